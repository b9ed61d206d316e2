"""The rail-optimised fabric's plan: scalable units, their rail leaves, and each HCA's place.

A server of a rail-optimised fabric has one HCA per GPU, each on its own rail; rail k of every
server of a scalable unit (SU) is cabled to the unit's leaf k (rails count from 0, as GPUs,
HCAs and their IPoIB interfaces do: GPU 3, mlx5_3 and ib3 are rail 3), and the leaves of every unit
link to every spine (two-tier), or, three-tier, to every spine of their pod (a spine group
of `units_per_pod` units), the spines of the pods joined by cores plane by plane, as NVIDIA's
DGX SuperPOD reference architecture builds it (SUs of 32 servers, eight rails, eight leaves
each; spine groups and core groups above four units). Everything here is a rule, so a
server, a rack or a unit added at the end renumbers nothing:

- a server's port on its rail leaves: the rack's place in the unit * servers_per_rack + slot;
- a rail leaf's place on the spines: unit index * rails + rail (as a rack leaf's is its
  rack id - 1); three-tier, on its pod's spines: (unit index mod units_per_pod) * rails +
  rail, its pod unit index // units_per_pod + 1;
- static LIDs: a rail leaf 0x101 + its unit index * rails + rail; three-tier, a spine
  0x801 + its place in name order, a core 0xC01 + its (leaves 0x101-0x7FF: 1,791; spines
  0x801-0xC00: 1,024, as many as the leaves of 4,096 eight-rail servers at 1:1; cores
  0xC01-0xFFF: 1,023; the two-tier spines keep 1 + their place); an HCA
  0x1000 + rails * (unit index * down ports + leaf port - 1) + rail, where the down ports
  are a leaf's ports below `uplink_port`: every HCA of 4,096 eight-rail servers (32,768
  ports, 0x1000-0x8FFF); an HCA on no rail (a service host's, cabled by `links:`)
  0x9000 + 16 * rack id + slot, up to 0xBBFF for rack id 703: all inside the unicast LIDs
  0x0001-0xBFFF.

Pure functions of the model; the checks (`check`) run on models that may be wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from common import memo
from common.rules import Rule
from compiler.model import Cluster, Nic, Node, RackRef, ScalableUnit, ServerModel, SwitchRole

if TYPE_CHECKING:
    from compiler.checks import Report

RAIL_LEAF_LID_BASE = 0x100  # as the rack leaves': a fabric has one kind or the other
RAIL_HOST_LID_BASE = 0x1000
RAIL_LID_TOP = 0x8FFF
OFF_RAIL_LID_BASE = 0x9000
OFF_RAIL_SLOTS = 16  # a rack's hosts on no rail: slots 1-15 (service hosts, a rack's few)
LEAF_LID_TOP = 0xF00  # the cores' LIDs start above it (compiler/plan.py)
# Three-tier: the rail leaves' block ends where the spines' starts, theirs where the cores'.
RAIL_SPINE_LID_BASE = 0x800
RAIL_CORE_LID_BASE = 0xC00
RAIL_CORE_LID_TOP = RAIL_HOST_LID_BASE - 1


class Rails(NamedTuple):
    """Where each rack and each rail leaf stands in the fabric's scalable units."""

    per_server: int  # rails: the most HCAs on rails any server model has
    down_ports: int  # a leaf's ports below uplink_port: the most servers a unit can hold
    units: tuple[ScalableUnit, ...]
    unit_of_rack: dict[str, tuple[int, int]]  # rack -> (unit index, the rack's place in it)
    leaf: dict[str, tuple[int, int]]  # leaf -> (unit index, rail from 0)
    units_per_pod: int | None = None  # three-tier: the units of a pod (a spine group)

    def place(self, leaf: str) -> int:
        """A rail leaf's place among every unit's leaves (0-based), as a rack leaf's is its
        rack id - 1: its place on every spine of a two-tier fabric, and its static LID's."""
        unit, rail = self.leaf[leaf]
        return unit * self.per_server + rail

    def pod_place(self, leaf: str) -> tuple[int, int]:
        """(pod, place on each of the pod's spines from 0) of a rail leaf; pod 0 of a
        two-tier fabric is every spine. A pod's units are consecutive in scalable_units, so
        a unit added at the end joins the last pod or starts one and moves no cable."""
        unit, rail = self.leaf[leaf]
        if self.units_per_pod is None:
            return 0, self.place(leaf)
        pod, within = divmod(unit, self.units_per_pod)
        return pod + 1, within * self.per_server + rail

    def pod_of_unit(self, unit: int) -> int:
        return 0 if self.units_per_pod is None else unit // self.units_per_pod + 1

    def leaf_lid(self, leaf: str) -> int:
        return RAIL_LEAF_LID_BASE + 1 + self.place(leaf)

    def port(self, rack: RackRef, node: Node) -> int | None:
        """The server's port on each of its unit's leaves; None outside every unit."""
        if rack.name not in self.unit_of_rack:
            return None
        place = self.unit_of_rack[rack.name][1]
        return place * self.units[self.unit_of_rack[rack.name][0]].servers_per_rack + node.slot

    def wire(self, rack: RackRef, node: Node, nic: Nic) -> tuple[str, int] | None:
        """(leaf, port) of an HCA on a rail; None for one not on a rail or outside the units."""
        port = self.port(rack, node)
        if nic.rail is None or port is None:
            return None
        leaves = self.units[self.unit_of_rack[rack.name][0]].leaves
        return (leaves[nic.rail], port) if nic.rail < len(leaves) else None

    def host_lid(self, rack: RackRef, node: Node, nic: Nic) -> int:
        """An HCA's static LID: by its unit, leaf port and rail; an HCA on no rail by its rack
        and slot, above the rails' block."""
        port = self.port(rack, node)
        if nic.rail is None or port is None:
            return OFF_RAIL_LID_BASE + OFF_RAIL_SLOTS * rack.id + node.slot
        unit = self.unit_of_rack[rack.name][0]
        return RAIL_HOST_LID_BASE + self.per_server * (unit * self.down_ports + port - 1) + nic.rail


