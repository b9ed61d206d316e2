"""The Prometheus textfile (node_exporter's textfile collector), rendered with prometheus_client.

Metrics, all gauges:

- `clusterforge_drift_findings{host,kind}`: findings per host and kind, 0 for every kind a
  host's checks covered without drift (host "fabric", kind "cable" for the cables), so a fixed
  drift goes back to 0 rather than vanishing; kinds whose checks did not run are absent;
- `clusterforge_hosts{status}`: hosts per status (ok, drift, unreachable, error);
- `clusterforge_hosts_unreachable`: hosts that could not be reached;
- `clusterforge_drift_findings_changed{change}`: findings `new`, `resolved` and `flapping`
  since the previous run (0 without one, `audits/history.py`);
- `clusterforge_audit_last_success_timestamp_seconds`: when this report's state was collected;
  alert when it grows old, i.e. when the audit stopped producing reports.

Pure: report in, text out (a fresh `CollectorRegistry`, `generate_latest`).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from audits.model import FABRIC, Status
from audits.report import Report
from contract import Kind, metrics


def render(report: Report) -> str:
    """The report's metrics in the Prometheus text format."""
    registry = CollectorRegistry()
    findings = Gauge(
        metrics.FINDINGS,
        "Drift findings of the last audit, per host and kind",
        ["host", "kind"],
        registry=registry,
    )
    counts = Counter((f["host"], f["kind"]) for f in report["findings"])
    covered = {
        (e["host"], c["kind"])
        for e in report["hosts"]
        for c in e["checks"]
        if c["outcome"] != "skipped"
    }
    if report["fabric"]["status"] in ("ok", "drift"):
        covered.add((FABRIC, Kind.CABLE.value))
    for host, kind in sorted(covered | set(counts)):
        findings.labels(host=host, kind=kind).set(counts[(host, kind)])
    hosts = Gauge(
        metrics.HOSTS, "Hosts per status in the last audit", ["status"], registry=registry
    )
    for status in Status:
        hosts.labels(status=status.value).set(report["summary"]["status"][status.value])
    Gauge(
        metrics.HOSTS_UNREACHABLE,
        "Hosts the last audit could not reach",
        registry=registry,
    ).set(report["summary"]["status"]["unreachable"])
    changed = Gauge(
        metrics.FINDINGS_CHANGED,
        "Findings new, resolved and flapping since the previous audit",
        ["change"],
        registry=registry,
    )
    for change in ("new", "resolved", "flapping"):
        changed.labels(change=change).set(len(report["history"][change]))
    Gauge(
        metrics.LAST_SUCCESS,
        "When the state of the last completed audit was collected (Unix time)",
        registry=registry,
    ).set(datetime.fromisoformat(report["collected_at"]).timestamp())
    return generate_latest(registry).decode("utf-8")
