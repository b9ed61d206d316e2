"""Stage 4, plan: every derived fact, computed once from a checked model, shared by all targets.

Addresses come from rules (rack id -> subnet, slot -> host part) so that adding a node or a
rack never renumbers anything; cables come from port rules plus per-cable overrides. The
helpers at the top are pure and also used by the checks, which run on models that may be wrong.
"""

from __future__ import annotations

import math
import re
import socket
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

import netaddr

from common import memo
from compiler import ethernet, roce
from compiler.ethernet import MGMT_PORT, MGMT_PORT_GBPS, Ethernet
from compiler.model import (
    MAX_RACK_ID,
    Acceptance,
    Baseline,
    BootMode,
    CableOverride,
    Cages,
    Cluster,
    Fabric,
    FirewallPolicy,
    Firmware,
    Hardware,
    Medium,
    Network,
    Nic,
    Node,
    Partition,
    Provisioning,
    Rack,
    RackRef,
    Role,
    ServerModel,
    Service,
    Site,
    Slurm,
    Switch,
    SwitchOs,
    SwitchRole,
)
from compiler.rails import (
    OFF_RAIL_LID_BASE,
    OFF_RAIL_SLOTS,
    RAIL_CORE_LID_BASE,
    RAIL_SPINE_LID_BASE,
    Rails,
    hca_order,
    rails,
)
from compiler.roce import RocePlan
from contract import Route, ib

# The cable records are the labels contract's, which draw and the diff report read too.
from contract.labels import Cable as Cable
from contract.labels import CableEnd as CableEnd

U_HEIGHT_M = 0.04445
TRAY_DROP_M = 0.6  # from a rack's top into the overhead tray, each end
SLACK_M = 0.5
# Lengths cables are sold in; a run is rounded up to the next one.
STOCK_LENGTHS_M = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0)
DAC_MAX_M = 3.0  # passive copper beyond this loses signal at 25G and up
# The cable ID names the rack and the switch role of its switch end: R01-IB05, R01-MG25.
CABLE_CODES = {"leaf": "IB", "management": "MG", "storage": "ST"}


# --- pure helpers, shared with the checks ---------------------------------------------------


# Static LIDs, so an SM fail-over or restart never renumbers the fabric and a LID says where a
# port is: spines from 1 in name order, leaves 0x100 + rack id, cores 0xf00 + their place in
# name order, hosts 0x1000 + 64 * rack + slot.
LEAF_LID_BASE = 0x100
CORE_LID_BASE = 0xF00
HOST_LID_BASE = 0x1000
HOST_LID_SLOTS = 64
UNICAST_LID_TOP = 0xBFFF  # multicast from 0xC000
MAX_SPINES = LEAF_LID_BASE - 1
MAX_CORES = HOST_LID_BASE - CORE_LID_BASE - 1


def link_gbps(fabric: Fabric) -> float:
    """The planned rate of one InfiniBand link: lanes times the per-lane rate (4x HDR = 200)."""
    return ib.link_gbps(fabric.width, fabric.rate)


def hca_link(fabric: Fabric, nic: Nic) -> tuple[str, str]:
    """(width, rate) an HCA's port is planned at: its own, else the fabric's."""
    return nic.width or fabric.width, nic.rate or fabric.rate


def host_lid(rack: RackRef, node: Node) -> int:
    return HOST_LID_BASE + rack.id * HOST_LID_SLOTS + node.slot


def port_lids(
    railed: Rails | None, rack: RackRef, node: Node, model: ServerModel
) -> Iterator[tuple[Nic, str, str, int]]:
    """(nic, device, port GUID, static LID) of each HCA of `node` with a GUID (a port
    without one has no static LID): by unit and rail on a rail fabric, else by rack."""
    for nic in hca_order(model):
        assert nic.device is not None, "hca_order lists HCAs"
        guid = node.guids.get(nic.device, node.guid)
        if guid:
            lid = railed.host_lid(rack, node, nic) if railed else host_lid(rack, node)
            yield nic, nic.device, guid, lid


def rack_subnet(network: Network, rack: RackRef) -> netaddr.IPNetwork | None:
    """The rack's subnet of `network`, or None when the rule points outside the network."""
    return _subnet(*_rack_block(network, rack))


def _rack_block(network: Network, rack: RackRef) -> tuple[str, int, int]:
    """(the network's block, the rack subnets' prefix, the rack's index among them)."""
    return network.cidr, network.rack_prefix, network.stride * rack.id + network.offset


def ip_int(address: str) -> int:
    """A (checked) IPv4 address as an integer: inet_aton, a tenth of netaddr's cost, for the
    sorting and masking every host's addresses go through."""
    return int.from_bytes(socket.inet_aton(address), "big")


def ip_str(number: int) -> str:
    """The IPv4 address `number` in dotted quads."""
    return socket.inet_ntoa(number.to_bytes(4, "big"))


def masked(address: str, prefix: int) -> str:
    """The block of `prefix` bits holding `address`: 10.60.2.0/24 for 10.60.2.11 and 24
    (integer masking: parsing a CIDR per interface was a tenth of a compile)."""
    return f"{ip_str(ip_int(address) & -(1 << (32 - prefix)))}/{prefix}"


@cache  # the compile asks for the same few dozen blocks many thousand times
def network(cidr: str) -> netaddr.IPNetwork:
    """A CIDR block, parsed once; shared, so never to be changed in place."""
    return netaddr.IPNetwork(cidr)


@cache  # checks and plan ask for the same few hundred subnets thousands of times
def _subnet(cidr: str, prefix: int, index: int) -> netaddr.IPNetwork | None:
    block = network(cidr)
    if prefix < block.prefixlen or not 0 <= index < 2 ** (prefix - block.prefixlen):
        return None
    size = 2 ** (32 - prefix)
    # (address, prefix length): netaddr's documented integer form, a seventh of the cost of
    # parsing the address and prefix as text, for the thousands of rack subnets of a site.
    return netaddr.IPNetwork((block.first + index * size, prefix), version=4)


def rack_span(network: Network, rack: RackRef) -> tuple[int, int] | None:
    """The rack's subnet of `network` as its first and last address (integers), or None:
    what every node's address is placed in and checked against, without netaddr's
    `first` and `last` (Python, per call: 200,000 calls in a 4,096 x 8 site's checks)."""
    return _rack_span(*_rack_block(network, rack))


@cache
def _rack_span(cidr: str, prefix: int, index: int) -> tuple[int, int] | None:
    subnet = _subnet(cidr, prefix, index)
    return None if subnet is None else (subnet.first, subnet.last)


