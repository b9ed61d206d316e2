"""Stage 3, checks: rules that relate values across files, every problem reported at once.

Each rule is a function `(cluster, report)` that never stops at the first problem; a rule
may assume the model's per-field rules held, nothing more (a model name may be undefined).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from common import memo
from common.errors import Diagnostic, closest
from common.registry import Registry
from common.rules import Rule
from compiler import rails
from compiler.ethernet import switch_asn
from compiler.kinds import UPPER_ROLES
from compiler.load import Path_, Source
from compiler.model import GPUDIRECT_PATHS, Baseline, Cluster, Medium, Roce, Role, SwitchRole
from compiler.plan import (
    CORE_LID_BASE,
    HOST_LID_SLOTS,
    LEAF_LID_BASE,
    MAX_CORES,
    MAX_SPINES,
    SLURMD,
    UNICAST_LID_TOP,
    Tiers,
    cidr_span,
    egress,
    hca_link,
    ib_mtu,
    ip_str,
    link_gbps,
    network,
    nic_networks,
    node_address,
    node_links,
    overrides_of,
    patched,
    port_lids,
    rack_ids,
    rack_span,
    rack_subnet,
    route_network,
    wires,
)
from contract import Route, ib

# Baseline keys a model must have, by what the model carries.
SERVER_KEYS = ("bios", "bmc")
IB_KEYS = ("nic_firmware", "nic_psid")
GPU_KEYS = ("vbios", "gpu_driver", "cuda")
FLEET_KEYS = ("ofed", "kernel")


# Rules whose collision makes the two objects collide in everything derived from it: two
# racks with one id get the same subnets, addresses and spine ports; two nodes with one slot
# the same addresses and switch ports. Those later collisions are consequences, not causes.
CAUSES = (Rule.DUPLICATE_NAME, Rule.DUPLICATE_SLOT)


@dataclass
class Report:
    """Collects diagnostics; `unique` finds duplicates across the whole cluster. Each may name
    the objects it `involves` (paths), so consequences can be folded under their cause."""

    source: Source
    diagnostics: list[Diagnostic] = field(default_factory=list)
    involves: list[tuple[Path_, ...]] = field(default_factory=list)

    def add(self, path: Path_, rule: Rule, message: str, involves: tuple[Path_, ...] = ()) -> None:
        self.diagnostics.append(Diagnostic(self.source.where(path), rule, message))
        self.involves.append(involves)

    def add_cause(
        self, path: Path_, rule: Rule, message: str, consequences: Iterable[tuple[Path_, str]]
    ) -> None:
        """One problem with what follows from it at each of its `consequences` (path,
        message), folded under it: one cause, one line, however many devices it reaches."""
        folded = tuple(
            sorted(Diagnostic(self.source.where(at), rule, what) for at, what in consequences)
        )
        self.diagnostics.append(Diagnostic(self.source.where(path), rule, message, folded))
        self.involves.append(())

    def unique(self, rule: Rule, what: str, items: Iterable[tuple[object, Path_]]) -> None:
        """Report every item whose key was already seen, naming where it was first."""
        seen: dict[object, Path_] = {}
        for key, path in items:
            if key in seen:
                where = self.source.where(seen[key])
                self.add(path, rule, f"{what} {key!r} already used at {where}", (path, seen[key]))
            else:
                seen[key] = path

    def folded(self) -> list[Diagnostic]:
        """The diagnostics, each collision between two objects that already collide by a
        `CAUSES` rule folded under that one as its consequence."""
        causes = [
            (i, {p[:-1] for p in paths})  # the objects: the colliding field's owners
            for i, (d, paths) in enumerate(zip(self.diagnostics, self.involves, strict=True))
            if d.rule in CAUSES and len(paths) == 2
        ]
        under: dict[int, list[Diagnostic]] = defaultdict(list)
        kept = []
        for i, (d, paths) in enumerate(zip(self.diagnostics, self.involves, strict=True)):
            cause = next((c for c, objects in causes if _between(paths, objects)), None)
            if cause is None or d.rule in CAUSES:  # a cause is shown, never folded
                kept.append(i)
            else:
                under[cause].append(d)
        return [
            replace(self.diagnostics[i], consequences=tuple(sorted(under[i]))) if i in under
            else self.diagnostics[i]
            for i in kept
        ]  # fmt: skip


def _between(paths: tuple[Path_, ...], objects: set[Path_]) -> bool:
    """Whether `paths` lie within `objects` and touch more than one of them."""
    owners = {next((o for o in objects if p[: len(o)] == o), None) for p in paths}
    return len(paths) >= 2 and None not in owners and len(owners) > 1


Check = Callable[[Cluster, Report], None]  # one of CHECKS: reports each problem it finds


def _nodes(c: Cluster) -> Iterable[tuple[Path_, int, int]]:
    for r, rack in enumerate(c.racks):
        for n, _ in enumerate(rack.nodes):
            yield ("racks", r, "nodes", n), r, n


def _switches(c: Cluster) -> Iterable[tuple[Path_, int, int]]:
    for r, rack in enumerate(c.racks):
        for s, _ in enumerate(rack.switches):
            yield ("racks", r, "switches", s), r, s


def names(c: Cluster, rep: Report) -> None:
    rep.unique(
        Rule.DUPLICATE_NAME,
        "rack",
        ((rack.name, ("racks", r, "name")) for r, rack in enumerate(c.racks)),
    )
    rep.unique(
        Rule.DUPLICATE_NAME,
        "rack id",
        ((rack.id, ("racks", r, "id")) for r, rack in enumerate(c.racks)),
    )
    hosts = [(c.racks[r].nodes[n].name, (*p, "name")) for p, r, n in _nodes(c)]
    hosts += [(c.racks[r].switches[s].name, (*p, "name")) for p, r, s in _switches(c)]
    rep.unique(Rule.DUPLICATE_NAME, "host or switch name", hosts)
    models = [(m, ("hardware", "servers", m)) for m in c.hardware.servers]
    models += [(m, ("hardware", "switches", m)) for m in c.hardware.switches]
    rep.unique(Rule.DUPLICATE_NAME, "model name", models)
    # Each SM host has one opensm.conf: a second entry would overwrite the first's.
    rep.unique(
        Rule.DUPLICATE_SUBNET_MANAGER,
        "subnet manager host",
        (
            (sm.host, ("fabric", "subnet_managers", i, "host"))
            for i, sm in enumerate(c.fabric.subnet_managers)
        ),
    )


def identities(c: Cluster, rep: Report) -> None:
    serials, macs, guids = [], [], []
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        serials.append((node.serial, (*p, "serial")))
        macs += [(mac, (*p, "mac", nic)) for nic, mac in node.mac.items()]
        if node.guid:
            guids.append((node.guid, (*p, "guid")))
        guids += [(guid, (*p, "guids", hca)) for hca, guid in node.guids.items()]
    for p, r, s in _switches(c):
        sw = c.racks[r].switches[s]
        serials.append((sw.serial, (*p, "serial")))
        macs.append((sw.mac, (*p, "mac")))
        if sw.guid:
            guids.append((sw.guid, (*p, "guid")))
    rep.unique(Rule.DUPLICATE_SERIAL, "serial", serials)
    rep.unique(Rule.DUPLICATE_MAC, "MAC", macs)
    rep.unique(Rule.DUPLICATE_GUID, "GUID", guids)


def references(c: Cluster, rep: Report) -> None:
    hosts = {node.name for rack in c.racks for node in rack.nodes}
    switches = {sw.name: sw for rack in c.racks for sw in rack.switches}

    def need(known: Iterable[str], name: str, what: str, path: Path_) -> bool:
        known = set(known)
        if name in known:
            return True
        close = closest(name, known)
        hint = (
            f"did you mean {close!r}?"
            if close
            else "known: " + ", ".join(sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
        )
        rep.add(path, Rule.UNKNOWN_REFERENCE, f"{what} {name!r} is not defined ({hint})")
        return False

    services = c.site.services
    for key, value in services:  # its fields: names and tuples of names
        for i, host in enumerate(value if isinstance(value, list | tuple) else [value]):
            at: Path_ = (
                ("site", "services", key, i)
                if isinstance(value, list | tuple)
                else ("site", "services", key)
            )
            need(hosts, host, "host", at)
    if c.site.audit is not None:
        need(hosts, c.site.audit.metrics.host, "host", ("site", "audit", "metrics", "host"))
    for model_name, model in c.hardware.servers.items():
        need(c.networks, model.bmc, "network", ("hardware", "servers", model_name, "bmc"))
        for i, nic in enumerate(model.nics):
            need(
                c.networks,
                nic.network,
                "network",
                ("hardware", "servers", model_name, "nics", i, "network"),
            )
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        if not need(c.hardware.servers, node.model, "server model", (*p, "model")):
            continue
        ports = dict(nic_networks(c, node))
        for port in ports:
            if port not in node.mac and (port == "bmc" or not _is_ib(c, node.model, port)):
                rep.add(
                    (*p, "mac"),
                    Rule.MISSING_FIELD,
                    f"{node.name!r} has no MAC for its {port!r} port",
                )
        for port in node.mac:
            need(ports, port, f"port of model {node.model!r}", (*p, "mac", port))
        for net in node.addresses:
            need(ports.values(), net, f"network of {node.name!r}", (*p, "addresses", net))
        for net, link in node.links.items():
            need(ports.values(), net, f"network of {node.name!r}", (*p, "links", net))
            need(switches, link.switch, "switch", (*p, "links", net, "switch"))
        hcas = [nic.device for nic in c.hardware.servers[node.model].nics if nic.device]
        if hcas and not node.guid and not node.guids:
            rep.add(p, Rule.MISSING_FIELD, f"{node.name!r} has an InfiniBand HCA but no guid")
        elif len(hcas) > 1 or node.guids:
            # One port GUID per HCA: `guid` alone would give all of them one.
            for hca in hcas:
                if hca not in node.guids:
                    rep.add((*p, "guids"), Rule.MISSING_FIELD, f"{node.name!r} has no guid for "
                            f"its HCA {hca!r} (guids: {{{hca}: \"0x...\"}})")  # fmt: skip
            for hca in node.guids:
                need(hcas, hca, f"HCA of model {node.model!r}", (*p, "guids", hca))
        for key in node.pins:
            need(
                (*SERVER_KEYS, *IB_KEYS, *GPU_KEYS, *FLEET_KEYS),
                key,
                "version key",
                (*p, "pins", key),
            )
        need(c.provisioning.role_profiles, node.role.value, "role in role_profiles", (*p, "role"))
    for p, r, s in _switches(c):
        need(c.hardware.switches, c.racks[r].switches[s].model, "switch model", (*p, "model"))
    for i, sm in enumerate(c.fabric.subnet_managers):
        need(hosts, sm.host, "host", ("fabric", "subnet_managers", i, "host"))
    for i, part in enumerate(c.fabric.partitions):
        for j, host in enumerate(part.hosts):
            need(hosts, host, "host", ("fabric", "partitions", i, "hosts", j))
    for i, cable in enumerate(c.fabric.cables):
        need(switches, cable.device, "switch", ("fabric", "cables", i, "device"))
    for i, ring in enumerate(c.firmware.rings):
        for j, host in enumerate(ring.nodes):
            need(hosts, host, "host", ("firmware", "rings", i, "nodes", j))
    for model_name in c.firmware.baselines:
        need(
            [*c.hardware.servers, *c.hardware.switches],
            model_name,
            "model",
            ("firmware", "baselines", model_name),
        )
    racks = [rack.name for rack in c.racks]
    for name, receiver in c.site.monitoring.receivers.items():
        for i, rack in enumerate(receiver.racks):
            need(racks, rack, "rack", ("site", "monitoring", "receivers", name, "racks", i))
    for role, profile in c.provisioning.role_profiles.items():
        need([r.value for r in Role], role, "role", ("provisioning", "role_profiles", role))
        need(c.provisioning.profiles, profile, "profile", ("provisioning", "role_profiles", role))


def _is_ib(c: Cluster, model: str, nic_name: str) -> bool:
    return nic_name in _hcas(c)[model]


@memo.last  # asked for every port of every node
def _hcas(c: Cluster) -> dict[str, frozenset[str]]:
    """Each server model's NICs that are HCAs, by name."""
    return {
        name: frozenset(n.name for n in model.nics if n.device)
        for name, model in c.hardware.servers.items()
    }


