"""`generated/monitoring/alerts.yml` and `recording.yml`: what Prometheus alerts on, and the
series the alerts and the dashboard share.

Every failure the runbook cares about has an alert: a scrape target down (`up == 0`; a node's
is HostDown, whose GPU and fabric alerts Alertmanager then holds back), a BMC that does not
answer IPMI or ping, a management address that does not answer ping, a GPU too hot, with
corrected ECC errors rising, an uncorrectable (double-bit) ECC error, a failed row remap, an
Xid, an NVLink down (DCGM's NVLINK health watch), fewer GPUs than the model has, an InfiniBand
port of the plan not Active or below its planned rate, an Ethernet switch's uplink down, a
switch port below its cable's planned speed or with errors rising, a switch whose IF-MIB
cannot be walked, a degraded md RAID, and the drift audit's own result (drift, hosts it could
not collect, its report gone stale or absent).
Thresholds and `for:` come from site.yaml `monitoring:`; planned GPU counts and port rates
from the plan, per hardware model. Every alert carries host, rack, u (its lowest rack unit),
role and severity, and the annotation `first_command`: what the runbook has an operator run
first.

The switch ports are the plan's, not the switch's: recording.yml holds one series per
installed, enabled port of every Ethernet switch the plan configures,
`clusterforge:switch_port:planned_mbps{instance, ifName, port, cable, peer, link}` (its
cable's planned speed in Mb/s, ifHighSpeed's unit), and the port alerts join snmp_exporter's
IF-MIB series to it on (instance, ifName). So an alert names the cable and far end the plan
gives that port even when the switch's own description (ifAlias) is stale or missing, a port
nothing is cabled to never alerts, and a spare's port (down by design) neither; a planned
port the switch does not list at all (named otherwise) alerts as missing.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from compiler.ethernet import SwitchPort
from compiler.kinds import SwitchRole
from compiler.model import Monitoring
from compiler.plan import Host, Plan
from compiler.targets.render import template, to_yaml
from compiler.targets.shared import PROBES, probe_jobs, snmp_switches
from contract import Severity, metrics

HOST = "instance, rack, u, role"  # what an aggregation keeps so the alert still names the box
HOST_INFO = "clusterforge:host:info"  # every host with its rack, u and role, labelled host
IB_ACTIVE = 4  # node_infiniband_state_id: 4 is ACTIVE (1 DOWN, 2 INIT, 3 ARMED)
HEALTH_PASS = 0  # DCGM_EXP_GPU_HEALTH_STATUS: 0 pass, 10 warn, 20 fail
# The switches a rack hangs from: one unreachable is its rack cut off (critical), where a
# spine has others beside it, and hosts and spines alert as PingFailed.
RACK_SWITCHES = "|".join(
    sorted(r.value for r in (SwitchRole.LEAF, SwitchRole.MANAGEMENT, SwitchRole.STORAGE))
)
SWITCH_PORT = "clusterforge:switch_port:planned_mbps"  # the plan's ports, one series each
PORT_FACTS = "port, cable, peer, link"  # what a port alert takes from the plan's series
# A switch's target labels (monitoring's switch_labels) and job: what a planned port's series,
# which has none of them, takes from its switch's scrape.
SWITCH_TARGET = "job, rack, u, role, switch_role, model, network, address"
IF_UP = 1  # IF-MIB ifOperStatus: 1 up (2 down, 7 lowerLayerDown, ...)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> int:
    """A Prometheus duration (`1h30m`) in whole seconds."""
    return round(
        sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", duration))
    )


def _alert(
    name: str,
    expr: str,
    wait: str | None,
    severity: Severity,
    summary: str,
    first: str,
    host: str | None = "{{ $labels.instance }}",
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    rule |= {"for": wait} if wait else {}
    labels = {"severity": severity.value} | ({"host": host} if host else {})
    return rule | {"labels": labels, "annotations": {"summary": summary, "first_command": first}}


def _ssh(command: str) -> str:
    """`command` run on the alert's host."""
    return f"ssh {{{{ $labels.instance }}}} {command}"


