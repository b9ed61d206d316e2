"""Stage 3, checks: rules that relate values across files, every problem reported at once.

Each rule is a function `(cluster, report)` that never stops at the first problem; a rule
may assume the model's per-field rules held, nothing more (a model name may be undefined).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from compiler.errors import Diagnostic, closest
from compiler.load import Path_, Source
from compiler.model import GPUDIRECT_PATHS, Baseline, Cluster, Medium, Role, SwitchRole
from compiler.plan import (
    HOST_LID_SLOTS,
    MAX_CORES,
    MAX_SPINES,
    Tiers,
    egress,
    ib_mtu,
    ip_str,
    link_gbps,
    links,
    network,
    nic_networks,
    node_address,
    rack_subnet,
    route_network,
    wires,
)
from contract import Route

# Baseline keys a model must have, by what the model carries.
SERVER_KEYS = ("bios", "bmc")
IB_KEYS = ("nic_firmware", "nic_psid")
GPU_KEYS = ("vbios", "gpu_driver", "cuda")
FLEET_KEYS = ("ofed", "kernel")


# Rules whose collision makes the two objects collide in everything derived from it: two
# racks with one id get the same subnets, addresses and spine ports; two nodes with one slot
# the same addresses and switch ports. Those later collisions are consequences, not causes.
CAUSES = ("duplicate-name", "duplicate-slot")


@dataclass
class Report:
    """Collects diagnostics; `unique` finds duplicates across the whole cluster. Each may name
    the objects it `involves` (paths), so consequences can be folded under their cause."""

    source: Source
    diagnostics: list[Diagnostic] = field(default_factory=list)
    involves: list[tuple[Path_, ...]] = field(default_factory=list)

    def add(self, path: Path_, rule: str, message: str, involves: tuple[Path_, ...] = ()) -> None:
        self.diagnostics.append(Diagnostic(self.source.where(path), rule, message))
        self.involves.append(involves)

    def unique(self, rule: str, what: str, items: Iterable[tuple[object, Path_]]) -> None:
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


Rule = Callable[[Cluster, Report], None]


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
        "duplicate-name",
        "rack",
        ((rack.name, ("racks", r, "name")) for r, rack in enumerate(c.racks)),
    )
    rep.unique(
        "duplicate-name",
        "rack id",
        ((rack.id, ("racks", r, "id")) for r, rack in enumerate(c.racks)),
    )
    hosts = [(c.racks[r].nodes[n].name, (*p, "name")) for p, r, n in _nodes(c)]
    hosts += [(c.racks[r].switches[s].name, (*p, "name")) for p, r, s in _switches(c)]
    rep.unique("duplicate-name", "host or switch name", hosts)
    models = [(m, ("hardware", "servers", m)) for m in c.hardware.servers]
    models += [(m, ("hardware", "switches", m)) for m in c.hardware.switches]
    rep.unique("duplicate-name", "model name", models)
    # Each SM host has one opensm.conf: a second entry would overwrite the first's.
    rep.unique(
        "duplicate-subnet-manager",
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
    for p, r, s in _switches(c):
        sw = c.racks[r].switches[s]
        serials.append((sw.serial, (*p, "serial")))
        macs.append((sw.mac, (*p, "mac")))
        if sw.guid:
            guids.append((sw.guid, (*p, "guid")))
    rep.unique("duplicate-serial", "serial", serials)
    rep.unique("duplicate-mac", "MAC", macs)
    rep.unique("duplicate-guid", "GUID", guids)


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
        rep.add(path, "unknown-reference", f"{what} {name!r} is not defined ({hint})")
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
                    (*p, "mac"), "missing-field", f"{node.name!r} has no MAC for its {port!r} port"
                )
        for port in node.mac:
            need(ports, port, f"port of model {node.model!r}", (*p, "mac", port))
        for net in node.addresses:
            need(ports.values(), net, f"network of {node.name!r}", (*p, "addresses", net))
        for net, link in node.links.items():
            need(ports.values(), net, f"network of {node.name!r}", (*p, "links", net))
            need(switches, link.switch, "switch", (*p, "links", net, "switch"))
        has_ib = any(_is_ib(c, node.model, nic) for nic in ports)
        if has_ib and not node.guid:
            rep.add(p, "missing-field", f"{node.name!r} has an InfiniBand HCA but no guid")
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
    nics = c.hardware.servers[model].nics
    return any(n.name == nic_name and n.device for n in nics)


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
            rep.add(("firmware", "software"), "missing-baseline", f"no fleet-wide {key!r} version")
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
                    "missing-baseline",
                    f"model {model!r} is in use but has no firmware baseline",
                )
            continue
        keys = _baseline_keys(c, model)
        missing = [k for k in keys if getattr(baseline, k) is None]
        if missing:
            rep.add(
                ("firmware", "baselines", model),
                "missing-baseline",
                f"baseline of {model!r} lacks {', '.join(missing)}",
            )
        # A key the model has no part for would make the audit expect a version it cannot read.
        for key in baseline.versions():
            if key not in keys:
                rep.add(
                    ("firmware", "baselines", model, key),
                    "unknown-reference",
                    f"model {model!r} has no {key!r} (its keys: {', '.join(keys)})",
                )
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        keys = (*_baseline_keys(c, node.model), *FLEET_KEYS)
        for key in node.pins:
            if key not in keys:
                rep.add(
                    (*p, "pins", key),
                    "unknown-reference",
                    f"{node.name!r} pins {key!r}, but model {node.model!r} has none "
                    f"(its keys: {', '.join(keys)})",
                )
    # A mask of a key the baseline does not set would hide nothing, silently.
    for model, baseline in c.firmware.baselines.items():
        for key in baseline.mask:
            if getattr(baseline, key, None) is None or key == "mask":
                rep.add(
                    ("firmware", "baselines", model, "mask", key),
                    "unknown-reference",
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
                rep.add((*at, "rings", j), "unknown-reference", f"no ring named {ring!r}")
        for key in rollout.previous:
            if key not in version_keys:
                rep.add(
                    (*at, "previous", key), "unknown-reference", f"{key!r} is not a version key"
                )
            for ring in rollout.rings:
                if (ring, key) in claimed:
                    rep.add(
                        (*at, "previous", key),
                        "duplicate-rollout",
                        f"{key!r} of ring {ring!r} is already rolling out",
                    )
                claimed.add((ring, key))
    defaults = [i for i, ring in enumerate(c.firmware.rings) if not ring.nodes]
    if defaults != [len(c.firmware.rings) - 1]:
        rep.add(
            ("firmware", "rings"),
            "rings",
            "exactly one ring, the last, must list no nodes: it takes every other node",
        )
    rep.unique(
        "duplicate-name",
        "ring",
        ((ring.name, ("firmware", "rings", i, "name")) for i, ring in enumerate(c.firmware.rings)),
    )
    rep.unique(
        "duplicate-ring-member",
        "node",
        (
            (n, ("firmware", "rings", i, "nodes", j))
            for i, ring in enumerate(c.firmware.rings)
            for j, n in enumerate(ring.nodes)
        ),
    )


def addresses(c: Cluster, rep: Report) -> None:
    used: list[tuple[object, Path_]] = []
    for p, r, n in _nodes(c):
        rack, node = c.racks[r], c.racks[r].nodes[n]
        if node.model not in c.hardware.servers:
            continue
        for _, net_name in nic_networks(c, node):
            net = c.networks.get(net_name)
            if net is None:
                continue
            at: Path_ = (*p, "addresses", net_name) if net_name in node.addresses else (*p, "slot")
            subnet = rack_subnet(net, rack)
            if subnet is None:
                rep.add(
                    ("racks", r, "id"),
                    "rack-subnet-too-small",
                    f"network {net_name!r} ({net.cidr}) has no subnet for rack id {rack.id}",
                )
                continue
            address = node_address(net, rack, node, net_name)
            if address is None:
                rep.add(
                    at,
                    "rack-subnet-too-small",
                    f"slot {node.slot} needs host part {net.host_base + node.slot}, beyond "
                    f"{net_name!r} subnet {subnet} of rack {rack.name!r}",
                )
                continue
            text = ip_str(address)
            used.append((text, at))
            block = network(net.cidr) if net.interface_prefix else subnet
            if not block.first <= address <= block.last:
                rep.add(
                    at,
                    "address-outside-subnet",
                    f"{text} is outside {net_name!r} subnet {block} of rack {rack.name!r}",
                )
                continue
            in_subnet = subnet.first <= address <= subnet.last
            host_part = address - subnet.first if in_subnet else None
            if host_part is not None and any(lo <= host_part <= hi for lo, hi in net.reserved):
                rep.add(
                    at,
                    "address-reserved",
                    f"{text} is in a reserved range of {net_name!r} {net.reserved}",
                )
    for p, r, s in _switches(c):
        rack, sw = c.racks[r], c.racks[r].switches[s]
        for net in c.networks.values():
            if net.switch_base is None or rack_subnet(net, rack) is None:
                continue
            subnet = rack_subnet(net, rack)
            assert subnet is not None
            part = net.switch_base + sw.u
            if not 0 < part < subnet.size - 1:
                rep.add(
                    (*p, "u"),
                    "rack-subnet-too-small",
                    f"switch at U{sw.u} needs host part {part}, beyond {subnet}",
                )
            else:
                used.append((ip_str(subnet.first + part), (*p, "u")))
    rep.unique("duplicate-ip", "address", used)


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
                    "subnet-overlap",
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
                    "subnet-overlap",
                    f"rack {rack_name!r} subnet {cidr} of {name!r} overlaps {o_cidr} "
                    f"({o_name!r}, rack {o_rack!r})",
                    (("racks", r, "id"), ("racks", o_r, "id")),
                )
        if widest is None or -last > -widest[1]:
            widest = block


def positions(c: Cluster, rep: Report) -> None:
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
                    "rack-position",
                    f"{name!r} at U{u}-U{top} does not fit a {rack.height_u}U rack",
                )
            clash = sorted({taken[x] for x in range(u, top + 1) if x in taken})
            if clash:
                rep.add(
                    (*path, "u"),
                    "rack-position",
                    f"{name!r} at U{u}-U{top} overlaps {', '.join(map(repr, clash))} "
                    f"in rack {rack.name!r}",
                )
            taken.update({x: name for x in range(u, top + 1)})
        rep.unique(
            "duplicate-slot",
            f"rack {rack.name!r}: slot",
            ((node.slot, ("racks", r, "nodes", n, "slot")) for n, node in enumerate(rack.nodes)),
        )
        roles = [
            (sw.role.value, ("racks", r, "switches", s, "role"))
            for s, sw in enumerate(rack.switches)
            if sw.role not in (SwitchRole.SPINE, SwitchRole.CORE)
        ]
        rep.unique("duplicate-switch-role", f"switch role in rack {rack.name!r}", roles)


def ports(c: Cluster, rep: Report) -> None:
    switch = {sw.name: sw for rack in c.racks for sw in rack.switches}
    all_wires = [w for w in wires(c) if w.switch in switch]
    overrides = {(o.device, o.port): o for o in c.fabric.cables}
    used: list[tuple[object, Path_]] = []
    for w in all_wires:
        o = overrides.get((w.switch, w.switch_port))
        port = o.use_port if o and o.use_port else w.switch_port
        model = c.hardware.switches.get(switch[w.switch].model)
        if model and not 1 <= port <= model.ports:
            rep.add(
                w.path,
                "port-out-of-range",
                f"{w.device!r} needs port {port} of {w.switch!r}, which has {model.ports} ports",
            )
        used.append(((w.switch, port), w.path))
        if switch[w.switch].role == SwitchRole.SPINE and w.device not in switch:
            # Hosts belong on leaves (ftree); and a cable ID names the one switch of its role
            # in a rack (R01-IB05), which a rack of spines does not have.
            rep.add(
                w.path,
                "link-to-spine",
                f"{w.device!r} is cabled to spine {w.switch!r}; hosts connect to a leaf",
            )
        if w.device in switch:  # a link up a tier: the upper end is a port too
            used.append(((w.device, int(w.device_port)), w.path))
            spine = c.hardware.switches.get(switch[w.device].model)
            if spine and not 1 <= int(w.device_port) <= spine.ports:
                rep.add(
                    w.path,
                    "port-out-of-range",
                    f"{w.switch!r} needs port {w.device_port} of {w.device!r}, "
                    f"which has {spine.ports} ports",
                )
    rep.unique("port-reused", "switch port", used)
    for i, o in enumerate(c.fabric.cables):
        if not any((w.switch, w.switch_port) == (o.device, o.port) for w in all_wires):
            rep.add(
                ("fabric", "cables", i),
                "unknown-reference",
                f"no planned cable uses port {o.port} of {o.device!r}",
            )


def fabric(c: Cluster, rep: Report) -> None:
    """A server cabled once, and every leaf: equal paths to every spine, within oversubscription."""
    ib_nets = {name for name, net in c.networks.items() if net.medium == Medium.INFINIBAND}
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
                "lid-range",
                f"slot {node.slot} of {node.name!r} has no static LID "
                f"(slots 1-{HOST_LID_SLOTS - 1})",
            )
        for _, net in nic_networks(c, node):
            if net in ib_nets and (node.name, net) not in cabled:
                rep.add(
                    p,
                    "server-not-connected",
                    f"{node.name!r} has an HCA but no leaf in rack {rack.name!r} "
                    "and no links: entry",
                )
    # A cable planned but not installed is no path: a switch's ECMP set is what is cabled.
    missing = {(o.device, o.port) for o in c.fabric.cables if not o.installed}
    tiers = Tiers.of(c)
    role = {sw.name: sw.role for rack in c.racks for sw in rack.switches}
    up: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # switch -> upper -> n
    down: dict[str, float] = defaultdict(float)  # switch -> Gb/s to the tier below
    rate = link_gbps(c.fabric)
    for w in all_wires:
        if (w.switch, w.switch_port) in missing:
            continue
        if role.get(w.device) in (SwitchRole.SPINE, SwitchRole.CORE):
            up[w.switch][w.device] += 1
            down[w.device] += rate
        else:
            down[w.switch] += speed.get((w.device, w.device_port), 0)
    for p, r, s in _switches(c):
        rack, sw = c.racks[r], c.racks[r].switches[s]
        if sw.role == SwitchRole.LEAF:
            pod = tiers.pod_of(rack.id)[0]
            upper, below, above = set(tiers.spines.get(pod, ())), "servers", "spines"
        elif sw.role == SwitchRole.SPINE and c.fabric.racks_per_pod is not None and sw.pod:
            plane = tiers.spines[sw.pod].index(sw.name) + 1
            upper, below, above = set(tiers.cores.get(plane, ())), "leaves", "cores"
        else:
            continue
        links = up[sw.name]
        if len(set(links.values())) > 1 or set(links) != upper:
            rep.add(
                p,
                "unequal-uplinks",
                f"{sw.role.value} {sw.name!r} links to {above} unevenly: "
                f"{dict(sorted(links.items()))}",
            )
        up_bw, down_bw = sum(links.values()) * rate, down[sw.name]
        if up_bw == 0 or down_bw / up_bw > c.fabric.max_oversubscription:
            rep.add(
                p,
                "oversubscription",
                f"{sw.role.value} {sw.name!r}: {down_bw:g} Gb/s to {below} vs {up_bw:g} Gb/s "
                f"to {above} exceeds {c.fabric.max_oversubscription:g}:1",
            )


def tiers(c: Cluster, rep: Report) -> None:
    """A fabric is two-tier (no pods, no cores) or three-tier (racks_per_pod and core_port,
    every spine in a pod, every core in a plane); every leaf's pod has spines, every spine's
    plane has cores, and each tier fits its static LID range."""
    three = c.fabric.racks_per_pod is not None
    if three and c.fabric.core_port is None:
        rep.add(
            ("fabric", "racks_per_pod"),
            "missing-field",
            "a three-tier fabric (racks_per_pod) needs core_port: the first spine port to the core",
        )
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
                    "invalid-value",
                    f"{sw.name!r}: {key} is for the {owner.value}s of a three-tier fabric",
                )
        if sw.role == SwitchRole.CORE and not three:
            rep.add(
                (*p, "role"),
                "core-without-pods",
                f"core {sw.name!r}: a core tier joins pods; set fabric racks_per_pod",
            )
        elif sw.role == SwitchRole.CORE and sw.plane is None:
            rep.add(p, "missing-field", f"core {sw.name!r} needs plane: (the spines it joins)")
        elif sw.role == SwitchRole.SPINE and three and sw.pod is None:
            rep.add(p, "missing-field", f"spine {sw.name!r} needs pod: in a three-tier fabric")
        elif sw.role == SwitchRole.SPINE and three and sw.pod is not None:
            plane = t.spines[sw.pod].index(sw.name) + 1
            if plane not in t.cores:
                rep.add(
                    p,
                    "plane-without-cores",
                    f"spine {sw.name!r} is spine {plane} of pod {sw.pod}; "
                    f"no core has plane {plane}",
                )
        elif (sw.pod is not None or sw.plane is not None) and not (three and sw.role in counts):
            rep.add(
                p, "unknown-key", f"{sw.name!r}: pod and plane are for three-tier spines and cores"
            )
        elif sw.role == SwitchRole.LEAF and three:
            pod = t.pod_of(rack.id)[0]
            if pod not in t.spines:
                rep.add(
                    ("racks", r, "id"),
                    "pod-without-spines",
                    f"rack id {rack.id} is in pod {pod} (racks_per_pod "
                    f"{c.fabric.racks_per_pod}), which has no spines",
                )
    for role, most in ((SwitchRole.SPINE, MAX_SPINES), (SwitchRole.CORE, MAX_CORES)):
        if counts[role] > most:
            rep.add(
                ("racks",),
                "lid-range",
                f"{counts[role]} {role.value} switches; static LIDs hold {most}",
            )


def routes(c: Cluster, rep: Report) -> None:
    """Every address of a network a host has an interface on goes out of that interface, by
    longest-prefix match over the host's routes, connected ones included: otherwise traffic
    between racks takes another NIC, and strict rp_filter drops the replies."""
    reported: set[tuple[str, str, str]] = set()  # one report per network and stray route
    for _, r, n in _nodes(c):
        rack, node = c.racks[r], c.racks[r].nodes[n]
        planned = links(c, rack, node)
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
                    "route-leaves-network",
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
                "ipoib-mtu",
                f"IPoIB MTU {net.mtu} is no IB MTU less its 4-byte header (datagram: 252, 508, "
                f"1020, 2044 or 4092; connected: 4093-65520)",
            )
    for i, part in enumerate(c.fabric.partitions):
        if part.ipoib:
            rep.add(
                ("fabric", "partitions", i, "ipoib"),
                "ipoib-partition",
                f"no host has an IPoIB interface on partition {part.name!r} (IPoIB runs on "
                "the Default partition): drop the flag",
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
                "cage-layout",
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
                "unknown-reference",
                f"network {name!r} is not defined (known: {known})",
            )
        elif net.medium != Medium.ETHERNET:
            rep.add((*at, "dhcp_networks", i), "invalid-value", f"DHCP cannot serve {name!r}")
    if prov.pxe_network not in prov.dhcp_networks:
        rep.add(
            (*at, "pxe_network"),
            "invalid-value",
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
                "invalid-value",
                f"{host!r} has no {prov.pxe_network!r} address, where installing hosts reach it",
            )
    for model in sorted({node.model for node in nodes.values()}):
        if len(c.hardware.servers[model].os_disks) < 2:
            rep.add(
                ("hardware", "servers", model, "os_disks"),
                "invalid-value",
                f"{model!r} needs two OS disks for its RAID1",
            )
    for mode in sorted({c.hardware.servers[node.model].boot for node in nodes.values()}):
        if getattr(prov.boot_files, mode.value) is None:
            rep.add(
                (*at, "boot_files"),
                "missing-field",
                f"a server model boots {mode.value}, but boot_files names no {mode.value} loader",
            )
    for p, r, n in _nodes(c):
        node = c.racks[r].nodes[n]
        if node.os_disks and len(node.os_disks) < 2:
            rep.add(
                (*p, "os_disks"), "invalid-value", f"{node.name!r} needs two OS disks for its RAID1"
            )
    # The loaders fetch the kernel and initrd as http://<provisioning host><path>.
    for key in ("kernel", "initrd"):
        path = getattr(prov.boot_files, key)
        if not path.startswith("/") or "/../" in f"{path}/":
            rep.add(
                (*at, "boot_files", key),
                "invalid-value",
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
                "unknown-reference",
                f"bootstrap names the upstream of repo {name!r}, which repos lacks ({hint})",
            )
    source = prov.root_password_hash
    if source.env is None and source.file is None:
        rep.add(
            (*at, "root_password_hash"),
            "missing-field",
            "root_password_hash needs an env variable or a file to read the hash from",
        )
    if source.file is not None and not source.file.startswith("/"):
        rep.add(
            (*at, "root_password_hash", "file"),
            "invalid-value",
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
                rep.add((*at, "hca"), "gpu-affinity", f"{name!r} has no HCA {entry.hca!r} "
                        f"(its HCAs: {known})")  # fmt: skip
            for gpu in entry.gpus:
                if gpu >= count or gpu in seen:
                    why = "listed twice" if gpu in seen else f"{name!r} has {count} GPUs"
                    rep.add((*at, "gpus"), "gpu-affinity", f"GPU {gpu}: {why}")
                seen.add(gpu)
            if entry.path not in GPUDIRECT_PATHS:
                rep.add(
                    (*at, "path"),
                    "gpu-affinity",
                    f"GPUs {list(entry.gpus)} reach {entry.hca} over {entry.path.value}: "
                    "GPUDirect RDMA needs PIX or PXB (NCCL_NET_GDR_LEVEL), never farther",
                )


def thresholds(c: Cluster, rep: Report) -> None:
    """A pass mark the physical plan can reach: a pair's below one link's rate, an NCCL
    step's below the NICs of its slowest node (bus bandwidth leaves a node through them)."""
    at = ("acceptance",)
    pair = c.acceptance.ib_write_bw.min_gb_s
    link = link_gbps(c.fabric) / 8
    if pair is not None and pair > link:
        rep.add(
            (*at, "ib_write_bw", "min_gb_s"),
            "threshold-ceiling",
            f"{pair:g} GB/s per pair is above the ceiling of one {c.fabric.width} "
            f"{c.fabric.rate} link: {link:g} GB/s ({link_gbps(c.fabric):g} Gb/s)",
        )
    bus = c.acceptance.nccl_tests.min_gb_s
    ceiling = nccl_ceiling(c)
    if bus is not None and ceiling is not None and bus > ceiling[0]:
        gbps, nics, model = ceiling
        rep.add(
            (*at, "nccl_tests", "min_gb_s"),
            "threshold-ceiling",
            f"{bus:g} GB/s all-reduce bus bandwidth is above the ceiling of {model!r}'s "
            f"{nics} HCA(s) at {link_gbps(c.fabric):g} Gb/s: {gbps:g} GB/s per node",
        )