def host_address(network: Network, rack: RackRef, host_part: int) -> int | None:
    """Address `host_part` of the rack's subnet (as an integer: `ip_str` writes it), or None
    when it does not fit."""
    span = rack_span(network, rack)
    if span is None or not 0 < host_part < span[1] - span[0]:
        return None
    return span[0] + host_part


def node_address(network: Network, rack: RackRef, node: Node, name: str) -> int | None:
    """The node's address on network `name` (an integer): its override, else host_base + slot."""
    if name in node.addresses:
        return ip_int(node.addresses[name])
    return host_address(network, rack, network.host_base + node.slot)


def interface_prefix(network: Network) -> int:
    return network.interface_prefix or network.rack_prefix


def nic_networks(cluster: Cluster, node: Node) -> list[tuple[str, str]]:
    """(NIC name, network name) of every port the node has, BMC included as NIC "bmc"."""
    return model_networks(cluster.hardware.servers.get(node.model))


def model_networks(model: ServerModel | None) -> list[tuple[str, str]]:
    """(NIC name, network name) of every port of a server model, BMC included as "bmc"."""
    if model is None:
        return []
    return [(nic.name, nic.network) for nic in model.nics] + [("bmc", model.bmc)]


# IPoIB in datagram mode carries the IB MTU less its 4-byte header; connected mode (up to
# 65520) rides the largest IB MTU. OpenSM names an IB MTU by its code (partitions' mtu=).
IB_MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
IPOIB_HEADER = 4
IPOIB_DATAGRAM_MAX_MTU = max(IB_MTU_CODES) - IPOIB_HEADER


def ib_mtu(ipoib_mtu: int) -> int | None:
    """The IB MTU a partition needs for an IPoIB MTU; None when datagram mode cannot carry it."""
    if ipoib_mtu > IPOIB_DATAGRAM_MAX_MTU:
        return max(IB_MTU_CODES)
    return ipoib_mtu + IPOIB_HEADER if ipoib_mtu + IPOIB_HEADER in IB_MTU_CODES else None


def ib_networks(cluster: Cluster) -> frozenset[str]:
    """The networks on InfiniBand (IPoIB): their cables are the fabric's."""
    return frozenset(n for n, net in cluster.networks.items() if net.medium == Medium.INFINIBAND)


def fabric_mtu(cluster: Cluster) -> int | None:
    """The fabric's IB MTU, from its IPoIB network's MTU: one value for every partition, so
    RDMA and IPoIB traffic agree; None without an IPoIB network."""
    mtus = [ib_mtu(cluster.networks[n].mtu) for n in ib_networks(cluster)]
    return max((m for m in mtus if m), default=None)


class Room(NamedTuple):
    """How far the plan's rules reach: the highest rack id every network and the LID plan
    hold, the highest rack id a leaf may have (its spine ports, or the core's ports for pods),
    and how many rack ids below those are still free."""

    max_rack_id: int
    limited_by: str
    max_leaf_rack_id: int
    leaf_limited_by: str
    free_ids: int
    free_leaf_ids: int
    # A rail-optimised fabric's leaves are its units', not racks': (units the spines' ports
    # take, or a three-tier one's cores', units planned).
    units: tuple[int, int] | None = None
    units_limited_by: str = "spine ports"

    def __str__(self) -> str:
        if self.units is not None:
            most, planned = self.units
            return (
                f"room for {self.free_ids} more racks (rack ids up to {self.max_rack_id}: "
                f"{self.limited_by}), {max(most - planned, 0)} more scalable units (up to "
                f"{most}: {self.units_limited_by})"
            )
        return (
            f"room for {self.free_ids} more racks (rack ids up to {self.max_rack_id}: "
            f"{self.limited_by}), {self.free_leaf_ids} of them with a leaf (up to "
            f"{self.max_leaf_rack_id}: {self.leaf_limited_by})"
        )


def rack_ids(net: Network) -> int:
    """The highest rack id the network's rule has a subnet for."""
    subnets: int = 2 ** (net.rack_prefix - int(network(net.cidr).prefixlen))
    return (subnets - 1 - net.offset) // net.stride


