"""What several targets derive alike from the plan: each in one place, so that no target
imports another (a target is plan in, files out, and nothing else's).

  names        every host and switch name with its address, for /etc/hosts, DNS and DHCP;
  provisioning where the provisioning host serves kickstarts and bundles, and which NIC a
               host installs over, for PXE, HTTP and the kickstarts;
  NCCL         the GPU servers NCCL runs on and their NCCL settings, for gpudirect/, the
               acceptance plan and the hosts' contracts;
  probes       the jobs Prometheus asks through an exporter beside it, for its targets and
               the alerts on them, the switches the snmp job walks and the community it
               walks them with, for snmp.yml and each switch's snmpd.conf;
  Slurm        the reason spares are drained with, for Slurm's nodes and the audit's contract.
"""

from __future__ import annotations

from typing import NamedTuple

from common import memo
from compiler.ethernet import EthernetSwitch
from compiler.model import Medium, SwitchOs
from compiler.plan import Host, Interface, Plan, SwitchPlan, ip_int
from compiler.targets.render import template

# --- names ----------------------------------------------------------------------------------


@memo.last  # /etc/hosts, DNS and DHCP each ask
def names(plan: Plan) -> tuple[tuple[str, str, str], ...]:
    """(address, short name, network) of every host interface, BMC and switch management
    port, in address order; shared with DNS and DHCP."""
    rows = []
    for host in plan.hosts:
        for iface in (*host.interfaces, host.bmc):
            suffix = "" if iface.network == host.management else f"-{iface.network}"
            rows.append((iface.address, f"{host.name}{suffix}", iface.network))
    rows += [(sw.address, sw.name, sw.network) for sw in plan.switches if sw.address and sw.network]
    return tuple(sorted(rows, key=lambda row: (ip_int(row[0]), row[1])))


# --- provisioning ---------------------------------------------------------------------------

KS_PATH = "/ks"  # where the provisioning host serves generated/kickstart/
BUNDLE_PATH = "/bundle"  # where it serves every host's bundle (`clusterforge bundle`)


def server(plan: Plan) -> str:
    """The provisioning host's address on the PXE network: DHCP next-server, TFTP, HTTP."""
    return plan.address(plan.site.services.provisioning, plan.provisioning.pxe_network)


def http_url(plan: Plan, path: str) -> str:
    """`path` on the provisioning host's HTTP server, as installing hosts reach it."""
    return f"http://{server(plan)}{path}"


def ks_url(plan: Plan, host: Host) -> str:
    return http_url(plan, f"{KS_PATH}/{host.name}.ks")


def boot_nic(plan: Plan, host: Host) -> Interface | None:
    """The NIC `host` PXE boots and installs over, when it has one with a MAC."""
    nic = host.interface(plan.provisioning.pxe_network)
    return nic if nic is not None and nic.mac else None


# --- NCCL -----------------------------------------------------------------------------------


def gpu_hosts(plan: Plan) -> list[Host]:
    """Hosts with GPUs and an InfiniBand HCA: the ones NCCL runs on."""
    return [h for h in plan.hosts if h.gpus is not None and h.ib_ports]


def hcas(host: Host) -> list[str]:
    """NCCL_IB_HCA entries of a host: `device:port`."""
    return [f"{p.device}:{p.port}" for p in host.ib_ports]


def socket_interfaces(plan: Plan, host: Host) -> list[str]:
    """The host's management interface, when it is on Ethernet."""
    mgmt = host.management_interface
    return [mgmt.name] if plan.networks[mgmt.network].medium == Medium.ETHERNET else []


def nccl_settings(plan: Plan, hosts: list[Host]) -> dict[str, str]:
    """NCCL's variables for `hosts` (one role), derived ones first."""
    # In each host's GPU order (the plan's), so GPU k's rail is the k-th on an eight-rail box.
    ib = list(dict.fromkeys(x for h in sorted(hosts, key=lambda h: h.name) for x in hcas(h)))
    socket = sorted({x for h in hosts for x in socket_interfaces(plan, h)})
    # A leading '=' makes NCCL match names exactly: mlx5_1 must not select mlx5_10.
    derived = {"NCCL_IB_HCA": "=" + ",".join(ib), "NCCL_SOCKET_IFNAME": "=" + ",".join(socket)}
    return derived | dict(sorted(plan.acceptance.nccl.settings.items()))


# --- probes ---------------------------------------------------------------------------------


class Probe(NamedTuple):
    """A job whose targets are asked through an exporter beside Prometheus."""

    service: str  # of services.yaml: runs the exporter on the monitoring host
    exporter: str  # where the exporter listens
    path: str
    module: str
    interval: str | None  # the job's own scrape interval, when not the global one


PROBES = {
    "ipmi": Probe("ipmi-exporter", "127.0.0.1:9290", "/ipmi", "default", None),
    "icmp": Probe("blackbox-exporter", "127.0.0.1:9115", "/probe", "icmp", "60s"),
    # A switch's snmpd walks its interface tables slowly: once a minute is enough for rates.
    "snmp": Probe("snmp-exporter", "127.0.0.1:9116", "/snmp", "if_mib", "60s"),
}


def probe_jobs(plan: Plan) -> set[str]:
    """The probe jobs whose exporter some host (the monitoring host) runs."""
    running = {name for host in plan.hosts for name in host.services}
    return {job for job, probe in PROBES.items() if probe.service in running}


def snmp_switches(plan: Plan) -> list[tuple[EthernetSwitch, SwitchPlan]]:
    """The Ethernet switches the plan configures that have a management address: the ones
    snmp_exporter walks (an InfiniBand switch's ports are the fabric's, read by the hosts)."""
    by_name = {sw.name: sw for sw in plan.switches}
    return [
        (sw, by_name[sw.name])
        for sw in plan.ethernet.switches
        if by_name[sw.name].address and by_name[sw.name].network
    ]


SNMP_COMMUNITY = "snmp_community"  # key of the switches' SNMP community in plan.secrets
SNMP_PLACEHOLDER = "PLACEHOLDER-not-the-snmp-community"


def snmp_community(plan: Plan) -> str:
    """The read-only SNMPv2c community snmp_exporter asks with and every switch's snmpd
    answers to: the secret of site.yaml `monitoring: snmp:`, else its placeholder (the same
    string on both sides, so generated/ agrees with itself)."""
    if plan.site.monitoring.snmp is None:
        return SNMP_PLACEHOLDER
    return plan.secrets.get(SNMP_COMMUNITY, SNMP_PLACEHOLDER)


# --- Slurm ----------------------------------------------------------------------------------

SPARE_REASON = "spare"


def frr_conf(plan: Plan, sw: EthernetSwitch) -> str:
    """A routed Cumulus switch's frr.conf: eBGP unnumbered on its routed ports (the cumulus
    target writes it; the expected target reads its lines as what FRR must run)."""
    return _frr_confs(plan)[sw.name]


@memo.last  # both targets ask for every routed Cumulus switch's: rendered once a plan
def _frr_confs(plan: Plan) -> dict[str, str]:
    return {
        sw.name: template("frr.conf.j2", site=plan.site, sw=sw)
        for sw in plan.ethernet.switches
        if sw.os == SwitchOs.CUMULUS and sw.asn is not None
    }