def _planned(
    plan: Plan, fact: Callable[[Host], dict[tuple[Any, ...], int]]
) -> list[tuple[str, tuple[Any, ...], int]]:
    """(selector, slot, planned value) covering every host's `fact` (slot -> value): per
    hardware model, the value most of its hosts share selects by model, minus the hosts that
    differ or lack the slot, which get their own selector."""
    by_model: dict[str, list[Host]] = defaultdict(list)
    for host in plan.hosts:
        by_model[host.model].append(host)
    out: list[tuple[str, tuple[Any, ...], int]] = []
    for model, hosts in sorted(by_model.items()):
        facts = {h.name: fact(h) for h in hosts}
        for slot in sorted({slot for f in facts.values() for slot in f}):
            values = Counter(f[slot] for f in facts.values() if slot in f)
            common = min(values, key=lambda v: (-values[v], v))
            other = sorted(n for n, f in facts.items() if f.get(slot) != common)
            sel = f'model="{model}"' + (f',instance!~"{"|".join(other)}"' if other else "")
            out.append((sel, slot, common))
            out += [(f'instance="{n}"', slot, facts[n][slot]) for n in other if slot in facts[n]]
    return out


def _ib_ports(plan: Plan) -> list[tuple[str, str, int, int, int | None]]:
    """(selector, device, port, planned Gb/s, rail or None) for every planned HCA port."""

    def ports(h: Host) -> dict[tuple[Any, ...], int]:
        model = plan.hardware.servers.get(h.model)
        rail = {n.device: n.rail for n in model.nics if n.device} if model else {}
        return {(p.device, p.port, rail.get(p.device)): p.rate_gbps for p in h.ib_ports}

    return [(sel, slot[0], slot[1], rate, slot[2]) for sel, slot, rate in _planned(plan, ports)]


def _on_rail(expr: str, rail: int | None) -> str:
    """`expr` labelled with its HCA's rail, which its series do not carry: an alert on
    mlx5_5 of an eight-rail server says rail 5 (its unit's fifth leaf)."""
    return expr if rail is None else f'label_replace({expr}, "rail", "{rail}", "", "")'


def _gpu_counts(plan: Plan) -> list[tuple[str, int]]:
    facts = _planned(plan, lambda h: {(): int(h.gpus["count"])} if h.gpus else {})
    return [(sel, count) for sel, _, count in facts]


def _ib_down(plan: Plan) -> str:
    """A planned port whose state is not ACTIVE, or which node_exporter does not see at all
    (the HCA gone) while the node itself answers."""
    out = []
    for sel, device, port, _, rail in _ib_ports(plan):
        port_sel = f'device="{device}",port="{port}"'
        missing = (
            f'(up{{job="node",{sel}}} == 1) unless on (instance) '
            f'node_infiniband_state_id{{job="node",{port_sel}}}'
        )
        down = f'node_infiniband_state_id{{job="node",{sel},{port_sel}}} != {IB_ACTIVE}'
        out.append(_on_rail(down, rail))
        out.append(
            _on_rail(
                f'label_replace(label_replace({missing}, "device", "{device}", "", ""), '
                f'"port", "{port}", "", "")',
                rail,
            )
        )
    return " or ".join(out)


def _ib_slow(plan: Plan) -> str:
    """An Active planned port whose link rate (bytes/s, from sysfs) is below its plan."""
    return " or ".join(
        _on_rail(
            f'node_infiniband_rate_bytes_per_second{{job="node",{sel},device="{device}",port="{port}"}}'
            f" * 8 / 1e9 < {rate} and on (instance, device, port) "
            f"node_infiniband_state_id == {IB_ACTIVE}",
            rail,
        )
        for sel, device, port, rate, rail in _ib_ports(plan)
    )


def _gpus_missing(plan: Plan) -> str:
    """Fewer GPUs than the model has, counted by the series DCGM exports per GPU; a running
    dcgm-exporter that sees none counts as 0 (no series at all is no count)."""
    return " or ".join(
        f'(count by ({HOST}) (DCGM_FI_DEV_GPU_TEMP{{job="dcgm",{sel}}}) or '
        f'sum by ({HOST}) (up{{job="dcgm",{sel}}} == 1) * 0) < {count}'
        for sel, count in _gpu_counts(plan)
    )


