"""`generated/monitoring/`: Prometheus on the monitoring host, its targets, and the exporters'
own configuration.

  targets/<job>.json     one per service of services.yaml with a `scrape:` (node_exporter,
                         dcgm-exporter, ...): every host whose role runs it, on its management
                         address and the service's port;
  targets/ipmi.json      every BMC, scraped through the ipmi_exporter beside Prometheus;
  targets/icmp.json      every BMC, every host's management address and every switch's,
                         pinged through the blackbox_exporter beside Prometheus every 60 s
                         (the runbook's ping);
  prometheus.yml         the scrape jobs over those files (file-based service discovery), the
                         rule files and the Alertmanager; paths relative to the config's folder;
  blackbox.yml           the blackbox_exporter's modules: `icmp`;
  ipmi_exporter.yml      the ipmi_exporter's module `default`: the BMC login of site.yaml
                         `monitoring: ipmi:` (its password a placeholder in generated/, read
                         like the root hash for `compile --out`);
  ipmi_exporter.default  the packaged unit's options: that config, on 127.0.0.1:9290;
  targets/snmp.json      every Ethernet switch the plan configures, on its management address,
                         walked through the snmp_exporter beside Prometheus (IF-MIB);
  snmp.yml               the snmp_exporter's module `if_mib`: each port's state, speed, octets,
                         errors and discards, labelled ifName, ifAlias and ifDescr; the
                         community of site.yaml `monitoring: snmp:` (a placeholder in
                         generated/, read like the root hash for `compile --out`);
  snmp_exporter.default  the packaged unit's options: that config, on 127.0.0.1:9116;
  node_exporter.conf     node_exporter's flags: the infiniband, mdadm and textfile collectors,
                         the textfile folder where the drift audit publishes its metrics;
  dcgm-counters.csv      the DCGM fields dcgm-exporter exports: its defaults plus every field an
                         alert reads (its stock file leaves ECC and NVLink errors out);
  textfile/<host>.*      on the host that receives the drift audit's metrics (site.yaml
                         audit.metrics) only: the account that publishes them (sysusers.d)
                         and the textfile folder, its own, which node_exporter reads
                         (tmpfiles.d, made at boot and by the kickstart's %post).
Each target is its own group labelled instance (the host name, so alerts name the box), rack,
u (its lowest rack unit), role, model and leaf (the leaf its HCA is cabled to, from the cable
plan; a server of eight rails: unit, its scalable unit): a rack or a leaf going dark shows as
one label value.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from common.errors import TargetError
from compiler.plan import Host, Plan, SwitchPlan
from compiler.targets.render import template, to_json, to_yaml
from compiler.targets.shared import PROBES, probe_jobs, snmp_community, snmp_switches

ALERTMANAGER = "127.0.0.1:9093"
IPMI_PASSWORD = "ipmi_password"  # key of the BMC password in plan.secrets
IPMI_PLACEHOLDER = "PLACEHOLDER-not-the-bmc-password"
IPMI_CONFIG = "/etc/prometheus/ipmi_remote.yml"  # services.yaml's home of ipmi_exporter.yml
SNMP_CONFIG = "/etc/prometheus/snmp.yml"  # services.yaml's home of snmp.yml
TEXTFILE_DIR = "/var/lib/node_exporter/textfile"  # where the drift audit workflow publishes
RULE_FILES = ("recording.yml", "alerts.yml")


# node_exporter turns these on by default; saying so keeps them on whatever the package's
# defaults become, and the textfile collector reads nothing without its folder.
NODE_EXPORTER_FLAGS = (
    "--collector.infiniband",
    "--collector.mdadm",
    "--collector.textfile",
    f"--collector.textfile.directory={TEXTFILE_DIR}",
)

# dcgm-exporter's etc/default-counters.csv (NVIDIA/dcgm-exporter), the fields it exports on,
# plus those it leaves commented out that an alert or the dashboard reads.
DCGM_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Single-bit persistent ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Double-bit persistent ECC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "NVLink flow-control CRC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "NVLink recovery errors."),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors.",
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors.",
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    # DCGM's health watches per GPU; the NVLINK watch fails when a link is down.
    ("DCGM_EXP_GPU_HEALTH_STATUS", "counter", "DCGM reported health status"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles device memory is active."),
)


def fabric_labels(plan: Plan) -> dict[str, dict[str, str]]:
    """Host -> where its HCAs are cabled: `leaf`, the one leaf they all reach; a server of
    several rails reaches a leaf per rail, all of one scalable unit: `unit` (the alerts
    name the HCA's rail; rail k's leaf is the unit's k-th, fabric.yaml)."""
    leaves: dict[str, set[str]] = defaultdict(set)
    for c in plan.cables:
        if c.network in plan.ib_networks:
            leaves[c.b.device].add(c.a.device)
    out: dict[str, dict[str, str]] = {}
    for host, names in leaves.items():
        if len(names) == 1:
            out[host] = {"leaf": next(iter(names))}
        elif plan.rails is not None and names <= plan.rails.leaf.keys():
            units = {plan.rails.units[plan.rails.leaf[n][0]].name for n in names}
            out[host] = {"unit": units.pop()} if len(units) == 1 else {}
    return out


def target_labels(host: Host, fabric: dict[str, dict[str, str]]) -> dict[str, str]:
    labels = {
        "instance": host.name,
        "rack": host.rack,
        "u": str(host.u),
        "role": host.role.value,
        "model": host.model,
    }
    return labels | fabric.get(host.name, {})


def targets(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Job name -> file_sd target groups."""
    leaf = fabric_labels(plan)
    jobs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    probes = probe_jobs(plan)
    for host in plan.hosts:
        labels = target_labels(host, leaf)
        mgmt = host.management_interface
        for _, service in host.software.services:
            if service.scrape:
                target = f"{mgmt.address}:{service.scrape.port}"
                jobs[service.scrape.job].append({"targets": [target], "labels": labels})
        if "ipmi" in probes:
            jobs["ipmi"].append({"targets": [host.bmc.address], "labels": labels})
        if "icmp" in probes:
            for iface in (host.bmc, mgmt):
                extra = {"network": iface.network, "address": iface.address}  # to ping by hand
                jobs["icmp"].append({"targets": [iface.address], "labels": labels | extra})
    if "snmp" in probes:
        for _, sw in snmp_switches(plan):
            jobs["snmp"].append({"targets": [sw.address], "labels": switch_labels(sw)})
    if "icmp" in probes:
        for sw in plan.switches:
            if sw.address and sw.network:
                jobs["icmp"].append({"targets": [sw.address], "labels": switch_labels(sw)})
    return dict(jobs)


def switch_labels(sw: SwitchPlan) -> dict[str, str]:
    """A switch's ping target labels: as a host's, its role `switch`, its own in switch_role
    (a rack's leaf, management or storage switch alerts apart: its rack is cut off)."""
    assert sw.network and sw.address, "only switches with a management address are pinged"
    return {
        "instance": sw.name,
        "rack": sw.rack,
        "u": str(sw.u),
        "role": "switch",
        "switch_role": sw.role.value,
        "model": sw.model,
        "network": sw.network,
        "address": sw.address,
    }


# IF-MIB (RFC 2863, which obsoletes RFC 2233): the ifTable columns under ifEntry
# 1.3.6.1.2.1.2.2.1 and the ifXTable ones under ifXEntry 1.3.6.1.2.1.31.1.1.1, both indexed by
# ifIndex. (metric, OID, type, help); every one is walked, the lookups' columns too, so a
# switch is asked for these alone rather than its whole interface tables.
IF_MIB = (
    ("ifAdminStatus", "1.3.6.1.2.1.2.2.1.7", "gauge", "Desired state: 1 up, 2 down, 3 testing."),
    (
        "ifOperStatus",
        "1.3.6.1.2.1.2.2.1.8",
        "gauge",
        "Current state: 1 up, 2 down, 3 testing, 4 unknown, 5 dormant, 6 notPresent, "
        "7 lowerLayerDown.",
    ),
    ("ifInDiscards", "1.3.6.1.2.1.2.2.1.13", "counter", "Inbound packets discarded."),
    ("ifInErrors", "1.3.6.1.2.1.2.2.1.14", "counter", "Inbound packets with errors."),
    ("ifOutDiscards", "1.3.6.1.2.1.2.2.1.19", "counter", "Outbound packets discarded."),
    ("ifOutErrors", "1.3.6.1.2.1.2.2.1.20", "counter", "Outbound packets not sent for errors."),
    ("ifHCInOctets", "1.3.6.1.2.1.31.1.1.1.6", "counter", "Octets received (64-bit)."),
    ("ifHCOutOctets", "1.3.6.1.2.1.31.1.1.1.10", "counter", "Octets sent (64-bit)."),
    ("ifHighSpeed", "1.3.6.1.2.1.31.1.1.1.15", "gauge", "Current bandwidth in Mb/s."),
)
# What every port series is labelled with, beside ifIndex: the name the switch's OS gives it
# (swp49, Ethernet49: what the alerts join the plan's ports on), its description (the alias
# the switch config sets: far end and cable ID) and ifDescr.
IF_LABELS = (
    ("ifName", "1.3.6.1.2.1.31.1.1.1.1"),
    ("ifAlias", "1.3.6.1.2.1.31.1.1.1.18"),
    ("ifDescr", "1.3.6.1.2.1.2.2.1.2"),
)
SYS_UPTIME = "1.3.6.1.2.1.1.3"  # SNMPv2-MIB (RFC 3418): a switch's reboot resets its counters


def snmp_exporter(plan: Plan) -> str:
    """snmp.yml in the format snmp_exporter 0.21 reads (Debian bookworm's; prometheus-rpm's
    `snmp_exporter-0.21.0`): one map of modules, each with its walk, its metrics and its own
    SNMP version and auth (config/config.go, `type Config map[string]*Module`, read with
    yaml.UnmarshalStrict; 0.23 moved auth into a top-level `auths:` and the modules under
    `modules:`, a file 0.21 refuses). Written here, not by snmp_exporter's generator: the
    OIDs are IF-MIB's, fixed by RFC 2863."""
    community = snmp_community(plan)
    lookups = [
        {"labels": ["ifIndex"], "labelname": name, "oid": oid, "type": "DisplayString"}
        for name, oid in IF_LABELS
    ]
    metrics: list[dict[str, Any]] = [
        {
            "name": "sysUpTime",
            "oid": SYS_UPTIME,
            "type": "gauge",
            "help": "Hundredths of a second since the agent started.",
        }
    ]
    metrics += [
        {
            "name": name,
            "oid": oid,
            "type": kind,
            "help": f"{text} - {oid}",
            "indexes": [{"labelname": "ifIndex", "type": "gauge"}],
            "lookups": lookups,
        }
        for name, oid, kind, text in IF_MIB
    ]
    module = {
        "walk": sorted({oid for _, oid, _, _ in IF_MIB} | {oid for _, oid in IF_LABELS}, key=_oid),
        "get": [f"{SYS_UPTIME}.0"],
        "metrics": metrics,
        # SNMPv2c: the 64-bit ifHC counters need it (SNMPv1 has no Counter64).
        "version": 2,
        "auth": {"community": community},
    }
    header = (
        f"# snmp_exporter on {plan.site.services.monitoring}: how it walks every Ethernet "
        "switch's IF-MIB.\n# Generated by clusterforge from cluster/; do not edit.\n"
    )
    return header + to_yaml({PROBES["snmp"].module: module})


def _oid(oid: str) -> tuple[int, ...]:
    return tuple(int(x) for x in oid.split("."))


def snmp_exporter_options() -> str:
    """`/etc/default/snmp_exporter`, the EnvironmentFile of the packaged unit, which runs
    `/usr/bin/snmp_exporter $SNMP_EXPORTER_OPTS` as prometheus (prometheus-rpm
    templating.yaml and templates/unit.tpl; its own options name the same config): the
    generated config, on the loopback address Prometheus's snmp job asks."""
    flags = (f"--config.file={SNMP_CONFIG}", f"--web.listen-address={PROBES['snmp'].exporter}")
    return (
        "# snmp_exporter's flags (EnvironmentFile of snmp_exporter.service). Generated by "
        "clusterforge\n# from cluster/; do not edit.\n"
        f'SNMP_EXPORTER_OPTS="{" ".join(flags)}"\n'
    )


def dcgm_counters() -> str:
    """dcgm-exporter's counters file. It reads it with Go's encoding/csv, Comment '#', every
    other setting the default (internal/pkg/counters/counter_config.go, ReadCSVFile): no
    TrimLeadingSpace, so after the ", " separator a quote would open no quoted field but be a
    bare quote, an error; then it trims spaces and wants exactly 3 fields (ExtractCounters).
    So a help text holds neither a comma nor a quote: each would break the file for all GPUs."""
    for row in DCGM_COUNTERS:
        if any(c in field for field in row for c in ',"'):
            raise TargetError(f"dcgm-exporter counter {row[0]!r}: a comma or quote in {row!r}")
    lines = ["# dcgm-exporter counters. Generated by clusterforge from cluster/; do not edit."]
    lines += ["# DCGM FIELD, Prometheus metric type, help message"]
    return "\n".join(lines + [", ".join(row) for row in DCGM_COUNTERS]) + "\n"


def ipmi_exporter_options() -> str:
    """`/etc/default/ipmi_exporter`, the EnvironmentFile of the packaged unit, which runs
    `/usr/bin/ipmi_exporter $IPMI_EXPORTER_OPTS` (prometheus-rpm templates/unit.tpl; its own
    default names /etc/prometheus/ipmi.yml, which the bundle does not write): the generated
    remote config, on the loopback address Prometheus's ipmi job asks."""
    flags = (
        f"--config.file={IPMI_CONFIG}",
        f"--web.listen-address={PROBES['ipmi'].exporter}",
    )
    return (
        "# ipmi_exporter's flags (EnvironmentFile of ipmi_exporter.service). Generated by "
        "clusterforge\n# from cluster/; do not edit.\n"
        f'IPMI_EXPORTER_OPTS="{" ".join(flags)}"\n'
    )


def ipmi_exporter(plan: Plan) -> str:
    login = plan.site.monitoring.ipmi
    module: dict[str, Any] = {}
    if login:
        module |= {"user": login.user, "pass": plan.secrets.get(IPMI_PASSWORD, IPMI_PLACEHOLDER)}
    # `user` privilege reads sensors and the chassis state and cannot change a thing.
    module |= {"driver": "LAN_2_0", "privilege": "user", "timeout": 10000}
    module["collectors"] = ["bmc", "ipmi", "chassis"]
    header = (
        f"# ipmi_exporter on {plan.site.services.monitoring}: how it reads every BMC. Generated "
        "by clusterforge from cluster/; do not edit.\n"
    )
    return header + to_yaml({"modules": {PROBES["ipmi"].module: module}})


def textfile_home(plan: Plan) -> dict[str, str]:
    """The metrics host's publishing account and textfile folder. The folder is the account's
    and world-readable: node_exporter (user prometheus) reads it, nothing else writes it;
    the audit's textfile is written beside and renamed in, never half-seen."""
    access = plan.site.audit
    if access is None:
        return {}
    user, host = access.metrics.user, access.metrics.host
    header = f"# On {host}: the drift audit's metrics. Generated by clusterforge; do not edit.\n"
    return {
        f"monitoring/textfile/{host}.sysusers": header
        + f'u {user} - "clusterforge drift audit metrics publisher" /var/lib/{user} /bin/bash\n',
        f"monitoring/textfile/{host}.tmpfiles": header
        + f"d /var/lib/{user} 0750 {user} {user} -\n"
        + f"d {TEXTFILE_DIR} 0755 {user} {user} -\n",
    }


def render(plan: Plan) -> dict[str, str]:
    jobs = targets(plan)
    files = {f"monitoring/targets/{job}.json": to_json(groups) for job, groups in jobs.items()}
    files["monitoring/prometheus.yml"] = template(
        "prometheus.yml.j2",
        site=plan.site,
        jobs=sorted(jobs),
        probes=PROBES,
        rule_files=RULE_FILES,
        alertmanager=ALERTMANAGER,
    )
    files["monitoring/blackbox.yml"] = template("blackbox.yml.j2", site=plan.site)
    files["monitoring/node_exporter.conf"] = template(
        "node_exporter.conf.j2", flags=NODE_EXPORTER_FLAGS
    )
    files["monitoring/dcgm-counters.csv"] = dcgm_counters()
    files["monitoring/ipmi_exporter.yml"] = ipmi_exporter(plan)
    files["monitoring/ipmi_exporter.default"] = ipmi_exporter_options()
    if "snmp" in probe_jobs(plan):
        files["monitoring/snmp.yml"] = snmp_exporter(plan)
        files["monitoring/snmp_exporter.default"] = snmp_exporter_options()
    files |= textfile_home(plan)
    return files
