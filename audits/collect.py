"""Stage 2 of the audit: fetch the raw output of the probes, per host and for the fabric.

Collectors fetch, parsers interpret. A `Collector` is asked for the probe keys each host needs
(`audits.compare.host_probes`) and those of the fabric, and returns a `Collection`: per
subject the text of every probe, or why it has none. A failure on one host is a value in that
host's result; the others go on. A probe key is the probe's name, or `<probe>@<iface>` for a
per-interface probe (`ethtool_i@ib0`).

`ReplayCollector` reads a recording; `Recorder` runs another collector (the live one is
`audits.ssh.SshCollector`), writes what it got in exactly this layout with `write_recording`,
and hands on what replay reads back, so any report can be reproduced from its inputs:

    <dir>/meta.json                    {"schema": 1, "collected_at": "2026-05-04T06:00:00+00:00"}
    <dir>/hosts/<host>/<key>.txt       a probe's stdout, as in tests/fixtures/<probe>/*.txt
    <dir>/hosts/<host>/status.json     optional; either the host could not be reached:
                                         {"status": "unreachable", "reason": "ssh: timed out"}
                                       (when its host key was not accepted, also
                                         "host_key": {"state": "unknown" | "changed",
                                         "known": [fingerprint], "offered": fingerprint})
                                       or collecting it hit a bug (the audit exits 3):
                                         {"status": "error", "reason": "internal error: ..."}
                                       or some commands ran but gave nothing usable:
                                         {"failed": {"ipmitool_mc_info": "exit 127: not found"}}
    <dir>/fabric/<key>.txt             the fabric probes, run once from a host on the fabric
    <dir>/fabric/status.json           optional, same shape (the scan host was unreachable)

`collected_at` is ISO 8601 with a UTC offset: when the state was read. A requested key with
neither a file nor a `failed` entry counts as failed ("not recorded"); files nobody asked for
are not read, and of a file no more than its probe's `max_output` (contract/probes/): a
longer one is failed, as the live run fails a probe that prints more. Unreachable means the
connection failed (refused, timeout, authentication); `failed` is for a host that answered
(command missing, non-zero exit, command timeout).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from audits.model import AuditError, HostKeyFact
from common import atomic
from contract import probes

SCHEMA = 1
NOT_RECORDED = "not recorded"
_DEFAULT_CAP = 16 * 2**20  # a key of no probe (never asked for by the audit)


def probe_key(probe: str, iface: str | None = None) -> str:
    """The key of a probe's output: `ethtool_i@ib0` for a per-interface probe."""
    return probe if iface is None else f"{probe}@{iface}"


def probe_of(key: str) -> str:
    """The probe (and parser) name of a key."""
    return key.split("@", 1)[0]


def output_cap(key: str) -> int:
    """The bytes of a probe key's output that count (the probe's `max_output`): more is a
    failure of the probe, live and replayed alike."""
    entry = probes.PROBES.get(probe_of(key))
    return entry.spec.max_output if entry is not None else _DEFAULT_CAP


def over_cap(cap: int) -> str:
    """Why a probe whose output ran over `cap` bytes gave nothing usable."""
    return f"output over {cap} bytes: the recording keeps the first"


@dataclass(frozen=True)
class Collected:
    """What one subject (a host, or the fabric) gave: outputs by probe key, or why not."""

    outputs: dict[str, str]
    failed: dict[str, str]  # probe key -> why the command gave no usable output
    unreachable: str | None = None  # why no connection was made; then nothing else is set
    crashed: str | None = None  # the collector's own bug (exit 3); then nothing else is set
    host_key: HostKeyFact | None = None  # with `unreachable`: the host key was not accepted


@dataclass(frozen=True)
class Collection:
    """What a collector got. `hosts` may be lazy (`ReplayCollector`): read it once per host,
    in turn, so that one host's raw text at a time is held."""

    collected_at: datetime
    hosts: Mapping[str, Collected]
    fabric: Collected


class Collector(Protocol):
    """Fetches probe outputs; never interprets them."""

    def collect(self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]) -> Collection: ...


@runtime_checkable
class Streaming(Protocol):
    """A collector that writes outputs into a recording as they arrive (`hosts/` and
    `fabric/` of `folder`, in the layout above) instead of holding them: memory stays
    bounded whatever the hosts print. Returns when the state was read."""

    def record(
        self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str], folder: Path
    ) -> datetime: ...


class ReplayCollector:
    """Reads a recording in the layout above (see the module docstring): meta.json and the
    fabric at once, each host's folder only when its entry of `hosts` is looked up."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def collect(self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]) -> Collection:
        meta = _json(self.root / "meta.json")
        if meta is None:
            raise AuditError(f"{self.root}/meta.json is missing: not a recording")
        return Collection(
            collected_at=_timestamp(meta.get("collected_at"), self.root / "meta.json"),
            hosts=_Hosts(self.root / "hosts", hosts),
            fabric=_subject(self.root / "fabric", fabric),
        )


class _Hosts(Mapping[str, Collected]):
    """The hosts of a recording, each read from its folder when looked up and never kept:
    the audit compares a host and drops its text before reading the next, so its memory is
    one host's outputs however large the fleet and whatever the hosts printed."""

    def __init__(self, folder: Path, keys: Mapping[str, Sequence[str]]) -> None:
        self.folder = folder
        self.probes = {h: tuple(k) for h, k in sorted(keys.items())}

    def __getitem__(self, host: str) -> Collected:
        return _subject(self.folder / host, self.probes[host])

    def __iter__(self) -> Iterator[str]:
        return iter(self.probes)

    def __len__(self) -> int:
        return len(self.probes)


