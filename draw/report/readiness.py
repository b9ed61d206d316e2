"""Renderings of the acceptance readiness report (`audits/accept.py`): Markdown, JUnit XML,
Prometheus.

As for the audit's report, each is pure, report in, text out, and reads nothing else:

- Markdown: summary, suspects, then failed nodes, failed cables, failing pairs, NCCL steps,
  and what was not tested, hosts folded into compact ranges;
- JUnit: a suite per subject kind (nodes, cables, pairs, nccl), a case per subject; failed is
  a `<failure>` with the reason, not tested is `<skipped>`;
- Prometheus: `clusterforge_acceptance{kind,status}` counts and
  `clusterforge_acceptance_node{host,status}` 1 per node for its status.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from common.hostlist import compact

_KINDS = ("nodes", "cables", "pairs", "nccl")
_NAME = {"nodes": "host", "cables": "cable", "pairs": "pair", "nccl": "step"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any]) -> str:
    """The report for people."""
    s = report["summary"]
    counts = "; ".join(
        f"{kind}: " + ", ".join(f"{n} {status}" for status, n in s[kind].items())
        for kind in _KINDS
        if s[kind]
    )
    parts = [f"# Acceptance: exit code {report['exit_code']}\n\n{counts}."]
    if report["suspects"]:
        parts.append(
            "## Suspect cables\n\nCommon to every failing pair: "
            + ", ".join(f"`{c}`" for c in report["suspects"])
        )
    failed = [n for n in report["nodes"] if n["status"] == "failed"]
    if failed:
        rows = ["## Failed nodes", "", "| host | check | problem |", "| --- | --- | --- |"]
        rows += [
            f"| {n['host']} | {f['check']} | {_cell(f['message'])} |"
            for n in failed
            for f in n["failed"]
        ]
        parts.append("\n".join(rows))
    bad = [c for c in report["cables"] if c["status"] == "failed"]
    if bad:
        rows = ["## Failed cables", "", "| cable | pairs that crossed it |", "| --- | --- |"]
        rows += [f"| {c['cable']} | {_cell(c['reason'] or '')} |" for c in bad]
        parts.append("\n".join(rows))
    # A failure the pairs cannot pin on one cable: the set, never one of it in its place.
    sets = [b for b in report.get("blame", ()) if len(b["cables"]) > 1]
    if sets:
        rows = [
            "## Failures the pairs cannot pin on one cable",
            "",
            "| one of | failing pairs | to tell them apart |",
            "| --- | --- | --- |",
        ]
        rows += [
            f"| {', '.join(b['cables'])} | {', '.join(b['pairs'])} | "
            + (
                f"retest {', '.join(b['retest'])}"
                if b["retest"]
                else "no planned pair splits them: swap one, or test each link alone"
            )
            + " |"
            for b in sets
        ]
        parts.append("\n".join(rows))
    slow = [p for p in report["pairs"] if p["status"] == "failed"]
    if slow:
        rows = ["## Failing pairs", "", "| pair | result | cables |", "| --- | --- | --- |"]
        rows += [
            f"| {p['pair']} | {_cell(p['message'])} | {', '.join(p['cables'])} |" for p in slow
        ]
        parts.append("\n".join(rows))
    if report["nccl"]:
        rows = ["## NCCL all-reduce", "", "| step | nodes | status | result |"]
        rows.append("| --- | ---: | --- | --- |")
        rows += [
            f"| {s['step']} | {s['nodes']} | {s['status']} | {_cell(s['message'])} |"
            for s in report["nccl"]
        ]
        parts.append("\n".join(rows))
    untested: dict[str, list[str]] = defaultdict(list)
    for n in report["nodes"]:
        if n["status"] == "not-tested":
            untested[", ".join(n["not_tested"])].append(n["host"])
    if untested:
        rows = ["## Nodes not tested", "", "| hosts | missing |", "| --- | --- |"]
        rows += [f"| {compact(h)} | {m} |" for m, h in sorted(untested.items())]
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"


def junit(report: dict[str, Any]) -> str:
    """The report as test results, for CI."""
    root = ET.Element("testsuites", name="clusterforge acceptance")
    for kind in _KINDS:
        suite = ET.SubElement(root, "testsuite", name=kind)
        for entry in report[kind]:
            case = ET.SubElement(suite, "testcase", classname=kind, name=entry[_NAME[kind]])
            if entry["status"] in ("failed", "one-of"):
                text = _why(kind, entry)
                ET.SubElement(case, "failure", type="failed", message=text.split("\n")[0])
                case[-1].text = text
            elif entry["status"] == "not-tested":
                ET.SubElement(case, "skipped", message=_why(kind, entry) or "not tested")
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _why(kind: str, entry: dict[str, Any]) -> str:
    if kind == "nodes":
        if entry["status"] == "not-tested":
            return "missing: " + ", ".join(entry["not_tested"])
        return "\n".join(f"{f['check']}: {f['message']}" for f in entry["failed"])
    if kind == "cables":
        return str(entry["reason"] or "")
    return str(entry["message"])


def textfile(report: dict[str, Any]) -> str:
    """The report's metrics in the Prometheus text format."""
    registry = CollectorRegistry()
    counts = Gauge(
        "clusterforge_acceptance",
        "Subjects of the last acceptance run per kind and status",
        ["kind", "status"],
        registry=registry,
    )
    for kind in _KINDS:
        for status in ("admitted", "passed", "failed", "one-of", "not-tested"):
            if status == ("passed" if kind == "nodes" else "admitted"):
                continue
            counts.labels(kind=kind, status=status).set(report["summary"][kind].get(status, 0))
    node = Gauge(
        "clusterforge_acceptance_node",
        "1 for the status each node ended the last acceptance run in",
        ["host", "status"],
        registry=registry,
    )
    for n in report["nodes"]:
        node.labels(host=n["host"], status=n["status"]).set(1)
    return generate_latest(registry).decode("utf-8")
