"""`generated/fabric/`: the planned InfiniBand fabric and the hall's cable schedule.

- `topology.net`: the planned fabric in the ibnetdiscover text format that `ibsim` reads, so
  the real OpenSM can be run against it (tests/lab). Only installed cables are in it (a
  spare's port is down by design).
- `cables.csv`: every cable of the plan (all networks), ID first.
- `bom.csv`: cables to buy, counted by medium, rate and length; the legs of a split cable
  (one OSFP cage to two QSFP56 ports) are one product, e.g. `AOC OSFP-2xQSFP56`, `2x4xHDR`,
  at the longer leg's length.
- `split-ports.csv`: every port of a switch whose cages carry several ports (the spines'
  twin-port OSFP cages): cage, half, lanes and what it is cabled to; the split-port
  configuration to set on the switch and to check a cage's two ends by.
- `slurm-topology.conf`: Slurm's tree topology, leaves with their GPU nodes, spines with leaves
  (and in a three-tier fabric, cores with spines).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from operator import itemgetter

from common import memo
from common.hostlist import compact
from compiler.model import Cages, Medium, Role, SwitchRole
from compiler.plan import Cable, Plan
from compiler.targets.render import Lines, template, to_csv


def _installed(plan: Plan) -> tuple[Cable, ...]:
    """Every installed InfiniBand cable: one tuple for both files a render writes from them,
    so a diff keys it once a side."""
    return tuple(
        c for c in plan.cables if c.network in plan.ib_networks and c.lifecycle == "installed"
    )


def topology(plan: Plan, installed: tuple[Cable, ...]) -> str:
    # Each HCA is a CA node of its own (an eight-rail server is eight), named in the plan's
    # cable ends by host and device; a host of one HCA keeps its bare name.
    return _topology(
        plan.site.name,
        tuple(
            (s.name, s.ports, s.guid)
            for s in plan.switches
            if s.medium == Medium.INFINIBAND and s.guid
        ),
        tuple(
            (h.name, len(h.ib_ports) > 1, port.device, port.port, port.guid)
            for h in plan.hosts
            for port in h.ib_ports
        ),
        installed,
    )


@memo.by_value  # a diff's two sides write one fabric unless a cable, switch or HCA changed
def _topology(
    site: str,
    switches: tuple[tuple[str, int, str], ...],
    hcas: tuple[tuple[str, bool, str, int, str], ...],
    cables: tuple[Cable, ...],
) -> str:
    """The fabric as ibsim reads it: `switches` (name, ports, GUID), `hcas` (host, whether it
    has several, device, port, port GUID), the installed InfiniBand `cables`."""
    ids: dict[str, str] = {}
    desc: dict[str, str] = {}
    for name, _, guid in switches:
        ids[name], desc[name] = f"S-{guid[2:]}", name
    cas: dict[str, int] = {}  # node key -> its ports
    for host, several, device, port, guid in hcas:
        # ibsim derives a CA's port N GUID as node GUID + N; we plan the port GUID (what
        # ibstat, cn_guid_file and partitions show), so the simulated node GUID is one less.
        node_guid = f"{int(guid, 16) - port:016x}"
        key = f"{host} {device}" if several else host
        ids[key], desc[key] = f"H-{node_guid}", f"{host} {device}"
        cas[key] = cas.get(key, 0) + 1
    several_of = {host for host, several, *_ in hcas if several}
    # node -> (its port, the peer, the peer's port, the link's width and speed): each link at
    # its cable's planned rate, which ibsim trains it at (an NDR200 HCA's `2xNDR` on a 4x
    # fabric), so the lab's scans show the fabric as planned.
    links: dict[str, list[tuple[int, str, str, str]]] = defaultdict(list)
    for c in cables:
        a, a_port, b = c.a.device, c.a.port, c.b.device
        device, _, number = c.b.port.rpartition("/")
        if b in several_of:
            b = f"{b} {device}"
        links[a].append((int(a_port), b, number or c.b.port, c.rate))
        links[b].append((int(number or c.b.port), a, a_port, c.rate))

    def ports(name: str) -> str:
        # A node's port lines, one per cable end, are most of the file (three per server in a
        # three-tier fabric): written here, not by a loop in the template, whose per-line
        # cost was two thirds of the fabric target's.
        return Lines(
            "".join(
                f'[{port}]\t"{ids[peer]}"[{peer_port}]\t# "{desc[peer]}" lid 0 {rate}\n'
                for port, peer, peer_port, rate in sorted(links.get(name, ()))
            )
        )

    nodes = [("Switch", n, name, guid, ports(name)) for name, n, guid in switches]
    nodes += [
        ("Ca", n, key, f"0x{ids[key][2:]}", ports(key)) for key, n in cas.items() if key in links
    ]
    return template("topology.net.j2", site=site, nodes=nodes, ids=ids, desc=desc)


def cable_schedule(cables: Sequence[Cable]) -> str:
    return to_csv(
        ["id", "network", "a_device", "a_port", "a_location", "b_device", "b_port",
         "b_location", "medium", "length_m", "rate", "lifecycle", "note"],
        [
            [c.id, c.network, c.a.device, c.a.port, c.a.location, c.b.device, c.b.port,
             c.b.location, c.medium, f"{c.length_m:g}", c.rate,
             c.lifecycle, c.note]
            for c in cables
        ],
    )  # fmt: skip


def _panels(plan: Plan) -> dict[str, Cages | None]:
    """Each switch's front panel by name (looked up per cable end: a dict, not a scan)."""
    return {s.name: plan.hardware.switches[s.model].cages for s in plan.switches}


