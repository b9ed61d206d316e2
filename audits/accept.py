"""`clusterforge accept RESULTS_DIR`: the logs of an acceptance run in, readiness out.

Reads `generated/acceptance/plan.json` (what was to run, where its logs are, the pass marks,
each pair's cables), the hosts' contracts (`generated/expected/`, for the admission checks),
`generated/expected/fabric.json` (every cable), and the logs under RESULTS_DIR in the layout
plan.json names. Parsing is the parsers' (`audits.parsers.RESULTS`, and `contract.probes`'s);
judging is here; a missing log is "not tested", a log that cannot be parsed a failure.

- A node is `admitted` when its burn-in (dcgmi diag), GPU admission (count, model, NVLinks,
  ECC, Xid: `audits/admission.py`) and GPUDirect checks (`audits/gpudirect.py`) ran and passed;
  `failed` with every failing check; else `not-tested` with what is missing.
- A pair passes when `ib_write_bw` ran between the planned LIDs at or above the pass mark. It
  is named `client->server`, on a rail-optimised fabric `client->server mlx5_K` (its HCA).
- A cable `passed` when a passing pair crossed it. The failing pairs' other cables are the
  candidates, in sets crossed by exactly the same failing pairs (no result tells the cables
  of a set apart); the fewest sets that account for every failing pair (greedily, most
  failures first) are blamed (`blame`): a set of one cable is `failed`, each cable of a
  larger set `one-of` ("one of A03-IB25, A04-IB25", with the planned pairs that would split
  it, or none). A candidate whose pairs all crossed a blamed cable too is `not-tested`
  ("retest alone"). So one bad cable is named alone, or with the cables no result tells
  from it, and never another in its place; `suspects` lists the cables common to all
  failing pairs that no passing pair crossed. Cables no pair crossed are `not-tested`, with
  the plan's reason where it has one.
- An NCCL step passes when `all_reduce_perf` ran on its planned nodes, with no wrong result
  and the bus bandwidth at its largest size at or above the step's pass mark.

Report, schema 1 (`readiness.json`):

    {"schema": 1, "exit_code": 0 | 1 | 2,
     "summary": {"nodes": {status: int}, "cables": {status: int}, "pairs": {status: int},
                 "nccl": {status: int}, "suspects": [cable]},
     "nodes": [{"host", "status", "failed": [{"check", "message"}], "not_tested": [check]}],
     "cables": [{"cable", "status", "pairs": [pair], "reason"}],  status: passed, failed,
                                                                  one-of, not-tested
     "pairs": [{"pair", "round", "client", "server", "status", "gb_s", "cables", "message"}],
     "nccl": [{"step", "nodes", "status", "busbw_gb_s", "min_bus_gb_s", "message"}],
     "suspects": [cable], "blame": [{"cables": [cable], "pairs": [pair], "retest": [pair]}]}

Exit codes: 0 everything planned passed; 1 something failed; 2 nothing failed but something
planned was not tested (a partial run admits nobody it did not see).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from audits import admission, expected, gpudirect
from audits.model import AuditError
from audits.parsers import RESULTS
from audits.sink import Sink
from common import atomic
from contract import Host, Kind, probes
from contract.probes import ParseError

SCHEMA = 1
EXIT_READY, EXIT_FAILED, EXIT_INCOMPLETE = 0, 1, 2
ADMITTED, FAILED, NOT_TESTED, PASSED = "admitted", "failed", "not-tested", "passed"
ONE_OF = "one-of"  # a cable among others that the failing pairs cannot tell apart
_GPU_PROBES = ("nvidia_smi_gpus", "nvidia_smi_nvlink", "nvidia_smi_ecc", "xid")
_GPUDIRECT_PROBES = ("nccl_conf", "ibstat", "lsmod", "nvidia_smi_topo")
_EPOCH = date(1970, 1, 1)  # the sinks judge no version, so no clock


@dataclass(frozen=True)
class Inputs:
    plan: dict[str, Any]  # generated/acceptance/plan.json
    contracts: dict[str, Host]  # host -> expected/hosts/<host>.json (with its deploy map)
    cables: list[str]  # every installed InfiniBand cable of expected/fabric.json


def read_inputs(repo: Path) -> Inputs:
    """The plan and contracts of `repo`; raises AuditError when they are missing."""
    path = repo / "generated" / "acceptance" / "plan.json"
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {exc}; run `clusterforge compile`") from None
    found = expected.read(repo)
    cables = [c.id for c in found.fabric.cables if c.lifecycle == "installed"]
    return Inputs(plan, found.hosts, cables)


def _read(results: Path, relative: str) -> str | None:
    try:
        return (results / relative).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _parse(name: str, text: str) -> tuple[Any, str | None]:
    parse = RESULTS[name] if name in RESULTS else probes.PROBES[name].parse
    try:
        return parse(text), None
    except ParseError as exc:
        return None, str(exc)
    except RecursionError:  # a log nested deeper than the parser follows: the log's fault
        return None, f"{name}: output nested too deep to parse"


def judge(inputs: Inputs, results: Path) -> dict[str, Any]:
    """The readiness report of the run whose logs are under `results`."""
    plan = inputs.plan
    pairs = _pairs(plan, results)
    nodes = [_node(inputs, node, results) for node in plan["nodes"]]
    steps = [_step(step, results) for step in plan["nccl_tests"]["steps"]]
    cables, suspects, blamed = _cables(inputs, pairs)
    summary = {
        "nodes": dict(sorted(Counter(n["status"] for n in nodes).items())),
        "cables": dict(sorted(Counter(c["status"] for c in cables).items())),
        "pairs": dict(sorted(Counter(p["status"] for p in pairs).items())),
        "nccl": dict(sorted(Counter(s["status"] for s in steps).items())),
        "suspects": suspects,
    }
    idle = {entry["cable"] for entry in plan["ib_write_bw"]["untested"]}
    statuses = [n["status"] for n in nodes] + [p["status"] for p in pairs]
    statuses += [s["status"] for s in steps]
    statuses += [c["status"] for c in cables if c["cable"] not in idle]
    code = EXIT_READY
    if FAILED in statuses or ONE_OF in statuses:
        code = EXIT_FAILED
    elif NOT_TESTED in statuses:
        code = EXIT_INCOMPLETE
    return {
        "schema": SCHEMA,
        "exit_code": code,
        "summary": summary,
        "nodes": nodes,
        "cables": cables,
        "pairs": pairs,
        "nccl": steps,
        "suspects": suspects,
        "blame": blamed,
    }


def _node(inputs: Inputs, node: dict[str, Any], results: Path) -> dict[str, Any]:
    host = node["host"]
    failed: list[dict[str, str]] = []
    missing: list[str] = []
    text = _read(results, node["burn_in"])
    if text is None:
        missing.append("burn_in")
    else:
        diag, error = _parse("dcgmi_diag", text)
        if error is not None:
            failed.append({"check": "burn_in", "message": error})
        else:
            for t in diag["tests"]:
                if t["status"] == "fail":
                    gpu = "" if t["gpu"] is None else f"GPU {t['gpu']} "
                    why = "; ".join(t["messages"]) or "failed"
                    failed.append({"check": "burn_in", "message": f"{gpu}{t['test']}: {why}"})
    facts: dict[str, Any] = {}
    for probe, relative in sorted(node["probes"].items()):
        text = _read(results, relative)
        if text is None:
            continue
        fact, error = _parse(probe, text)
        if error is not None:
            failed.append({"check": probe, "message": error})
        else:
            facts[probe] = fact
    contract = inputs.contracts.get(host)
    gpus, direct = (contract.gpus, contract.gpudirect) if contract else (None, None)
    for check, kind, needs, run, applies in (
        ("gpus", Kind.GPU, _GPU_PROBES, admission.gpus, gpus is not None),
        ("gpudirect", Kind.GPUDIRECT, _GPUDIRECT_PROBES, gpudirect.check, direct is not None),
    ):
        if contract is None or not applies:
            continue
        if not all(p in facts for p in needs):
            missing.append(check)
            continue
        sink = Sink(host, check, kind, _EPOCH)
        run(contract, facts, sink)
        failed += [{"check": check, "message": f["message"]} for f in sink.findings]
    status = FAILED if failed else NOT_TESTED if missing else ADMITTED
    return {"host": host, "status": status, "failed": failed, "not_tested": missing}


def _pairs(plan: dict[str, Any], results: Path) -> list[dict[str, Any]]:
    bw = plan["ib_write_bw"]
    mark = bw["min_gb_s"]
    out = []
    for round_ in bw["rounds"]:
        for p in round_["pairs"]:
            # A rail's pair by its HCA too: the same servers meet on every rail.
            hca = f" {p['hca']}" if "hca" in p else ""
            entry = {
                "pair": f"{p['client']}->{p['server']}{hca}",
                "round": round_["round"],
                "client": p["client"],
                "server": p["server"],
                "cables": p["cables"],
                "gb_s": None,
                "status": NOT_TESTED,
                "message": "no log",
            }
            text = _read(results, p["log"])
            if text is not None:
                fact, error = _parse("ib_write_bw", text)
                if error is not None:
                    entry |= {"status": FAILED, "message": error}
                elif [fact["local_lid"], fact["remote_lid"]] != p["lids"]:
                    ran = f"LID {fact['local_lid']} -> {fact['remote_lid']}"
                    entry |= {"status": FAILED, "message": f"ran {ran}, planned {p['lids']}"}
                else:
                    gb_s = fact["average_gb_s"]
                    # A pair over an HCA planned narrower than the fabric has its own mark.
                    own = p.get("min_gb_s", mark)
                    ok = gb_s >= own
                    entry |= {
                        "gb_s": gb_s,
                        "status": PASSED if ok else FAILED,
                        "message": f"{gb_s:g} GB/s" + ("" if ok else f", below {own:g}"),
                    }
            out.append(entry)
    return out


def _cables(
    inputs: Inputs, pairs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    crossed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pairs:
        for cable in p["cables"]:
            crossed[cable].append(p)
    idle = {e["cable"]: e["reason"] for e in inputs.plan["ib_write_bw"]["untested"]}
    ran = {c: [p for p in ps if p["status"] != NOT_TESTED] for c, ps in crossed.items()}
    sets = blame(pairs)
    blamed = {c: b for b in sets for c in b["cables"]}
    cleared = {c for c, ps in ran.items() if any(p["status"] == PASSED for p in ps)}
    out = []
    for cable in sorted(set(inputs.cables) | set(crossed)):
        status, reason = NOT_TESTED, idle.get(cable, "no pair crossed it")
        if cable in cleared:
            status, reason = PASSED, None
        elif cable in blamed and len(blamed[cable]["cables"]) == 1:
            status = FAILED
            reason = "; ".join(f"{p['pair']}: {p['message']}" for p in ran[cable])
        elif cable in blamed:
            status, reason = ONE_OF, _one_of(blamed[cable])
        elif ran.get(cable):
            # Every pair over it also crossed a blamed cable: its own state is unknown.
            others = sorted({c for p in ran[cable] for c in p["cables"] if c in blamed})
            reason = f"crossed only by pairs failing over {', '.join(others)}: retest alone"
        names = [p["pair"] for p in crossed[cable]]
        out.append({"cable": cable, "status": status, "pairs": names, "reason": reason})
    failing = [set(p["cables"]) for p in pairs if p["status"] == FAILED]
    # Less what a passing pair cleared: two failing pairs of a rail may share the uplinks
    # that another pair carried at full rate.
    common = set.intersection(*failing) - cleared if failing else set()
    return out, sorted(common), sets


def _one_of(b: dict[str, Any]) -> str:
    retest = (
        f"retest {', '.join(b['retest'])} to tell them apart"
        if b["retest"]
        else "no planned pair tells them apart: swap one of them, or test each link alone "
        "(ibdiagnet)"
    )
    return (
        f"one of {', '.join(b['cables'])}: the failing pairs ({', '.join(b['pairs'])}) "
        f"cross them all; {retest}"
    )


def blame(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the failing pairs say, and no more: the fewest sets of cables, greedily (the
    most failures first, then by ID), that account for every failing pair no passing pair
    cleared a cable of. A set holds the cables crossed by exactly the same failing pairs:
    those results cannot tell them apart, so a set of two is "one of A, B", never A. With one
    bad cable, its set covers every failing pair, so it is the one named, alone or with the
    cables no result tells from it. `retest`: planned pairs that did not run and cross some
    of a set's cables but not all, which would split it.

    Each: {cables: [id], pairs: [pair], retest: [pair]}."""
    cleared = {c for p in pairs if p["status"] == PASSED for c in p["cables"]}
    failing: dict[str, set[str]] = defaultdict(set)  # cable -> failing pairs over it
    for p in pairs:
        if p["status"] == FAILED:
            for c in p["cables"]:
                if c not in cleared:
                    failing[c].add(p["pair"])
    sets: dict[frozenset[str], list[str]] = defaultdict(list)
    for cable, crossing in failing.items():
        sets[frozenset(crossing)].append(cable)
    left: set[str] = set().union(*failing.values()) if failing else set()
    chosen: list[tuple[list[str], frozenset[str]]] = []
    while left:
        over, cables = min(sets.items(), key=lambda kv: (-len(kv[0] & left), sorted(kv[1])))
        if not over & left:
            break
        chosen.append((sorted(cables), over))
        left -= over
    out = []
    for cables, over in sorted(chosen):
        members = set(cables)
        retest = sorted(
            p["pair"]
            for p in pairs
            if p["status"] == NOT_TESTED and 0 < len(members & set(p["cables"])) < len(members)
        )
        out.append({"cables": cables, "pairs": sorted(over), "retest": retest})
    return out


