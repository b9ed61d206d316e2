"""A small fleet for the monitoring tests: what each exporter of each host serves, under the
real metric names of node_exporter, dcgm-exporter, ipmi_exporter, blackbox_exporter
(FORMATS.md §9) and snmp_exporter (the generated IF-MIB module's), healthy or in one failure
state, and the alerts each failure must raise.

The same samples feed `promtool test rules` (as input series) and the test exporter a real
Prometheus scrapes (as the text exposition format), so both proofs speak of one fleet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compiler.ethernet import EthernetSwitch, SwitchPort
from compiler.plan import Host, Plan
from compiler.targets.monitoring import fabric_labels, switch_labels, target_labels

# host -> failure; every other host of FLEET is healthy.
FAULTS = {
    "gpu001": "host_down",  # node_exporter's scrape fails: up == 0
    "gpu002": "gpu_hot",
    "gpu003": "xid",
    "gpu004": "ecc_dbe",
    "gpu005": "row_remap",
    "gpu006": "nvlink_down",
    "gpu007": "gpu_missing",  # 7 of 8 GPUs visible
    "gpu008": "ib_down",
    "gpu009": "ib_slow",
    "gpu010": "ecc_sbe_rising",
    "gpu011": "bmc_ipmi",  # the BMC answers ping but not IPMI
    "gpu012": "bmc_ping",
    "gpu013": "mgmt_ping",
    "gpu014": "dcgm_down",  # dcgm-exporter's scrape fails
    "gpu015": "ib_absent",  # the HCA's port is gone from sysfs: no series at all
    "gpu016": "ipmi_scrape_fails",  # the ipmi_exporter's scrape of this BMC fails: no ipmi_up
    "gpu018": "gpus_none",  # dcgm-exporter runs but sees no GPU: no GPU series at all
    "prov01": "raid_degraded",
    "mon01": "audit_bad",  # the drift audit's textfile: drift, unreachable hosts, stale
}
CLEAN = ("gpu017", "login01", "sm01")
FLEET = (*FAULTS, *CLEAN)
# Switches pinged beside the hosts: a rack's storage switch down, its management switch and a
# storage spine up (a spine's silence would be PingFailed's).
SWITCH_DOWN = "stor03"
SWITCHES = (SWITCH_DOWN, "mgmt03", "stor-spine01", "stor04", "stor05", "stor06")
# Their IF-MIB through snmp_exporter: the dead switch cannot be walked, and one failure a
# switch; stor-spine01 is healthy.
SNMP_FAULTS = {
    SWITCH_DOWN: "snmp_down",
    "stor04": "uplink_down",  # its first uplink (a routed port) is down
    "stor05": "port_slow",  # its first host port trained down to half its cable's speed
    "mgmt03": "port_errors",  # its first host port counts input errors
    "stor06": "port_absent",  # its first host port is not in its IF-MIB at all
}
ERRORS_STEP = 3.0  # a faulty port's ifInErrors per scrape (or per promtool interval)
DRIFTING = "gpu017"  # the host the audit textfile of `audit_bad` reports drift on
HOT_GPU = "3"
SBE_STEP = 50.0  # corrected ECC errors per scrape (or per promtool interval) when rising
AUDIT_AGE = 2 * 86400  # seconds: the stale audit report is two days old


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    step: float = 0.0  # added per scrape (live) or per interval (promtool): a rising counter
    clock: bool = False  # a Unix time: the seconds elapsed since the start are added


@dataclass
class Scrape:
    """One target's answer: samples, or None when its scrape fails."""

    job: str
    host: str
    samples: list[Sample] | None
    extra: dict[str, str] = field(default_factory=dict)  # target labels beyond the host's


def labels_of(plan: Plan, host: str) -> dict[str, str]:
    """The generated target labels of `host` (instance, rack, u, role, model, leaf), or of
    a switch."""
    switch = next((s for s in plan.switches if s.name == host), None)
    if switch is not None:
        return switch_labels(switch)
    return target_labels(plan.host(host), fabric_labels(plan))