def _link(port: SwitchPort) -> str:
    """`uplink`: a routed port to another switch (its BGP session's); `host`: an access port."""
    return "uplink" if port.peer is not None else "host"


def switch_ports(plan: Plan) -> list[dict[str, Any]]:
    """One recording rule per port the plan has cabled and enabled on an Ethernet switch the
    snmp job walks: its planned speed, labelled with the switch (instance), the name its OS
    gives the port (ifName: swp49, Ethernet49), the cable and the far end."""
    if "snmp" not in probe_jobs(plan):
        return []
    rules = []
    for sw, _ in snmp_switches(plan):
        model = plan.hardware.switches[sw.model]
        for p in sw.ports:
            if not (p.enabled and p.installed):
                continue
            labels = {
                "instance": sw.name,
                "ifName": model.port_label(p.port),
                "port": str(p.port),
                "cable": p.cable,
                "peer": p.description.removesuffix(f" {p.cable}"),
                "link": _link(p),
            }
            rules.append(
                {"record": SWITCH_PORT, "expr": f"vector({p.gbps * 1000})", "labels": labels}
            )
    return rules


def _switch_port_alerts(plan: Plan) -> list[dict[str, Any]]:
    """The alerts on the snmp job's IF-MIB series; none without it."""
    if "snmp" not in probe_jobs(plan):
        return []
    m = plan.site.monitoring
    mon = plan.site.services.monitoring
    join = f"on (instance, ifName) group_left ({PORT_FACTS})"
    port = (
        "{{ $labels.ifName }} of {{ $labels.instance }} "
        "(cable {{ $labels.cable }} to {{ $labels.peer }})"
    )
    show = "ssh {{ $labels.instance }} "
    # The right-hand side of the comparison is 1 (up) beside every planned uplink: the port's
    # own state against it keeps the ports that are not up, labelled with the plan's facts.
    planned_up = f'({SWITCH_PORT}{{link="uplink"}} > bool 0)'
    errors = (
        f'increase(ifInErrors{{job="snmp"}}[{m.port_errors_window}]) + '
        f'increase(ifOutErrors{{job="snmp"}}[{m.port_errors_window}])'
    )
    # `host` is the switch, as RackSwitchUnreachable's; `switch` says so to a reader.
    labels = {"switch": "{{ $labels.instance }}"}
    rules = [
        _alert(
            "SwitchUplinkDown",
            f'ifOperStatus{{job="snmp"}} != {join} {planned_up}',
            m.pending,
            Severity.CRITICAL,
            f"uplink {port} is not up (ifOperStatus {{{{ $value }}}}): one path fewer "
            "between a rack and the spines",
            show + "'ip link show {{ $labels.ifName }}; sudo vtysh -c \"show bgp summary\"'",
        ),
        _alert(
            "SwitchPortSpeedDegraded",
            f'ifHighSpeed{{job="snmp"}} < {join} {SWITCH_PORT} and on (instance, ifName) '
            f'ifOperStatus{{job="snmp"}} == {IF_UP}',
            m.pending,
            Severity.WARNING,
            f"{port} runs at {{{{ $value }}}} Mb/s, below its cable's planned speed "
            "(trained down: cable, optics or autonegotiation)",
            show + "sudo ethtool {{ $labels.ifName }}",
        ),
        _alert(
            "SwitchPortErrors",
            f"({errors}) > {join} ({SWITCH_PORT} * 0)",
            None,
            Severity.WARNING,
            f"{port} counted {{{{ $value }}}} errors in {m.port_errors_window}",
            show + "sudo ethtool -S {{ $labels.ifName }}",
        ),
        _alert(
            "SwitchPortMissing",
            f'({SWITCH_PORT} unless on (instance, ifName) ifOperStatus{{job="snmp"}}) '
            f"* on (instance) group_left ({SWITCH_TARGET}) "
            f'(up{{job="snmp"}} == 1)',
            m.pending,
            Severity.WARNING,
            f"{port} is planned but the switch's IF-MIB lists no such port: its ports are "
            "named otherwise (the model's port_name, a breakout) and its alerts are blind",
            show + "ip -br link",
        ),
        _alert(
            "SwitchSnmpUnreachable",
            'up{job="snmp"} == 0',
            m.pending,
            Severity.WARNING,
            "snmp_exporter cannot walk the IF-MIB of {{ $labels.instance }}: its port alerts "
            "are blind (its snmpd, the community, or the exporter)",
            f"ssh {mon} systemctl status {' '.join(_units(plan, PROBES['snmp'].service))}; "
            'snmpget -v2c -c "$SNMP_COMMUNITY" {{ $labels.address }} SNMPv2-MIB::sysUpTime.0',
        ),
    ]
    for rule in rules:
        rule["labels"] |= labels
    return rules