def rail_hcas(model: ServerModel) -> list[Nic]:
    return [nic for nic in model.nics if nic.device and nic.rail is not None]


def rails(cluster: Cluster) -> Rails | None:
    """The rail plan of a rail-optimised fabric; None for a fat tree of rack leaves."""
    fabric = cluster.fabric
    if fabric.topology != "rail-optimised":
        return None
    count = max((len(rail_hcas(m)) for m in cluster.hardware.servers.values()), default=0)
    unit_of_rack: dict[str, tuple[int, int]] = {}
    leaf: dict[str, tuple[int, int]] = {}
    for u, unit in enumerate(fabric.scalable_units):
        for place, rack in enumerate(unit.racks):
            unit_of_rack.setdefault(rack, (u, place))
        for r, name in enumerate(unit.leaves):
            leaf.setdefault(name, (u, r))
    return Rails(
        count, fabric.uplink_port - 1, fabric.scalable_units, unit_of_rack, leaf,
        fabric.units_per_pod,
    )  # fmt: skip


@memo.last  # asked for each node's ports three times (checks, baseline, host), by model
def hca_order(model: ServerModel) -> tuple[Nic, ...]:
    """The model's HCAs in GPU order: by the lowest GPU each is nearest to (`affinity`), then
    as listed; NCCL_IB_HCA lists them so, GPU k's rail k-th."""
    nearest = {a.hca: min(a.gpus) for a in model.affinity}
    hcas = [nic for nic in model.nics if nic.device]
    # Ties by position, not `hcas.index`: that compares pydantic models, a second a compile.
    rank = [nearest.get(nic.device or "", len(hcas)) for nic in hcas]
    return tuple(hcas[i] for i in sorted(range(len(hcas)), key=lambda i: (rank[i], i)))


# --- checks ---------------------------------------------------------------------------------


