"""The audit end to end: expected -> collect -> parse -> compare -> report, and its files.

`audit` is pure but for the collector's IO; `write` puts the report and its renderings in a
folder; `audit_replay` is what `clusterforge audit --replay` calls.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

from audits import expected, shard
from audits.collect import Collector, ReplayCollector
from audits.compare import compare_host, host_probes
from audits.fabric import FabricAudit, compare_fabric, fabric_probes, not_scanned
from audits.model import AuditError
from audits.render import junit, markdown, textfile
from audits.report import Report, build, to_json


def audit(
    expectations: expected.Expectations,
    collector: Collector,
    now: datetime | None = None,
    selection: shard.Selection | None = None,
) -> Report:
    """Collect, compare and report; rollout windows are judged at `now`, by default the time
    the state was collected (so a replay gives the same report as the original run).
    `selection` (`audits.shard`) narrows the run to some hosts, with or without the fabric."""
    hosts = expectations.hosts
    chosen = sorted(hosts) if selection is None else selection.hosts
    scan = selection is None or selection.fabric
    collection = collector.collect(
        {name: host_probes(hosts[name]) for name in chosen},
        fabric_probes(expectations.fabric) if scan else (),
    )
    when = now or collection.collected_at
    audits = [compare_host(hosts[name], collection.hosts[name], when) for name in chosen]
    # Every planned HCA port, not only the chosen hosts': the scan sees the whole fabric.
    ports = {p["port_guid"]: name for name, c in hosts.items() for p in c["ib_ports"]}
    if scan:
        fabric = compare_fabric(expectations.fabric, ports, collection.fabric)
    else:
        fabric = FabricAudit(not_scanned(), [])
    report = build(expectations, collection.collected_at, when, audits, fabric)
    return report if selection is None else shard.mark(report, selection)


def files(report: Report) -> dict[str, str]:
    """The report folder's files: the data and its renderings."""
    return {
        "report.json": to_json(report),
        "report.md": markdown.render(report),
        "junit.xml": junit.render(report),
    }


def write(report: Report, out: Path, metrics: Path | None = None) -> None:
    """Write the report folder, and the Prometheus textfile when asked; raises AuditError."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files(report).items():
            (out / name).write_text(text, encoding="utf-8")
        if metrics is not None:
            _replace(metrics, textfile.render(report))
    except OSError as exc:
        raise AuditError(f"cannot write the report: {exc}") from None


def _replace(path: Path, text: str) -> None:
    # node_exporter may read the file at any moment: it must never see half of it.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    except OSError:
        Path(staging).unlink(missing_ok=True)
        raise


def audit_replay(
    repo: Path,
    recording: Path,
    out: Path,
    metrics: Path | None,
    now: datetime | None,
    part: tuple[tuple[int, int] | None, str | None] = (None, None),
) -> Report:
    """Audit a recording against `repo`'s generated/expected/ and write the report; `part` is
    the (--shard, --hosts) selection, if any."""
    if not recording.is_dir():
        raise AuditError(f"{recording} is not a folder")
    expectations = expected.read(repo)
    selection = shard.select(expectations, *part) if part != (None, None) else None
    report = audit(expectations, ReplayCollector(recording), now, selection)
    write(report, out, metrics)
    return report


def merge(folders: list[Path], out: Path, metrics: Path | None) -> Report:
    """Fold shard report folders into one report folder (`clusterforge audit merge`)."""
    report = shard.merge([shard.read(folder) for folder in folders])
    write(report, out, metrics)
    return report
