"""The audit end to end: expected -> collect -> parse -> compare -> report, and its files.

`audit` is pure but for the collector's IO; `write` puts the report and its renderings in a
folder; `audit_replay` is what `clusterforge audit --replay` calls.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from audits import ethernet, expected, shard
from audits.collect import (
    Collected,
    Collection,
    Collector,
    ReplayCollector,
    probe_of,
    read_object,
)
from audits.compare import (
    INTERNAL_ERROR,
    SNAPSHOT_PROBE,
    HostAudit,
    compare_host,
    crashed_host,
    host_probes,
)
from audits.fabric import (
    FabricAudit,
    compare_fabric,
    crashed_fabric,
    fabric_probes,
    not_scanned,
    port_names,
)
from audits.model import AuditError
from audits.report import Report, build, to_json
from audits.sanitize import clean
from common import atomic
from contract import EthernetSwitch, Host, probes, snapshot
from contract.deploy import file_arguments
from contract.probes import file_texts
from contract.probes.base import ParseError


def audit(
    expectations: expected.Expectations,
    collector: Collector,
    now: datetime | None = None,
    previous: Any | None = None,
    selection: shard.Selection | None = None,
) -> Report:
    """Collect, compare and report; rollout windows are judged at `now`, by default the time
    the state was collected (so a replay gives the same report as the original run).
    `previous` is the last run's report (`audits.history`); `selection` (`audits.shard`)
    narrows the run to some hosts, with or without the fabric.

    Never costs the fleet its report: an exception nobody expected (a bug) while collecting
    makes every host `error`, while comparing one host (or the fabric) only that one; each
    names the exception, and the report's exit code is 3."""
    hosts = expectations.machines  # every host, and every switch the audit logs into
    chosen = sorted(hosts) if selection is None else selection.hosts
    scan = selection is None or selection.fabric
    try:
        collection = collector.collect(
            {name: host_probes(hosts[name]) for name in chosen},
            fabric_probes(expectations.fabric) if scan else (),
        )
    except AuditError:
        raise  # the audit cannot run at all (exit 4): no report would be true
    except Exception as exc:  # a bug: reported on every host, exit 3
        lost = Collected({}, {}, crashed=_bug(exc))
        at = now or datetime.now(UTC).replace(microsecond=0)
        collection = Collection(at, dict.fromkeys(chosen, lost), lost)
    when = now or collection.collected_at
    audits = []
    snapshots: dict[str, dict[str, str]] = {}
    for name in chosen:
        # One lookup per host: a replayed collection reads the host's folder here, and its
        # text is dropped once the host is compared (bounded memory at any fleet size).
        try:
            collected = collection.hosts[name]
        except AuditError:
            raise  # the recording is not one (a bad status.json): no report would be true
        except Exception as exc:  # a bug, or a host folder unreadable: this host is error
            collected = Collected({}, {}, crashed=_bug(exc))
        kept = snapshot_of(hosts[name], collected)
        if kept:
            snapshots[name] = kept
        try:
            if collected.crashed is not None:
                judged = crashed_host(hosts[name], collected.crashed)
            else:
                judged = compare_host(hosts[name], collected, when)
        except Exception as exc:  # a bug: this host is error, exit 3
            judged = crashed_host(hosts[name], _bug(exc))
        # What the host said, made safe and bounded before the next host is read: the report
        # holds each host's strings escaped and cut (audits.sanitize), never its raw text.
        audits.append(HostAudit(clean(judged.entry), clean(judged.findings)))
    # Two Ethernet links swapped may be two hosts' (one switch's two ports): named once all
    # hosts are judged.
    named = ethernet.name_swaps([a.findings for a in audits])
    audits = [HostAudit(a.entry, findings) for a, findings in zip(audits, named, strict=True)]
    # Every planned HCA port, not only the chosen hosts': the scan sees the whole fabric.
    ports = port_names(expectations.hosts)
    try:
        if not scan:
            fabric = FabricAudit(not_scanned(), [])
        elif collection.fabric.crashed is not None:
            fabric = crashed_fabric(collection.fabric.crashed)
        else:
            fabric = compare_fabric(expectations.fabric, ports, collection.fabric)
    except Exception as exc:  # a bug: the fabric is error, exit 3
        fabric = crashed_fabric(_bug(exc))
    fabric = FabricAudit(clean(fabric.entry), clean(fabric.findings))
    report = build(expectations, collection.collected_at, when, audits, fabric, previous)
    if snapshots:
        report["snapshots"] = snapshots
    return report if selection is None else shard.mark(report, selection)


