"""`generated/expected/hosts/<host>.json`: what one machine must look like.

The audit reads these and nothing else of the host; every fact in them comes from the plan.
Each field says what it holds; the file is the record's `to_json()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from contract.deploy import Deploy
from contract.record import Absent, File, Record, absent

VERSION_KEYS = (
    "bios",
    "bmc",
    "nic_firmware",
    "nic_psid",
    "vbios",
    "gpu_driver",
    "cuda",
    "ofed",
    "kernel",
)


class Interface(Record):
    name: str = Field(description="The interface's name on the host (eno1, ib0).")
    network: str = Field(description="The network of cluster/networks.yaml it is on.")
    address: str = Field(description='Its address with prefix length: "a.b.c.d/len".')
    mac: str | None = Field(description="Its MAC, lower case; null on IPoIB (no fixed one).")
    mtu: int


class Bmc(Record):
    address: str
    mac: str | None = Field(description="null where the rack file gives none.")


class ExpectedRoute(Record):
    """A route as `ip -j route show` reports it, normalised to these three fields
    (`contract.routes.normal_routes`)."""

    dst: str = Field(description='The prefix, or "default" for the default route.')
    dev: str
    gateway: str | Absent = absent("Absent on connected routes.")


class IbPort(Record):
    device: str = Field(description="The HCA (mlx5_0).")
    port: int
    port_guid: str
    rate: int = Field(description="Gb/s, as ibstat's Rate.")
    width: str = Field(description='"4x"')
    state: Literal["Active", "Down"] = Field(
        description="Down by design on a host cabled to a spare (its switch port disabled)."
    )


class EthernetLink(Record):
    """One Ethernet port as cabled: what LLDP must see on it (`lldpcli show neighbors`), read
    from this end (a host's NIC, or a switch's port to another switch)."""

    iface: str = Field(
        description="The port's name here: a host's NIC (eno1), a Cumulus switch's swp49 or eth0."
    )
    cable: str = Field(description="The cable's ID, as its label prints it.")
    switch: str = Field(description="The switch at its far end, as its LLDP system name.")
    port: str = Field(
        description="The switch's port as LLDP reports it (its ifname): the plan's port number "
        "in the switch model's port_name format (swp5 on Cumulus)."
    )


class Gpus(Record):
    count: int
    model: str = Field(description="As nvidia-smi names it.")
    nvlinks_per_gpu: int = Field(description="NVLinks each GPU must have active.")
    max_corrected_ecc: int = Field(description="Corrected ECC errors a GPU may report.")


class Affinity(Record):
    gpu: int
    hca: str = Field(description="The GPU's nearest HCA.")
    path: str = Field(
        description="The farthest PCIe path type (`nvidia-smi topo -m`) the model allows."
    )


class GpuDirect(Record):
    nccl: Mapping[str, str] = Field(description="Variable -> value, as /etc/nccl.conf sets them.")
    affinity: tuple[Affinity, ...] = Field(description="By GPU index.")


class Slurm(Record):
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mib: int = Field(description="Installed memory.")
    real_memory_mib: int = Field(description="slurm.conf's RealMemory.")
    spare: bool = Field(description="Drained by design, with the controller's spare_reason.")


class Scheduled(Record):
    """Where a node the controller schedules is, and whether it is a spare."""

    rack: str
    u: int
    spare: bool


class SlurmController(Record):
    spare_reason: str = Field(description="The reason spares are drained with.")
    nodes: Mapping[str, Scheduled] = Field(description="Every node it schedules, by name.")


class Accept(Record):
    """A rollout of cluster/firmware.yaml: the version it replaces, which the audit still
    accepts for its key up to and including `until` (by the audit's clock)."""

    previous: str
    until: date


class Host(File):
    """One host's expected state."""

    host: str
    role: str
    rack: str
    u: int = Field(description="The lowest rack unit it occupies: where a technician finds it.")
    ring: str = Field(description="Its rollout ring.")
    model: str = Field(description="Its server model in cluster/hardware/.")
    versions: Mapping[str, str] = Field(
        description=f"Version key ({', '.join(VERSION_KEYS)}) -> baseline; only the keys that "
        "apply to the model."
    )
    pinned: Mapping[str, str] = Field(description="Version key -> why it is held off the baseline.")
    mask: Mapping[str, int] = Field(
        description="Version key -> the leading dot-separated parts it is compared by (what the "
        "probe prints); every other key is compared in full."
    )
    interfaces: tuple[Interface, ...]
    bmc: Bmc
    routes: tuple[ExpectedRoute, ...] = Field(
        description="The default route first, then by prefix."
    )
    ib_ports: tuple[IbPort, ...]
    ethernet: tuple[EthernetLink, ...] | Absent = absent(
        "Each cabled Ethernet NIC of the host (not its BMC's, which LLDP on the "
        "host never sees), by name; absent on a host with none.",
    )
    gpus: Gpus | None = Field(description="null on a host without GPUs.")
    gpudirect: GpuDirect | Absent = absent(
        "On hosts with GPUs and an HCA: NCCL's settings and each GPU's HCA.",
    )
    slurm: Slurm | Absent = absent("On hosts that run slurmd.")
    slurm_controller: SlurmController | Absent = absent(
        "On the first host by name that runs slurmctld: what sinfo answers for.",
    )
    accept: Mapping[str, Accept] | Absent = absent(
        "Only on hosts a rollout covers: version key -> the window; pinned keys take no rollout.",
    )
    # Not in this file: generated/deploy/<host>.json, which the reader puts beside it.
    deploy: SkipJsonSchema[Deploy | None] = Field(default=None, exclude=True)

    @property
    def management(self) -> Interface | None:
        """The interface the default route leaves by: how the compiler defines the management
        network (whatever the site names it), so the one the audit reaches the host on."""
        dev = next((r.dev for r in self.routes if r.dst == "default"), None)
        return next((i for i in self.interfaces if i.name == dev), None)

    def with_deploy(self, deploy: Deploy | None) -> Host:
        return self.model_copy(update={"deploy": deploy})
