"""`generated/expected/`: the audit's contract, one JSON file per host plus the fabric.

The audit reads these and nothing else; every fact in them comes from the plan.

Per host (`expected/hosts/<host>.json`), schema 1:
  host, role, rack, u (the lowest unit it occupies), ring, model;
  versions: {bios, bmc, nic_firmware, nic_psid, vbios, gpu_driver, cuda, ofed, kernel}
            (only the keys that apply to the model), and pinned: {key: reason};
  mask: {version key: parts}: keys the baseline has compared by their first `parts`
            dot-separated parts only (what the probe prints); every other key in full;
  interfaces: [{name, network, address: "a.b.c.d/len", mac, mtu}] (mac null on IPoIB);
  bmc: {address, mac};
  routes: [{dst, dev, gateway?}] as `ip -j route show` reports them, normalised to those
          three fields ("default" for the default route, connected routes without gateway);
  ib_ports: [{device, port, port_guid, rate, width, state}];
  gpus: {count, model, nvlinks_per_gpu, max_corrected_ecc} or null;
  gpudirect (hosts with GPUs and an HCA): {nccl: {variable: value} as /etc/nccl.conf sets
          them, affinity: [{gpu, hca, path}]: each GPU's nearest HCA and the farthest PCIe
          path type (`nvidia-smi topo -m`) the model allows between them};
  slurm (hosts that run slurmd): {cpus, sockets, cores_per_socket, threads_per_core,
          memory_mib (installed), real_memory_mib (slurm.conf's RealMemory), spare};
  slurm_controller (the first host by name that runs slurmctld): {spare_reason, nodes:
          {node: {rack, u, spare}}}: the nodes it schedules, where they are, the spares;
  accept (only on hosts a rollout of cluster/firmware.yaml covers): {version key:
          {previous, until: "YYYY-MM-DD"}}: the version the rollout replaces, which the audit
          still accepts for that key up to and including `until` (by the audit's clock);
          pinned keys are held off the baseline and take no rollout.
Fabric (`expected/fabric.json`): every planned InfiniBand cable with its ID, both ends as
node name, node GUID and port, rate, width and lifecycle ("installed", "planned", or "spare":
cabled, its port down by design); every
InfiniBand switch with its node GUID, model and baseline firmware ("switches").
"""

from __future__ import annotations

from typing import Any

from compiler.model import Rollout
from compiler.plan import SLURMCTLD, Host, Plan
from compiler.targets.render import to_json
from compiler.targets.shared import SPARE_REASON, gpu_hosts, nccl_settings

SCHEMA = 1


def host_contract(
    h: Host,
    rollouts: tuple[Rollout, ...] = (),
    direct: dict[str, Any] | None = None,
    controls: dict[str, Any] | None = None,
    ib_down: bool = False,
) -> dict[str, Any]:
    contract = {
        "schema": SCHEMA,
        "host": h.name,
        "role": h.role.value,
        "rack": h.rack,
        "u": h.u,  # where the technician finds it, for the drift report
        "ring": h.ring,
        "model": h.model,
        "versions": h.versions,
        "pinned": h.pinned,
        "mask": h.mask,
        "interfaces": [
            {"name": i.name, "network": i.network, "address": i.cidr, "mac": i.mac, "mtu": i.mtu}
            for i in h.interfaces
        ],
        "bmc": {"address": h.bmc.address, "mac": h.bmc.mac},
        "routes": [r.as_json() for r in h.routes],
        "ib_ports": [
            {
                "device": p.device,
                "port": p.port,
                "port_guid": p.guid,
                "rate": p.rate_gbps,
                "width": p.width,
                # A spare cable's switch port is disabled: the host's end is down by design.
                "state": "Down" if ib_down else "Active",
            }
            for p in h.ib_ports
        ],
        "gpus": h.gpus,
    }
    if direct is not None:
        contract["gpudirect"] = direct
    if h.slurm is not None:
        s = h.slurm
        contract["slurm"] = {
            "cpus": s.cpus,
            "sockets": s.sockets,
            "cores_per_socket": s.cores_per_socket,
            "threads_per_core": s.threads_per_core,
            "memory_mib": s.memory_mib,
            "real_memory_mib": s.real_memory_mib,
            "spare": s.spare,
        }
    if controls is not None:
        contract["slurm_controller"] = controls
    accept = {
        key: {"previous": previous, "until": r.until}
        for r in rollouts
        if h.ring in r.rings
        for key, previous in r.previous.items()
        if key in h.versions and key not in h.pinned
    }
    if accept:
        contract["accept"] = dict(sorted(accept.items()))
    return contract


def fabric_contract(plan: Plan) -> dict[str, Any]:
    guid = {s.name: s.guid for s in plan.switches}
    guid |= {h.name: p.guid for h in plan.hosts for p in h.ib_ports}

    def end(device: str, port: str) -> dict[str, Any]:
        # A host end is "mlx5_0/1": the audit sees the CA's port number only.
        return {"name": device, "guid": guid[device], "port": int(port.rsplit("/", 1)[-1])}

    return {
        "schema": SCHEMA,
        "rate": plan.fabric.rate,
        "width": plan.fabric.width,
        # InfiniBand switches with a firmware baseline: the audit reads theirs from the fabric.
        "switches": [
            {"name": s.name, "guid": s.guid, "model": s.model, "firmware": s.firmware}
            for s in plan.switches
            if s.guid and s.firmware
        ],
        "cables": [
            {
                "id": c.id,
                "a": end(c.a.device, c.a.port),
                "b": end(c.b.device, c.b.port),
                "rate": c.rate,
                "lifecycle": c.lifecycle,
            }
            for c in plan.cables
            if c.network in plan.ib_networks
        ],
    }


def gpudirect_contracts(plan: Plan) -> dict[str, dict[str, Any]]:
    """The `gpudirect` section of each host NCCL runs on."""
    hosts = gpu_hosts(plan)
    settings = {
        role: nccl_settings(plan, [h for h in hosts if h.role.value == role])
        for role in {h.role.value for h in hosts}
    }
    out = {}
    for h in hosts:
        model = plan.hardware.servers[h.model]
        affinity = sorted(
            (
                {"gpu": g, "hca": a.hca, "path": a.path.value}
                for a in model.affinity
                for g in a.gpus
            ),
            key=lambda e: e["gpu"],
        )
        out[h.name] = {"nccl": settings[h.role.value], "affinity": affinity}
    return out


def slurm_controller(plan: Plan) -> dict[str, Any]:
    """What a Slurm controller's audit needs of the nodes it schedules: where each is, and
    which are spares (drained with the reason "spare" by design)."""
    return {
        "spare_reason": SPARE_REASON,
        "nodes": {
            h.name: {"rack": h.rack, "u": h.u, "spare": h.slurm.spare}
            for h in plan.hosts
            if h.slurm is not None
        },
    }


def render(plan: Plan) -> dict[str, str]:
    rollouts = plan.firmware.rollouts
    direct = gpudirect_contracts(plan)
    # sinfo answers the same on every controller host (a backup asks the primary): the
    # first by name reports the nodes held out, once.
    asks = next((h.name for h in plan.hosts if SLURMCTLD in h.services), None)
    controls = slurm_controller(plan)
    on_spare = {c.b.device for c in plan.cables if c.lifecycle == "spare"}
    files = {
        f"expected/hosts/{h.name}.json": to_json(
            host_contract(
                h,
                rollouts,
                direct.get(h.name),
                controls if h.name == asks else None,
                h.name in on_spare,
            )
        )
        for h in plan.hosts
    }
    files["expected/fabric.json"] = to_json(fabric_contract(plan))
    return files