def _step(step: dict[str, Any], results: Path) -> dict[str, Any]:
    entry = {
        "step": step["step"],
        "nodes": step["nodes"],
        "min_bus_gb_s": step["min_bus_gb_s"],
        "busbw_gb_s": None,
        "status": NOT_TESTED,
        "message": "no log",
    }
    text = _read(results, step["log"])
    if text is None:
        return entry
    fact, error = _parse("all_reduce_perf", text)
    if error is not None:
        return entry | {"status": FAILED, "message": error}
    largest = max(fact["rows"], key=lambda r: r["bytes"])
    busbw = largest["busbw"]
    problems = []
    if fact["hosts"] and fact["hosts"] != step["hosts"]:
        problems.append(f"ran on {len(fact['hosts'])} other or fewer nodes than planned")
    if any(r["wrong"] for r in fact["rows"]) or fact["out_of_bounds"]:
        problems.append("wrong results")
    if busbw < step["min_bus_gb_s"]:
        problems.append(f"bus bandwidth {busbw:g} GB/s below {step['min_bus_gb_s']:g}")
    status = FAILED if problems else PASSED
    message = "; ".join(problems) or f"bus bandwidth {busbw:g} GB/s"
    return entry | {"busbw_gb_s": busbw, "status": status, "message": message}


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class Renderings(Protocol):
    """The documents of the report (draw/report/readiness.py), handed in by the CLI:
    `audits` never imports `draw`."""

    def markdown(self, report: dict[str, Any]) -> str: ...

    def junit(self, report: dict[str, Any]) -> str: ...

    def textfile(self, report: dict[str, Any]) -> str: ...


def accept(
    repo: Path, results: Path, out: Path, render: Renderings, metrics: Path | None = None
) -> dict[str, Any]:
    """Judge the run under `results` against `repo`'s plan; write the report into `out`
    (readiness.json, readiness.md, junit.xml) and the metrics when asked."""
    from audits.pipeline import TEXTFILE_MODE

    if not results.is_dir():
        raise AuditError(f"{results} is not a folder")
    report = judge(read_inputs(repo), results)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in (
            ("readiness.json", to_json(report)),
            ("readiness.md", render.markdown(report)),
            ("junit.xml", render.junit(report)),
        ):
            atomic.replace(out / name, text)
        if metrics is not None:
            atomic.replace(metrics, render.textfile(report), TEXTFILE_MODE)
    except OSError as exc:
        raise AuditError(f"cannot write the report: {exc}") from None
    return report