def snapshot_of(c: Host | EthernetSwitch, collected: Collected) -> dict[str, str]:
    """The device's snapshot (contract/snapshot.py): from its `file_texts` output each file
    asked for that it printed, by path, and the output of each probe that is a snapshot
    (`Probe.snapshot`: a running configuration) by that name; empty when it printed nothing
    usable. Only the paths its deploy map marks are kept, so a device cannot write a file of
    its choosing."""
    kept = _probe_snapshots(collected)
    text = collected.outputs.get(SNAPSHOT_PROBE)
    if text is None:
        return kept
    try:
        texts = file_texts.parse(text)
    except ParseError:
        return kept
    asked = set(file_arguments(c.deploy.files if c.deploy else ()).get(SNAPSHOT_PROBE, ()))
    return {path: body for path, body in texts.items() if path in asked} | kept


def _probe_snapshots(collected: Collected) -> dict[str, str]:
    """Each output of a snapshot probe that its parser reads (a config cut short or an
    error message in its place is no snapshot), by the probe's snapshot name."""
    kept = {}
    for key, text in sorted(collected.outputs.items()):
        entry = probes.PROBES.get(probe_of(key))
        if entry is None or entry.spec.snapshot is None:
            continue
        try:
            entry.parse(text)
        except ParseError:
            continue
        kept[entry.spec.snapshot] = text
    return kept


def read_previous(path: Path | None) -> Any | None:
    """The previous run's report.json, or None when there is none to read; raises AuditError
    when `path` is there but is not a report."""
    if path is None:
        return None
    report = read_object(path, "a report.json")
    if not isinstance(report.get("findings"), list) or "collected_at" not in report:
        raise AuditError(f"{path}: not a clusterforge audit report (no findings, collected_at)")
    return report


def _bug(exc: BaseException) -> str:
    return f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}"


class Renderer(Protocol):
    """Turns the report data into documents: the report folder's files besides report.json,
    and the Prometheus textfile. The CLI passes `draw.report.Renderer`."""

    def files(self, report: Report) -> Mapping[str, str]: ...

    def metrics(self, report: Report) -> str: ...


def files(report: Report, renderer: Renderer) -> dict[str, str]:
    """The report folder's files: the data, its renderings, and each snapshotted device's
    files as it holds them (`snapshots/<device>/files/<path>`, contract/snapshot.py) and its
    running configuration (`snapshots/<device>/<name>`: `running-config`)."""
    kept = {
        snapshot.relative(device, path): body
        for device, texts in sorted(report.get("snapshots", {}).items())
        for path, body in sorted(texts.items())
    }
    return {"report.json": to_json(report), **renderer.files(report), **kept}


def write(report: Report, out: Path, renderer: Renderer, metrics: Path | None = None) -> None:
    """Write the report folder, and the Prometheus textfile when asked; raises AuditError.
    Each file is replaced whole: node_exporter may read the textfile at any moment, and a
    dashboard the report folder."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        # The last run's snapshots go: a device not read this time must not look as it was.
        shutil.rmtree(out / snapshot.FOLDER, ignore_errors=True)
        for name, text in files(report, renderer).items():
            atomic.replace(out / name, text)
        if metrics is not None:
            atomic.replace(metrics, renderer.metrics(report), TEXTFILE_MODE)
    except OSError as exc:
        raise AuditError(f"cannot write the report: {exc}") from None


# node_exporter's textfile collector runs as its own user: it must be able to read the file.
TEXTFILE_MODE = 0o644


def audit_replay(
    repo: Path,
    recording: Path,
    out: Path,
    metrics: Path | None,
    now: datetime | None,
    part: tuple[tuple[int, int] | None, str | None] = (None, None),
    previous: Path | None = None,
    *,
    renderer: Renderer,
) -> Report:
    """Audit a recording against `repo`'s generated/expected/ and write the report; `part` is
    the (--shard, --hosts) selection, if any."""
    if not recording.is_dir():
        raise AuditError(f"{recording} is not a folder")
    expectations = expected.read(repo)
    selection = shard.select(expectations, *part) if part != (None, None) else None
    last = read_previous(previous)
    report = audit(expectations, ReplayCollector(recording), now, last, selection)
    write(report, out, renderer, metrics)
    return report


def merge(
    folders: list[Path],
    out: Path,
    metrics: Path | None,
    previous: Path | None = None,
    *,
    renderer: Renderer,
) -> Report:
    """Fold shard report folders into one report folder (`clusterforge audit merge`), with
    the history against the `previous` merged report."""
    report = shard.merge([shard.read(folder) for folder in folders], read_previous(previous))
    write(report, out, renderer, metrics)
    return report