def _units(plan: Plan, service: str) -> tuple[str, ...]:
    return next(s.units for h in plan.hosts for n, s in h.software.services if n == service)


def _exporters(plan: Plan) -> list[tuple[str, str]]:
    """(job, units) of every scrape job whose failure no other alert names: node's is
    HostDown, ipmi's BmcUnreachable."""
    jobs: dict[str, str] = {}
    for host in plan.hosts:
        for _, service in host.software.services:
            if service.scrape and service.scrape.job != "node":
                jobs[service.scrape.job] = " ".join(service.units)
    if "icmp" in probe_jobs(plan):
        jobs["icmp"] = " ".join(_units(plan, PROBES["icmp"].service))
    return sorted(jobs.items())


def _exporter_down(plan: Plan) -> list[dict[str, Any]]:
    """ExporterDown, whose first command depends on the job; none without such jobs."""
    exporters = _exporters(plan)
    if not exporters:
        return []
    mon = plan.site.services.monitoring
    first = "".join(
        f'{{{{ {"if" if i == 0 else "else if"} eq $labels.job "{job}" }}}}'
        + (f"ssh {mon} " if job in PROBES else "ssh {{ $labels.instance }} ")
        + f"systemctl status {units}"
        for i, (job, units) in enumerate(exporters)
    )
    return [
        _alert(
            "ExporterDown",
            f'up{{job=~"{"|".join(job for job, _ in exporters)}"}} == 0',
            plan.site.monitoring.pending,
            Severity.WARNING,
            "the {{ $labels.job }} exporter of {{ $labels.instance }} does not answer Prometheus",
            first + "{{ end }}",
        )
    ]