def product(panels: Mapping[str, Cages | None], cable: Cable) -> tuple[str, str, float]:
    """What to buy for a cable: (medium, rate, length); a split cable names both connectors."""
    if not cable.assembly:
        return cable.medium, cable.rate, cable.length_m
    split, other = (
        (cable.b, cable.a)
        if cable.assembly.startswith(cable.b.device.upper())
        else (
            cable.a,
            cable.b,
        )
    )
    panel, far = panels.get(split.device), panels.get(other.device)
    assert panel is not None, "an assembly sits on a switch with cages"
    ends = f"{panel.connector}-{panel.split}x{far.connector if far else 'QSFP'}"
    return f"{cable.medium} {ends}", f"{panel.split}x{cable.rate}", cable.length_m


def bill_of_materials(cables: Sequence[Cable], panels: Mapping[str, Cages | None]) -> str:
    # A split cable is bought once, at its longer leg's run. Each leg keeps its own run in the
    # schedule, so a rack added later never changes a cable already there; its leg may make
    # the cage's product longer, and the BOM's diff says so.
    legs: dict[str, Cable] = {}
    counts: Counter[tuple[str, str, float]] = Counter()
    for c in cables:
        if not c.assembly:
            counts[product(panels, c)] += 1
        elif c.assembly not in legs or c.length_m > legs[c.assembly].length_m:
            legs[c.assembly] = c
    counts.update(product(panels, c) for c in legs.values())
    rows: list[list[object]] = [
        [medium, rate, f"{length:g}", n] for (medium, rate, length), n in sorted(counts.items())
    ]
    return to_csv(["medium", "rate", "length_m", "count"], rows)


def slurm_topology(plan: Plan, installed: tuple[Cable, ...]) -> str:
    # A rail-optimised unit is one switch to Slurm: its servers share every rail leaf (a
    # server under eight leaves is not a tree), and a job within it crosses no spine.
    rails = plan.rails
    unit = {leaf: rails.units[u].name for leaf, (u, _) in rails.leaf.items()} if rails else {}
    return _slurm_topology(
        frozenset(h.name for h in plan.hosts if h.role == Role.GPU),
        frozenset(s.name for s in plan.switches if s.role == SwitchRole.SPINE),
        frozenset(s.name for s in plan.switches if s.role == SwitchRole.CORE),
        tuple(sorted(unit.items())),
        installed,
    )