def _baseline_keys(c: Cluster, model: str) -> tuple[str, ...]:
    """The version keys a model's baseline must set, by what the model carries."""
    server = c.hardware.servers.get(model)
    if server is None:
        return ("firmware",)
    ib = IB_KEYS if any(nic.device for nic in server.nics) else ()
    return (*SERVER_KEYS, *ib, *(GPU_KEYS if server.gpus else ()))


def baselines(c: Cluster, rep: Report) -> None:
    for key in FLEET_KEYS:
        if key not in c.firmware.software:
            rep.add(
                ("firmware", "software"), Rule.MISSING_BASELINE, f"no fleet-wide {key!r} version"
            )
    used = {node.model for rack in c.racks for node in rack.nodes}
    used |= {sw.model for rack in c.racks for sw in rack.switches}
    first_use: dict[str, Path_] = {}
    for p, r, n in _nodes(c):
        first_use.setdefault(c.racks[r].nodes[n].model, (*p, "model"))
    for p, r, s in _switches(c):
        first_use.setdefault(c.racks[r].switches[s].model, (*p, "model"))
    for model in sorted(used):
        baseline = c.firmware.baselines.get(model)
        if baseline is None:
            if model in c.hardware.servers or model in c.hardware.switches:
                rep.add(
                    first_use[model],
                    Rule.MISSING_BASELINE,
                    f"model {model!r} is in use but has no firmware baseline",
                )
            continue
        keys = _baseline_keys(c, model)
        missing = [k for k in keys if getattr(baseline, k) is None]
        if missing:
            rep.add(
                ("firmware", "baselines", model),
                Rule.MISSING_BASELINE,
                f"baseline of {model!r} lacks {', '.join(missing)}",
            )
        # A key the model has no part for would make the audit expect a version it cannot read.
        for key in baseline.versions():
            if key not in keys:
                rep.add(
                    ("firmware", "baselines", model, key),
                    Rule.UNKNOWN_REFERENCE,
                    f"model {model!r} has no {key!r} (its keys: {', '.join(keys)})",
                )
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        keys = (*_baseline_keys(c, node.model), *FLEET_KEYS)
        for key in node.pins:
            if key not in keys:
                rep.add(
                    (*p, "pins", key),
                    Rule.UNKNOWN_REFERENCE,
                    f"{node.name!r} pins {key!r}, but model {node.model!r} has none "
                    f"(its keys: {', '.join(keys)})",
                )
    # A mask of a key the baseline does not set would hide nothing, silently.
    for model, baseline in c.firmware.baselines.items():
        for key in baseline.mask:
            if getattr(baseline, key, None) is None or key == "mask":
                rep.add(
                    ("firmware", "baselines", model, "mask", key),
                    Rule.UNKNOWN_REFERENCE,
                    f"mask of {key!r}, which baseline {model!r} does not set",
                )
    # A rollout naming no real ring or key would silently accept nothing, and two rollouts
    # of one key in one ring would leave "previous" ambiguous.
    rings = {ring.name for ring in c.firmware.rings}
    version_keys = {*c.firmware.software, *Baseline.model_fields} - {"mask"}
    claimed: set[tuple[str, str]] = set()
    for i, rollout in enumerate(c.firmware.rollouts):
        at: Path_ = ("firmware", "rollouts", i)
        for j, ring in enumerate(rollout.rings):
            if ring not in rings:
                rep.add((*at, "rings", j), Rule.UNKNOWN_REFERENCE, f"no ring named {ring!r}")
        for key in rollout.previous:
            if key not in version_keys:
                rep.add(
                    (*at, "previous", key), Rule.UNKNOWN_REFERENCE, f"{key!r} is not a version key"
                )
            for ring in rollout.rings:
                if (ring, key) in claimed:
                    rep.add(
                        (*at, "previous", key),
                        Rule.DUPLICATE_ROLLOUT,
                        f"{key!r} of ring {ring!r} is already rolling out",
                    )
                claimed.add((ring, key))
    defaults = [i for i, ring in enumerate(c.firmware.rings) if not ring.nodes]
    if defaults != [len(c.firmware.rings) - 1]:
        rep.add(
            ("firmware", "rings"),
            Rule.RINGS,
            "exactly one ring, the last, must list no nodes: it takes every other node",
        )
    rep.unique(
        Rule.DUPLICATE_NAME,
        "ring",
        ((ring.name, ("firmware", "rings", i, "name")) for i, ring in enumerate(c.firmware.rings)),
    )
    rep.unique(
        Rule.DUPLICATE_RING_MEMBER,
        "node",
        (
            (n, ("firmware", "rings", i, "nodes", j))
            for i, ring in enumerate(c.firmware.rings)
            for j, n in enumerate(ring.nodes)
        ),
    )