def room(cluster: Cluster) -> Room:
    """How many racks the address, LID and port rules can still take; see `Room`."""
    # A rail fabric's HCAs take LIDs by unit, and a rack's off-rail hosts 16 a rack id.
    railed = rails(cluster)
    off_rail = (UNICAST_LID_TOP - OFF_RAIL_LID_BASE - OFF_RAIL_SLOTS + 1) // OFF_RAIL_SLOTS
    lid_top = MAX_RACK_ID if railed is None else off_rail
    limits = [(lid_top, "static LIDs")]
    for name, net in sorted(cluster.networks.items()):
        limits.append((rack_ids(net), f"network {name!r}"))
    top, why = min(limits)
    fabric = cluster.fabric
    ports = {
        sw.role: cluster.hardware.switches[sw.model].ports
        for rack in cluster.racks
        for sw in rack.switches
        if sw.model in cluster.hardware.switches
    }
    leaf = [(top, why)]
    if not fabric.three_tier and SwitchRole.SPINE in ports:
        leaf.append((ports[SwitchRole.SPINE] // fabric.links_per_spine, "spine ports"))
    elif fabric.racks_per_pod is not None and SwitchRole.CORE in ports:
        pods = ports[SwitchRole.CORE] // fabric.links_per_core
        leaf.append((pods * fabric.racks_per_pod, f"core ports: {pods} pods"))
    leaf += ethernet.room(cluster)
    leaf_top, leaf_why = min(leaf)
    ids = {rack.id for rack in cluster.racks}
    units, units_why = None, "spine ports"
    if railed is not None and railed.units_per_pod and SwitchRole.CORE in ports:
        # Three-tier: a unit joins its pod's spines, a pod each core plane's cores.
        pods = ports[SwitchRole.CORE] // fabric.links_per_core
        units, units_why = (pods * railed.units_per_pod, len(railed.units)), "core ports"
    elif railed is not None and SwitchRole.SPINE in ports:
        per_unit = fabric.links_per_spine * max(railed.per_server, 1)
        units = (ports[SwitchRole.SPINE] // per_unit, len(railed.units))
    return Room(
        top,
        why,
        leaf_top,
        leaf_why,
        top - sum(1 for i in ids if i <= top),
        leaf_top - sum(1 for i in ids if i <= leaf_top),
        units,
        units_why,
    )


# Spines with more than this many times the ports their cables use were bought for a much
# larger site than the one described (or described with a template's defaults): worth a word.
OVERSIZE_FACTOR = 4.0
FEWEST_UPPER = 2  # an upper tier of two is the least without a single point of failure


def oversized(cluster: Cluster) -> list[str]:
    """Warnings, one per upper tier (spines, cores) of more than two switches that have more
    than OVERSIZE_FACTOR times the ports the planned cables use; none for a fabric sized to
    fit, nor for the two a small one needs whatever their ports."""
    role = {sw.name: sw.role for rack in cluster.racks for sw in rack.switches}
    ports: dict[SwitchRole, int] = {}
    count: dict[SwitchRole, int] = {}
    for rack in cluster.racks:
        for sw in rack.switches:
            if sw.role in (SwitchRole.SPINE, SwitchRole.CORE):
                model = cluster.hardware.switches.get(sw.model)
                ports[sw.role] = ports.get(sw.role, 0) + (model.ports if model else 0)
                count[sw.role] = count.get(sw.role, 0) + 1
    used = dict.fromkeys(ports, 0)
    for w in wires(cluster):
        for end in (w.switch, w.device):
            if role.get(end) in used:
                used[role[end]] += 1
    out = []
    for tier, total in sorted(ports.items()):
        cabled = used[tier]
        if count[tier] > FEWEST_UPPER and total > OVERSIZE_FACTOR * max(cabled, 1):
            out.append(
                f"fabric oversized: {count[tier]} {tier.value}s have {total} ports, the plan "
                f"cables {cabled} ({total / max(cabled, 1):.1f}x, more than "
                f"{OVERSIZE_FACTOR:g}x): fewer or smaller {tier.value}s would carry this "
                "site; keep them only if it is to grow that much"
            )
    return out


def standard_length(metres: float) -> float:
    i = bisect_left(STOCK_LENGTHS_M, metres - 1e-9)
    return STOCK_LENGTHS_M[i] if i < len(STOCK_LENGTHS_M) else math.ceil(metres / 10) * 10


# --- the plan -------------------------------------------------------------------------------


class Interface(NamedTuple):
    name: str
    network: str
    mac: str | None
    address: str
    prefix: int
    gateway: str | None
    mtu: int

    @property
    def cidr(self) -> str:
        return f"{self.address}/{self.prefix}"

    @property
    def subnet(self) -> str:
        """The connected subnet, `10.60.2.0/24` for 10.60.2.11/24."""
        return masked(self.address, self.prefix)


class IbPort(NamedTuple):
    device: str
    port: int
    guid: str
    rate_gbps: int
    width: str
    speed: str  # HDR, NDR, ...
    lid: int


class SlurmNode(NamedTuple):
    """A host as Slurm knows it (generated/slurm/): what `slurmd -C` must show at least,
    what its GPUs are and which cores each is bound to."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mib: int  # installed
    real_memory_mib: int  # RealMemory: installed less slurm.yaml's headroom
    gres_type: str | None  # None: no GPUs
    gpus: int
    gres_detect: str  # files | nvml
    gpu_cores: tuple[tuple[tuple[int, ...], str], ...]  # (GPU indices, "0-63") per socket
    weight: int
    spare: bool  # drained with the reason "spare", in no partition

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


class Software(NamedTuple):
    """What a host's services (services.yaml, its role's, in install order) put on it."""

    services: tuple[tuple[str, Service], ...]  # (name, service) in install order
    module_streams: tuple[str, ...]  # dnf module streams, `{key}` expanded, without repeats
    packages: tuple[str, ...]  # likewise
    units: tuple[str, ...]
    kernel_modules: tuple[str, ...]
    ports: tuple[str, ...]  # what its restricted networks open: every service's, port order


class Host(NamedTuple):
    name: str
    role: Role
    rack: str
    slot: int
    u: int
    height_u: int
    model: str
    serial: str
    ring: str
    profile: str
    services: tuple[str, ...]  # services.yaml: what the host's role runs, in install order
    software: Software
    interfaces: tuple[Interface, ...]
    bmc: Interface
    # The network of the interface that carries its default route (its first interface's
    # without one): where it is named plainly, scraped and pinged, and NCCL bootstraps.
    management: str
    routes: tuple[Route, ...]
    ib_ports: tuple[IbPort, ...]
    versions: dict[str, str]
    pinned: dict[str, str]  # version key -> reason, for keys held off the baseline
    mask: dict[str, int]  # version key -> leading parts compared, where the baseline says so
    gpus: dict[str, Any] | None
    boot: BootMode
    os_disks: tuple[str, ...]  # stable names (/dev/disk/by-path/...), mirrored
    scratch_disk: str | None
    reinstall: bool  # its PXE menu installs by default; otherwise it boots the local disk
    hca_of: dict[str, str]  # an IPoIB interface's HCA (RDMA device): ib3 -> mlx5_3
    slurm: SlurmNode | None = None  # hosts that run services.yaml's `slurm` (slurmd)

    def interface(self, network: str) -> Interface | None:
        return next((i for i in self.interfaces if i.network == network), None)

    @property
    def management_interface(self) -> Interface:
        return next(i for i in self.interfaces if i.network == self.management)


class Machine(NamedTuple):
    """What the deploy map places generated files on: a host, or a configured Ethernet switch
    (whose services are its OS's, services.yaml `switch_os:`)."""

    name: str
    role: str  # `{role}` in services.yaml's homes: a host's role, a switch's OS
    software: Software


class SwitchPlan(NamedTuple):
    name: str
    role: SwitchRole
    rack: str
    u: int
    model: str
    medium: Medium
    ports: int
    serial: str
    mac: str
    guid: str | None
    network: str | None  # the network of its management address
    address: str | None
    firmware: str | None
    lid: int | None  # InfiniBand switches


@dataclass(frozen=True)
class Plan:
    """What every target reads: the site's declared settings as their typed models, and the
    facts derived from them once. Targets never see the raw `Cluster`."""

    site: Site
    fabric: Fabric
    networks: dict[str, Network]
    hardware: Hardware
    firmware: Firmware
    provisioning: Provisioning
    slurm: Slurm
    acceptance: Acceptance
    racks: tuple[Rack, ...]  # as declared, for pictures and the diff's new racks
    review_only: tuple[str, ...]  # services.yaml: generated files no host holds
    snapshot: frozenset[str]  # services.yaml: the services whose files the audit keeps whole
    ib_networks: frozenset[str]  # the InfiniBand (IPoIB) ones: a cable on one is the fabric's
    ib_mtu: int | None  # the fabric's IB MTU (`fabric_mtu`); None without an IPoIB network
    # The site's management network: the one carrying the default route (the first by name
    # when several do); None when none does. A host's own is `Host.management`.
    management: str | None
    hosts: tuple[Host, ...]
    switches: tuple[SwitchPlan, ...]
    cables: tuple[Cable, ...]
    subnets: dict[str, tuple[tuple[str, str], ...]]  # network -> ((rack, subnet), ...)
    gateways: dict[tuple[str, str], str] = field(default_factory=dict)  # (network, rack) -> ip
    rails: Rails | None = None  # a rail-optimised fabric's units and rail leaves
    ethernet: Ethernet = field(default_factory=lambda: Ethernet(mtu=0))  # its switches' configs
    roce: RocePlan = field(default_factory=RocePlan)  # RoCE networks' NICs and switch ports
    # What each configured switch's OS runs (services.yaml `switch_os:`), by OS.
    switch_software: dict[SwitchOs, Software] = field(default_factory=dict)
    # What cluster/ names but must not hold (root_password_hash), set by the pipeline.
    secrets: dict[str, str] = field(default_factory=dict)
    # The committed generated/ files a target continues from (DNS serials), set by the pipeline.
    previous: dict[str, str] = field(default_factory=dict)

    @cached_property
    def _host_by_name(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    def host(self, name: str) -> Host:
        return self._host_by_name[name]

    def machines(self) -> Iterator[Machine]:
        """Every host, then every configured Ethernet switch: what the deploy map places on."""
        for h in self.hosts:
            yield Machine(h.name, h.role.value, h.software)
        for sw in self.ethernet.switches:
            yield Machine(sw.name, sw.os.value, self.switch_software[sw.os])

    def address(self, name: str, network: str) -> str:
        """A host's address on `network`; the site services are named by host."""
        iface = self.host(name).interface(network)
        if iface is None:
            raise KeyError(f"{name!r} has no interface on {network!r}")
        return iface.address

    def firewall_zone(self, network: str) -> str:
        """The firewalld zone of a host's interface on `network`."""
        if self.networks[network].firewall == FirewallPolicy.TRUSTED:
            return "trusted"
        return network


def build(cluster: Cluster) -> Plan:
    """Derive everything from a model the checks passed."""
    racks = sorted(cluster.racks, key=lambda r: r.name)
    ring_of = _rings(cluster)
    railed = rails(cluster)  # None for a fat tree of rack leaves
    software: dict[tuple[Hashable, ...], Software] = {}  # one per set of services and versions
    planned_links = node_links(cluster)
    context = _HostContext(
        _networks(cluster),
        cluster.hardware,
        cluster.fabric,
        cluster.firmware.baselines,
        cluster.provisioning.role_profiles,
        cluster.slurm,
    )
    made = []
    for r, rack in enumerate(cluster.racks):
        for n, node in enumerate(rack.nodes):
            services, expected = _baseline(cluster, railed, rack, node)
            key = (services, *expected)
            if key not in software:  # hosts of one role at one baseline share it: made once
                software[key] = _software(cluster, services, dict(expected))
            made.append(
                _host(
                    context,
                    railed,
                    RackId(rack.name, rack.id),
                    node,
                    planned_links[(r, n)],
                    ring_of[node.name],
                    software[key],
                    expected,
                )
            )
    hosts = tuple(sorted(made, key=lambda h: h.name))
    top = {
        role: sorted(sw.name for r in racks for sw in r.switches if sw.role == role)
        for role in (SwitchRole.SPINE, SwitchRole.CORE)
    }
    switches = tuple(
        sorted(
            (_switch(cluster, railed, rack, sw, top) for rack in racks for sw in rack.switches),
            key=lambda s: s.name,
        )
    )
    subnets: dict[str, tuple[tuple[str, str], ...]] = {}
    gateways: dict[tuple[str, str], str] = {}
    used = {rack.name: _used(cluster, rack) for rack in racks}
    for name, net in sorted(cluster.networks.items()):
        rows = []
        for rack in racks:
            subnet = rack_subnet(net, rack)
            if subnet is None or name not in used[rack.name]:
                continue
            rows.append((rack.name, str(subnet)))
            if net.gateway:
                gateways[(name, rack.name)] = ip_str(subnet.first + net.gateway)
        subnets[name] = tuple(rows)
    defaults = sorted(name for name, net in cluster.networks.items() if net.default_route)
    planned = cables(cluster)
    configured = ethernet.build(cluster, switches, planned, subnets, gateways)
    # A switch has no versions of ours to expand: the checks keep `{key}` out of its services.
    switch_software = {
        os: _software(cluster, cluster.services.switch_os.get(os, ()), {})
        for os in sorted({sw.os for sw in configured.switches})
    }
    return Plan(
        site=cluster.site,
        fabric=cluster.fabric,
        networks=cluster.networks,
        hardware=cluster.hardware,
        firmware=cluster.firmware,
        provisioning=cluster.provisioning,
        slurm=cluster.slurm,
        acceptance=cluster.acceptance,
        racks=cluster.racks,
        review_only=cluster.services.review_only,
        snapshot=frozenset(cluster.services.snapshot),
        ib_networks=ib_networks(cluster),
        ib_mtu=fabric_mtu(cluster),
        management=defaults[0] if defaults else None,
        hosts=hosts,
        switches=switches,
        cables=planned,
        subnets=subnets,
        gateways=gateways,
        rails=railed,
        ethernet=configured,
        roce=roce.build(cluster.networks, hosts, configured),
        switch_software=switch_software,
    )


def _used(cluster: Cluster, rack: Rack) -> set[str]:
    """The networks any host or switch of the rack has an address on."""
    used = {n for node in rack.nodes for _, n in nic_networks(cluster, node)}
    if rack.switches:
        used |= {n for n, net in cluster.networks.items() if net.switch_base is not None}
    return used


def _rings(cluster: Cluster) -> dict[str, str]:
    ring_of: dict[str, str] = {}
    default = ""
    for ring in cluster.firmware.rings:
        if not ring.nodes:
            default = default or ring.name
        for member in ring.nodes:
            ring_of.setdefault(member, ring.name)
    for rack in cluster.racks:
        for node in rack.nodes:
            ring_of.setdefault(node.name, default)
    return ring_of


def versions(firmware: Firmware, model: str) -> dict[str, str]:
    """The baseline of `model`: the fleet's software plus the model's own firmware."""
    return {**firmware.software, **_own_versions(firmware.baselines[model])}


@memo.last  # asked for every node, read off the baseline's fields each time
def _own_versions(baseline: Baseline) -> Mapping[str, str]:
    return MappingProxyType(baseline.versions())


Links = tuple[tuple[Interface, ...], tuple[Route, ...], Interface]  # interfaces, routes, BMC


class RackId(NamedTuple):
    """A rack's name and id (`RackRef`): what a diff's marked functions of one node key on,
    so a change to one node of a rack leaves its neighbours' results shared."""

    name: str
    id: int


def links(cluster: Cluster, rack: Rack, node: Node) -> Links | None:
    """The node's interfaces, routes and BMC port; None when an address does not fit (the
    checks report that). Routes: each interface's connected subnet, its network's default
    route and `routes:` through the network's gateway."""
    model = cluster.hardware.servers.get(node.model)
    return _links(_networks(cluster), model, RackId(rack.name, rack.id), node)


# A diff's two sides share each node's links unless the node, its rack's id, its model or
# a network changed: HEAD then hands the plan's hosts (and every record made of them) the same
# objects as BASE, which the later marked functions know at once.
@memo.by_value
def _links(
    networks: tuple[tuple[str, Network], ...], model: ServerModel | None, rack: RackRef, node: Node
) -> Links | None:
    ifaces: list[Interface] = []
    routes: list[Route] = []
    bmc: Interface | None = None
    by_name = dict(networks)
    for nic_name, net_name in model_networks(model):
        net = by_name[net_name]
        address = node_address(net, rack, node, net_name)
        span = rack_span(net, rack)
        if address is None or span is None:
            return None
        prefix = interface_prefix(net)
        gateway = ip_str(span[0] + net.gateway) if net.gateway else None
        iface = Interface(
            nic_name, net_name, node.mac.get(nic_name), ip_str(address), prefix, gateway, net.mtu
        )
        if nic_name == "bmc":
            bmc = iface
            continue
        ifaces.append(iface)
        routes.append(Route(iface.subnet, nic_name))
        if gateway and net.default_route:
            routes.append(Route("default", nic_name, gateway))
        routes += [Route(dst, nic_name, gateway) for dst in net.routes if gateway]
    assert bmc is not None, "nic_networks always lists the BMC"
    return tuple(ifaces), tuple(routes), bmc


def route_network(route: Route) -> netaddr.IPNetwork:
    return network("0.0.0.0/0" if route.dst == "default" else route.dst)


@cache  # a few hundred blocks and route destinations, asked for every host's interfaces
def cidr_span(cidr: str) -> tuple[int, int, int]:
    """(first, last, prefix length) of a block: containment as two integer comparisons, where
    netaddr's `in` and `first` (Python, per call) were a fifth of the routes check's profile."""
    block = network(cidr)
    return block.first, block.last, block.prefixlen


@lru_cache(maxsize=4096)  # a rack's hosts of one model share their routes; asked per host
def egress(routes: tuple[Route, ...], block: str) -> tuple[Route, ...]:
    """The routes that carry some address of `block` (longest-prefix match): the most specific
    route holding all of it, and every route inside it. Empty: some address has no route."""
    first, last, prefix = cidr_span(block)
    covering: Route | None = None
    widest = -1  # the covering route's prefix length
    inside: list[Route] = []
    for route in routes:
        low, high, length = cidr_span("0.0.0.0/0" if route.dst == "default" else route.dst)
        if length > prefix and first <= low and high <= last:
            inside.append(route)
        elif low <= first and last <= high and length > widest:
            covering, widest = route, length
    return (*([covering] if covering else []), *sorted(inside, key=Route.order))


class _HostContext(NamedTuple):
    """What a host's record takes from the model beside its rack and node: one value a side,
    which `_host`'s key holds (not the whole model, whose racks hold every other node)."""

    networks: tuple[tuple[str, Network], ...]
    hardware: Hardware
    fabric: Fabric
    baselines: Mapping[str, Baseline]  # firmware.yaml's, by model: each host's mask
    profiles: Mapping[str, str]  # provisioning.yaml's role_profiles
    slurm: Slurm


def _baseline(
    cluster: Cluster, railed: Rails | None, rack: Rack, node: Node
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The services the node's role runs and the versions it is expected at (its model's
    baseline, its pins; no OFED without an HCA port to drive), sorted."""
    model = cluster.hardware.servers[node.model]
    expected = versions(cluster.firmware, node.model)
    expected.update({key: pin.version for key, pin in node.pins.items()})
    if next(port_lids(railed, rack, node, model), None) is None:
        # MLNX_OFED is the HCA's driver: a host without one installs none, and has no version.
        expected.pop("ofed", None)
    return cluster.services.roles.get(node.role, ()), tuple(sorted(expected.items()))


# A diff's two sides share each host's record unless its node, its rack's name or id, its
# links, its software or the model around it changed: HEAD's hosts are then BASE's objects,
# which every later marked function (each host's contract, kickstart, keyfiles) knows at
# once instead of reading them field by field.
@memo.by_value
def _host(
    context: _HostContext,
    railed: Rails | None,
    rack: RackRef,
    node: Node,
    planned: Links | None,
    ring: str,
    software: Software,
    expected: tuple[tuple[str, str], ...],
) -> Host:
    model = context.hardware.servers[node.model]
    ib_ports: list[IbPort] = []
    assert planned is not None, "checks guarantee every address"
    ifaces, routes, bmc = planned
    networks = dict(context.networks)
    defaults = [i.network for i in ifaces if networks[i.network].default_route]
    for nic, device, guid, lid in port_lids(railed, rack, node, model):
        width, rate = hca_link(context.fabric, nic)
        ib_ports.append(
            IbPort(device, nic.port or 1, guid, int(ib.link_gbps(width, rate)), width, rate, lid)
        )
    services = tuple(name for name, _ in software.services)
    return Host(
        name=node.name,
        role=node.role,
        rack=rack.name,
        slot=node.slot,
        u=node.u,
        height_u=model.height_u,
        model=node.model,
        serial=node.serial,
        ring=ring,
        profile=context.profiles[node.role.value],
        services=services,
        software=software,
        interfaces=tuple(ifaces),
        bmc=bmc,
        management=(defaults or [ifaces[0].network])[0],
        routes=tuple(sorted(routes, key=Route.order)),
        ib_ports=tuple(ib_ports),
        versions=dict(expected),
        pinned={key: pin.reason for key, pin in sorted(node.pins.items())},
        mask=dict(sorted(context.baselines[node.model].mask.items())),
        # The audit's GPU facts; Slurm's (type, detection, affinity) are in `slurm`.
        gpus={k: v for k, v in model.gpus if k not in _SLURM_GPU_KEYS} if model.gpus else None,
        boot=model.boot,
        os_disks=node.os_disks or model.os_disks,
        scratch_disk=node.scratch_disk or model.scratch_disk,
        reinstall=node.reinstall,
        hca_of={nic.name: nic.device for nic in model.nics if nic.device},
        slurm=slurm_node(model, context.slurm, node) if SLURMD in services else None,
    )


_KEY = re.compile(r"\{([a-z_]+)\}")


def _software(cluster: Cluster, names: tuple[str, ...], versions: dict[str, str]) -> Software:
    """What services `names` install at `versions`: a package's `{key}` is the version of
    that key, `{key_major}` its first dotted part (the checks made sure every key is there)."""
    variables = versions | {f"{key}_major": value.split(".")[0] for key, value in versions.items()}

    def expand(text: str) -> str:
        return _KEY.sub(lambda m: variables[m.group(1)], text)

    services = tuple((name, cluster.services.services[name]) for name in names)

    def each(
        values: Callable[[Service], Sequence[str]], change: Callable[[str], str] = str
    ) -> tuple[str, ...]:
        """Every service's `values`, in order, without repeats."""
        return tuple(dict.fromkeys(change(v) for _, s in services for v in values(s)))

    return Software(
        services=services,
        module_streams=each(lambda s: s.module_streams, expand),
        packages=each(lambda s: s.packages, expand),
        units=each(lambda s: s.units),
        kernel_modules=each(lambda s: s.kernel_modules),
        ports=tuple(sorted(each(lambda s: s.ports), key=_port_order)),
    )


def _port_order(spec: str) -> tuple[int, str]:
    number, proto = spec.split("/")
    return int(number.split("-")[0]), proto


SLURMD = "slurm"  # the services.yaml service of a Slurm compute node
SLURMCTLD = "slurm-controller"  # and of its controller
_SLURM_GPU_KEYS = ("gres_type", "gres_detect", "cpu_affinity")


def slurm_node(model: ServerModel, slurm: Slurm, node: Node) -> SlurmNode:
    """What Slurm is told of `node`: CPU topology and memory from its model, GPUs and the
    cores of each socket's GPUs from the model's cpu_affinity."""
    gpus = model.gpus
    per = model.cores_per_socket
    memory = model.memory_gib * 1024
    return SlurmNode(
        sockets=model.cpu_sockets,
        cores_per_socket=per,
        threads_per_core=model.threads_per_core,
        memory_mib=memory,
        real_memory_mib=max(memory - slurm.memory_headroom_gib * 1024, 1),
        gres_type=(gpus.gres_type or "gpu") if gpus else None,
        gpus=gpus.count if gpus else 0,
        gres_detect=gpus.gres_detect if gpus else "files",
        # Slurm numbers cores socket by socket (abstract IDs, not the kernel's CPU numbers).
        gpu_cores=tuple(
            (tuple(sorted(a.gpus)), f"{a.socket * per}-{(a.socket + 1) * per - 1}")
            for a in sorted(gpus.cpu_affinity, key=lambda a: min(a.gpus))
        )
        if gpus
        else (),
        weight=slurm.spare_weight if node.role == Role.SPARE else slurm.weight,
        spare=node.role == Role.SPARE,
    )


def _switch(
    cluster: Cluster,
    railed: Rails | None,
    rack: Rack,
    sw: Switch,
    top: dict[SwitchRole, list[str]],
) -> SwitchPlan:
    model = cluster.hardware.switches[sw.model]
    lid = None
    # A three-tier rail fabric has as many spines as leaves (1:1): more than the 255 LIDs
    # below the leaves', so its spines and cores have blocks of their own (compiler/rails.py).
    rail3 = railed is not None and railed.units_per_pod is not None
    if sw.role == SwitchRole.SPINE:
        lid = (RAIL_SPINE_LID_BASE if rail3 else 0) + 1 + top[SwitchRole.SPINE].index(sw.name)
    elif sw.role == SwitchRole.CORE:
        base = RAIL_CORE_LID_BASE if rail3 else CORE_LID_BASE
        lid = base + 1 + top[SwitchRole.CORE].index(sw.name)
    elif sw.role == SwitchRole.LEAF:
        in_unit = railed is not None and sw.name in railed.leaf
        lid = railed.leaf_lid(sw.name) if railed and in_unit else LEAF_LID_BASE + rack.id
    # Switch management ports live on the first network, by name, that has a switch_base.
    network = next(
        (n for n, net in sorted(cluster.networks.items()) if net.switch_base is not None), None
    )
    address = None
    if network is not None:
        net = cluster.networks[network]
        address = host_address(net, rack, (net.switch_base or 0) + sw.u)
    baseline = cluster.firmware.baselines.get(sw.model)
    return SwitchPlan(
        name=sw.name,
        role=sw.role,
        rack=rack.name,
        u=sw.u,
        model=sw.model,
        medium=model.medium,
        ports=model.ports,
        serial=sw.serial,
        mac=sw.mac,
        guid=sw.guid,
        network=network if address else None,
        address=ip_str(address) if address else None,
        firmware=baseline.firmware if baseline else None,
        lid=lid,
    )


# --- the cable plan -------------------------------------------------------------------------


class Wire(NamedTuple):
    """A cable as the rules give it, before overrides, lengths and IDs; used by the checks."""

    network: str
    switch: str
    switch_port: int
    device: str
    device_port: str
    path: tuple[str | int, ...]  # where in cluster/ the rule that made it comes from


@memo.last
def _networks(cluster: Cluster) -> tuple[tuple[str, Network], ...]:
    """The networks as one value a side (`_links` keys on it for every node)."""
    return tuple(cluster.networks.items())


@memo.last
def node_links(cluster: Cluster) -> dict[tuple[int, int], Links | None]:
    """`links` of every node by (rack, node) index: the routes check and the plan read them."""
    return {
        (r, n): links(cluster, rack, node)
        for r, rack in enumerate(cluster.racks)
        for n, node in enumerate(rack.nodes)
    }


@memo.last
def wires(cluster: Cluster) -> tuple[Wire, ...]:
    """Every cable the rules call for, switch end first; unconnectable ports are left out."""
    out: list[Wire] = []
    by_role = {(rack.name, sw.role): sw.name for rack in cluster.racks for sw in rack.switches}
    railed = rails(cluster)
    for r, rack in enumerate(cluster.racks):
        for n, node in enumerate(rack.nodes):
            for nic_name, net_name in nic_networks(cluster, node):
                net = cluster.networks.get(net_name)
                path: tuple[str | int, ...] = ("racks", r, "nodes", n)
                nic = next(
                    (x for x in cluster.hardware.servers[node.model].nics if x.name == nic_name),
                    None,
                )
                on_rail = railed.wire(rack, node, nic) if railed and nic else None
                if net_name in node.links:
                    link = node.links[net_name]
                    switch, port = link.switch, link.port
                    path = (*path, "links", net_name)
                elif on_rail is not None:
                    (switch, port), path = on_rail, (*path, "slot")
                elif net is not None and net.switch is not None:
                    found = by_role.get((rack.name, net.switch))
                    if found is None:
                        continue  # a spare waiting in a rack without that switch
                    switch, port = found, net.first_port + node.slot - 1
                    path = (*path, "slot")
                else:
                    continue
                end = f"{nic.device}/{nic.port or 1}" if nic and nic.device else nic_name
                out.append(Wire(net_name, switch, port, node.name, end, path))
    fabric = cluster.fabric
    ib = next((name for name, net in cluster.networks.items() if net.switch == "leaf"), "ib")
    tiers = Tiers.of(cluster)

    def uplinks(
        sw: Switch,
        path: tuple[str | int, ...],
        first: int,
        ups: Sequence[str],
        links: int,
        place: int,
    ) -> list[Wire]:
        """A switch's uplinks: `links` to each of `ups` from its port `first` on, landing on
        each from port place*links+1 on, so a new switch below adds cables and moves none."""
        return [
            Wire(ib, sw.name, first + k * links + j, up, str(place * links + j + 1), path)
            for k, up in enumerate(ups)
            for j in range(links)
        ]

    switches = [
        (sw, rack, ("racks", r, "switches", s))
        for r, rack in enumerate(cluster.racks)
        for s, sw in enumerate(rack.switches)
    ]
    for sw, rack, path in switches:  # every leaf's first, then every spine's: the plan's order
        if sw.role == SwitchRole.LEAF:
            # A leaf's place on its pod's spines is its rack's place in the pod; a rail
            # leaf's, its unit's and rail's.
            pod, place = tiers.pod_of(rack.id)
            if railed and sw.name not in railed.leaf:
                continue  # a leaf of no unit has no place on the spines (checks say so)
            if railed:
                pod, place = railed.pod_place(sw.name)
            spines = tiers.spines.get(pod, ())
            out += uplinks(sw, path, fabric.uplink_port, spines, fabric.links_per_spine, place)
    for sw, _, path in switches:
        if sw.role == SwitchRole.SPINE and sw.pod is not None and fabric.core_port is not None:
            # A spine's plane is its place among its pod's spines; it links to every core of
            # that plane, and its place on a core is its pod's.
            cores = tiers.cores.get(tiers.spines[sw.pod].index(sw.name) + 1, ())
            out += uplinks(sw, path, fabric.core_port, cores, fabric.links_per_core, sw.pod - 1)
    return (*out, *ethernet.wires(cluster))


Overrides = Mapping[tuple[str, int], CableOverride]


def overrides_of(fabric: Fabric) -> dict[tuple[str, int], CableOverride]:
    """fabric.yaml's cable overrides by the (switch, port) the rule gives the end they name."""
    return {(o.device, o.port): o for o in fabric.cables}


def patched(wire: Wire, overrides: Overrides) -> tuple[int, str, CableOverride | None]:
    """(switch port, far-end port, override) of a wire once the overrides apply.

    An override names an end by the port the rules give it: the lower switch's end, or the
    upper one of a link up a tier (a spine's port of a leaf's uplink); `use_port` moves that
    end. The cable keeps the ID the rules give it, so a move is a re-patch of one cable, not
    one cable removed and another added, and no other cable's label changes."""
    found = overrides.get((wire.switch, wire.switch_port))
    if found is not None:
        return found.use_port or wire.switch_port, wire.device_port, found
    if wire.device_port.isdigit():  # the far end is a switch port: a link up a tier
        found = overrides.get((wire.device, int(wire.device_port)))
        if found is not None:
            far = str(found.use_port) if found.use_port else wire.device_port
            return wire.switch_port, far, found
    return wire.switch_port, wire.device_port, None


class Tiers(NamedTuple):
    """The fat tree's upper tiers: spines by pod, cores by plane, each in name order. A
    two-tier fabric is one pod (0) holding every spine, and no cores."""

    racks_per_pod: int | None
    spines: dict[int, tuple[str, ...]]
    cores: dict[int, tuple[str, ...]]

    @classmethod
    def of(cls, cluster: Cluster) -> Tiers:
        per_pod = cluster.fabric.racks_per_pod
        three = cluster.fabric.three_tier
        spines: dict[int, list[str]] = {}
        cores: dict[int, list[str]] = {}
        for rack in cluster.racks:
            for sw in rack.switches:
                if sw.role == SwitchRole.SPINE:
                    spines.setdefault((sw.pod or 0) if three else 0, []).append(sw.name)
                elif sw.role == SwitchRole.CORE and sw.plane is not None:
                    cores.setdefault(sw.plane, []).append(sw.name)
        return cls(
            per_pod,
            {k: tuple(sorted(v)) for k, v in spines.items()},
            {k: tuple(sorted(v)) for k, v in cores.items()},
        )

    def pod_of(self, rack_id: int) -> tuple[int, int]:
        """(pod, the rack's place in it from 0) of a leaf's rack; pod 0 in a two-tier fabric."""
        if self.racks_per_pod is None:
            return 0, rack_id - 1
        return (rack_id - 1) // self.racks_per_pod + 1, (rack_id - 1) % self.racks_per_pod


class _RackAt(NamedTuple):
    """What a cable's length and its ends' labels take from a rack."""

    name: str
    height_u: int
    col: int
    row: str
    nodes: tuple[tuple[str, int, str], ...]  # (name, U, model)
    switches: tuple[tuple[str, int, str, str], ...]  # (name, U, model, role)


def cables(cluster: Cluster) -> tuple[Cable, ...]:
    """The cable plan, by ID: rules plus overrides, with IDs, both ends, medium and length."""
    railed = rails(cluster)
    racks = tuple(
        _RackAt(
            rack.name,
            rack.height_u,
            rack.col,
            rack.row,
            tuple((n.name, n.u, n.model) for n in rack.nodes),
            tuple((s.name, s.u, s.model, s.role.value) for s in rack.switches),
        )
        for rack in cluster.racks
    )
    return _cables(
        wires(cluster),
        racks,
        cluster.site,
        cluster.hardware,
        ib_networks(cluster),
        cluster.fabric,
        frozenset(railed.leaf) if railed else frozenset(),
    )


# A diff's two sides share the plan unless a cable's rule, a device's place or a model
# changed: a pull request that changes a MAC, a pin or a serial cables nothing anew, and
# made anew the plan was an eighth of HEAD's compile at 4,096 x 8. The racks are handed in
# as plain values (not the model, whose MACs and serials are no cable's business).
@memo.by_value
def _cables(
    planned: tuple[Wire, ...],
    racks: tuple[_RackAt, ...],
    site: Site,
    hardware: Hardware,
    ib: frozenset[str],
    fabric: Fabric,
    rail_leaves: frozenset[str],
) -> tuple[Cable, ...]:
    place: dict[str, tuple[_RackAt, int]] = {}  # device -> (rack, U)
    speed: dict[tuple[str, str], int] = {}  # (device, port or NIC) -> Gbps; switches under ""
    role: dict[str, str] = {}
    cages: dict[str, Cages | None] = {}  # switch -> its model's front panel
    # A host cable at its HCA's own link, where the model gives it one.
    own = {
        name: [(f"{n.device}/{n.port or 1}", "".join(hca_link(fabric, n))) for n in m.nics
               if n.device and (n.width or n.rate)]
        for name, m in hardware.servers.items()
    }  # fmt: skip
    hca_rate: dict[tuple[str, str], str] = {}
    for rack in racks:
        for name, u, model_name in rack.nodes:
            place[name] = (rack, u)
            for nic in hardware.servers[model_name].nics:
                speed[(name, (nic.device and f"{nic.device}/{nic.port or 1}") or nic.name)] = (
                    nic.speed_gbps
                )
            for hca_port, rate in own.get(model_name, ()):
                hca_rate[(name, hca_port)] = rate
        for name, u, model_name, switch_role in rack.switches:
            place[name] = (rack, u)
            model = hardware.switches[model_name]
            speed[(name, "")] = model.speed_gbps
            speed[(name, MGMT_PORT)] = MGMT_PORT_GBPS
            if model.uplinks:
                for p in range(model.uplinks.first_port, model.ports + 1):
                    speed[(name, str(p))] = model.uplinks.speed_gbps
            role[name] = switch_role
            cages[name] = model.cages
    # device -> its ends' location up to the port (H1.A01-U42:), made once, not per end
    where = {device: f"{site.room}.{grid(rack)}-U{u:02d}:" for device, (rack, u) in place.items()}
    overrides = overrides_of(fabric)
    ib_rate = f"{fabric.width}{fabric.rate}"

    def end(device: str, port: str) -> CableEnd:
        rack, u = place[device]
        face = port_face(cages[device], int(port)) if device in cages and port.isdigit() else port
        # "/" separates the two ends of a TIA-606 patch-cord label: mlx5_0/1 -> mlx5_0-1,
        # cage 3's first half P3/1 -> P3-1.
        label = face.replace("/", "-")
        return CableEnd(device, port, rack.name, u, where[device] + label, face)

    out = []
    for wire in planned:
        port, far, override = patched(wire, overrides)
        a, b = end(wire.switch, str(port)), end(wire.device, far)
        (ra, _), (rb, _) = place[a.device], place[b.device]
        run = abs(a.u - b.u) * U_HEIGHT_M + SLACK_M
        if ra.name != rb.name:
            # Up out of each rack into the overhead tray, along the rows, and down again.
            run = (
                (ra.height_u - a.u + rb.height_u - b.u) * U_HEIGHT_M
                + 2 * TRAY_DROP_M
                + abs(ra.col - rb.col) * site.rack_pitch_m
                + abs(ord(ra.row[-1]) - ord(rb.row[-1])) * site.row_pitch_m
                + SLACK_M
            )
        length = standard_length(run)
        if wire.network in ib:
            rate = hca_rate.get((b.device, b.port), ib_rate) if hca_rate else ib_rate
            medium = "DAC" if length <= DAC_MAX_M else "AOC"
        else:
            # A port's own speed (an uplink's, a management port's), else its switch's.
            gbps = min(
                speed.get((a.device, a.port), speed[(a.device, "")]),
                speed.get((b.device, b.port), speed.get((b.device, ""), 1)),
            )
            medium = "Cat6A" if gbps <= 10 else ("DAC" if length <= DAC_MAX_M else "AOC")
            rate = f"{gbps}G"
        # A rack has one switch of each role whose ports name its cables (R01-IB05); a spine's
        # uplinks to the core are named by the spine, which is unique site-wide (SPINE03-33),
        # and so are a rail leaf's cables, several rail leaves sharing a rack (SU1-LEAF3-05).
        # The ID follows the rule's port, not an override's: it stays with the cable.
        if role[a.device] == SwitchRole.SPINE or a.device in rail_leaves:
            cable_id = f"{a.device.upper()}-{wire.switch_port:02d}"
        else:
            cable_id = f"{ra.name.upper()}-{CABLE_CODES[role[a.device]]}{wire.switch_port:02d}"
        out.append(
            Cable(
                id=cable_id,
                network=wire.network,
                a=a,
                b=b,
                medium=medium,
                length_m=length,
                rate=rate,
                installed=override.installed if override else True,
                note=override.note if override else "",
                assembly=_assembly(cages, a) or _assembly(cages, b),
                spare=override.spare if override else False,
            )
        )
    return tuple(sorted(out, key=lambda c: c.id))


def _assembly(cages: Mapping[str, Cages | None], end: CableEnd) -> str:
    """The split cable an end belongs to: its switch and cage, when the cage holds several
    ports (SPINE01-P03); "" otherwise."""
    panel = cages.get(end.device)
    if panel is None or panel.split == 1 or not end.port.isdigit():  # a management port
        return ""
    return f"{end.device.upper()}-P{(int(end.port) - 1) // panel.split + 1:02d}"


def port_face(cages: Cages | None, port: int) -> str:
    """How a switch's front panel names logical port `port`: P05, or P3/1 (cage 3, first
    half) on a model whose cages carry several ports."""
    if cages is None or cages.split == 1:
        return f"P{port:02d}"
    cage, half = divmod(port - 1, cages.split)
    return f"P{cage + 1}/{half + 1}"


def grid(rack: Rack | _RackAt) -> str:
    """The rack's floor-grid name (TIA-606 style): row letter(s) and position, e.g. A01."""
    return f"{rack.row}{rack.col:02d}"


def partition_members(plan: Plan, partition: Partition) -> list[str]:
    """Port GUIDs of a partition's members: its hosts and every host of its roles."""
    return sorted(
        p.guid
        for h in plan.hosts
        if h.name in partition.hosts or h.role in partition.roles
        for p in h.ib_ports
    )
