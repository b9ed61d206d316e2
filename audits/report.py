"""Stage 5 of the audit: the report as data (`report.json`, schema 1), and its exit code.

Markdown, JUnit XML and the Prometheus textfile are renderings of this data
(`draw/report/`); they read nothing else, so a stored `report.json` renders again later.

Schema 1:

    {"schema": 1,
     "expectations": {"commit": str | null, "source_sha256": str | null},
     "collected_at": ISO 8601,            when the state was read (the recording's meta.json)
     "now": ISO 8601,                     the clock rollout windows were judged by
     "exit_code": 0 | 1 | 2 | 3,
     "summary": {"hosts": int, "status": {"ok": int, "drift": int, "unreachable": int,
                 "error": int}, "findings": int, "by_kind": {kind: int}, "fabric": status,
                 "internal_errors": int},       hosts (and the fabric) a bug kept from judging
     "hosts": [HostEntry],                by host name (audits/model.py)
     "fabric": FabricEntry,               (audits/fabric.py)
     "findings": [Finding],               critical first, then by rack and U, host, check,
                                          path; the fabric's after the hosts' (audits/model.py)
     "history": History}                  what changed since the previous run (audits/history.py)

Exit codes: 0 every host and the fabric complied; 1 drift; 2 some host or the fabric could
not be collected (unreachable or error); 2 wins over 1, because a partial audit proves nothing
about the hosts it could not see; 3 the audit hit a bug of its own on some host or the fabric
(that one is `error`, its reason starts "internal error"; every other is reported as usual).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from audits.compare import INTERNAL_ERROR, HostAudit
from audits.expected import Expectations
from audits.fabric import FabricAudit, FabricEntry
from audits.history import History, history
from audits.model import Finding, HostEntry, Status, finding_order
from contract import Kind, Severity

SCHEMA = 1
EXIT_CLEAN, EXIT_DRIFT, EXIT_UNCOLLECTED, EXIT_BUG = 0, 1, 2, 3


class Named(TypedDict):
    commit: str | None
    source_sha256: str | None


class Summary(TypedDict):
    hosts: int
    status: dict[str, int]
    findings: int
    by_kind: dict[str, int]
    fabric: str
    internal_errors: int


class Shard(TypedDict):
    """A shard's part of the audit (`audit --shard K/N`): `audit merge` folds the N parts."""

    index: int
    count: int
    hosts: list[str]  # the hosts this shard audited
    fabric: bool  # whether this shard scanned the fabric (shard 1 does)


class Report(TypedDict):
    schema: int
    expectations: Named
    collected_at: str
    now: str
    exit_code: int
    summary: Summary
    hosts: list[HostEntry]
    fabric: FabricEntry
    findings: list[Finding]
    history: History
    shard: NotRequired[Shard]
    # Each snapshotted device's files as it holds them (path -> text): written beside
    # report.json as files (`snapshots/`), never into it.
    snapshots: NotRequired[dict[str, dict[str, str]]]


def build(
    expectations: Expectations,
    collected_at: datetime,
    now: datetime,
    hosts: list[HostAudit],
    fabric: FabricAudit,
    previous: Any | None = None,
) -> Report:
    """Assemble the report from every host's audit and the fabric's; `previous` is the last
    run's report (None: no memory, every finding is new)."""
    named = Named(commit=expectations.commit, source_sha256=expectations.source_sha256)
    return assemble(
        named,
        collected_at.isoformat(),
        now.isoformat(),
        [h.entry for h in hosts],
        [f for h in hosts for f in h.findings] + fabric.findings,
        fabric.entry,
        previous,
    )


def assemble(
    named: Named,
    collected_at: str,
    now: str,
    hosts: list[HostEntry],
    findings: list[Finding],
    fabric: FabricEntry,
    previous: Any | None = None,
) -> Report:
    """The report of these host entries, findings and fabric entry: sorted, summed, judged,
    and compared with the `previous` report."""
    entries = sorted(hosts, key=lambda e: e["host"])
    findings = sorted(findings, key=_triage_order(entries))
    statuses = Counter(e["status"] for e in entries)
    kinds = Counter(f["kind"] for f in findings)
    summary = Summary(
        hosts=len(entries),
        status={s.value: statuses[s.value] for s in Status},
        findings=len(findings),
        by_kind={k.value: kinds[k.value] for k in Kind if kinds[k.value]},
        fabric=fabric["status"],
        internal_errors=sum(
            1 for e in [*entries, fabric] if (e["reason"] or "").startswith(INTERNAL_ERROR)
        ),
    )
    report = Report(
        schema=SCHEMA,
        expectations=named,
        collected_at=collected_at,
        now=now,
        exit_code=exit_code(summary),
        summary=summary,
        hosts=entries,
        fabric=fabric,
        findings=findings,
        history=History(previous=None, new=[], resolved=[], still=[], flapping=[], tracked=[]),
    )
    report["history"] = history(previous, report)
    return report


_SEVERITY_RANK = {Severity.CRITICAL.value: 0, Severity.WARNING.value: 1}


def _triage_order(entries: list[HostEntry]) -> Callable[[Finding], tuple[Any, ...]]:
    """Sort key of findings for the one who reads them at 3 am: what is worst first, then
    in the order one walks the hall (rack, then U), the fabric's after the hosts'."""
    place = {e["host"]: (e["rack"], e["u"] or 0) for e in entries}

    def key(f: Finding) -> tuple[Any, ...]:
        where = place.get(f["host"])
        return (_SEVERITY_RANK.get(f["severity"], 2), where is None, where, finding_order(f))

    return key


def exit_code(summary: Summary) -> int:
    """3 on a bug of the audit's own, 2 when anything could not be collected, else 1 on drift,
    else 0."""
    if summary["internal_errors"]:
        return EXIT_BUG
    uncollected = {Status.UNREACHABLE.value, Status.ERROR.value}
    if summary["fabric"] in uncollected or any(summary["status"][s] for s in uncollected):
        return EXIT_UNCOLLECTED
    if summary["status"][Status.DRIFT.value] or summary["fabric"] == Status.DRIFT.value:
        return EXIT_DRIFT
    return EXIT_CLEAN


def to_json(report: Report) -> str:
    """`report.json`: stable key order and layout, so two runs on one input are identical."""
    data = {k: v for k, v in report.items() if k != "snapshots"}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