def check(c: Cluster, rep: Report) -> None:
    """A model's HCAs on rails 0..N-1, one each; a rail-optimised fabric's units hold together
    (known racks and leaves, each in one unit, one leaf per rail, servers within the unit's
    ports), its pods are of units (units_per_pod), and its LID plan fits the unicast LIDs."""
    at = ("fabric",)
    fabric = c.fabric
    railed = fabric.topology == "rail-optimised"
    for name, model in c.hardware.servers.items():
        hcas = [(i, nic) for i, nic in enumerate(model.nics) if nic.device]
        numbered = sorted(nic.rail for _, nic in hcas if nic.rail is not None)
        where = ("hardware", "servers", name, "nics")
        if numbered and numbered != list(range(len(hcas))):
            rep.add(
                (*where, hcas[0][0], "rail"),
                Rule.RAIL_LAYOUT,
                f"{name!r}: its {len(hcas)} HCAs are on rails {numbered}; give each one rail, "
                f"0-{len(hcas) - 1}",
            )
        elif len(hcas) > 1 and not railed:
            rep.add(
                (*where, hcas[1][0], "device"),
                Rule.RAIL_LAYOUT,
                f"{name!r} has {len(hcas)} HCAs: a leaf per rack takes one per server; set "
                "fabric topology: rail-optimised and give each HCA its rail",
            )
        elif len(hcas) > 1 and not numbered:
            rep.add(
                (*where, hcas[0][0]),
                Rule.RAIL_LAYOUT,
                f"{name!r} has {len(hcas)} HCAs and none on a rail: give each HCA its rail",
            )
    if not railed:
        if fabric.scalable_units:
            rep.add(
                (*at, "scalable_units"),
                Rule.SCALABLE_UNIT,
                "scalable units are for topology: rail-optimised",
            )
        if fabric.units_per_pod is not None:
            rep.add(
                (*at, "units_per_pod"),
                Rule.SCALABLE_UNIT,
                "units_per_pod is for topology: rail-optimised (a fat tree's pods are "
                "racks_per_pod)",
            )
        return
    if not fabric.scalable_units:
        rep.add((*at, "topology"), Rule.MISSING_FIELD, "rail-optimised needs scalable_units")
        return
    if fabric.racks_per_pod is not None:
        rep.add(
            (*at, "racks_per_pod"),
            Rule.SCALABLE_UNIT,
            "a rail-optimised fabric's pods are of scalable units, not racks: set "
            "units_per_pod (a leaf's rack says nothing of its rail)",
        )
    plan = rails(c)
    assert plan is not None
    racks = {r.name for r in c.racks}
    leaves = {sw.name for rack in c.racks for sw in rack.switches if sw.role == SwitchRole.LEAF}
    switches = {sw.name for rack in c.racks for sw in rack.switches}
    seen_rack: dict[str, str] = {}
    seen_leaf: dict[str, str] = {}
    for u, unit in enumerate(fabric.scalable_units):
        here = (*at, "scalable_units", u)
        for i, name in enumerate(unit.racks):
            if name not in racks:
                rep.add((*here, "racks", i), Rule.UNKNOWN_REFERENCE, f"no rack named {name!r}")
            elif name in seen_rack:
                rep.add(
                    (*here, "racks", i),
                    Rule.SCALABLE_UNIT,
                    f"rack {name!r} is in unit {seen_rack[name]!r} already",
                )
            seen_rack.setdefault(name, unit.name)
        for i, leaf in enumerate(unit.leaves):
            if leaf not in switches:
                rep.add((*here, "leaves", i), Rule.UNKNOWN_REFERENCE, f"no switch named {leaf!r}")
            elif leaf not in leaves:
                rep.add((*here, "leaves", i), Rule.SCALABLE_UNIT, f"{leaf!r} is not a leaf")
            elif leaf in seen_leaf:
                rep.add(
                    (*here, "leaves", i),
                    Rule.SCALABLE_UNIT,
                    f"leaf {leaf!r} is in unit {seen_leaf[leaf]!r} already",
                )
            seen_leaf.setdefault(leaf, unit.name)
        if len(unit.leaves) != plan.per_server:
            rep.add(
                (*here, "leaves"),
                Rule.SCALABLE_UNIT,
                f"unit {unit.name!r} has {len(unit.leaves)} leaves for {plan.per_server} rails: "
                "one leaf per rail",
            )
        capacity = len(unit.racks) * unit.servers_per_rack
        if capacity > plan.down_ports:
            rep.add(
                (*here, "racks"),
                Rule.SCALABLE_UNIT,
                f"unit {unit.name!r}: {len(unit.racks)} racks of {unit.servers_per_rack} "
                f"servers need {capacity} leaf ports below uplink_port {fabric.uplink_port}",
            )
    for r, rack in enumerate(c.racks):
        for s, sw in enumerate(rack.switches):
            if sw.role == SwitchRole.LEAF and sw.name not in plan.leaf:
                rep.add(
                    ("racks", r, "switches", s),
                    Rule.SCALABLE_UNIT,
                    f"leaf {sw.name!r} is in no scalable unit: a rail-optimised fabric's "
                    "leaves are its units' (fabric.yaml scalable_units: leaves)",
                )
        for n, node in enumerate(rack.nodes):
            server = c.hardware.servers.get(node.model)
            p = ("racks", r, "nodes", n)
            if server is None:
                continue
            if not rail_hcas(server):
                if any(nic.device for nic in server.nics) and node.slot >= OFF_RAIL_SLOTS:
                    rep.add(
                        (*p, "slot"),
                        Rule.LID_RANGE,
                        f"slot {node.slot} of {node.name!r}: an HCA on no rail has a static "
                        f"LID in slots 1-{OFF_RAIL_SLOTS - 1} of its rack",
                    )
                continue
            if rack.name not in plan.unit_of_rack:
                rep.add(
                    (*p, "model"),
                    Rule.SCALABLE_UNIT,
                    f"{node.name!r} has HCAs on rails, but rack {rack.name!r} is in no "
                    "scalable unit",
                )
                continue
            unit = plan.units[plan.unit_of_rack[rack.name][0]]
            if node.slot > unit.servers_per_rack:
                rep.add(
                    (*p, "slot"),
                    Rule.SCALABLE_UNIT,
                    f"slot {node.slot} of {node.name!r}: unit {unit.name!r} has "
                    f"{unit.servers_per_rack} servers a rack (servers_per_rack)",
                )
            for nic in rail_hcas(server):
                lid = plan.host_lid(rack, node, nic)
                if lid > RAIL_LID_TOP:
                    rep.add(
                        p,
                        Rule.LID_RANGE,
                        f"{node.name!r} {nic.device}: static LID 0x{lid:04x} is beyond the "
                        f"rails' LIDs (0x1000-0x{RAIL_LID_TOP:04X}: 4,096 servers of 8 rails)",
                    )
    top, above = (
        (RAIL_SPINE_LID_BASE, "spines'") if fabric.units_per_pod else (LEAF_LID_TOP, "cores'")
    )
    for leaf in plan.leaf:
        if plan.leaf_lid(leaf) >= top:
            rep.add(
                (*at, "scalable_units"),
                Rule.LID_RANGE,
                f"leaf {leaf!r}: static LID 0x{plan.leaf_lid(leaf):04x} reaches the {above} "
                f"(from 0x{top:04x})",
            )