def _node(host: Host, fault: str, now: float) -> list[Sample] | None:
    if fault == "host_down":
        return None
    out = []
    for p in host.ib_ports:
        if fault == "ib_absent":
            continue
        port = {"device": p.device, "port": str(p.port)}
        down = fault == "ib_down"
        rate = p.rate_gbps / (2 if fault == "ib_slow" else 1) * 125_000_000
        out += [
            Sample("node_infiniband_state_id", port, 1 if down else 4),
            Sample("node_infiniband_physical_state_id", port, 2 if down else 5),
            Sample("node_infiniband_rate_bytes_per_second", port, rate),
        ]
    if host.os_disks:
        md = {"device": "md127"}
        failed = 1 if fault == "raid_degraded" else 0
        out += [
            Sample("node_md_disks", md | {"state": "active"}, len(host.os_disks) - failed),
            Sample("node_md_disks", md | {"state": "failed"}, failed),
            Sample("node_md_disks", md | {"state": "spare"}, 0),
            Sample("node_md_disks_required", md, len(host.os_disks)),
            Sample("node_md_state", md | {"state": "active"}, 1),
        ]
    out.append(Sample("node_textfile_scrape_error", {}, 0))
    if host.role.value == "monitoring":
        bad = fault == "audit_bad"
        for h, kind in ((DRIFTING, "ofed"), (DRIFTING, "bios"), ("fabric", "cable")):
            value = 2 if bad and kind == "ofed" else 0
            out.append(Sample("clusterforge_drift_findings", {"host": h, "kind": kind}, value))
        out.append(Sample("clusterforge_hosts_unreachable", {}, 1 if bad else 0))
        stamp = now - AUDIT_AGE if bad else now
        out.append(
            Sample("clusterforge_audit_last_success_timestamp_seconds", {}, stamp, clock=True)
        )
    return out