def addresses(c: Cluster, rep: Report) -> None:
    """Every device gets its address on each of its networks, none twice. A rack whose id
    the network's rule has no subnet for is one problem, at the id, with each device it
    leaves without an address under it: no device drops out of DHCP and DNS unsaid."""
    used: list[tuple[object, Path_]] = []
    homeless: dict[tuple[int, str], list[tuple[Path_, str]]] = defaultdict(list)
    for p, r, n in _nodes(c):
        rack, node = c.racks[r], c.racks[r].nodes[n]
        if node.model not in c.hardware.servers:
            continue
        for _, net_name in nic_networks(c, node):
            net = c.networks.get(net_name)
            if net is None:
                continue
            at: Path_ = (*p, "addresses", net_name) if net_name in node.addresses else (*p, "slot")
            span = rack_span(net, rack)
            if span is None:
                homeless[(r, net_name)].append(
                    ((*p, "name"), f"{node.name!r} would have no {net_name!r} address")
                )
                continue
            address = node_address(net, rack, node, net_name)
            if address is None:
                rep.add(
                    at,
                    Rule.RACK_SUBNET_TOO_SMALL,
                    f"slot {node.slot} needs host part {net.host_base + node.slot}, beyond "
                    f"{net_name!r} subnet {rack_subnet(net, rack)} of rack {rack.name!r}",
                )
                continue
            text = ip_str(address)
            used.append((text, at))
            low, high = cidr_span(net.cidr)[:2] if net.interface_prefix else span
            if not low <= address <= high:
                block = network(net.cidr) if net.interface_prefix else rack_subnet(net, rack)
                rep.add(
                    at,
                    Rule.ADDRESS_OUTSIDE_SUBNET,
                    f"{text} is outside {net_name!r} subnet {block} of rack {rack.name!r}",
                )
                continue
            first, last = span
            host_part = address - first if first <= address <= last else None
            if host_part is not None and any(lo <= host_part <= hi for lo, hi in net.reserved):
                rep.add(
                    at,
                    Rule.ADDRESS_RESERVED,
                    f"{text} is in a reserved range of {net_name!r} {net.reserved}",
                )
    for p, r, s in _switches(c):
        rack, sw = c.racks[r], c.racks[r].switches[s]
        for net_name, net in sorted(c.networks.items()):
            if net.switch_base is None:
                continue
            subnet = rack_subnet(net, rack)
            if subnet is None:
                homeless[(r, net_name)].append(
                    ((*p, "name"), f"{sw.name!r} would have no {net_name!r} address")
                )
                continue
            part = net.switch_base + sw.u
            if not 0 < part < subnet.size - 1:
                rep.add(
                    (*p, "u"),
                    Rule.RACK_SUBNET_TOO_SMALL,
                    f"switch at U{sw.u} needs host part {part}, beyond {subnet}",
                )
            else:
                used.append((ip_str(subnet.first + part), (*p, "u")))
    for (r, net_name), devices in sorted(homeless.items()):
        rack, net = c.racks[r], c.networks[net_name]
        top = rack_ids(net)
        taken = {other.id for other in c.racks if other is not rack}
        free = [i for i in range(1, top + 1) if i not in taken]
        # A leaf's spine ports follow its rack id, so a leaf rack takes the next low id; a
        # rack without one (network, service) is best kept apart, at the top of the range.
        has_leaf = any(sw.role == SwitchRole.LEAF for sw in rack.switches)
        pick = (free[0] if has_leaf else free[-1]) if free else None
        fix = f"give rack {rack.name!r} a free id up to {top}" + (f" (e.g. {pick})" if pick else "")
        rep.add_cause(
            ("racks", r, "id"),
            Rule.RACK_SUBNET_TOO_SMALL,
            f"network {net_name!r} ({net.cidr}, a /{net.rack_prefix} per rack, stride "
            f"{net.stride}, offset {net.offset}) has no subnet for rack id {rack.id}: it holds "
            f"rack ids up to {top}, so {len(devices)} device(s) of {rack.name!r} would have no "
            f"{net_name!r} address; {fix}, or widen {net_name!r}'s cidr",
            devices,
        )
    rep.unique(Rule.DUPLICATE_IP, "address", used)


def subnets(c: Cluster, rep: Report) -> None:
    """Networks may share one block (bmc and mgmt split 10.60/16 by stride); they may not
    partly overlap, and no two rack subnets of any networks may overlap."""
    nets = sorted(c.networks.items())
    for i, (a_name, a) in enumerate(nets):
        for b_name, b in nets[i + 1 :]:
            na, nb = network(a.cidr), network(b.cidr)
            if na != nb and (na in nb or nb in na):
                rep.add(
                    ("networks", b_name, "cidr"),
                    Rule.SUBNET_OVERLAP,
                    f"{b_name!r} {b.cidr} overlaps {a_name!r} {a.cidr}",
                )
    # Sweep the rack subnets in address order: each overlaps the widest one still open.
    blocks = sorted(
        (subnet.first, -subnet.last, str(subnet), name, rack.name, r)
        for r, rack in enumerate(c.racks)
        for name, net in nets
        if (subnet := rack_subnet(net, rack)) is not None
    )
    reported: set[tuple[str, str]] = set()  # one report per pair of networks, not per rack
    widest: tuple[int, int, str, str, str, int] | None = None
    for block in blocks:
        first, last, cidr, name, rack_name, r = block
        if widest is not None and first <= -widest[1]:
            _, _, o_cidr, o_name, o_rack, o_r = widest
            if (name, o_name) not in reported:
                reported.add((name, o_name))
                rep.add(
                    ("networks", name),
                    Rule.SUBNET_OVERLAP,
                    f"rack {rack_name!r} subnet {cidr} of {name!r} overlaps {o_cidr} "
                    f"({o_name!r}, rack {o_rack!r})",
                    (("racks", r, "id"), ("racks", o_r, "id")),
                )
        if widest is None or -last > -widest[1]:
            widest = block


def positions(c: Cluster, rep: Report) -> None:
    # Rail leaves stand several to a rack (a unit's network rack); their cables are named
    # by the leaf, not the rack.
    rail_leaves = {leaf for unit in c.fabric.scalable_units for leaf in unit.leaves}
    for r, rack in enumerate(c.racks):
        taken: dict[int, str] = {}
        items = [
            (
                ("racks", r, "nodes", n),
                node.name,
                node.u,
                c.hardware.servers[node.model].height_u if node.model in c.hardware.servers else 1,
            )
            for n, node in enumerate(rack.nodes)
        ]
        items += [
            (
                ("racks", r, "switches", s),
                sw.name,
                sw.u,
                c.hardware.switches[sw.model].height_u if sw.model in c.hardware.switches else 1,
            )
            for s, sw in enumerate(rack.switches)
        ]
        for path, name, u, height in items:
            top = u + height - 1
            if top > rack.height_u:
                rep.add(
                    (*path, "u"),
                    Rule.RACK_POSITION,
                    f"{name!r} at U{u}-U{top} does not fit a {rack.height_u}U rack",
                )
            clash = sorted({taken[x] for x in range(u, top + 1) if x in taken})
            if clash:
                rep.add(
                    (*path, "u"),
                    Rule.RACK_POSITION,
                    f"{name!r} at U{u}-U{top} overlaps {', '.join(map(repr, clash))} "
                    f"in rack {rack.name!r}",
                )
            taken.update({x: name for x in range(u, top + 1)})
        rep.unique(
            Rule.DUPLICATE_SLOT,
            f"rack {rack.name!r}: slot",
            ((node.slot, ("racks", r, "nodes", n, "slot")) for n, node in enumerate(rack.nodes)),
        )
        roles = [
            (sw.role.value, ("racks", r, "switches", s, "role"))
            for s, sw in enumerate(rack.switches)
            if sw.role not in UPPER_ROLES and sw.name not in rail_leaves
        ]
        rep.unique(Rule.DUPLICATE_SWITCH_ROLE, f"switch role in rack {rack.name!r}", roles)


