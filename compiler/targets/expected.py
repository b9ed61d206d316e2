"""`generated/expected/`: the audit's contract, one file per host and per configured Ethernet
switch (`switches/<name>.json`) plus the fabric, built from the plan as the records of
`contract/` (which document every field) and written through their `to_json`."""

from __future__ import annotations

from datetime import date
from functools import lru_cache
from typing import Any

from common import memo
from compiler.ethernet import MGMT_PORT
from compiler.model import Rollout, SwitchOs
from compiler.plan import SLURMCTLD, Cable, Plan, SlurmNode
from compiler.plan import Host as PlannedHost
from compiler.plan import IbPort as PlannedPort
from compiler.targets.shared import SPARE_REASON, frr_conf, gpu_hosts, nccl_settings
from contract import (
    Affinity,
    BgpPeer,
    EthernetLink,
    EthernetSwitch,
    ExpectedRoute,
    Fabric,
    GpuDirect,
    Gpus,
    Host,
    Route,
    Scheduled,
    Slurm,
    SlurmController,
)
from contract.probes.vtysh_running_config import canonical


def host_contract(
    h: PlannedHost,
    rollouts: tuple[Rollout, ...] = (),
    direct: GpuDirect | None = None,
    controls: SlurmController | None = None,
    ib_down: bool = False,
    ethernet: tuple[EthernetLink, ...] = (),
) -> Host:
    accept = {
        key: {"previous": previous, "until": date.fromisoformat(r.until)}
        for r in rollouts
        if h.ring in r.rings
        for key, previous in r.previous.items()
        if key in h.versions and key not in h.pinned
    }
    s = h.slurm
    # Validated whole, as fabric_contract: one call for the host, not one for each of its
    # tens of records (twice the time, with the same checks).
    return Host.model_validate(
        {
            "host": h.name,
            "role": h.role.value,
            "rack": h.rack,
            "u": h.u,
            "ring": h.ring,
            "model": h.model,
            "versions": h.versions,
            "pinned": h.pinned,
            "mask": h.mask,
            "interfaces": tuple(
                {
                    "name": i.name,
                    "network": i.network,
                    "address": i.cidr,
                    "mac": i.mac,
                    "mtu": i.mtu,
                }
                for i in h.interfaces
            ),
            "bmc": {"address": h.bmc.address, "mac": h.bmc.mac},
            "routes": _routes(h.routes),
            "ib_ports": tuple(
                {
                    "device": p.device,
                    "port": p.port,
                    "port_guid": p.guid,
                    "rate": p.rate_gbps,
                    "width": p.width,
                    # A spare cable's switch port is disabled: the host's end is down by
                    # design.
                    "state": "Down" if ib_down else "Active",
                }
                for p in h.ib_ports
            ),
            "ethernet": ethernet or None,
            "gpus": None if h.gpus is None else _gpus(tuple(h.gpus.items())),
            "gpudirect": direct,
            "slurm": None if s is None else _slurm(s),
            "slurm_controller": controls,
            "accept": dict(sorted(accept.items())) or None,
        }
    )


# The parts many hosts hold alike, each value validated once: the routes of a rack's hosts
# (258 lists for 4,096 servers), a model's GPUs, a model's Slurm node. A record passed in is
# taken as it is (pydantic does not validate an instance again), so every value is still
# checked, once: a third of the hosts' validation at 4,096 servers. Pure functions of hashable
# values; the caches are bounded, as a long-lived process compiles many sites.
@lru_cache(maxsize=4096)
def _routes(routes: tuple[Route, ...]) -> tuple[ExpectedRoute, ...]:
    return tuple(
        ExpectedRoute.model_validate({"dst": r.dst, "dev": r.dev, "gateway": r.gateway})
        for r in routes
    )


@lru_cache(maxsize=256)
def _gpus(items: tuple[tuple[str, Any], ...]) -> Gpus:
    return Gpus.model_validate(dict(items))


@lru_cache(maxsize=256)
def _slurm(s: SlurmNode) -> Slurm:
    return Slurm.model_validate(
        {
            "cpus": s.cpus,
            "sockets": s.sockets,
            "cores_per_socket": s.cores_per_socket,
            "threads_per_core": s.threads_per_core,
            "memory_mib": s.memory_mib,
            "real_memory_mib": s.real_memory_mib,
            "spare": s.spare,
        }
    )


@memo.by_value  # a diff's two sides share each host's record unless the host changed
def _host_text(
    h: PlannedHost,
    rollouts: tuple[Rollout, ...],
    direct: GpuDirect | None,
    controls: SlurmController | None,
    ib_down: bool,
    ethernet: tuple[EthernetLink, ...],
) -> str:
    return host_contract(h, rollouts, direct, controls, ib_down, ethernet).to_json()


