"""Plan step: the storage and management networks' switches, from the same model as the hosts.

Two things come from here. The cables the Ethernet rules call for beyond the hosts' own: each
rack switch's uplinks to its tier's spines (ethernet.yaml) and every switch's management port
to its rack's management switch (networks.yaml `switch_port_base`); they join the one cable
plan, so they get IDs, labels and a place in the BOM like every other cable. And `Ethernet`,
what each switch is configured with: its ports (an access port on its network's VLAN for a
host, a routed port for an uplink, each described by the far end and the cable ID), one SVI
per rack subnet it is the gateway of, and its BGP (one ASN per rack switch, one per tier of
spines; sessions unnumbered on the routed ports). The targets render these facts per
switch OS; none of them looks at cluster/.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from compiler.model import (
    Cluster,
    EthernetTier,
    Medium,
    Network,
    Rack,
    Switch,
    SwitchOs,
    SwitchRole,
)

if TYPE_CHECKING:
    from compiler.plan import Cable, CableEnd, SwitchPlan, Wire

MGMT_PORT = "mgmt"  # a switch's out-of-band management port, as its cables name it
MGMT_PORT_GBPS = 1  # 1000BASE-T on every Spectrum and Arista model the site buys


class SwitchPort(NamedTuple):
    port: int
    description: str  # the far end and the cable: "gpu001 ens2f0 R01-ST01"
    network: str
    vlan: int | None  # the access VLAN; None: a routed uplink
    peer: str | None  # a routed port's switch at the far end, its BGP neighbour
    enabled: bool  # a spare cable's port stays down until a link moves onto it
    cable: str  # its cable's ID: R01-ST01
    gbps: int  # the speed its cable is planned at (the slower end's), what the port must run
    installed: bool  # its cable is in: a planned one's port waits, and nothing alerts on it


class Svi(NamedTuple):
    """The gateway of one rack subnet: an address on the network's VLAN."""

    network: str
    vlan: int
    address: str  # 10.70.1.1/24
    subnet: str  # 10.70.1.0/24, what BGP announces
    mtu: int


class EthernetSwitch(NamedTuple):
    name: str
    os: SwitchOs
    role: SwitchRole
    rack: str
    model: str
    asn: int | None  # None: on no tier of ethernet.yaml, so no routing
    router_id: str | None  # its management address: unique, and set before BGP starts
    management: str | None  # the management port's address/prefix
    management_gateway: str | None
    mtu: int  # every port's and the bridge's
    ports: tuple[SwitchPort, ...]
    svis: tuple[Svi, ...]
    lldp: bool

    @property
    def routed(self) -> tuple[SwitchPort, ...]:
        return tuple(p for p in self.ports if p.vlan is None)

    @property
    def access(self) -> tuple[SwitchPort, ...]:
        return tuple(p for p in self.ports if p.vlan is not None)

    @property
    def vlans(self) -> tuple[int, ...]:
        return tuple(sorted({p.vlan for p in self.access if p.vlan} | {s.vlan for s in self.svis}))


class Ethernet(NamedTuple):
    """Every configured Ethernet switch, by name."""

    mtu: int
    switches: tuple[EthernetSwitch, ...] = ()

    def switch(self, name: str) -> EthernetSwitch:
        return next(s for s in self.switches if s.name == name)


# --- the cables -----------------------------------------------------------------------------


def management_network(cluster: Cluster) -> tuple[str, Network] | None:
    """The network switch management ports live on: the first, by name, with a switch_base
    (as the plan gives the switches their addresses)."""
    return next(
        ((n, net) for n, net in sorted(cluster.networks.items()) if net.switch_base is not None),
        None,
    )


def wires(cluster: Cluster) -> list[Wire]:
    """The Ethernet rules' cables, switch end first: management ports, then uplinks."""
    from compiler.plan import Wire  # the plan imports this module: its records, when called

    out: list[Wire] = []
    name, net = management_network(cluster) or ("", None)
    base = net.switch_port_base if net else None
    if net is not None and base is not None and net.switch is not None:
        for r, rack in enumerate(cluster.racks):
            into = next((sw for sw in rack.switches if sw.role == net.switch), None)
            if into is None:
                continue  # a rack without a management switch: its switches wait uncabled
            for s, sw in enumerate(rack.switches):
                path = ("racks", r, "switches", s, "u")
                out.append(Wire(name, into.name, base + sw.u, sw.name, MGMT_PORT, path))
    if cluster.ethernet is None:
        return out
    for tier in cluster.ethernet.tiers:
        uppers = sorted(
            (sw for rack in cluster.racks for sw in rack.switches if sw.role == tier.to),
            key=lambda sw: sw.name,
        )
        network = tier_network(cluster, tier.switch)
        for r, rack in enumerate(cluster.racks):
            for s, sw in enumerate(rack.switches):
                if sw.role == tier.switch and network is not None:
                    out += _uplinks(
                        cluster, tier, rack, sw, uppers, network, ("racks", r, "switches", s)
                    )
    return out