def ports(c: Cluster, rep: Report) -> None:
    # switch -> (whether a spine, its model's ports; None for a model the references check
    # reports): looked up once for each of a large fabric's hundred thousand wires.
    switch: dict[str, tuple[bool, int | None]] = {}
    for rack in c.racks:
        for sw in rack.switches:
            model = c.hardware.switches.get(sw.model)
            switch[sw.name] = (sw.role == SwitchRole.SPINE, model.ports if model else None)
    overrides = overrides_of(c.fabric)
    used: list[tuple[object, Path_]] = []
    named: set[tuple[str, int]] = set()  # the ends the overrides may name: a rule's ports
    beyond: dict[tuple[str, Path_], list[tuple[str, int, int]]] = defaultdict(list)
    for w in wires(c):
        below = switch.get(w.switch)
        if below is None:
            continue
        upper = switch.get(w.device)  # a link up a tier: the upper end is a port too
        named.add((w.switch, w.switch_port))
        if upper and w.device_port.isdigit():
            named.add((w.device, int(w.device_port)))
        port, far = w.switch_port, w.device_port
        if overrides:
            port, far, _ = patched(w, overrides)
        spine, count = below
        if count and not 1 <= port <= count:
            rep.add(
                w.path,
                Rule.PORT_OUT_OF_RANGE,
                f"{w.device!r} needs port {port} of {w.switch!r}, which has {count} ports",
            )
        used.append(((w.switch, port), w.path))
        if spine and upper is None:
            # Hosts belong on leaves (ftree); and a cable ID names the one switch of its role
            # in a rack (R01-IB05), which a rack of spines does not have.
            rep.add(
                w.path,
                Rule.LINK_TO_SPINE,
                f"{w.device!r} is cabled to spine {w.switch!r}; hosts connect to a leaf",
            )
        if upper and far.isdigit():
            used.append(((w.device, int(far)), w.path))
            above = upper[1]
            if above and not 1 <= int(far) <= above:
                beyond[(w.switch, w.path)].append((w.device, int(far), above))
    for (lower, at), uppers in sorted(beyond.items(), key=lambda kv: kv[0][0]):
        # Every uplink of one switch lands by the same rule: one cause, the links under it.
        first, far_port, ports = uppers[0]
        rep.add_cause(
            at,
            Rule.PORT_OUT_OF_RANGE,
            f"{lower!r} needs port {far_port} of {first!r}, which has {ports} ports"
            + (f" (and of {len(uppers) - 1} more above it)" if len(uppers) > 1 else "")
            + ": an uplink lands on the port its rack id (its place in the pod) gives; give "
            "the rack a lower free id (validate prints the room)",
            [(at, f"{lower!r} needs port {f} of {u!r}") for u, f, _ in uppers[1:]],
        )
    rep.unique(Rule.PORT_REUSED, "switch port", used)
    for i, o in enumerate(c.fabric.cables):
        if (o.device, o.port) not in named:
            in_use = sorted(p for d, p in named if d == o.device)
            rep.add(
                ("fabric", "cables", i),
                Rule.UNKNOWN_REFERENCE,
                f"no planned cable uses port {o.port} of {o.device!r}; an override names a "
                "cable by the port the rules give it, on either end"
                + (f" ({o.device!r} has cables on ports {_ranges(in_use)})" if in_use else ""),
            )


def _ranges(numbers: Iterable[int]) -> str:
    """ "1-20, 33" for 1, ..., 20, 33."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def fabric(c: Cluster, rep: Report) -> None:
    """A server cabled once, and every leaf: equal paths to every spine, within oversubscription.
    A NIC's own link `width` or `rate` is an InfiniBand HCA port's (a `device` on an
    InfiniBand network): on any other NIC nothing reads it, so it is refused, not ignored."""
    ib_nets = {name for name, net in c.networks.items() if net.medium == Medium.INFINIBAND}
    for name, model in c.hardware.servers.items():
        for i, nic in enumerate(model.nics):
            field_name = "width" if nic.width else "rate" if nic.rate else None
            if field_name and not (nic.device and nic.network in ib_nets):
                rep.add(
                    ("hardware", "servers", name, "nics", i, field_name),
                    Rule.INVALID_VALUE,
                    f"{nic.name} of {name!r} sets its link {field_name}, which only an "
                    "InfiniBand HCA port has (a device: on an InfiniBand network): nothing "
                    "would read it",
                )
    all_wires = wires(c)
    cabled = {(w.device, w.network) for w in all_wires}
    speed: dict[tuple[str, str], int] = {}  # (host, "mlx5_0/1") -> Gb/s
    for p, r, n in _nodes(c):
        rack, node = c.racks[r], c.racks[r].nodes[n]
        if node.model not in c.hardware.servers:
            continue
        for nic in c.hardware.servers[node.model].nics:
            speed[(node.name, f"{nic.device}/{nic.port or 1}")] = nic.speed_gbps
        if node.role == Role.SPARE:
            continue  # a spare may wait uncabled
        if node.guid and node.slot >= HOST_LID_SLOTS:
            rep.add(
                (*p, "slot"),
                Rule.LID_RANGE,
                f"slot {node.slot} of {node.name!r} has no static LID "
                f"(slots 1-{HOST_LID_SLOTS - 1})",
            )
        for _, net in nic_networks(c, node):
            if net in ib_nets and (node.name, net) not in cabled:
                rep.add(
                    p,
                    Rule.SERVER_NOT_CONNECTED,
                    f"{node.name!r} has an HCA but no leaf in rack {rack.name!r} "
                    "and no links: entry",
                )
    # A cable planned but not installed, or a spare, is no path: a switch's ECMP set is what
    # is cabled and up.
    overrides = overrides_of(c.fabric)
    tiers = Tiers.of(c)
    role = {sw.name: sw.role for rack in c.racks for sw in rack.switches}
    up: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # switch -> upper -> n
    down: dict[str, float] = defaultdict(float)  # switch -> Gb/s to the tier below
    rate = link_gbps(c.fabric)
    upper_tier = (SwitchRole.SPINE, SwitchRole.CORE)
    for w in all_wires:
        o = patched(w, overrides)[2] if overrides else None
        if o is not None and (not o.installed or o.spare):
            continue
        if role.get(w.device) in upper_tier:
            up[w.switch][w.device] += 1
            down[w.device] += rate
        else:
            down[w.switch] += speed.get((w.device, w.device_port), 0)
    railed = rails.rails(c)
    for p, r, s in _switches(c):
        rack, sw = c.racks[r], c.racks[r].switches[s]
        if sw.role == SwitchRole.LEAF:
            if railed is not None and sw.name not in railed.leaf:
                continue  # a leaf of no unit: the scalable-unit rule says so
            pod = railed.pod_place(sw.name)[0] if railed else tiers.pod_of(rack.id)[0]
            upper, below, above = set(tiers.spines.get(pod, ())), "servers", "spines"
        elif sw.role == SwitchRole.SPINE and c.fabric.three_tier and sw.pod:
            plane = tiers.spines[sw.pod].index(sw.name) + 1
            upper, below, above = set(tiers.cores.get(plane, ())), "leaves", "cores"
        else:
            continue
        links = up[sw.name]
        if len(set(links.values())) > 1 or set(links) != upper:
            rep.add(
                p,
                Rule.UNEQUAL_UPLINKS,
                f"{sw.role.value} {sw.name!r} links to {above} unevenly: "
                f"{dict(sorted(links.items()))}",
            )
        up_bw, down_bw = sum(links.values()) * rate, down[sw.name]
        if up_bw == 0 or down_bw / up_bw > c.fabric.max_oversubscription:
            ratio = f"{down_bw / up_bw:.3g}:1" if up_bw else "no uplinks"
            rep.add(
                p,
                Rule.OVERSUBSCRIPTION,
                f"{sw.role.value} {sw.name!r}: {down_bw:g} Gb/s to {below} vs {up_bw:g} Gb/s "
                f"to {above} ({ratio}) exceeds {c.fabric.max_oversubscription:g}:1",
            )


def tiers(c: Cluster, rep: Report) -> None:
    """A fabric is two-tier (no pods, no cores) or three-tier (racks_per_pod or
    units_per_pod, and core_port; every spine in a pod, every core in a plane); every leaf's
    pod has spines, every spine's plane has cores, and each tier fits its static LID range."""
    three = c.fabric.three_tier
    pods = "units_per_pod" if c.fabric.units_per_pod is not None else "racks_per_pod"
    if three and c.fabric.core_port is None:
        rep.add(
            ("fabric", pods),
            Rule.MISSING_FIELD,
            f"a three-tier fabric ({pods}) needs core_port: the first spine port to the core",
        )
    railed = rails.rails(c)
    t = Tiers.of(c)
    counts = {SwitchRole.SPINE: 0, SwitchRole.CORE: 0}
    for p, r, s in _switches(c):
        rack, sw = c.racks[r], c.racks[r].switches[s]
        if sw.role in counts:
            counts[sw.role] += 1
        for key, owner in (("pod", SwitchRole.SPINE), ("plane", SwitchRole.CORE)):
            if getattr(sw, key) is not None and not (three and sw.role == owner):
                rep.add(
                    (*p, key),
                    Rule.INVALID_VALUE,
                    f"{sw.name!r}: {key} is for the {owner.value}s of a three-tier fabric",
                )
        if sw.role == SwitchRole.CORE and not three:
            rep.add(
                (*p, "role"),
                Rule.CORE_WITHOUT_PODS,
                f"core {sw.name!r}: a core tier joins pods; set fabric {pods}",
            )
        elif sw.role == SwitchRole.CORE and sw.plane is None:
            rep.add(p, Rule.MISSING_FIELD, f"core {sw.name!r} needs plane: (the spines it joins)")
        elif sw.role == SwitchRole.SPINE and three and sw.pod is None:
            rep.add(p, Rule.MISSING_FIELD, f"spine {sw.name!r} needs pod: in a three-tier fabric")
        elif sw.role == SwitchRole.SPINE and three and sw.pod is not None:
            plane = t.spines[sw.pod].index(sw.name) + 1
            if plane not in t.cores:
                rep.add(
                    p,
                    Rule.PLANE_WITHOUT_CORES,
                    f"spine {sw.name!r} is spine {plane} of pod {sw.pod}; "
                    f"no core has plane {plane}",
                )
        elif (sw.pod is not None or sw.plane is not None) and not (three and sw.role in counts):
            rep.add(
                p,
                Rule.UNKNOWN_KEY,
                f"{sw.name!r}: pod and plane are for three-tier spines and cores",
            )
        elif sw.role == SwitchRole.LEAF and three and railed is not None:
            if sw.name in railed.leaf and railed.pod_place(sw.name)[0] not in t.spines:
                unit = railed.leaf[sw.name][0]
                rep.add(
                    p,
                    Rule.POD_WITHOUT_SPINES,
                    f"leaf {sw.name!r} of unit {railed.units[unit].name!r} is in pod "
                    f"{railed.pod_of_unit(unit)} (units_per_pod {c.fabric.units_per_pod}), "
                    "which has no spines",
                )
        elif sw.role == SwitchRole.LEAF and three:
            pod = t.pod_of(rack.id)[0]
            if pod not in t.spines:
                rep.add(
                    ("racks", r, "id"),
                    Rule.POD_WITHOUT_SPINES,
                    f"rack id {rack.id} is in pod {pod} (racks_per_pod "
                    f"{c.fabric.racks_per_pod}), which has no spines",
                )
    limits = ((SwitchRole.SPINE, MAX_SPINES), (SwitchRole.CORE, MAX_CORES))
    if railed is not None and three:
        # A three-tier rail fabric's blocks (compiler/rails.py): 0x801-0xC00, 0xC01-0xFFF.
        limits = (
            (SwitchRole.SPINE, rails.RAIL_CORE_LID_BASE - rails.RAIL_SPINE_LID_BASE),
            (SwitchRole.CORE, rails.RAIL_CORE_LID_TOP - rails.RAIL_CORE_LID_BASE),
        )
    for role, most in limits:
        if counts[role] > most:
            rep.add(
                ("racks",),
                Rule.LID_RANGE,
                f"{counts[role]} {role.value} switches; static LIDs hold {most}",
            )


