"""`generated/monitoring/`: Prometheus on the monitoring host, its targets and alert rules.

  targets/<job>.json   one per service of services.yaml with a `scrape:` (node_exporter,
                       dcgm-exporter, ...): every host whose role runs it, on its management
                       address and the service's port;
  targets/ipmi.json    every BMC, scraped through the ipmi_exporter beside Prometheus;
  prometheus.yml       the scrape jobs over those files (file-based service discovery), the
                       rule file and the Alertmanager; paths relative to the config's folder;
  alerts.yml           alert rules with the thresholds of site.yaml `monitoring:`.
Each target is its own group labelled instance (the host name, so alerts name the box), rack,
role and leaf (the leaf its HCA is cabled to, from the cable plan): a rack or a leaf going dark
shows as one label value. The drift audit exports clusterforge_drift_findings{host,kind} and
clusterforge_hosts_unreachable; the rules alert on both above zero.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from compiler.deploy import services
from compiler.model import Medium
from compiler.plan import Host, Plan
from compiler.targets.render import template, to_json, to_yaml

IPMI_EXPORTER = "127.0.0.1:9290"  # runs on the monitoring host, beside Prometheus
ALERTMANAGER = "127.0.0.1:9093"


def _labels(host: Host, leaf: dict[str, str]) -> dict[str, str]:
    labels = {"instance": host.name, "rack": host.rack, "role": host.role.value}
    return labels | ({"leaf": leaf[host.name]} if host.name in leaf else {})


def _scrape_address(plan: Plan, host: Host) -> str:
    """The host's address on the network that carries its default route (management)."""
    default = {n for n, net in plan.cluster.networks.items() if net.default_route}
    return next((i for i in host.interfaces if i.network in default), host.interfaces[0]).address


def targets(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Job name -> file_sd target groups."""
    ib = {n for n, net in plan.cluster.networks.items() if net.medium == Medium.INFINIBAND}
    leaf = {c.b.device: c.a.device for c in plan.cables if c.network in ib}
    jobs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for host in plan.hosts:
        labels = _labels(host, leaf)
        address = _scrape_address(plan, host)
        for _, service in services(plan, host):
            if service.scrape:
                target = f"{address}:{service.scrape.port}"
                jobs[service.scrape.job].append({"targets": [target], "labels": labels})
        jobs["ipmi"].append({"targets": [host.bmc.address], "labels": labels})
    return dict(jobs)


def _ib_rate_expr(plan: Plan) -> str:
    """Every planned HCA port whose link rate (bytes/s, from sysfs) is below its plan."""
    planned = sorted({(p.device, p.port, p.rate_gbps) for h in plan.hosts for p in h.ib_ports})
    return " or ".join(
        f'node_infiniband_rate_bytes_per_second{{job="node",device="{device}",port="{port}"}}'
        f" * 8 / 1e9 < {rate}"
        for device, port, rate in planned
    )


def rules(plan: Plan) -> dict[str, Any]:
    m = plan.site.monitoring

    def alert(
        name: str, expr: str, wait: str | None, severity: str, summary: str
    ) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": name, "expr": expr}
        rule |= {"for": wait} if wait else {}
        return rule | {"labels": {"severity": severity}, "annotations": {"summary": summary}}

    return {
        "groups": [
            {
                "name": "clusterforge",
                "rules": [
                    alert(
                        "GpuTemperatureHigh",
                        f"DCGM_FI_DEV_GPU_TEMP > {m.gpu_temp_c}",
                        m.pending,
                        "critical",
                        f"GPU {{{{ $labels.gpu }}}} of {{{{ $labels.instance }}}} is at "
                        f"{{{{ $value }}}} °C, above {m.gpu_temp_c} °C",
                    ),
                    alert(
                        "GpuEccCorrectedRising",
                        f"increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[{m.ecc_window}])"
                        f" > {m.ecc_corrected_increase}",
                        None,
                        "warning",
                        f"GPU {{{{ $labels.gpu }}}} of {{{{ $labels.instance }}}} corrected "
                        f"{{{{ $value }}}} ECC errors in {m.ecc_window}",
                    ),
                    alert(
                        "IbPortRateDegraded",
                        _ib_rate_expr(plan),
                        m.pending,
                        "warning",
                        "{{ $labels.device }} port {{ $labels.port }} of {{ $labels.instance }} "
                        "(leaf {{ $labels.leaf }}) runs at {{ $value }} Gb/s, below plan "
                        "(trained down, or the link is down)",
                    ),
                    alert(
                        "BmcUnreachable",
                        'max without (collector) (ipmi_up{job="ipmi"}) == 0',
                        m.bmc_down_for,
                        "warning",
                        "the BMC of {{ $labels.instance }} does not answer IPMI",
                    ),
                    alert(
                        "ClusterDrift",
                        "sum by (host, kind) (clusterforge_drift_findings) > 0",
                        None,
                        "warning",
                        "{{ $labels.host }} drifts from generated/expected: "
                        "{{ $value }} {{ $labels.kind }} finding(s)",
                    ),
                    alert(
                        "AuditHostsUnreachable",
                        "max(clusterforge_hosts_unreachable) > 0",
                        None,
                        "warning",
                        "the drift audit could not reach {{ $value }} host(s)",
                    ),
                ],
            }
        ]
    }


def render(plan: Plan) -> dict[str, str]:
    jobs = targets(plan)
    files = {f"monitoring/targets/{job}.json": to_json(groups) for job, groups in jobs.items()}
    files["monitoring/prometheus.yml"] = template(
        "prometheus.yml.j2",
        site=plan.site,
        jobs=sorted(jobs),
        ipmi_exporter=IPMI_EXPORTER,
        alertmanager=ALERTMANAGER,
    )
    files["monitoring/alerts.yml"] = template("alerts-header.j2", site=plan.site) + to_yaml(
        rules(plan)
    )
    return files
