"""The metrics the audit publishes (node_exporter's textfile collector reads them) and the
alerts are written against: one name for the writer and the alert expressions."""

from __future__ import annotations

FINDINGS = "clusterforge_drift_findings"  # {host, kind}: findings per host and kind
FINDINGS_CHANGED = "clusterforge_drift_findings_changed"  # {change}: new, resolved, flapping
LAST_SUCCESS = "clusterforge_audit_last_success_timestamp_seconds"  # when it was collected
HOSTS = "clusterforge_hosts"  # {status}: hosts per status
HOSTS_UNREACHABLE = "clusterforge_hosts_unreachable"  # hosts the audit could not reach