def lids(c: Cluster, rep: Report) -> None:
    """Every static LID a rack id gives (its hosts' ports, its rack leaf's) is unicast and
    below the next block: the rack id's bound is the rule's, not the model's."""
    railed = rails.rails(c)
    for r, rack in enumerate(c.racks):
        found: list[str] = []
        for node in rack.nodes:
            server = c.hardware.servers.get(node.model)
            if server is None or node.slot >= HOST_LID_SLOTS:
                continue  # unknown models and slots are reported where they are
            for _, device, _, lid in port_lids(railed, rack, node, server):
                if lid > UNICAST_LID_TOP:
                    found.append(f"{node.name} {device}: 0x{lid:04x}")
        leaf = any(sw.role == SwitchRole.LEAF for sw in rack.switches)
        if railed is None and leaf and LEAF_LID_BASE + rack.id >= CORE_LID_BASE:
            found.append(f"its leaf: 0x{LEAF_LID_BASE + rack.id:04x}, the cores' block")
        if found:
            rep.add(
                ("racks", r, "id"),
                Rule.LID_RANGE,
                f"rack id {rack.id} gives static LIDs beyond their range ("
                + "; ".join(found[:3])
                + (f"; {len(found) - 3} more" if len(found) > 3 else "")
                + f"; unicast LIDs end at 0x{UNICAST_LID_TOP:04X}): give the rack a lower free id",
            )


def routes(c: Cluster, rep: Report) -> None:
    """Every address of a network a host has an interface on goes out of that interface, by
    longest-prefix match over the host's routes, connected ones included: otherwise traffic
    between racks takes another NIC, and strict rp_filter drops the replies."""
    reported: set[tuple[str, str, str]] = set()  # one report per network and stray route
    for (r, n), planned in node_links(c).items():
        node = c.racks[r].nodes[n]
        if planned is None:
            continue  # addresses() reports the address that does not fit
        ifaces, host_routes, _ = planned
        for iface in ifaces:
            net = c.networks[iface.network]
            carriers: list[Route | None] = [*egress(host_routes, net.cidr)] or [None]
            for route in carriers:
                if route is not None and route.dev == iface.name:
                    continue
                key = (iface.network, route.dst if route else "", route.dev if route else "")
                if key in reported:
                    continue
                reported.add(key)
                if route is None:
                    how = "has no route"
                else:
                    stray = next(i.network for i in ifaces if i.name == route.dev)
                    whole = network(net.cidr) in route_network(route)
                    part = net.cidr if whole else route.dst
                    how = (
                        f"{part} leaves through {route.dev} ({stray!r} route {route.dst}"
                        f"{' via ' + route.gateway if route.gateway else ''})"
                    )
                rep.add(
                    ("networks", iface.network, "routes")
                    if net.routes
                    else ("networks", iface.network),
                    Rule.ROUTE_LEAVES_NETWORK,
                    f"{node.name!r} on {iface.network!r} {net.cidr}: {how}, not {iface.name}; "
                    f"add a route of {iface.network!r} that covers it",
                )


def ipoib(c: Cluster, rep: Report) -> None:
    """IPoIB runs on the Default partition (hosts configure ib0, no child interfaces), at an
    MTU a partition's IB MTU carries."""
    for name, net in sorted(c.networks.items()):
        if net.medium == Medium.INFINIBAND and ib_mtu(net.mtu) is None:
            rep.add(
                ("networks", name, "mtu"),
                Rule.IPOIB_MTU,
                f"IPoIB MTU {net.mtu} is no IB MTU less its 4-byte header (datagram: 252, 508, "
                f"1020, 2044 or 4092; connected: 4093-65520)",
            )
    for i, part in enumerate(c.fabric.partitions):
        if part.ipoib:
            rep.add(
                ("fabric", "partitions", i, "ipoib"),
                Rule.IPOIB_PARTITION,
                f"no host has an IPoIB interface on partition {part.name!r} (IPoIB runs on "
                "the Default partition): drop the flag",
            )


def ethernet(c: Cluster, rep: Report) -> None:
    """A host's frame must fit every switch hop on its path: its rack switch's ports and, for
    a network routed between racks, the uplinks and the spines of its tier (ethernet.yaml's
    `mtu`, capped by each switch model's largest). A larger host MTU is not refused by
    anything on the way: the switch drops the frame, so jumbo storage traffic stalls while
    pings still pass. Every network cabled to a configured switch needs a VLAN."""
    eth = c.ethernet
    if eth is None:
        return
    for name, net in sorted(c.networks.items()):
        if net.medium != Medium.ETHERNET or net.switch is None:
            continue
        roles = {net.switch} | {t.to for t in eth.tiers if t.switch == net.switch}
        models = sorted(
            {sw.model for r in c.racks for sw in r.switches if sw.role in roles}
            & set(c.hardware.switches)
        )
        hops = [(eth.mtu, f"the switch ports' mtu {eth.mtu} (ethernet.yaml)")] + [
            (c.hardware.switches[m].max_mtu, f"switch model {m!r}'s max_mtu")
            for m in models
            if c.hardware.switches[m].max_mtu < eth.mtu
        ]
        lowest, hop = min(hops)
        if net.mtu > lowest:
            rep.add(
                ("networks", name, "mtu"),
                Rule.SWITCH_MTU,
                f"the MTU {net.mtu} of network {name!r} exceeds {hop} on its path: the switch "
                "drops every larger frame",
            )
        if net.vlan is None and any(c.hardware.switches[m].os for m in models):
            rep.add(
                ("networks", name),
                Rule.MISSING_FIELD,
                f"network {name!r} is cabled to configured Ethernet switches: give it a vlan:",
            )


# The last ASN a BGP speaker may hold: 4294967295 is reserved (RFC 7300).
ASN_MAX = 4294967294