@memo.by_value  # a diff's two sides write one tree unless a cable or a switch's role changed
def _slurm_topology(
    gpus: frozenset[str],
    spine_names: frozenset[str],
    core_names: frozenset[str],
    units: tuple[tuple[str, str], ...],
    cables: tuple[Cable, ...],
) -> str:
    """Slurm's tree of the installed InfiniBand `cables`: leaves (a rail unit as one, `units`:
    leaf -> unit) with their GPU servers, spines with leaves, cores with spines."""
    leaves: dict[str, list[str]] = defaultdict(list)
    spines: dict[str, set[str]] = defaultdict(set)
    cores: dict[str, set[str]] = defaultdict(set)
    unit = dict(units)
    for a, b in ((c.a.device, c.b.device) for c in cables):
        if b in gpus:
            if b not in leaves[unit.get(a, a)]:
                leaves[unit.get(a, a)].append(b)
        elif b in spine_names:
            spines[b].add(unit.get(a, a))
        elif b in core_names:
            cores[b].add(a)
    lines = [
        "# Slurm tree topology (topology.conf) of the InfiniBand fabric; generated by",
        "# clusterforge from cluster/, do not edit. TopologyPlugin=topology/tree",
    ]
    lines += [f"SwitchName={leaf} Nodes={compact(nodes)}" for leaf, nodes in sorted(leaves.items())]
    lines += [
        f"SwitchName={spine} Switches={compact(sorted(leaf_set))}"
        for spine, leaf_set in sorted(spines.items())
    ]
    lines += [
        f"SwitchName={core} Switches={compact(sorted(spine_set))}"
        for core, spine_set in sorted(cores.items())
    ]
    return "\n".join(lines) + "\n"


def split_ports(cables: Sequence[Cable], panels: Mapping[str, Cages | None]) -> str:
    # The switches whose cages carry several ports: connector, ports a cage, lanes a port.
    caged = {
        name: (p.connector, p.split, f"{p.lanes // p.split}x")
        for name, p in panels.items()
        if p is not None and p.split != 1
    }
    # (switch, port number, row), sorted by the first two: rows of text, cage numbers too (a
    # table of text is joined, `to_csv`): 163,836 rows at 4,096 eight-rail servers.
    rows: list[tuple[str, int, list[str]]] = []
    for c in cables:
        if not c.assembly:  # neither end on a cage of several ports
            continue
        for here, there in ((c.a, c.b), (c.b, c.a)):
            found = caged.get(here.device)
            if found is None:
                continue
            connector, split, lanes = found
            port = int(here.port)
            cage, half = divmod(port - 1, split)
            rows.append(
                (here.device, port,
                 [here.device, connector, str(cage + 1), str(half + 1), here.port, here.face,
                  lanes, c.rate, there.device, there.face, c.id, c.assembly])
            )  # fmt: skip
    rows.sort(key=itemgetter(0, 1))
    return to_csv(
        ["switch", "connector", "cage", "half", "port", "face", "lanes", "rate", "peer",
         "peer_port", "cable", "assembly"],
        [row for _, _, row in rows],
    )  # fmt: skip


@memo.by_value  # a diff's two sides share them unless a cable or a panel changed
def cable_files(
    cables: tuple[Cable, ...], panels: Mapping[str, Cages | None]
) -> tuple[tuple[str, str], ...]:
    """The files of the cable plan alone: the schedule, the BOM, the split ports."""
    return (
        ("fabric/cables.csv", cable_schedule(cables)),
        ("fabric/bom.csv", bill_of_materials(cables, panels)),
        ("fabric/split-ports.csv", split_ports(cables, panels)),
    )


def render(plan: Plan) -> dict[str, str]:
    installed = _installed(plan)
    return {
        "fabric/topology.net": topology(plan, installed),
        **dict(cable_files(plan.cables, _panels(plan))),
        "fabric/slurm-topology.conf": slurm_topology(plan, installed),
    }