def nccl_ceiling(c: Cluster) -> tuple[float, int, str] | None:
    """(GB/s, HCAs, model) of the GPU model with the least InfiniBand bandwidth per node."""
    link = link_gbps(c.fabric)
    found = []
    for model in sorted({n.model for r in c.racks for n in r.nodes if n.role == Role.GPU}):
        server = c.hardware.servers.get(model)
        hcas = [nic for nic in server.nics if nic.device] if server else []
        if hcas:
            found.append((sum(min(n.speed_gbps, link) for n in hcas) / 8, len(hcas), model))
    return min(found) if found else None


_VERSION_KEY = re.compile(r"\{([a-z_]+)\}")


def services(c: Cluster, rep: Report) -> None:
    """Every role a node has runs named, defined services; a `{key}` in a package name is a
    version every host of that role has (its model's baseline or the fleet's software)."""
    cat, at = c.services, ("services",)
    for role, names in cat.roles.items():
        for i, name in enumerate(names):
            if name not in cat.services:
                known = ", ".join(sorted(cat.services))
                rep.add(
                    (*at, "roles", role.value, i),
                    "unknown-reference",
                    f"service {name!r} is not defined (known: {known})",
                )
    for name, defined in cat.services.items():
        for i, home in enumerate(defined.files):
            allowed = {"host", "role"}
            for key, text in (("source", home.source), ("dest", home.dest)):
                bad = set(re.findall(r"\{([^{}]*)\}", text)) - allowed
                if bad or text.count("{") != text.count("}"):
                    rep.add(
                        (*at, "services", name, "files", i, key),
                        "invalid-placeholder",
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
                "missing-services",
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
                                "unknown-version-key",
                                f"{{{key}}}: role {role.value!r} runs {name!r} on model(s) "
                                f"{', '.join(lacking)}, which have no {base!r} version",
                            )


def _version_keys(c: Cluster, model: str) -> set[str]:
    baseline = c.firmware.baselines.get(model)
    keys = set(baseline.versions()) if baseline else set()
    return keys | set(c.firmware.software)


RULES: tuple[Rule, ...] = (
    names,
    identities,
    references,
    baselines,
    subnets,
    addresses,
    routes,
    ipoib,
    cages,
    provisioning,
    positions,
    ports,
    tiers,
    fabric,
    services,
    gpudirect,
    thresholds,
)


def run(cluster: Cluster, source: Source) -> list[Diagnostic]:
    """Every diagnostic of every rule. Rules after `references` run only when it found no
    dangling name: they look names up and would trip over the same one again."""
    report = Report(source)
    for rule in RULES:
        before = len(report.diagnostics)
        rule(cluster, report)
        if rule is references and len(report.diagnostics) > before:
            break
    return sorted(report.folded())