def asns(c: Cluster, rep: Report) -> None:
    """Each configured Ethernet switch's BGP ASN (`switch_asn`: a rack switch's is its tier's
    `asn` plus its rack id) must be one BGP allows, and no two switches that trade routes
    through the switches of one role above may share one: eBGP drops a path that already
    holds the receiver's own ASN (its loop check), so two rack switches of one ASN under the
    same spines never learn each other's subnets, and one holding a spine's ASN brings up no
    session with it. Two tiers to one role above must give it one `asn`: the second would
    be ignored. A clash is one problem at the tier that makes it, with each switch under it."""
    eth = c.ethernet
    if eth is None:
        return
    above: dict[SwitchRole, tuple[int, int]] = {}  # role above -> (its first tier, ASN)
    for i, tier in enumerate(eth.tiers):
        first = above.setdefault(tier.to, (i, tier.asn))
        if first[1] != tier.asn:
            rep.add(("ethernet", "tiers", i, "asn"), Rule.BGP_ASN, f"tier {i + 1} gives the "
                    f"{tier.to} switches asn {tier.asn}, tier {first[0] + 1} gives them "
                    f"{first[1]}: one ASN for the switches of a role above")  # fmt: skip
    configured = {name for name, m in c.hardware.switches.items() if m.os is not None}
    # switch -> (ASN, role, where, rack id)
    held: dict[str, tuple[int, SwitchRole, Path_, int]] = {}
    for r, rack in enumerate(c.racks):
        for s, sw in enumerate(rack.switches):
            asn = switch_asn(eth.tiers, sw.role, rack.id)
            if sw.model in configured and asn is not None:
                held[sw.name] = (asn, sw.role, ("racks", r, "switches", s), rack.id)
    for i, tier in enumerate(eth.tiers):
        at = ("ethernet", "tiers", i, "asn")
        over = {asn: name for name, (asn, role, _, _) in held.items() if role == tier.to}
        # The ASNs under the role above, of every tier to it: the first switch of each.
        under: dict[int, str] = {}
        for name, (asn, role, _, _) in held.items():
            if any(t.to == tier.to and t.switch == role for t in eth.tiers):
                under.setdefault(asn, name)
        clashes = []
        for name, (asn, role, where, rack_id) in held.items():
            if role != tier.switch:
                continue
            if asn > ASN_MAX:
                clashes.append((where, f"{name}: ASN {asn}, above BGP's last ({ASN_MAX})"))
            elif asn in over:
                clashes.append((where, f"{name}: ASN {asn}, that of {over[asn]} above it"))
            elif under[asn] != name:
                what = f"{name}: ASN {asn}, as {under[asn]}'s"
                _, prior_role, prior_where, prior_rack = held[under[asn]]
                if (prior_role, prior_rack) == (role, rack_id):
                    # Two racks of one id: the ASN follows from it, folded under that cause.
                    rep.add(where, Rule.BGP_ASN, what, (where, prior_where))
                else:
                    clashes.append((where, what))
        if clashes:
            rep.add_cause(at, Rule.BGP_ASN, f"tier {i + 1} (asn {tier.asn} plus the rack id) "
                          f"gives {len(clashes)} of its {tier.switch} switches an ASN that BGP "
                          f"refuses or that another switch under the {tier.to} switches holds: "
                          "eBGP drops a route holding its receiver's ASN", clashes)  # fmt: skip


def roce(c: Cluster, rep: Report) -> None:
    """A RoCE network (`rdma: roce`) is lossless only if every hop is set alike, so every hop
    must be one the compiler configures: an Ethernet network cabled to a switch role, with
    ethernet.yaml, every switch it crosses (its rack switches, a host's `links` override's,
    the spines they uplink to) of a model with an `os:`. One switch carries one RoCE class;
    the CNP rides a priority and DSCP of its own."""
    eth = c.ethernet
    switches = {sw.name: sw for r in c.racks for sw in r.switches}
    classes: dict[SwitchRole, tuple[str, object]] = {}
    for name, net in sorted(c.networks.items()):
        at = ("networks", name)
        if net.rdma != "roce":
            if net.roce is not None:
                rep.add((*at, "roce"), Rule.ROCE_MISMATCH, f"network {name!r} has a roce: "
                        "block but no rdma: roce; declare both or neither")  # fmt: skip
            continue
        block = net.roce or Roce()
        if block.priority == block.cnp_priority or block.dscp == block.cnp_dscp:
            rep.add((*at, "roce"), Rule.ROCE_MISMATCH, "RoCE and its congestion notifications "
                    "(cnp_) need a priority and a DSCP each of their own")  # fmt: skip
        if net.medium != Medium.ETHERNET or net.switch is None or eth is None:
            why = (
                "it is not an Ethernet network"
                if net.medium != Medium.ETHERNET
                else "it names no switch: role"
                if net.switch is None
                else "ethernet.yaml configures no switch"
            )
            rep.add((*at, "rdma"), Rule.ROCE_MISMATCH, f"RoCE on {name!r} needs PFC on every "
                    f"switch it crosses, and {why}")  # fmt: skip
            continue
        roles = {net.switch} | {t.to for t in eth.tiers if t.switch == net.switch}
        seen = classes.setdefault(net.switch, (name, block))
        if seen[1] != block:
            rep.add((*at, "roce"), Rule.ROCE_MISMATCH, f"network {name!r} and {seen[0]!r} "
                    f"share the {net.switch.value} switches with other roce: classes; a switch "
                    "port trusts one")  # fmt: skip
        lossy = [
            (("racks", r, "switches", s), sw.name)
            for r, rack in enumerate(c.racks)
            for s, sw in enumerate(rack.switches)
            if sw.role in roles
            and sw.model in c.hardware.switches
            and c.hardware.switches[sw.model].os is None
        ]
        for r, n in ((r, n) for r, rack in enumerate(c.racks) for n in range(len(rack.nodes))):
            link = c.racks[r].nodes[n].links.get(name)
            far = switches.get(link.switch) if link else None
            model = c.hardware.switches.get(far.model) if far else None
            if link and far and model and (model.os is None or far.role not in roles):
                rep.add(("racks", r, "nodes", n, "links", name), Rule.ROCE_MISMATCH,
                        f"{c.racks[r].nodes[n].name!r} is cabled to {link.switch!r}, off RoCE "
                        f"network {name!r}'s configured path ({', '.join(sorted(roles))} "
                        "switches): that port would forward RoCE without PFC")  # fmt: skip
        if lossy:
            rep.add_cause(
                (*at, "rdma"),
                Rule.ROCE_MISMATCH,
                f"RoCE on {name!r} crosses {len(lossy)} switch(es) whose model has no os:, "
                "which get no PFC: a lossy hop drops RoCE under load",
                [(p, f"{sw}: no PFC (its model names no os:)") for p, sw in lossy],
            )


def cages(c: Cluster, rep: Report) -> None:
    """A front panel adds up: its cages' ports are the model's ports, each port whole lanes."""
    for name, model in sorted(c.hardware.switches.items()):
        panel = model.cages
        if panel is None:
            continue
        if panel.count * panel.split != model.ports or panel.lanes % panel.split:
            rep.add(
                ("hardware", "switches", name, "cages"),
                Rule.CAGE_LAYOUT,
                f"{panel.count} {panel.connector} cages of {panel.lanes} lanes split "
                f"{panel.split} ways do not make {model.ports} ports of whole lanes",
            )