FabricFacts = tuple[
    str,  # the fabric's rate
    str,  # its width
    tuple[tuple[str, str | None, str, str | None], ...],  # switches: name, GUID, model, firmware
    tuple[tuple[str, tuple[PlannedPort, ...]], ...],  # hosts' HCA ports
    tuple[Cable, ...],
    frozenset[str],  # the InfiniBand networks
]


def fabric_facts(plan: Plan) -> FabricFacts:
    """Everything the fabric record is made of, hashable (NamedTuples and text): a diff's
    two sides share the record's text unless one of them changed."""
    return (
        plan.fabric.rate,
        plan.fabric.width,
        tuple((s.name, s.guid, s.model, s.firmware) for s in plan.switches),
        tuple((h.name, h.ib_ports) for h in plan.hosts),
        plan.cables,
        plan.ib_networks,
    )


@memo.by_value
def _fabric_text(facts: FabricFacts) -> str:
    return fabric_contract(facts).to_json()


def fabric_contract(facts: FabricFacts) -> Fabric:
    rate, width, switches, hosts, cables, ib_networks = facts
    switch = {name: guid for name, guid, _, _ in switches}
    # A host end is its HCA's port ("mlx5_3/1"): on a server of eight, each rail's own GUID.
    hca = {(name, f"{p.device}/{p.port}"): p.guid for name, ports in hosts for p in ports}

    def end(device: str, port: str) -> dict[str, object]:
        guid = switch[device] if device in switch else hca[(device, port)]
        # The audit sees the CA's port number only.
        return {"name": device, "guid": guid, "port": int(port.rsplit("/", 1)[-1])}

    # Validated whole, as the audit reads it: one call for the tens of thousands of cables'
    # records, not one each (a third of the time, with the same checks).
    return Fabric.model_validate(
        {
            "rate": rate,
            "width": width,
            # InfiniBand switches with a firmware baseline: the audit reads theirs from the
            # fabric.
            "switches": tuple(
                {"name": name, "guid": guid, "model": model, "firmware": firmware}
                for name, guid, model, firmware in switches
                if guid and firmware
            ),
            "cables": tuple(
                {
                    "id": c.id,
                    "a": end(c.a.device, c.a.port),
                    "b": end(c.b.device, c.b.port),
                    "rate": c.rate,
                    "lifecycle": c.lifecycle,
                }
                for c in cables
                if c.network in ib_networks
            ),
        }
    )


def ethernet_links(plan: Plan) -> dict[str, tuple[EthernetLink, ...]]:
    """Each host's installed Ethernet cables from its NICs (the BMC's excluded: the host's
    lldpd never sees that port), by NIC name; the switch's port named as its model's OS
    names it in LLDP."""
    nics = {h.name: {i.name for i in h.interfaces} for h in plan.hosts}
    models = {s.name: plan.hardware.switches[s.model] for s in plan.switches}
    links: dict[str, list[EthernetLink]] = {}
    for c in plan.cables:
        if c.network in plan.ib_networks or not c.installed or c.a.device not in models:
            continue
        if c.b.port not in nics.get(c.b.device, ()):
            continue
        port = models[c.a.device].port_label(c.a.port)
        link = EthernetLink(iface=c.b.port, cable=c.id, switch=c.a.device, port=port)
        links.setdefault(c.b.device, []).append(link)
    return {h: tuple(sorted(ls, key=lambda e: e.iface)) for h, ls in links.items()}


# A switch's port as its OS names the interface: BGP's session key, as frr.conf.j2 and eos.py
# write the neighbours, and lldpcli's (not the model's LLDP `port_name`, which only relabels
# what LLDP says).
_PORT_NAME = {SwitchOs.CUMULUS: "swp{n}", SwitchOs.EOS: "Ethernet{n}"}
# A switch's management port, as its own OS names the interface (and its LLDP the port ID):
# the Cumulus Linux user guide's eth0, EOS's Management1.
_MGMT_IFNAME = {SwitchOs.CUMULUS: "eth0", SwitchOs.EOS: "Management1"}


def switch_links(plan: Plan) -> dict[str, tuple[EthernetLink, ...]]:
    """Each configured switch's installed cables to another (uplinks, management-port patches),
    from each end: its port as its OS names the interface (what `lldpcli` keys a neighbour
    by), the far end as the far switch's LLDP names its port. A host's cable is left to the
    host's end (`ethernet_links`), so one fault there is one finding."""
    models = {s.name: plan.hardware.switches[s.model] for s in plan.switches}
    os = {sw.name: sw.os for sw in plan.ethernet.switches}

    def here(device: str, port: str) -> str:
        """The port as its own OS names the interface (as `switch_contracts` keys BGP)."""
        return (
            _MGMT_IFNAME[os[device]] if port == MGMT_PORT else _PORT_NAME[os[device]].format(n=port)
        )

    def far(device: str, port: str) -> str:
        """The far port as its switch's LLDP announces it (a model's `port_name`)."""
        return here(device, port) if port == MGMT_PORT else models[device].port_label(port)

    links: dict[str, list[EthernetLink]] = {}
    for c in plan.cables:
        ends = (c.a, c.b)
        if c.network in plan.ib_networks or not c.installed:
            continue
        # Both ends configured here (so running the plan's lldpd): an InfiniBand switch's or
        # another unmanaged device's management port may announce anything, or nothing; a
        # management switch's own patch loops back to itself.
        if not all(e.device in os for e in ends) or c.a.device == c.b.device:
            continue
        for one, other in (ends, ends[::-1]):
            link = EthernetLink(
                iface=here(one.device, one.port),
                cable=c.id,
                switch=other.device,
                port=far(other.device, other.port),
            )
            links.setdefault(one.device, []).append(link)
    return {s: tuple(sorted(ls, key=lambda e: e.iface)) for s, ls in links.items()}