def alert_rules(plan: Plan) -> list[dict[str, Any]]:
    m: Monitoring = plan.site.monitoring
    crit, warn = Severity.CRITICAL, Severity.WARNING
    gpu = "GPU {{ $labels.gpu }} of {{ $labels.instance }}"
    ib = "{{ $labels.device }} port {{ $labels.port }} of {{ $labels.instance }}"
    where = "leaf {{ $labels.leaf }}"
    if plan.rails is not None:
        # A rail's HCA by its rail and unit (its leaf is the unit's leaf of that rail); a
        # service host's, on one leaf, by its leaf.
        rail = "rail {{ $labels.rail }} of {{ $labels.unit }}"
        where = f"{{{{ if $labels.rail }}}}{rail}{{{{ else }}}}{where}{{{{ end }}}}"
    mon = plan.site.services.monitoring
    rules = [
        _alert(
            "HostDown",
            'up{job="node"} == 0',
            m.pending,
            crit,
            "{{ $labels.instance }} (rack {{ $labels.rack }} U{{ $labels.u }}) does not answer "
            "Prometheus",
            "ping -c 3 {{ $labels.instance }}; "
            'ipmitool -I lanplus -H {{ $labels.instance }}-bmc -U "$IPMI_USER" -E chassis status',
        ),
        *_exporter_down(plan),
        _alert(
            "BmcUnreachable",
            'max without (collector) (ipmi_up{job="ipmi"}) == 0 or up{job="ipmi"} == 0',
            m.bmc_down_for,
            warn,
            "the BMC of {{ $labels.instance }} does not answer IPMI",
            'ipmitool -I lanplus -H {{ $labels.instance }}-bmc -U "$IPMI_USER" -E mc info',
        ),
        _alert(
            "RackSwitchUnreachable",
            f'probe_success{{job="icmp",switch_role=~"{RACK_SWITCHES}"}} == 0',
            m.bmc_down_for,
            crit,
            "{{ $labels.switch_role }} switch {{ $labels.instance }} (rack {{ $labels.rack }} "
            "U{{ $labels.u }}) does not answer ping: its rack's hosts may be cut off",
            "ping -c 3 {{ $labels.address }}",
        ),
        _alert(
            "PingFailed",
            f'probe_success{{job="icmp",switch_role!~"{RACK_SWITCHES}"}} == 0',
            m.bmc_down_for,
            warn,
            "the {{ $labels.network }} address of {{ $labels.instance }} does not answer ping",
            "ping -c 3 {{ $labels.address }}",
        ),
        _alert(
            "GpuTemperatureHigh",
            f'DCGM_FI_DEV_GPU_TEMP{{job="dcgm"}} > {m.gpu_temp_c}',
            m.pending,
            crit,
            f"{gpu} is at {{{{ $value }}}} °C, above {m.gpu_temp_c} °C",
            _ssh("nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {{ $labels.gpu }}"),
        ),
        _alert(
            "GpuEccCorrectedRising",
            f'increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{job="dcgm"}}[{m.ecc_window}])'
            f" > {m.ecc_corrected_increase}",
            None,
            warn,
            f"{gpu} corrected {{{{ $value }}}} ECC errors in {m.ecc_window}",
            _ssh("nvidia-smi -q -d ECC -i {{ $labels.gpu }}"),
        ),
        _alert(
            "GpuEccUncorrectable",
            'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{job="dcgm"} > 0',
            None,
            crit,
            f"{gpu} had {{{{ $value }}}} uncorrectable (double-bit) ECC error(s) since boot",
            _ssh("nvidia-smi -q -d ECC,ROW_REMAPPER -i {{ $labels.gpu }}"),
        ),
        _alert(
            "GpuRowRemapFailure",
            'DCGM_FI_DEV_ROW_REMAP_FAILURE{job="dcgm"} > 0',
            None,
            crit,
            f"{gpu} failed to remap a memory row: it needs replacing",
            _ssh("nvidia-smi -q -d ROW_REMAPPER -i {{ $labels.gpu }}"),
        ),
        _alert(
            "GpuXidError",
            'DCGM_FI_DEV_XID_ERRORS{job="dcgm"} > 0',
            None,
            warn,
            f"{gpu} reported Xid {{{{ $value }}}} (the last one; it holds until a GPU reset)",
            _ssh("journalctl -k -g 'NVRM: Xid'"),
        ),
        _alert(
            "GpuNvlinkDown",
            f'DCGM_EXP_GPU_HEALTH_STATUS{{job="dcgm",health_watch="NVLINK"}} > {HEALTH_PASS}',
            m.pending,
            crit,
            f"{gpu}: DCGM's NVLink health watch fails ({{{{ $labels.health_error_code }}}})",
            _ssh("nvidia-smi nvlink --status -i {{ $labels.gpu }}"),
        ),
        _alert(
            "GpusMissing",
            _gpus_missing(plan),
            m.pending,
            crit,
            "{{ $labels.instance }} shows {{ $value }} GPUs, fewer than its model has",
            _ssh("nvidia-smi -L"),
        ),
        _alert(
            "IbPortDown",
            _ib_down(plan),
            m.pending,
            crit,
            f"{ib} ({where}) is not Active",
            _ssh("ibstat {{ $labels.device }} {{ $labels.port }}"),
        ),
        _alert(
            "IbPortRateDegraded",
            _ib_slow(plan),
            m.pending,
            warn,
            f"{ib} ({where}) runs at {{{{ $value }}}} Gb/s, below plan "
            "(trained down: cable, optics or rate negotiation)",
            _ssh("ibstat {{ $labels.device }} {{ $labels.port }}"),
        ),
        *_switch_port_alerts(plan),
        _alert(
            "MdRaidDegraded",
            '(node_md_disks_required{job="node"} - ignoring (state) '
            'node_md_disks{job="node",state="active"}) > 0 or '
            'max without (state) (node_md_disks{job="node",state="failed"}) > 0',
            m.pending,
            warn,
            "md RAID {{ $labels.device }} of {{ $labels.instance }} is degraded",
            _ssh("cat /proc/mdstat"),
        ),
    ]
    drift = f"sum by (host, kind) ({metrics.FINDINGS}) > 0"
    rules += [
        _alert(
            "ClusterDrift",
            f"({drift}) * on (host) group_left (rack, u, role) {HOST_INFO} "
            f"or on (host, kind) ({drift})",
            None,
            warn,
            "{{ $labels.host }} drifts from generated/expected: {{ $value }} "
            "{{ $labels.kind }} finding(s)",
            "read report.md of the last drift-audit run for {{ $labels.host }}",
            host=None,
        ),
        _alert(
            "AuditHostsUnreachable",
            f"max({metrics.HOSTS_UNREACHABLE}) > 0",
            None,
            warn,
            "the drift audit could not reach {{ $value }} host(s)",
            "read report.md of the last drift-audit run: its unreachable hosts",
            host=None,
        ),
        _alert(
            "AuditStale",
            f"time() - min({metrics.LAST_SUCCESS}) > {seconds(m.audit_stale_after)} or "
            f"absent({metrics.LAST_SUCCESS})",
            None,
            warn,
            f"no drift audit report for {m.audit_stale_after} (or none published at all)",
            f"ssh {mon} ls -l /var/lib/node_exporter/textfile",
            host=None,
        ),
    ]
    return rules