def provisioning(c: Cluster, rep: Report) -> None:
    """What DHCP, the boot menus and the kickstarts need: served Ethernet networks, the PXE
    network among them, the service hosts reachable on it, two OS disks for RAID1."""
    prov, at = c.provisioning, ("provisioning",)
    for i, name in enumerate(prov.dhcp_networks):
        net = c.networks.get(name)
        if net is None:
            known = ", ".join(sorted(c.networks))
            rep.add(
                (*at, "dhcp_networks", i),
                Rule.UNKNOWN_REFERENCE,
                f"network {name!r} is not defined (known: {known})",
            )
        elif net.medium != Medium.ETHERNET:
            rep.add((*at, "dhcp_networks", i), Rule.INVALID_VALUE, f"DHCP cannot serve {name!r}")
    if prov.pxe_network not in prov.dhcp_networks:
        rep.add(
            (*at, "pxe_network"),
            Rule.INVALID_VALUE,
            f"PXE network {prov.pxe_network!r} is not among dhcp_networks: no one would answer",
        )
    nodes = {node.name: node for rack in c.racks for node in rack.nodes}
    s = c.site.services
    for path, host in [
        (("site", "services", "provisioning"), s.provisioning),
        *((("site", "services", "dns", i), h) for i, h in enumerate(s.dns)),
        *((("site", "services", "ntp", i), h) for i, h in enumerate(s.ntp)),
    ]:
        if prov.pxe_network not in dict(nic_networks(c, nodes[host])).values():
            rep.add(
                path,
                Rule.INVALID_VALUE,
                f"{host!r} has no {prov.pxe_network!r} address, where installing hosts reach it",
            )
    for model in sorted({node.model for node in nodes.values()}):
        if len(c.hardware.servers[model].os_disks) < 2:
            rep.add(
                ("hardware", "servers", model, "os_disks"),
                Rule.INVALID_VALUE,
                f"{model!r} needs two OS disks for its RAID1",
            )
    for mode in sorted({c.hardware.servers[node.model].boot for node in nodes.values()}):
        if getattr(prov.boot_files, mode.value) is None:
            rep.add(
                (*at, "boot_files"),
                Rule.MISSING_FIELD,
                f"a server model boots {mode.value}, but boot_files names no {mode.value} loader",
            )
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        if node.os_disks and len(node.os_disks) < 2:
            rep.add(
                (*p, "os_disks"),
                Rule.INVALID_VALUE,
                f"{node.name!r} needs two OS disks for its RAID1",
            )
    # The loaders fetch the kernel and initrd as http://<provisioning host><path>.
    for key in ("kernel", "initrd"):
        path = getattr(prov.boot_files, key)
        if not path.startswith("/") or "/../" in f"{path}/":
            rep.add(
                (*at, "boot_files", key),
                Rule.INVALID_VALUE,
                f"{path!r} must be an absolute path below the HTTP root ({prov.http_root})",
            )
    # The provisioning host installs from upstream: each name is one of `repos` (or baseos).
    repo_names = ["baseos", *(r.name for r in prov.repos)]
    for name in prov.bootstrap.repos:
        if name not in repo_names:
            close = closest(name, repo_names)
            hint = f"did you mean {close!r}?" if close else "known: " + ", ".join(repo_names)
            rep.add(
                (*at, "bootstrap", "repos", name),
                Rule.UNKNOWN_REFERENCE,
                f"bootstrap names the upstream of repo {name!r}, which repos lacks ({hint})",
            )
    source = prov.root_password_hash
    if source.env is None and source.file is None:
        rep.add(
            (*at, "root_password_hash"),
            Rule.MISSING_FIELD,
            "root_password_hash needs an env variable or a file to read the hash from",
        )
    if source.file is not None and not source.file.startswith("/"):
        rep.add(
            (*at, "root_password_hash", "file"),
            Rule.INVALID_VALUE,
            f"{source.file!r} must be an absolute path, outside the repository",
        )


def gpudirect(c: Cluster, rep: Report) -> None:
    """A model's GPU<->HCA affinity names its own HCAs and GPUs, each once, and plans only
    paths GPUDirect RDMA takes (PIX, PXB): NCCL stages through host memory beyond them."""
    for name, model in c.hardware.servers.items():
        devices = {nic.device for nic in model.nics if nic.device}
        count = model.gpus.count if model.gpus else 0
        seen: set[int] = set()
        for i, entry in enumerate(model.affinity):
            at = ("hardware", "servers", name, "affinity", i)
            if entry.hca not in devices:
                known = ", ".join(sorted(devices)) or "none"
                rep.add((*at, "hca"), Rule.GPU_AFFINITY, f"{name!r} has no HCA {entry.hca!r} "
                        f"(its HCAs: {known})")  # fmt: skip
            for gpu in entry.gpus:
                if gpu >= count or gpu in seen:
                    why = "listed twice" if gpu in seen else f"{name!r} has {count} GPUs"
                    rep.add((*at, "gpus"), Rule.GPU_AFFINITY, f"GPU {gpu}: {why}")
                seen.add(gpu)
            if entry.path not in GPUDIRECT_PATHS:
                rep.add(
                    (*at, "path"),
                    Rule.GPU_AFFINITY,
                    f"GPUs {list(entry.gpus)} reach {entry.hca} over {entry.path.value}: "
                    "GPUDirect RDMA needs PIX or PXB (NCCL_NET_GDR_LEVEL), never farther",
                )


def slurm(c: Cluster, rep: Report) -> None:
    """Slurm's view of the hardware holds together (each GPU bound to one socket the model
    has, a GRES type for every GPU model Slurm schedules, memory left after the headroom), and
    slurm.yaml's partitions name Slurm nodes, never a spare, with at most one default."""
    slurm_roles = {role for role, names in c.services.roles.items() if SLURMD in names}
    scheduled = {node.model for rack in c.racks for node in rack.nodes if node.role in slurm_roles}
    for name, model in c.hardware.servers.items():
        at = ("hardware", "servers", name)
        if name in scheduled and model.memory_gib <= c.slurm.memory_headroom_gib:
            headroom = c.slurm.memory_headroom_gib
            rep.add((*at, "memory_gib"), Rule.SLURM_MEMORY, f"{name!r} has {model.memory_gib} GiB, "
                    f"no more than slurm.yaml's headroom of {headroom} GiB")  # fmt: skip
        if model.gpus is None:
            continue
        if name in scheduled and model.gpus.gres_type is None:
            rep.add((*at, "gpus"), Rule.SLURM_GRES, f"{name!r} has GPUs Slurm schedules: give "
                    "them a gres_type (gpu:<type>:<count>), e.g. a100")  # fmt: skip
        seen: set[int] = set()
        for i, entry in enumerate(model.gpus.cpu_affinity):
            where = (*at, "gpus", "cpu_affinity", i)
            if entry.socket >= model.cpu_sockets:
                rep.add((*where, "socket"), Rule.SLURM_GRES, f"socket {entry.socket}: {name!r} "
                        f"has {model.cpu_sockets} sockets (counted from 0)")  # fmt: skip
            for gpu in entry.gpus:
                if gpu >= model.gpus.count or gpu in seen:
                    why = "listed twice" if gpu in seen else f"{name!r} has {model.gpus.count} GPUs"
                    rep.add((*where, "gpus"), Rule.SLURM_GRES, f"GPU {gpu}: {why}")
                seen.add(gpu)
        left = sorted(set(range(model.gpus.count)) - seen)
        if model.gpus.cpu_affinity and left:
            # gres.conf would list fewer GPUs than Gres= counts, and slurmctld drains every
            # node of the model: "gres/gpu count reported lower than configured".
            rep.add((*at, "gpus", "cpu_affinity"), Rule.SLURM_GRES, f"GPUs {left} of {name!r} "
                    "have no socket: gres.conf would list fewer than the model has")  # fmt: skip
    nodes = {
        node.name: node.role for rack in c.racks for node in rack.nodes if node.role in slurm_roles
    }
    defaults = []
    for pname, part in c.slurm.partitions.items():
        at = ("slurm", "partitions", pname)
        if part.default:
            defaults.append(at)
        if pname == "spare":
            rep.add(at, Rule.SLURM_SPARE, "partition 'spare' is the spares' own (generated, "
                    "inactive): name production partitions otherwise")  # fmt: skip
        if Role.SPARE in part.roles:
            rep.add((*at, "roles"), Rule.SLURM_SPARE, f"partition {pname!r}: spares stay out of "
                    "production partitions (they are drained with the reason 'spare')")  # fmt: skip
        for i, host in enumerate(part.hosts):
            if host not in nodes:
                near = closest(host, nodes)
                hint = f"; did you mean {near!r}?" if near else ""
                rep.add((*at, "hosts", i), Rule.SLURM_PARTITION, f"{host!r} is no Slurm node (a "
                        f"host whose role runs services.yaml's {SLURMD!r}){hint}")  # fmt: skip
            elif nodes[host] == Role.SPARE:
                rep.add((*at, "hosts", i), Rule.SLURM_SPARE, f"{host!r} is a spare: spares stay "
                        "out of production partitions")  # fmt: skip
        if not any(role in part.roles for role in nodes.values()) and not part.hosts:
            rep.add(at, Rule.SLURM_PARTITION, f"partition {pname!r} holds no Slurm node")
    for at in defaults[1:]:
        rep.add((*at, "default"), Rule.SLURM_PARTITION, f"a second default partition: "
                f"{defaults[0][-1]!r} is the default already")  # fmt: skip