def _dcgm(host: Host, fault: str, limit: int) -> list[Sample] | None:
    if fault == "dcgm_down":
        return None
    assert host.gpus
    count = {"gpu_missing": int(host.gpus["count"]) - 1, "gpus_none": 0}.get(
        fault, int(host.gpus["count"])
    )
    out = []
    for i in range(count):
        gpu = {
            "gpu": str(i),
            "UUID": f"GPU-{host.name}-{i}",
            "device": f"nvidia{i}",
            "modelName": str(host.gpus["model"]),
            "Hostname": host.name,
        }
        mine = gpu["gpu"] == HOT_GPU

        def at(name: str, bad: str, ok: float = 0, worse: float = 1, g: Any = gpu) -> Sample:
            return Sample(name, g, worse if fault == bad and g["gpu"] == HOT_GPU else ok)

        sbe_step = SBE_STEP if fault == "ecc_sbe_rising" and mine else 0.0
        nvlink = "DCGM_FR_NVLINK_DOWN" if fault == "nvlink_down" and mine else "DCGM_FR_OK"
        out += [
            # A healthy GPU sits exactly at the limit, which must not alert.
            at("DCGM_FI_DEV_GPU_TEMP", "gpu_hot", limit, limit + 10),
            Sample("DCGM_FI_DEV_POWER_USAGE", gpu, 300),
            at("DCGM_FI_DEV_XID_ERRORS", "xid", 0, 79),
            Sample("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu, 0, sbe_step),
            at("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe", 0, 1),
            at("DCGM_FI_DEV_ROW_REMAP_FAILURE", "row_remap", 0, 1),
            at("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "row_remap", 0, 4),
            Sample(
                "DCGM_EXP_GPU_HEALTH_STATUS",
                gpu | {"health_watch": "NVLINK", "health_error_code": nvlink},
                20 if nvlink != "DCGM_FR_OK" else 0,
            ),
        ]
    return out


def snmp_ports(plan: Plan, name: str) -> list[tuple[SwitchPort | None, dict[str, str]]]:
    """The ports of switch `name` the fleet's snmp_exporter reports, with their IF-MIB labels:
    every port the plan cabled, and one port nothing is cabled to (None), down, which no
    alert may name."""
    sw = plan.ethernet.switch(name)
    model = plan.hardware.switches[sw.model]
    picked = [p for p in sw.ports if p.enabled and p.installed]
    free = next(n for n in range(1, model.ports + 1) if n not in {p.port for p in sw.ports})
    out: list[tuple[SwitchPort | None, dict[str, str]]] = []
    for index, (p, n) in enumerate([*((p, p.port) for p in picked), (None, free)], start=1):
        label = model.port_label(n)
        alias = p.description if p else ""
        out.append(
            (p, {"ifIndex": str(index), "ifName": label, "ifAlias": alias, "ifDescr": label})
        )
    return out


def _snmp(plan: Plan, sw: EthernetSwitch, fault: str) -> list[Sample] | None:
    if fault == "snmp_down":
        return None
    ports = snmp_ports(plan, sw.name)
    first = (sw.routed if fault == "uplink_down" else sw.access)[0].port if fault else None
    out = [Sample("sysUpTime", {}, 360000.0, 300.0)]
    for p, labels in ports:
        if fault == "port_absent" and p is not None and p.port == first:
            continue
        mine = p is not None and p.port == first
        up = p is not None and not (mine and fault == "uplink_down")
        speed = 0 if p is None else p.gbps * 1000 // (2 if mine and fault == "port_slow" else 1)
        errors = ERRORS_STEP if mine and fault == "port_errors" else 0.0
        out += [
            Sample("ifAdminStatus", labels, 1 if p is not None else 2),
            Sample("ifOperStatus", labels, 1 if up else 2),
            Sample("ifHighSpeed", labels, speed),
            Sample("ifInErrors", labels, 0, errors),
            Sample("ifOutErrors", labels, 0),
            Sample("ifInDiscards", labels, 0),
            Sample("ifHCInOctets", labels, 0, 1e6 if up else 0.0),
            Sample("ifHCOutOctets", labels, 0, 1e6 if up else 0.0),
        ]
    return out


def scrapes(plan: Plan, now: float = 0.0, faulty: bool = True) -> list[Scrape]:
    """Every target of FLEET with what it answers (all healthy unless `faulty`); `now` is
    the Unix time the fleet starts at."""
    out = []
    for name in FLEET:
        host, fault = plan.host(name), FAULTS.get(name, "") if faulty else ""
        out.append(Scrape("node", name, _node(host, fault, now)))
        if host.gpus:
            limit = plan.site.monitoring.gpu_temp_c
            out.append(Scrape("dcgm", name, _dcgm(host, fault, limit)))
        ipmi = [
            Sample("ipmi_up", {"collector": c}, 0 if fault == "bmc_ipmi" else 1)
            for c in ("bmc", "ipmi")
        ]
        out.append(Scrape("ipmi", name, None if fault == "ipmi_scrape_fails" else ipmi))
        for network, bad in (("bmc", "bmc_ping"), ("mgmt", "mgmt_ping")):
            address = host.bmc.address if network == "bmc" else plan.address(name, network)
            ok = 0 if fault == bad else 1
            probe = [
                Sample("probe_success", {}, ok),
                Sample("probe_duration_seconds", {}, 0.001),
                Sample("probe_icmp_duration_seconds", {"phase": "rtt"}, 0.0005 * ok),
            ]
            out.append(Scrape("icmp", name, probe, {"network": network, "address": address}))
    for name in SWITCHES:
        ok = 0 if faulty and name == SWITCH_DOWN else 1
        probe = [
            Sample("probe_success", {}, ok),
            Sample("probe_duration_seconds", {}, 0.001),
            Sample("probe_icmp_duration_seconds", {"phase": "rtt"}, 0.0005 * ok),
        ]
        out.append(Scrape("icmp", name, probe, {"address": labels_of(plan, name)["address"]}))
    for name in SWITCHES:
        fault = SNMP_FAULTS.get(name, "") if faulty else ""
        samples = _snmp(plan, plan.ethernet.switch(name), fault)
        out.append(Scrape("snmp", name, samples, {"address": labels_of(plan, name)["address"]}))
    return out


def expected(plan: Plan) -> list[dict[str, str]]:
    """The full label set of every alert FAULTS must raise, and no other."""

    def base(host: str, job: str | None, severity: str, **extra: str) -> dict[str, str]:
        labels = labels_of(plan, host) | {"host": host, "severity": severity} | extra
        return labels | ({"job": job} if job else {})

    def gpu(host: str, **extra: str) -> dict[str, str]:
        h = plan.host(host)
        assert h.gpus
        return {
            "gpu": HOT_GPU,
            "UUID": f"GPU-{host}-{HOT_GPU}",
            "device": f"nvidia{HOT_GPU}",
            "modelName": str(h.gpus["model"]),
            "Hostname": host,
        } | extra

    def by_host(host: str, severity: str) -> dict[str, str]:
        keep = {
            k: v for k, v in labels_of(plan, host).items() if k in ("instance", "rack", "u", "role")
        }
        return keep | {"host": host, "severity": severity}

    ib = {"device": "mlx5_0", "port": "1"}
    drift_host = labels_of(plan, DRIFTING)
    alerts = [
        {"alertname": "HostDown"} | base("gpu001", "node", "critical"),
        {"alertname": "GpuTemperatureHigh"} | base("gpu002", "dcgm", "critical", **gpu("gpu002")),
        {"alertname": "GpuXidError"} | base("gpu003", "dcgm", "warning", **gpu("gpu003")),
        {"alertname": "GpuEccUncorrectable"} | base("gpu004", "dcgm", "critical", **gpu("gpu004")),
        {"alertname": "GpuRowRemapFailure"} | base("gpu005", "dcgm", "critical", **gpu("gpu005")),
        {"alertname": "GpuNvlinkDown"}
        | base(
            "gpu006",
            "dcgm",
            "critical",
            **gpu("gpu006", health_watch="NVLINK", health_error_code="DCGM_FR_NVLINK_DOWN"),
        ),
        {"alertname": "GpusMissing"} | by_host("gpu007", "critical"),
        {"alertname": "IbPortDown"} | base("gpu008", "node", "critical", **ib),
        {"alertname": "IbPortRateDegraded"} | base("gpu009", "node", "warning", **ib),
        {"alertname": "GpuEccCorrectedRising"} | base("gpu010", "dcgm", "warning", **gpu("gpu010")),
        {"alertname": "BmcUnreachable"} | base("gpu011", "ipmi", "warning"),
        {"alertname": "PingFailed"}
        | base("gpu012", "icmp", "warning", network="bmc", address=plan.host("gpu012").bmc.address),
        {"alertname": "PingFailed"}
        | base("gpu013", "icmp", "warning", network="mgmt", address=plan.address("gpu013", "mgmt")),
        {"alertname": "ExporterDown"} | base("gpu014", "dcgm", "warning"),
        {"alertname": "RackSwitchUnreachable"} | base(SWITCH_DOWN, "icmp", "critical"),
        {"alertname": "IbPortDown"} | base("gpu015", "node", "critical", **ib),
        {"alertname": "BmcUnreachable"} | base("gpu016", "ipmi", "warning"),
        {"alertname": "GpusMissing"} | by_host("gpu018", "critical"),
        {"alertname": "MdRaidDegraded"} | base("prov01", "node", "warning", device="md127"),
        {
            "alertname": "ClusterDrift",
            "host": DRIFTING,
            "kind": "ofed",
            "rack": drift_host["rack"],
            "u": drift_host["u"],
            "role": drift_host["role"],
            "severity": "warning",
        },
        *_switch_alerts(plan, base),
        {"alertname": "AuditHostsUnreachable", "severity": "warning"},
        {"alertname": "AuditStale", "severity": "warning"},
    ]
    return alerts


def _switch_alerts(plan: Plan, base: Any) -> list[dict[str, str]]:
    """What SNMP_FAULTS raise: each names the switch, the port and the plan's facts of it."""
    alerts = []
    for name, fault in SNMP_FAULTS.items():
        sw = plan.ethernet.switch(name)
        if fault == "snmp_down":
            alerts.append(
                {"alertname": "SwitchSnmpUnreachable"} | base(name, "snmp", "warning", switch=name)
            )
            continue
        p = sw.routed[0] if fault == "uplink_down" else sw.access[0]
        labels = next(lab for q, lab in snmp_ports(plan, name) if q == p)
        facts = {
            "port": str(p.port),
            "cable": p.cable,
            "peer": p.description.removesuffix(f" {p.cable}"),
            "link": "uplink" if p.peer else "host",
        }
        alertname, severity = {
            "uplink_down": ("SwitchUplinkDown", "critical"),
            "port_slow": ("SwitchPortSpeedDegraded", "warning"),
            "port_errors": ("SwitchPortErrors", "warning"),
            "port_absent": ("SwitchPortMissing", "warning"),
        }[fault]
        if fault == "port_absent":  # the plan's series: no IF-MIB labels but its name
            labels = {"ifName": labels["ifName"]}
        extra = labels | facts | {"switch": name}
        alerts.append({"alertname": alertname} | base(name, "snmp", severity, **extra))
    return alerts


def exposition(samples: list[Sample], scraped: int, elapsed: float) -> str:
    """The Prometheus text format of `samples` at their `scraped`-th scrape, `elapsed`
    seconds after the start."""
    lines = []
    for s in samples:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        value = s.value + s.step * scraped + (elapsed if s.clock else 0)
        lines.append(f"{s.name}{{{inner}}} {value!r}" if inner else f"{s.name} {value!r}")
    return "\n".join(lines) + "\n"
