"""The audit's memory: what changed since the previous run, and what keeps coming back.

A finding is the same finding in two reports when its host, check and path are (its observed
value may change: an OFED still wrong, now another wrong version). Given the previous report,
each finding of this one is:

- new: not in the previous report;
- still there, since the run that first saw it (carried from report to report);
- flapping: it went away and came back at least `FLAPS` times in the runs remembered.

and each finding of the previous report not in this one is resolved, but only when its host
(or the fabric) was judged this time: a finding on a host that is now unreachable or error is
not resolved, it is unknown, and stays remembered as it was. A finding gone for `FORGET`
runs is forgotten. The memory travels in each report (`history.tracked`), so one previous
report is enough, and `clusterforge audit history` rebuilds it from a chain of reports.

Schema (the `history` key of report.json, schema 1):

    {"previous": ISO 8601 | null,            collected_at of the previous report
     "new": [Key], "resolved": [Key],
     "still": [{"key": Key, "since": ISO 8601}], "flapping": [Key],
     "tracked": [{"key": Key, "since": ISO 8601, "present": bool, "flips": int,
                  "absent_runs": int}]}
    Key = {"host": str, "check": str, "path": str}
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any, TypedDict

from audits import sanitize
from audits.model import FABRIC, Status
from contract import snapshot

FLAPS = 2  # a finding that came back this many times (or more) is flapping
FORGET = 10  # runs a resolved finding is remembered, to see it flap


class Key(TypedDict):
    host: str
    check: str
    path: str


class Still(TypedDict):
    key: Key
    since: str


class Tracked(TypedDict):
    key: Key
    since: str  # when it was first seen, in its current appearance
    present: bool
    flips: int  # how often it came back after going away
    absent_runs: int


class History(TypedDict):
    previous: str | None
    new: list[Key]
    resolved: list[Key]
    still: list[Still]
    flapping: list[Key]
    tracked: list[Tracked]


_JUDGED = {Status.OK.value, Status.DRIFT.value}


def _key(finding: Any) -> tuple[str, str, str]:
    return (str(finding["host"]), str(finding["check"]), str(finding["path"]))


def _as_key(k: tuple[str, str, str]) -> Key:
    return Key(host=k[0], check=k[1], path=k[2])


def _tracked(
    k: tuple[str, str, str], since: str, present: bool, flips: int, absent_runs: int
) -> Tracked:
    return Tracked(
        key=_as_key(k), since=since, present=present, flips=flips, absent_runs=absent_runs
    )


def history(previous: Any | None, current: Any) -> History:
    """The history of `current` (a report) given `previous` (a report, or None: the first
    run, where everything is new). Pure; tolerates a previous report without history."""
    memory: dict[tuple[str, str, str], Tracked] = {}
    if previous is not None:
        past = previous.get("history") or {}
        for t in past.get("tracked") or []:
            memory[_key(t["key"])] = _tracked(
                _key(t["key"]),
                str(t["since"]),
                bool(t["present"]),
                int(t["flips"]),
                int(t["absent_runs"]),
            )
        for f in previous.get("findings") or []:  # a report from before history existed
            k = _key(f)
            if k not in memory:
                memory[k] = Tracked(
                    key=_as_key(k),
                    since=str(previous["collected_at"]),
                    present=True,
                    flips=0,
                    absent_runs=0,
                )
    judged = {e["host"] for e in current["hosts"] if e["status"] in _JUDGED}
    if current["fabric"]["status"] in _JUDGED:
        judged.add(FABRIC)
    now = str(current["collected_at"])
    seen = {_key(f) for f in current["findings"]}
    new: list[Key] = []
    resolved: list[Key] = []
    still: list[Still] = []
    tracked: list[Tracked] = []
    for k in sorted(seen | memory.keys()):
        before = memory.get(k)
        if k in seen:
            if before is None:
                new.append(_as_key(k))
                tracked.append(
                    Tracked(key=_as_key(k), since=now, present=True, flips=0, absent_runs=0)
                )
            elif before["present"]:
                still.append(Still(key=_as_key(k), since=before["since"]))
                tracked.append(before)
            else:  # back after going away
                new.append(_as_key(k))
                tracked.append(
                    Tracked(
                        key=_as_key(k),
                        since=now,
                        present=True,
                        flips=before["flips"] + 1,
                        absent_runs=0,
                    )
                )
        elif before is not None:
            if k[0] not in judged:
                tracked.append(before)  # not looked at this time: neither there nor gone
            elif before["present"]:
                resolved.append(_as_key(k))
                tracked.append(_tracked(k, before["since"], False, before["flips"], 1))
            elif before["absent_runs"] + 1 < FORGET:
                tracked.append(
                    _tracked(k, before["since"], False, before["flips"], before["absent_runs"] + 1)
                )
    flapping = [t["key"] for t in tracked if t["flips"] >= FLAPS]
    return History(
        previous=str(previous["collected_at"]) if previous is not None else None,
        new=new,
        resolved=resolved,
        still=still,
        flapping=flapping,
        tracked=tracked,
    )


def config_changes(runs: list[tuple[str, Path]]) -> list[str]:
    """What changed in the devices' snapshots from run to run (oldest first: each run's time
    and report folder), as Markdown lines: per run, device and file, the lines changed,
    volatile ones masked (contract/snapshot.py). A device only one side kept is not compared:
    it was not read, which is not a change."""
    out: list[str] = []
    for (_, older), (when, newer) in pairwise(runs):
        was, now = snapshot.read(older), snapshot.read(newer)
        for device in sorted(was.keys() & now.keys()):
            for path, (old, new) in snapshot.changed(was[device], now[device]).items():
                if old is None or new is None:
                    said = ["file appeared" if old is None else "file gone"]
                else:
                    said = snapshot.diff_lines(old, new)
                out += [f"- {when} **{device}** `{path}`:", "", "  ```diff"]
                out += [f"  {sanitize.text(line)}" for line in said]
                out += ["  ```", ""]
    return out


def chain(reports: Iterable[Any]) -> History | None:
    """The history of the last of `reports` (oldest first), rebuilt along all of them."""
    last: Any | None = None
    result: History | None = None
    for report in reports:
        if last is not None:
            last = {**last, "history": result}
        result = history(last, report)
        last = report
    return result