def room(cluster: Cluster) -> list[tuple[int, str]]:
    """(highest rack id, why) each tier's spines leave a rack below `top_down_from`: their
    ports less those the racks from `top_down_from` on hold from the top."""
    out: list[tuple[int, str]] = []
    for tier in cluster.ethernet.tiers if cluster.ethernet else ():
        ports = [
            cluster.hardware.switches[sw.model].ports
            for rack in cluster.racks
            for sw in rack.switches
            if sw.role == tier.to and sw.model in cluster.hardware.switches
        ]
        held = max(
            (
                (rack.id - tier.top_down_from + 1) * tier.links
                for rack in cluster.racks
                if rack.id >= tier.top_down_from
                and any(s.role == tier.switch for s in rack.switches)
            ),
            default=0,
        )
        if ports:
            top = min(tier.top_down_from - 1, (min(ports) - held) // tier.links)
            out.append((top, f"{tier.to} ports"))
    return out


def tier_network(cluster: Cluster, role: SwitchRole) -> str | None:
    """The network an uplink of `role`'s switches is counted under: the first, by name, whose
    hosts are cabled to that role."""
    return next((n for n, net in sorted(cluster.networks.items()) if net.switch == role), None)


def _uplinks(
    cluster: Cluster,
    tier: EthernetTier,
    rack: Rack,
    sw: Switch,
    uppers: Sequence[Switch],
    network: str,
    path: tuple[str | int, ...],
) -> list[Wire]:
    from compiler.plan import Wire

    model = cluster.hardware.switches[sw.model]
    first = (
        model.uplinks.first_port if model.uplinks else model.ports - len(uppers) * tier.links + 1
    )
    out = []
    for k, up in enumerate(uppers):
        top = cluster.hardware.switches[up.model].ports
        for j in range(tier.links):
            if rack.id < tier.top_down_from:
                far = (rack.id - 1) * tier.links + j + 1
            else:
                far = top - (rack.id - tier.top_down_from) * tier.links - j
            out.append(Wire(network, sw.name, first + k * tier.links + j, up.name, str(far), path))
    return out


# --- the switches' configuration ------------------------------------------------------------


def switch_asn(tiers: Iterable[EthernetTier], role: SwitchRole, rack_id: int) -> int | None:
    """A switch's BGP ASN: a rack switch's is its tier's `asn` plus its rack id, an upper
    switch's its tier's `asn` (the checks hold every tier to one role above alike); None on
    no tier: no routing."""
    asn = None
    for tier in tiers:
        if tier.switch == role:
            asn = tier.asn + rack_id
        elif tier.to == role:
            asn = tier.asn
    return asn


def build(
    cluster: Cluster,
    switches: Iterable[SwitchPlan],
    cables: Iterable[Cable],
    subnets: dict[str, tuple[tuple[str, str], ...]],
    gateways: dict[tuple[str, str], str],
) -> Ethernet:
    """Every Ethernet switch whose model names its OS, configured; none without ethernet.yaml."""
    eth = cluster.ethernet
    if eth is None:
        return Ethernet(mtu=0)
    rack_id = {rack.name: rack.id for rack in cluster.racks}
    ends: dict[str, list[tuple[int, CableEnd, Cable]]] = {}
    for c in cables:
        if c.a.port.isdigit():
            ends.setdefault(c.a.device, []).append((int(c.a.port), c.b, c))
        if c.b.port.isdigit():  # an uplink's upper end
            ends.setdefault(c.b.device, []).append((int(c.b.port), c.a, c))
    plans = {s.name: s for s in switches}
    mgmt = management_network(cluster)
    prefix_of = f"/{mgmt[1].interface_prefix or mgmt[1].rack_prefix}" if mgmt else ""
    out = []
    for sw in sorted(plans.values(), key=lambda s: s.name):
        model = cluster.hardware.switches[sw.model]
        if model.medium != Medium.ETHERNET or model.os is None:
            continue
        ports = []
        for number, far, cable in sorted(ends.get(sw.name, ()), key=lambda e: e[0]):
            routed = far.device in plans and far.port.isdigit()
            ports.append(
                SwitchPort(
                    number,
                    f"{far.device} {far.face or far.port} {cable.id}",
                    cable.network,
                    None if routed else cluster.networks[cable.network].vlan,
                    far.device if routed else None,
                    cable.lifecycle != "spare",
                    cable.id,
                    int(cable.rate.removesuffix("G")),
                    cable.installed,
                )
            )
        svis = []
        for name, net in sorted(cluster.networks.items()):
            subnet = dict(subnets.get(name, ())).get(sw.rack)
            gateway = gateways.get((name, sw.rack))
            if net.switch == sw.role and net.vlan and subnet and gateway:
                prefix = subnet.split("/")[1]
                svis.append(Svi(name, net.vlan, f"{gateway}/{prefix}", subnet, net.mtu))
        asn = switch_asn(eth.tiers, sw.role, rack_id[sw.rack])
        out.append(
            EthernetSwitch(
                name=sw.name,
                os=model.os,
                role=sw.role,
                rack=sw.rack,
                model=sw.model,
                asn=asn,
                router_id=sw.address,
                management=f"{sw.address}{prefix_of}" if sw.address else None,
                management_gateway=gateways.get((sw.network, sw.rack)) if sw.network else None,
                mtu=eth.mtu,
                ports=tuple(ports),
                svis=tuple(svis),
                lldp=eth.lldp,
            )
        )
    return Ethernet(mtu=eth.mtu, switches=tuple(out))
