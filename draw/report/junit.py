"""`junit.xml`: the report as test results, so CI shows drift as failing tests.

One test case per host and check (`classname` the host, `name` the check) and one per
installed cable (`classname` "fabric", `name` the cable ID), plus per subject a `collect` case:

- drift: the check's case has a `<failure type="drift">` listing its findings; a link that no
  cable plans is a failing case of its own, named `unplanned: <ends>`;
- could not collect: the subject's `collect` case has an `<error>` whose type is the status
  (`unreachable` or `error`) and whose message is the reason;
- a check that could not run (for an unreachable host: all of them) is `<skipped>` with the
  reason, never passed.

So `failures` counts drift, `errors` counts subjects not collected, `skipped` checks not run.
Pure: report in, text out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from audits.fabric import UNPLANNED
from audits.model import FABRIC, Finding
from audits.report import Report
from audits.sanitize import xml_legal

_UNCOLLECTED = ("unreachable", "error")


def render(report: Report) -> str:
    """The report as JUnit XML."""
    by_case: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in report["findings"]:
        by_case[(f["host"], f["check"])].append(f)
    root = ET.Element("testsuites", name="clusterforge audit")
    hosts = _suite(root, "hosts", report["collected_at"])
    for entry in report["hosts"]:
        _collect(hosts, entry["host"], entry["status"], entry["reason"])
        for check in entry["checks"]:
            case = _case(hosts, entry["host"], check["check"])
            if check["outcome"] == "skipped":
                ET.SubElement(case, "skipped", message=check["reason"] or "")
            elif check["outcome"] == "drift":
                _failure(case, by_case[(entry["host"], check["check"])])
    fabric = _suite(root, FABRIC, report["collected_at"])
    cables = report["fabric"]
    _collect(fabric, FABRIC, cables["status"], cables["reason"])
    for cable in cables["checked"]:
        case = _case(fabric, FABRIC, cable)
        if cables["status"] in _UNCOLLECTED:
            ET.SubElement(case, "skipped", message=f"fabric {cables['status']}")
        elif by_case[(FABRIC, cable)]:
            _failure(case, by_case[(FABRIC, cable)])
    for f in by_case[(FABRIC, UNPLANNED)]:
        _failure(_case(fabric, FABRIC, f"{UNPLANNED}: {f['path']}"), [f])
    for suite in (root, hosts, fabric):
        _count(suite)
    ET.indent(root)
    # ElementTree writes a control character as is, which no XML parser reads: the report's
    # text is sanitized already (audits.sanitize), this keeps the document well-formed anyway.
    body = xml_legal(ET.tostring(root, "unicode"))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _suite(root: ET.Element, name: str, timestamp: str) -> ET.Element:
    return ET.SubElement(root, "testsuite", name=name, timestamp=timestamp)


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name)


def _collect(suite: ET.Element, subject: str, status: str, reason: str | None) -> None:
    case = _case(suite, subject, "collect")
    if status in _UNCOLLECTED:
        ET.SubElement(case, "error", type=status, message=reason or status)


def _failure(case: ET.Element, findings: list[Finding]) -> None:
    failure = ET.SubElement(
        case, "failure", type="drift", message="; ".join(f["message"] for f in findings)
    )
    failure.text = "\n".join(
        f"{f['severity']}: {f['path']}: expected {f['expected']!r}, observed {f['observed']!r}"
        for f in findings
    )


def _count(suite: ET.Element) -> None:
    cases = list(suite.iter("testcase"))
    suite.set("tests", str(len(cases)))
    for tag, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attribute, str(sum(1 for case in cases if case.find(tag) is not None)))