class Recorder:
    """Runs `collector`, records what it got in `folder`, and returns that recording as
    `ReplayCollector` reads it: a live report is, by construction, the report of its
    recording."""

    def __init__(self, collector: Collector, folder: Path) -> None:
        self.collector = collector
        self.folder = folder

    def collect(self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]) -> Collection:
        if isinstance(self.collector, Streaming):
            streaming = self.collector
            _swap_in(self.folder, lambda staging: streaming.record(hosts, fabric, staging))
        else:
            write_recording(self.collector.collect(hosts, fabric), self.folder)
        return ReplayCollector(self.folder).collect(hosts, fabric)


def write_recording(collection: Collection, folder: Path) -> None:
    """Write `collection` into `folder` in the layout above; raises AuditError.

    The recording is written beside `folder` and then swapped in, so `folder` never holds
    half of one, nor files left from an earlier recording. Only an earlier recording (it has
    meta.json) or an empty folder is replaced: anything else there is not ours to delete.
    """

    def fill(staging: Path) -> datetime:
        for name, collected in sorted(collection.hosts.items()):
            _write_subject(staging / "hosts" / name, collected)
        _write_subject(staging / "fabric", collection.fabric)
        return collection.collected_at

    _swap_in(folder, fill)


def _swap_in(folder: Path, fill: Callable[[Path], datetime]) -> None:
    """Let `fill` write a recording's subjects into a staging folder beside `folder`, add
    meta.json, and swap it in (see `write_recording`)."""
    ours = folder.is_dir() and ((folder / "meta.json").is_file() or not any(folder.iterdir()))
    if folder.exists() and not ours:
        raise AuditError(f"{folder} is neither a recording (no meta.json) nor an empty folder")

    def recording(staging: Path) -> None:
        collected_at = fill(staging)
        meta = {"schema": SCHEMA, "collected_at": collected_at.isoformat()}
        _write_json(staging / "meta.json", meta)

    try:
        # The staging folder's mode 0700 stays: what the hosts printed is for the auditor's
        # eyes only.
        atomic.replace_folder(folder, recording)
    except OSError as exc:
        raise AuditError(f"cannot write the recording {folder}: {exc}") from None


def _write_subject(folder: Path, collected: Collected) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if write_status(folder, collected):
        for key, text in collected.outputs.items():
            # newline="": the bytes as the command printed them, on any platform.
            (folder / f"{key}.txt").write_text(text, encoding="utf-8", newline="")


def write_status(folder: Path, collected: Collected) -> bool:
    """Write a subject's status.json (when it has one); False when its outputs do not count
    (unreachable, or the collector's bug): then no output file is left in `folder`."""
    lost = collected.unreachable is not None or collected.crashed is not None
    if lost:
        for stale in folder.glob("*.txt"):
            stale.unlink()
    if collected.unreachable is not None:
        status: dict[str, Any] = {"status": "unreachable", "reason": collected.unreachable}
        if collected.host_key is not None:
            status["host_key"] = collected.host_key
        _write_json(folder / "status.json", status)
    elif collected.crashed is not None:
        _write_json(folder / "status.json", {"status": "error", "reason": collected.crashed})
    elif collected.failed:
        _write_json(folder / "status.json", {"failed": collected.failed})
    return not lost


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _subject(folder: Path, keys: Sequence[str]) -> Collected:
    status = _json(folder / "status.json") or {}
    state = status.get("status", "reached")
    if state == "unreachable":
        key = status.get("host_key")
        fact = _host_key(key, folder) if key is not None else None
        return Collected({}, {}, str(status.get("reason") or "unreachable"), host_key=fact)
    if state == "error":
        return Collected({}, {}, crashed=str(status.get("reason") or "error"))
    if state != "reached":
        raise AuditError(f"{folder}/status.json: status {state!r} is not 'unreachable' or 'error'")
    noted = status.get("failed", {})
    if not isinstance(noted, dict):
        raise AuditError(f"{folder}/status.json: 'failed' must map probe keys to reasons")
    outputs: dict[str, str] = {}
    failed: dict[str, str] = {}
    for key in sorted(keys):
        path = folder / f"{key}.txt"
        if key in noted:
            failed[key] = str(noted[key])
        elif path.is_file():
            # No more than the probe's cap is read, as the live run keeps no more: a hostile
            # host's recording costs what its caps allow, whatever its files hold.
            cap = output_cap(key)
            # Sized first: a read of cap + 1 bytes would allocate the whole cap each time.
            if path.stat().st_size > cap:
                failed[key] = over_cap(cap)
            else:
                outputs[key] = path.read_bytes()[:cap].decode("utf-8", errors="replace")
        else:
            failed[key] = NOT_RECORDED
    return Collected(outputs, failed)


def _host_key(data: object, folder: Path) -> HostKeyFact:
    ok = (
        isinstance(data, dict)
        and data.get("state") in ("unknown", "changed")
        and isinstance(data.get("known"), list)
        and all(isinstance(k, str) for k in data["known"])
        and isinstance(data.get("offered"), str | None)
    )
    if not ok:
        raise AuditError(f"{folder}/status.json: 'host_key' is not {{state, known, offered}}")
    assert isinstance(data, dict)
    return HostKeyFact(state=data["state"], known=list(data["known"]), offered=data["offered"])


def _json(path: Path) -> dict[str, Any] | None:
    return read_object(path) if path.is_file() else None


def read_object(path: Path, what: str = "a JSON object") -> dict[str, Any]:
    """The JSON object in `path`; raises AuditError naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise AuditError(f"{path}: expected {what}")
    return data


def _timestamp(value: object, where: Path) -> datetime:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise AuditError(f"{where}: collected_at {value!r} is not ISO 8601 with a UTC offset")
    return when