def thresholds(c: Cluster, rep: Report) -> None:
    """A pass mark the physical plan can reach: a pair's below one link's rate, an NCCL
    step's below the NICs of its slowest node (bus bandwidth leaves a node through them)."""
    at = ("acceptance",)
    pair = c.acceptance.ib_write_bw.min_gb_s
    gbps, width, rate = pair_ceiling(c)
    if pair is not None and pair > gbps / 8:
        rep.add(
            (*at, "ib_write_bw", "min_gb_s"),
            Rule.THRESHOLD_CEILING,
            f"{pair:g} GB/s per pair is above the ceiling of one {width} "
            f"{rate} link: {gbps / 8:g} GB/s ({gbps:g} Gb/s)",
        )
    bus = c.acceptance.nccl_tests.min_gb_s
    ceiling = nccl_ceiling(c)
    if bus is not None and ceiling is not None and bus > ceiling[0]:
        gbps, nics, model = ceiling
        rep.add(
            (*at, "nccl_tests", "min_gb_s"),
            Rule.THRESHOLD_CEILING,
            f"{bus:g} GB/s all-reduce bus bandwidth is above the ceiling of {model!r}'s "
            f"{nics} HCA(s) at {link_gbps(c.fabric):g} Gb/s: {gbps:g} GB/s per node",
        )


def nccl_ceiling(c: Cluster) -> tuple[float, int, str] | None:
    """(GB/s, HCAs, model) of the GPU model with the least InfiniBand bandwidth per node."""
    found = []
    for model in sorted({n.model for r in c.racks for n in r.nodes if n.role == Role.GPU}):
        server = c.hardware.servers.get(model)
        hcas = [nic for nic in server.nics if nic.device] if server else []
        if hcas:
            gbps = sum(min(n.speed_gbps, ib.link_gbps(*hca_link(c.fabric, n))) for n in hcas)
            found.append((gbps / 8, len(hcas), model))
    return min(found) if found else None


def pair_ceiling(c: Cluster) -> tuple[float, str, str]:
    """(Gb/s, width, rate) of the slowest link a GPU server's HCA is planned at: the
    ceiling of an `ib_write_bw` pair over it (the fabric's own link at most)."""
    links = {(c.fabric.width, c.fabric.rate)}
    for model in {n.model for r in c.racks for n in r.nodes if n.role == Role.GPU}:
        server = c.hardware.servers.get(model)
        links |= {hca_link(c.fabric, n) for n in server.nics if n.device} if server else set()
    return min((ib.link_gbps(w, r), w, r) for w, r in links)


_VERSION_KEY = re.compile(r"\{([a-z_]+)\}")


def services(c: Cluster, rep: Report) -> None:
    """Every role a node has runs named, defined services, and so does every switch OS; a
    `{key}` in a package name is a version every host of that role has (its model's baseline
    or the fleet's software), and none a switch has: our versions are the hosts'."""
    cat, at = c.services, ("services",)
    runs: list[tuple[str, str, tuple[str, ...]]] = [
        ("roles", role.value, names) for role, names in cat.roles.items()
    ]
    runs += [("switch_os", os.value, names) for os, names in cat.switch_os.items()]
    for key, kind, names in runs:
        for i, name in enumerate(names):
            if name not in cat.services:
                known = ", ".join(sorted(cat.services))
                rep.add(
                    (*at, key, kind, i),
                    Rule.UNKNOWN_REFERENCE,
                    f"service {name!r} is not defined (known: {known})",
                )
    for i, name in enumerate(cat.snapshot):
        if name not in cat.services:
            known = ", ".join(sorted(cat.services))
            rep.add(
                (*at, "snapshot", i),
                Rule.UNKNOWN_REFERENCE,
                f"snapshot: service {name!r} is not defined (known: {known})",
            )
    for os, names in cat.switch_os.items():
        for name in names:
            service = cat.services.get(name)
            for field_name in ("module_streams", "packages"):
                for i, text in enumerate(getattr(service, field_name, ())):
                    for key in _VERSION_KEY.findall(text):
                        rep.add(
                            (*at, "services", name, field_name, i),
                            Rule.UNKNOWN_VERSION_KEY,
                            f"{{{key}}}: {os.value} switches run {name!r}, and a switch has "
                            "no versions of the cluster's to put in",
                        )
    for name, defined in cat.services.items():
        for i, home in enumerate(defined.files):
            allowed = {"host", "role"}
            for key, text in (("source", home.source), ("dest", home.dest)):
                bad = set(re.findall(r"\{([^{}]*)\}", text)) - allowed
                if bad or text.count("{") != text.count("}"):
                    rep.add(
                        (*at, "services", name, "files", i, key),
                        Rule.INVALID_PLACEHOLDER,
                        f"{text!r}: only {{{'}, {'.join(sorted(allowed))}}} may stand in it",
                    )
                # {name} is the matched file's name, so only a pattern with `*` gives one.
                allowed = {"host", "role", "name"} if "*" in home.source else allowed
    used: dict[Role, set[str]] = defaultdict(set)
    for path, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        used[node.role].add(node.model)
        if node.role not in cat.roles:
            rep.add(
                (*path, "role"),
                Rule.MISSING_SERVICES,
                f"role {node.role.value!r} of {node.name!r} has no entry in services.yaml roles",
            )
    for role, models in sorted(used.items()):
        for name in cat.roles.get(role, ()):
            service = cat.services.get(name)
            if service is None:
                continue
            for field_name in ("module_streams", "packages"):
                for i, text in enumerate(getattr(service, field_name)):
                    for key in _VERSION_KEY.findall(text):
                        base = key.removesuffix("_major")
                        lacking = sorted(m for m in models if base not in _version_keys(c, m))
                        if lacking:
                            rep.add(
                                (*at, "services", name, field_name, i),
                                Rule.UNKNOWN_VERSION_KEY,
                                f"{{{key}}}: role {role.value!r} runs {name!r} on model(s) "
                                f"{', '.join(lacking)}, which have no {base!r} version",
                            )


def site_hosts(c: Cluster, rep: Report) -> None:
    """The site's time servers have an upstream to follow; the host that receives the drift
    audit's metrics runs node_exporter, which serves them; the change account is not the
    audit's; the InfiniBand user space (the
    `rdma` service, MLNX_OFED) runs only on hosts whose model has an HCA."""
    if c.site.services.ntp and not c.site.ntp_upstream:
        rep.add(
            ("site", "services", "ntp"),
            Rule.NTP_WITHOUT_UPSTREAM,
            f"{', '.join(c.site.services.ntp)} serve the site's time but site.yaml names no "
            "ntp_upstream to follow (e.g. ntp_upstream: [{host: ntp1.example.net}])",
        )
    if c.site.audit is not None and c.site.change.user == c.site.audit.user:
        rep.add(
            ("site", "change", "user"),
            Rule.CHANGE_ACCOUNT,
            f"the change plan's account {c.site.change.user!r} is the audit's: the audit's "
            "account is read-only by construction, so the playbook needs another",
        )
    roles = c.services.roles
    models = c.hardware.servers
    for path, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        runs = roles.get(node.role, ())
        audit = c.site.audit
        if audit is not None and node.name == audit.metrics.host and "node-exporter" not in runs:
            rep.add(
                ("site", "audit", "metrics", "host"),
                Rule.METRICS_HOST_WITHOUT_NODE_EXPORTER,
                f"{node.name!r} receives the audit's metrics, but its role "
                f"{node.role.value!r} runs no node-exporter to serve them",
            )
        model = models.get(node.model)
        if (
            model is not None
            and "rdma" in runs
            and not any(_is_ib(c, node.model, nic.name) for nic in model.nics)
        ):
            rep.add(
                (*path, "role"),
                Rule.RDMA_WITHOUT_HCA,
                f"role {node.role.value!r} runs rdma (MLNX_OFED) on {node.name!r}, whose model "
                f"{node.model!r} has no InfiniBand HCA",
            )


def _version_keys(c: Cluster, model: str) -> set[str]:
    baseline = c.firmware.baselines.get(model)
    keys = set(baseline.versions()) if baseline else set()
    return keys | set(c.firmware.software)


# By name, in the order they run (`references` before every check that looks names up).
CHECKS: Registry[Check] = Registry(
    "check",
    (
        (check.__name__, check)
        for check in (
            names,
            identities,
            references,
            baselines,
            subnets,
            addresses,
            routes,
            ipoib,
            ethernet,
            asns,
            roce,
            cages,
            provisioning,
            positions,
            ports,
            tiers,
            fabric,
            lids,
            services,
            site_hosts,
            gpudirect,
            slurm,
            thresholds,
            rails.check,
        )
    ),
)


def run(cluster: Cluster, source: Source) -> list[Diagnostic]:
    """Every diagnostic of every check. Checks after `references` run only when it found no
    dangling name: they look names up and would trip over the same one again."""
    report = Report(source)
    for check in CHECKS.values():
        before = len(report.diagnostics)
        check(cluster, report)
        if check is references and len(report.diagnostics) > before:
            break
    return sorted(report.folded())
