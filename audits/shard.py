"""Sharded audits: which hosts one shard of a large fleet audits, and the shards' reports
folded back into the one report an unsharded run gives.

A shard is a set of racks, so its hosts share leaves and their racks' switches: racks in name
order are dealt round-robin over the N shards (`--shard K/N`), a stable partition of one
generated/expected/. The fabric is scanned once, by shard 1. `--hosts gpu[001-010]` narrows
any run to the named hosts (ClusterShell-style ranges, `common/hostlist.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audits.expected import Expectations
from audits.fabric import FabricEntry
from audits.model import AuditError
from audits.report import Report, Shard, assemble
from common.hostlist import expand
from contract import snapshot


@dataclass(frozen=True)
class Selection:
    hosts: tuple[str, ...]
    fabric: bool  # scan the fabric in this run
    shard: tuple[int, int] | None  # (K, N) of --shard K/N


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 1 <= K <= N; raises ValueError."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(f"{text!r} is not K/N with 1 <= K <= N")
    return int(k), int(n)


def select(
    expectations: Expectations, shard: tuple[int, int] | None, hosts: str | None
) -> Selection:
    """The hosts of shard K of N (by rack), narrowed to `hosts` when given; raises AuditError
    when `hosts` names a host the expectations do not know."""
    machines = expectations.machines  # a switch is in its rack's shard, as its hosts are
    names = sorted(machines)
    if shard is not None:
        k, n = shard
        racks = sorted({c.rack for c in machines.values()})
        mine = set(racks[k - 1 :: n])
        names = [h for h in names if machines[h].rack in mine]
    if hosts is not None:
        wanted = set(expand(hosts))
        unknown = sorted(wanted - set(machines))
        if unknown:
            raise AuditError(f"--hosts names hosts generated/expected/ does not: {unknown}")
        names = [h for h in names if h in wanted]
    return Selection(tuple(names), shard is None or shard[0] == 1, shard)


def mark(report: Report, selection: Selection) -> Report:
    """The report of a shard, saying which part it is (for `merge`)."""
    if selection.shard is None:
        return report
    k, n = selection.shard
    return {
        **report,
        "shard": Shard(index=k, count=n, hosts=list(selection.hosts), fabric=selection.fabric),
    }


def merge(reports: Sequence[Report], previous: Any | None = None) -> Report:
    """Fold the N shard reports of one audit into the report an unsharded run gives (its
    history against the `previous` merged report); raises AuditError unless they are
    exactly shards 1..N of one expectation set."""
    shards = [r.get("shard") for r in reports]
    if not reports or any(s is None for s in shards):
        raise AuditError("audit merge takes the report folders of `audit --shard K/N` runs")
    parts = [s for s in shards if s is not None]
    count = parts[0]["count"]
    if sorted(s["index"] for s in parts) != list(range(1, count + 1)) or any(
        s["count"] != count for s in parts
    ):
        got = ", ".join(f"{s['index']}/{s['count']}" for s in parts)
        raise AuditError(f"need shards 1..{count} of {count}, each once; got {got}")
    if len({json.dumps(r["expectations"], sort_keys=True) for r in reports}) != 1:
        raise AuditError("the shards were audited against different expectations")
    scanned = [r for r, s in zip(reports, parts, strict=True) if s["fabric"]]
    if len(scanned) != 1:
        raise AuditError(f"{len(scanned)} shards scanned the fabric; exactly one must")
    fabric: FabricEntry = scanned[0]["fabric"]
    merged = assemble(
        reports[0]["expectations"],
        min(r["collected_at"] for r in reports),
        min(r["now"] for r in reports),
        [h for r in reports for h in r["hosts"]],
        [f for r in reports for f in r["findings"]],  # only the scanning shard has the fabric's
        fabric,
        previous,
    )
    # Each shard's devices' snapshots (its hosts are its own): the change plan and `audit
    # history` read them from the merged folder as from an unsharded run's.
    kept = {device: texts for r in reports for device, texts in r.get("snapshots", {}).items()}
    if kept:
        merged["snapshots"] = dict(sorted(kept.items()))
    return merged


def read(folder: Path) -> Report:
    """A report folder's report.json, with the devices' snapshots beside it (written as
    text: contract/snapshot.py); raises AuditError."""
    try:
        report: Report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        kept = {
            device: {path: body.decode("utf-8") for path, body in texts.items()}
            for device, texts in snapshot.read(folder).items()
        }
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise AuditError(f"cannot read {folder}: {exc}") from None
    if kept:
        report["snapshots"] = kept
    return report