def recording_rules(plan: Plan) -> list[dict[str, Any]]:
    gpus = 'DCGM_FI_DEV_GPU_TEMP{job="dcgm"}'
    planned: dict[str, int] = defaultdict(int)
    for host in plan.hosts:
        planned[host.rack] += int(host.gpus["count"]) if host.gpus else 0
    rules: list[dict[str, Any]] = [
        {
            "record": HOST_INFO,
            "expr": f'label_replace(group by ({HOST}) (up{{job="node"}}), '
            '"host", "$1", "instance", "(.*)")',
        },
        {"record": "rack:hosts_up:sum", "expr": 'sum by (rack) (up{job="node"})'},
        {"record": "rack:gpus_visible:count", "expr": f"count by (rack) ({gpus})"},
        {"record": "cluster:gpus_visible:count", "expr": f"count({gpus})"},
        {"record": "rack:gpu_temperature_celsius:max", "expr": f"max by (rack) ({gpus})"},
        {"record": "rack:gpu_temperature_celsius:avg", "expr": f"avg by (rack) ({gpus})"},
        {
            "record": "rack:ib_ports_active:count",
            "expr": f'count by (rack) (node_infiniband_state_id{{job="node"}} == {IB_ACTIVE})',
        },
        {
            "record": "rack:ib_ports_not_active:count",
            "expr": f'count by (rack) (node_infiniband_state_id{{job="node"}} != {IB_ACTIVE})',
        },
        {
            "record": "rack:drift_findings:sum",
            "expr": f"sum by (rack) (sum by (host) ({metrics.FINDINGS}) "
            f"* on (host) group_left (rack) {HOST_INFO})",
        },
        {"record": "cluster:gpus_planned:count", "expr": f"vector({sum(planned.values())})"},
    ]
    # The plan's GPUs per rack, so the dashboard shows visible against planned.
    rules += [
        {"record": "rack:gpus_planned:count", "expr": f"vector({n})", "labels": {"rack": rack}}
        for rack, n in sorted(planned.items())
        if n
    ]
    return rules


def render(plan: Plan) -> dict[str, str]:
    alerts = {"groups": [{"name": "clusterforge", "rules": alert_rules(plan)}]}
    groups = [{"name": "clusterforge-recording", "rules": recording_rules(plan)}]
    ports = switch_ports(plan)
    if ports:  # the plan's switch ports, constant series: a group of their own
        groups.append({"name": "clusterforge-switch-ports", "rules": ports})
    recording = {"groups": groups}
    return {
        "monitoring/alerts.yml": template("alerts-header.j2", site=plan.site) + to_yaml(alerts),
        "monitoring/recording.yml": template("recording-header.j2", site=plan.site)
        + to_yaml(recording),
    }