def gpudirect_contracts(plan: Plan) -> dict[str, GpuDirect]:
    """The `gpudirect` section of each host NCCL runs on."""
    hosts = gpu_hosts(plan)
    settings = {
        role: nccl_settings(plan, [h for h in hosts if h.role.value == role])
        for role in {h.role.value for h in hosts}
    }
    # A model's affinity, made once for all its servers (records are frozen: shared safely).
    affinities: dict[str, tuple[Affinity, ...]] = {}
    made_for: dict[tuple[str, str], GpuDirect] = {}
    out = {}
    for h in hosts:
        affinity = affinities.get(h.model)
        if affinity is None:
            model = plan.hardware.servers[h.model]
            made = (
                Affinity(gpu=g, hca=a.hca, path=a.path.value)
                for a in model.affinity
                for g in a.gpus
            )
            affinity = affinities[h.model] = tuple(sorted(made, key=lambda e: e.gpu))
        # One record per role and model, shared: a diff keys it once a side, not per host.
        key = (h.role.value, h.model)
        if key not in made_for:
            made_for[key] = GpuDirect(nccl=settings[h.role.value], affinity=affinity)
        out[h.name] = made_for[key]
    return out


def slurm_controller(plan: Plan) -> SlurmController:
    """What a Slurm controller's audit needs of the nodes it schedules: where each is, and
    which are spares (drained with the reason "spare" by design)."""
    return SlurmController(
        spare_reason=SPARE_REASON,
        nodes={
            h.name: Scheduled(rack=h.rack, u=h.u, spare=h.slurm.spare)
            for h in plan.hosts
            if h.slurm is not None
        },
    )


def render(plan: Plan) -> dict[str, str]:
    rollouts = plan.firmware.rollouts
    direct = gpudirect_contracts(plan)
    # sinfo answers the same on every controller host (a backup asks the primary): the
    # first by name reports the nodes held out, once.
    asks = next((h.name for h in plan.hosts if SLURMCTLD in h.services), None)
    controls = slurm_controller(plan)
    on_spare = {c.b.device for c in plan.cables if c.lifecycle == "spare"}
    ethernet = ethernet_links(plan)
    files = {
        f"expected/hosts/{h.name}.json": _host_text(
            h,
            rollouts,
            direct.get(h.name),
            controls if h.name == asks else None,
            h.name in on_spare,
            ethernet.get(h.name, ()),
        )
        for h in plan.hosts
    }
    files["expected/fabric.json"] = _fabric_text(fabric_facts(plan))
    files |= {
        f"expected/switches/{sw.name}.json": c.to_json()
        for sw, c in zip(plan.ethernet.switches, switch_contracts(plan), strict=True)
    }
    return files


def switch_contracts(plan: Plan) -> list[EthernetSwitch]:
    """Each configured Ethernet switch's record, in the plan's order: its management address
    and its BGP sessions, one per routed port in service (a spare cable's port stays down)."""
    asn = {sw.name: sw.asn for sw in plan.ethernet.switches}
    u = {sw.name: sw.u for sw in plan.switches}
    links = switch_links(plan)
    out = []
    for sw in plan.ethernet.switches:
        peers = tuple(
            BgpPeer(port=_PORT_NAME[sw.os].format(n=p.port), peer=p.peer, remote_as=asn.get(p.peer))
            for p in sw.routed
            if p.peer is not None and p.enabled and sw.asn is not None
        )
        out.append(
            EthernetSwitch(
                host=sw.name,
                role=sw.role.value,
                os=sw.os.value,
                rack=sw.rack,
                u=u[sw.name],
                model=sw.model,
                management=sw.management,
                asn=sw.asn,
                router_id=sw.router_id,
                bgp=peers,
                ethernet=links.get(sw.name),
                running_config=(
                    tuple(canonical(frr_conf(plan, sw)))
                    if sw.os == SwitchOs.CUMULUS and sw.asn is not None
                    else None
                ),
            )
        )
    return out
