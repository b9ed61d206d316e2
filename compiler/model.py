"""Stage 2, model: the shape and type of every field of `cluster/`, strict and frozen.

Field names are the YAML keys, so a validation error's `loc` is a path `Source.where` knows.
Only single-value rules live here (a MAC's format, a CIDR being a network address); rules that
relate values to each other are checks (`compiler/checks.py`).
"""

# No `from __future__ import annotations` here: with annotations as text, pydantic evaluates
# each field's type from its string as the class is made, which made building these models
# about a third slower, on every cold start.
import re
from datetime import date
from functools import cache
from types import UnionType
from typing import Annotated, Any, Literal, Protocol, Union, get_args, get_origin

import netaddr
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
)

from common import memo
from common.errors import closest, quote
from compiler.kinds import (
    GPUDIRECT_PATHS,
    BootMode,
    FileCheck,
    FirewallPolicy,
    LabelStock,
    Medium,
    PciPath,
    Role,
    SwitchOs,
    SwitchRole,
)
from contract import Severity  # an alert's, as a finding's: the one scale


def _empty() -> Any:
    """An empty mapping as a field's default, made by a factory: pydantic deep-copies a `{}`
    default for every record that leaves the key out (a node's four: 16,000 calls of
    copy.deepcopy at 4,096 nodes, half of validating them)."""
    return Field(default_factory=dict)


class Strict_(BaseModel):
    """Base of every model: unknown keys are errors, no coercion, immutable."""

    # defer_build: a model's validator is built when first used, not as its class is made;
    # `validate` builds the Cluster's, nested models within it, once, instead of every model
    # on import (a quarter of a cold compile went to building validators twice over).
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)


def _pattern(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{quote(value)} is not {what}")
        return value

    check.__doc__ = what  # the field reference (compiler/reference.py) quotes it
    return AfterValidator(check)


@cache
def _zones() -> frozenset[str]:
    """The zone names of the IANA database as the `tzdata` package ships it (its `zones`
    list, links such as UTC included): the same answer on every machine, where the host's
    /usr/share/zoneinfo differs from one distribution and release to the next."""
    from importlib import resources

    return frozenset((resources.files("tzdata") / "zones").read_text().split())


def _timezone(value: str) -> str:
    """an IANA time zone (Etc/UTC, Europe/Berlin)"""
    if value not in _zones():
        from importlib import import_module

        release = getattr(import_module("tzdata"), "IANA_VERSION", "?")
        near = closest(value, _zones()) if value.isprintable() else None
        hint = f"; did you mean {near!r}?" if near else " (e.g. Etc/UTC, Europe/Berlin)"
        raise ValueError(
            f"{quote(value)} is not a time zone of the IANA database (tzdata {release}){hint}"
        )
    return value


Timezone = Annotated[str, AfterValidator(_timezone)]


def _ipv4(value: str) -> str:
    """an IPv4 address"""
    try:
        return str(netaddr.IPAddress(value, version=4, flags=netaddr.INET_PTON))
    except (netaddr.AddrFormatError, ValueError):
        raise ValueError(f"{value!r} is not an IPv4 address") from None


def _cidr(value: str) -> str:
    """an IPv4 network a.b.c.d/len"""
    try:
        net = netaddr.IPNetwork(value, version=4)
    except (netaddr.AddrFormatError, ValueError):
        raise ValueError(f"{value!r} is not an IPv4 network (a.b.c.d/len)") from None
    if "/" not in value or net.ip != net.network:
        raise ValueError(f"{value!r} is not a network address; did you mean {net.cidr}?")
    return str(net.cidr)


Name = Annotated[str, _pattern(r"[a-z][a-z0-9-]{0,62}", "a name (a-z, 0-9, '-')")]
# As vendors print them: 3C-EC-EF-43-33-87, 3cec.ef43.3387, 3CECEF433387; kept lower-case
# with colons, the form dhcpd, Kea and `ip link` use, so equal MACs compare equal.
_MAC = re.compile(
    r"(?:[0-9a-f]{2}([:-]))(?:[0-9a-f]{2}\1){4}[0-9a-f]{2}|(?:[0-9a-f]{4}\.){2}[0-9a-f]{4}"
    r"|[0-9a-f]{12}"
)


_NORMAL_MAC = re.compile(r"(?:[0-9a-f]{2}:){5}[0-9a-f]{2}")


def normal_mac(value: str) -> str:
    """a MAC address: aa:bb:cc:dd:ee:ff, AA-BB-..., aabb.ccdd.eeff or 12 hex digits"""
    if _NORMAL_MAC.fullmatch(value):  # most are written so already: one test
        return value
    if not _MAC.fullmatch(value.lower()):
        raise ValueError(f"{value!r} is not a MAC address (like 3c:ec:ef:43:33:87)")
    digits = re.sub(r"[^0-9a-f]", "", value.lower())
    return ":".join(digits[i : i + 2] for i in range(0, 12, 2))


Mac = Annotated[str, AfterValidator(normal_mac)]
Guid = Annotated[str, _pattern(r"0x[0-9a-f]{16}", "a GUID (quoted '0x' + 16 hex digits)")]
Serial = Annotated[str, _pattern(r"[A-Z0-9][A-Z0-9-]{3,31}", "a serial number (A-Z, 0-9, '-')")]
Version = Annotated[str, _pattern(r"[0-9A-Za-z][0-9A-Za-z._-]*", "a version (quote it)")]
# A group as useradd(8) takes one (Debian's system groups start with `_`).
GroupName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a group name (a-z, 0-9, _, -)")]
IPv4 = Annotated[str, AfterValidator(_ipv4)]
Cidr = Annotated[str, AfterValidator(_cidr)]
# Kernel names (nvme0n1, sda) follow probe order, which changes across boots and kernels; a
# udev link by PCI path (same slot, same name) or by WWN/serial (same disk) does not.
DiskId = Annotated[
    str,
    _pattern(
        r"/dev/disk/by-(path|id)/[A-Za-z0-9][A-Za-z0-9:._+-]*",
        "a stable disk name (/dev/disk/by-path/... or /dev/disk/by-id/..., not sda or nvme0n1)",
    ),
]
Lax = Strict(False)  # closed vocabularies: a YAML string becomes the StrEnum member
__all__ = [
    "GPUDIRECT_PATHS",
    "BootMode",
    "FileCheck",
    "FirewallPolicy",
    "LabelStock",
    "Medium",
    "PciPath",
    "Role",
    "SwitchOs",
    "SwitchRole",
]


# --- site.yaml ------------------------------------------------------------------------------


class Services(Strict_):
    """Which host runs each site service; addresses follow from the host."""

    provisioning: Name
    dns: tuple[Name, ...]
    ntp: tuple[Name, ...]
    monitoring: Name


Duration = Annotated[str, _pattern(r"([0-9]+(ms|s|m|h|d|w|y))+", "a duration like 5m or 1h30m")]


class SecretSource(Strict_):
    """Where the compile finds a secret (the root password hash, a webhook URL, the BMC
    password): never in cluster/ itself."""

    env: str | None = None  # an environment variable, tried first
    file: str | None = None  # an absolute path outside the repository


class Receiver(Strict_):
    """A chat-ops webhook Alertmanager notifies: every alert that matches all of its filters
    (an empty filter matches any value). Its URL is a secret, read like the root hash."""

    url: SecretSource
    severities: tuple[Annotated[Severity, Lax], ...] = ()
    roles: tuple[Annotated[Role, Lax], ...] = ()
    racks: tuple[Name, ...] = ()


class IpmiLogin(Strict_):
    """How ipmi_exporter logs into every BMC: a user with IPMI `user` privilege (reads
    sensors, changes nothing); the password is a secret, read like the root hash."""

    user: str
    password: SecretSource


class SnmpLogin(Strict_):
    """How snmp_exporter reads every Ethernet switch's IF-MIB: SNMPv2c with a read-only
    community, a secret read like the root hash (the switches' snmpd holds the same one)."""

    community: SecretSource


class Monitoring(Strict_):
    """Alert thresholds (generated/monitoring/alerts.yml) and Alertmanager's receivers."""

    gpu_temp_c: int = Field(85, gt=0)
    ecc_corrected_increase: int = Field(10, ge=0)  # corrected ECC errors per GPU in ecc_window
    ecc_window: Duration = "1h"
    pending: Duration = "5m"  # how long a condition must hold before it alerts
    bmc_down_for: Duration = "5m"
    audit_stale_after: Duration = "13h"  # no drift audit report for this long: it stopped
    receivers: dict[Name, Receiver] = _empty()
    ipmi: IpmiLogin | None = None  # without it, ipmi_exporter tries the BMCs without a login
    snmp: SnmpLogin | None = None  # without it, snmp.yml's community stays a placeholder
    port_errors_window: Duration = "10m"  # a switch port's errors counted over this long


class Labels(Strict_):
    """How cable labels are printed (`clusterforge labels`)."""

    stock: Annotated[LabelStock, Lax] = LabelStock.WRAP_LETTER


UserName = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", "a user name (a-z, 0-9, '_', '-')")]


class AuditMetrics(Strict_):
    """Where the drift audit's metrics land: the host whose node_exporter serves them (its
    textfile folder, made on that host and written by `user`, the account the drift-audit
    workflow's publishing job runs as there)."""

    host: Name
    user: UserName


class AuditAccess(Strict_):
    """The drift audit's account on every host (generated/access/): who it logs in as, with
    which public key, the longest a probe may run there, and where its metrics land."""

    user: UserName
    public_key: Annotated[
        str,
        _pattern(
            r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,2}( [!-~]+)?",
            "an OpenSSH public key line (type, base64, optional comment without spaces)",
        ),
    ]
    probe_timeout_s: int = Field(300, ge=1, le=3600)  # a probe's hard limit on the host
    metrics: AuditMetrics


class ChangeAccess(Strict_):
    """The account `clusterforge plan`'s playbook logs in as to change a device (with sudo):
    the site's own, provisioned by the site, never generated; never the audit's, which is
    read-only by construction (compiler check `change-account`)."""

    user: UserName = "clusterforge-change"


class TimeSource(Strict_):
    """An upstream NTP source the site's time servers follow: one server, or a pool."""

    host: Annotated[
        str,
        _pattern(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", "a host name or IPv4 address"),
    ]
    pool: bool = False  # chrony's `pool`: the name resolves to several servers, all used


class Site(Strict_):
    name: Name
    room: Annotated[str, _pattern(r"[A-Z0-9]{1,6}", "a room code (A-Z, 0-9)")]
    domain: Annotated[str, _pattern(r"[a-z0-9-]+(\.[a-z0-9-]+)+", "a DNS domain")]
    timezone: Timezone
    services: Services
    ntp_upstream: tuple[TimeSource, ...] = ()  # what the ntp hosts follow (they need one)
    rack_pitch_m: float = Field(0.6, gt=0)
    row_pitch_m: float = Field(2.4, gt=0)
    labels: Labels = Labels()  # label stock for the cable label sheets
    monitoring: Monitoring = Monitoring()
    audit: AuditAccess | None = None  # no account generated without it
    change: ChangeAccess = ChangeAccess()


# --- networks.yaml --------------------------------------------------------------------------


class Roce(Strict_):
    """A RoCE network's lossless class, as NVIDIA's RoCE defaults set it (Cumulus Linux user
    guide, "RDMA over Converged Ethernet - RoCE", default lossless mode): RoCE on switch
    priority 3, marked DSCP 26, PFC on that priority and ECN on its queue; the congestion
    notifications (CNP) on priority 6, DSCP 48. One block for the whole network: every switch
    port and host NIC on it derives its QoS from these values, so both ends of a link agree."""

    priority: int = Field(3, ge=0, le=7)  # the lossless priority (PFC), RoCE's traffic class
    dscp: int = Field(26, ge=0, le=63)  # RoCE's marking; RDMA-CM's ToS is dscp << 2
    cnp_priority: int = Field(6, ge=0, le=7)
    cnp_dscp: int = Field(48, ge=0, le=63)
    ecn: bool = True  # ECN marking on the RoCE queue (switches) and DCQCN (hosts)


class Network(Strict_):
    """A logical IPv4 network; each rack gets subnet number `stride * rack.id + offset`."""

    medium: Annotated[Medium, Lax]
    cidr: Cidr
    rack_prefix: int = Field(ge=8, le=30)
    stride: int = Field(1, ge=1)
    offset: int = 0
    interface_prefix: int | None = Field(None, ge=8, le=30)  # default: rack_prefix
    host_base: int = Field(ge=1)  # host part of a node = host_base + slot
    switch_base: int | None = Field(None, ge=1)  # host part of a switch = switch_base + its U
    # With switch_base: a switch's management port is cabled to port switch_port_base + its U
    # of its rack's `switch` (U40-U42 on 46-48 with 6), so a switch added never moves another.
    switch_port_base: int | None = Field(None, ge=0)
    vlan: int | None = Field(None, ge=2, le=4094)  # its VLAN on the Ethernet switches
    gateway: int | None = Field(None, ge=1)  # host part of the rack router
    reserved: tuple[tuple[int, int], ...] = ()  # host-part ranges never given to a node
    default_route: bool = False
    routes: tuple[Cidr, ...] = ()  # destinations reached through this network's gateway
    mtu: int = Field(1500, ge=576, le=65520)
    switch: Annotated[SwitchRole, Lax] | None = None  # the rack switch its NICs are cabled to
    first_port: int = Field(1, ge=1)  # that switch's port for slot 1; slot n uses first+n-1
    # Host firewall on this network's interfaces: `restricted` opens only the ports of the
    # host's services (a zone named after the network); `trusted` lets everything in.
    firewall: Annotated[FirewallPolicy, Lax] = FirewallPolicy.RESTRICTED
    # RDMA over this Ethernet network: its switch ports and its hosts' NICs lossless on
    # `roce:`'s priority (PFC, DSCP trust, ECN), both ends of every link from the one block.
    rdma: Literal["roce"] | None = None  # roce: RoCE, lossless on every hop
    roce: Roce | None = None  # with rdma: roce; NVIDIA's defaults when left out


# --- hardware.yaml --------------------------------------------------------------------------


class Nic(Strict_):
    name: Annotated[str, _pattern(r"[a-z][a-z0-9_.]{0,14}", "an interface name")]
    network: Name
    speed_gbps: int = Field(gt=0)
    device: str | None = None  # RDMA device of an InfiniBand port, e.g. mlx5_0
    port: int | None = Field(None, ge=1)
    # A rail-optimised fabric's HCAs: rail k (from 0, as mlx5_k and ibk) of every server of
    # a scalable unit goes to the unit's leaf k. Where it sits on the board (NUMA node, PCIe
    # switch) is the site's record for `nvidia-smi topo -m`; the GPUs nearest to it are the
    # model's `affinity`.
    rail: int | None = Field(None, ge=0)
    numa_node: int | None = Field(None, ge=0)
    pcie_switch: str | None = None
    # An HCA's own link where it is not the fabric's `width` and `rate`: a port split to two
    # lanes (NDR200: 2x NDR) on a 4x NDR fabric. Its contract port, its cable's planned rate,
    # its alert and the acceptance ceilings follow it.
    width: Annotated[str, _pattern(r"(1x|2x|4x|8x|12x)", "a link width")] | None = None
    rate: (
        Annotated[str, _pattern(r"(SDR|DDR|QDR|FDR|EDR|HDR|NDR)", "an InfiniBand rate")] | None
    ) = None


class GpuSocket(Strict_):
    """GPUs whose PCIe root sits on CPU socket `socket` (counted from 0): Slurm binds their
    jobs to that socket's cores (gres.conf `Cores=`)."""

    socket: int = Field(ge=0)
    gpus: tuple[Annotated[int, Field(ge=0)], ...] = Field(min_length=1)


class Gpus(Strict_):
    count: int = Field(ge=1)
    model: str
    nvlinks_per_gpu: int = Field(ge=0)
    max_corrected_ecc: int = Field(0, ge=0)  # per GPU, since boot, before it is flagged
    # Slurm's GRES type (Gres=gpu:<type>:<count>, srun --gres=gpu:a100:8).
    gres_type: Name | None = None
    # How slurmd learns the GPUs: `files`, gres.conf lists /dev/nvidiaN and the cores of each
    # (from cpu_affinity); `nvml`, slurmd asks the driver (AutoDetect=nvml, a slurmd built
    # with NVML). Never both: an autodetected GPU that disagrees with a listed one is dropped.
    gres_detect: Literal["files", "nvml"] = "files"
    cpu_affinity: tuple[GpuSocket, ...] = ()


class Affinity(Strict_):
    """GPUs whose nearest HCA is `hca`, and the farthest PCIe path the board gives them."""

    hca: str  # an RDMA device of the model's NICs, e.g. mlx5_0
    gpus: tuple[Annotated[int, Field(ge=0)], ...] = Field(min_length=1)
    path: Annotated[PciPath, Lax]


class ServerModel(Strict_):
    vendor: str
    height_u: int = Field(ge=1, le=12)
    cpu_sockets: int = Field(ge=1)
    cpu_model: str | None = None
    cores_per_socket: int = Field(1, ge=1)  # physical cores, as `slurmd -C` counts them
    threads_per_core: int = Field(1, ge=1, le=8)  # 2 with SMT on
    memory_gib: int = Field(ge=1)  # installed; Slurm's RealMemory leaves slurm.yaml's headroom
    gpus: Gpus | None = None
    boot: Annotated[BootMode, Lax]
    os_disks: tuple[DiskId, ...] = Field(min_length=1)  # mirrored (RAID1)
    scratch_disk: DiskId | None = None
    bmc: Name  # the network of the BMC port
    nics: tuple[Nic, ...] = Field(min_length=1)
    affinity: tuple[Affinity, ...] = ()  # GPU <-> HCA over PCIe, for GPUDirect RDMA


class Cages(Strict_):
    """A switch's front panel: `count` cages of one connector, `lanes` each, split into
    `split` ports of lanes/split lanes (a twin-port OSFP cage: 8 lanes, 2 ports of 4x)."""

    connector: Annotated[str, _pattern(r"[A-Z][A-Z0-9-]*", "a connector (OSFP, QSFP56)")]
    count: int = Field(ge=1, le=128)
    lanes: int = Field(ge=1, le=16)
    split: int = Field(1, ge=1, le=8)


class UplinkPorts(Strict_):
    """An Ethernet switch model's uplink ports: the faster ones at the end of its panel
    (an SN2410: 48 x 25G, then 8 x 100G from port 49)."""

    first_port: int = Field(ge=1)
    speed_gbps: int = Field(gt=0)


class SwitchModel(Strict_):
    vendor: str
    medium: Annotated[Medium, Lax]
    ports: int = Field(ge=1, le=128)  # logical ports, as the fabric numbers them
    speed_gbps: int = Field(gt=0)
    height_u: int = Field(1, ge=1, le=4)
    cages: Cages | None = None  # default: one single-port cage per port
    os: Annotated[SwitchOs, Lax] | None = None  # Ethernet switches configured from the plan
    uplinks: UplinkPorts | None = None  # default: every port at speed_gbps
    max_mtu: int = Field(9216, ge=1280, le=65535)  # the largest frame (L3 MTU) a port takes
    # What each host's lldpd hears as the LLDP Port ID (subtype ifname) of front port n: by
    # default the OS's own names, swp1..swpN on Cumulus Linux, Ethernet1..N on EOS.
    port_name: str | None = Field(None, pattern=r"^[^{}]*\{n\}[^{}]*$")

    def port_label(self, n: int | str) -> str:
        """Front port `n` as the switch's LLDP names it."""
        default = "Ethernet{n}" if self.os == SwitchOs.EOS else "swp{n}"
        return (self.port_name or default).format(n=n)


class Hardware(Strict_):
    servers: dict[Name, ServerModel]
    switches: dict[Name, SwitchModel]


# --- racks/*.yaml ---------------------------------------------------------------------------


class Pin(Strict_):
    """A node held at a version other than its model's baseline, and why."""

    version: Version
    reason: str = Field(min_length=10)


class Link(Strict_):
    """A NIC cabled to a named switch port instead of its rack switch (service hosts)."""

    switch: Name
    port: int = Field(ge=1)


class Node(Strict_):
    name: Name
    model: Name
    role: Annotated[Role, Lax]
    slot: int = Field(ge=1)
    u: int = Field(ge=1)
    serial: Serial
    mac: dict[str, Mac]  # NIC name (and "bmc") -> MAC
    guid: Guid | None = None  # port GUID of the InfiniBand HCA
    guids: dict[str, Guid] = _empty()  # port GUID by RDMA device, for a model of several HCAs
    addresses: dict[Name, IPv4] = _empty()  # per-network override of the derived address
    links: dict[Name, Link] = _empty()  # per-network override of the derived switch port
    pins: dict[str, Pin] = _empty()
    # Where this box's disks differ from its model's (another PCI slot, disks named by WWN).
    os_disks: tuple[DiskId, ...] = ()
    scratch_disk: DiskId | None = None
    reinstall: bool = False  # PXE boot installs (wiping its disks); otherwise boots local


class Switch(Strict_):
    name: Name
    model: Name
    role: Annotated[SwitchRole, Lax]
    u: int = Field(ge=1)
    serial: Serial
    mac: Mac  # management port
    guid: Guid | None = None  # node GUID (InfiniBand switches)
    pod: int | None = Field(None, ge=1)  # spines of a three-tier fabric: the pod they serve
    plane: int | None = Field(None, ge=1)  # cores: the spine position, in every pod, they join


# A rack leaf's hosts' LIDs are 0x1000 + 64 * rack id + slot and must stay unicast (below
# 0xC000): the highest rack id a rack of such hosts may have. The id itself is not bounded
# here: each rule derived from it checks its own reach (LIDs: compiler/checks.py `lids`;
# subnets: `subnets`), so a rail-optimised site, whose HCAs' LIDs follow their unit, may
# number past it.
MAX_RACK_ID = (0xBFFF - 0x1000 - 63) // 64


class Rack(Strict_):
    name: Name
    id: int = Field(ge=1)
    row: Annotated[str, _pattern(r"[A-Z]{1,2}", "a row letter")]
    col: int = Field(ge=1)
    height_u: int = Field(42, ge=1, le=60)
    nodes: tuple[Node, ...] = ()
    switches: tuple[Switch, ...] = ()


class RackRef(Protocol):
    """A rack as the rules numbering its hosts read it (subnets, static LIDs, rail leaf
    ports): its name and id, not its nodes. A Rack is one."""

    @property
    def name(self) -> str: ...

    @property
    def id(self) -> int: ...


# --- fabric.yaml ----------------------------------------------------------------------------


class CableOverride(Strict_):
    """One cable that departs from the rule: a port skipped as bad, not yet installed, or a
    spare: cabled and labelled, its switch port disabled until a link is moved onto it.

    It names the cable by one end, the switch and the port the rules give it: a leaf's port
    of a server's cable, or a spine's (core's) port of an uplink; the cable keeps its ID."""

    device: Name  # the switch at the end named
    port: int = Field(ge=1)  # that end's port as the rules give it
    use_port: int | None = Field(None, ge=1)  # the port that end moves to instead
    installed: bool = True
    spare: bool = False
    note: str = ""


class Partition(Strict_):
    name: Annotated[str, _pattern(r"[A-Za-z][A-Za-z0-9_]{0,31}", "a partition name")]
    pkey: Annotated[str, _pattern(r"0x[0-7][0-9a-f]{3}", "a 15-bit P_Key like 0x0002")]
    ipoib: bool = False
    roles: tuple[Annotated[Role, Lax], ...] = ()  # every host of these roles
    hosts: tuple[Name, ...] = ()


class SubnetManager(Strict_):
    host: Name
    priority: int = Field(ge=0, le=15)


class ScalableUnit(Strict_):
    """A rail-optimised fabric's building block: the servers of `racks` (in that order) and
    its leaves, one per rail in rail order. Leaf k (from 0) takes rail k of every server of
    the unit, on port place * servers_per_rack + slot (place: the rack's among `racks`, from
    0), so a server added to a rack moves no cable."""

    name: Name
    racks: tuple[Name, ...] = Field(min_length=1)
    leaves: tuple[Name, ...] = Field(min_length=1)
    servers_per_rack: int = Field(ge=1)


class Fabric(Strict_):
    # fat-tree: a leaf per rack, every server's HCA on it; rail-optimised: leaves per
    # scalable unit, one per rail (their uplinks to every spine like a rack leaf's).
    topology: Literal["fat-tree", "rail-optimised"] = "fat-tree"
    scalable_units: tuple[ScalableUnit, ...] = ()
    rate: Annotated[str, _pattern(r"(SDR|DDR|QDR|FDR|EDR|HDR|NDR)", "an InfiniBand rate")]
    width: Annotated[str, _pattern(r"(1x|4x|8x|12x)", "a link width")]
    max_oversubscription: float = Field(1.0, gt=0)
    uplink_port: int = Field(ge=1)  # first leaf port facing spines, in spine order
    links_per_spine: int = Field(1, ge=1)
    # Three-tier: racks 1..racks_per_pod are pod 1, and so on; a leaf links to the spines of
    # its pod; spine ports from core_port on go, links_per_core each, to the cores of the
    # spine's plane (its position among its pod's spines). Unset: one two-tier fabric.
    racks_per_pod: int | None = Field(None, ge=1)
    # Three-tier rail-optimised: the units' leaves in pods (spine groups) of units_per_pod
    # units each, in scalable_units order; a pod's spines, cores and ports as above.
    units_per_pod: int | None = Field(None, ge=1)  # rail-optimised: units a pod (spine group)
    core_port: int | None = Field(None, ge=1)
    links_per_core: int = Field(1, ge=1)
    subnet_managers: tuple[SubnetManager, ...] = Field(min_length=1)
    partitions: tuple[Partition, ...] = ()
    cables: tuple[CableOverride, ...] = ()

    @property
    def three_tier(self) -> bool:
        """Leaves in pods, their spines joined by cores (racks_per_pod or units_per_pod)."""
        return self.racks_per_pod is not None or self.units_per_pod is not None


# --- firmware.yaml --------------------------------------------------------------------------


class Baseline(Strict_):
    """What every box of one model must run; GPU fields only for models with GPUs."""

    bios: Version | None = None
    bmc: Version | None = None
    nic_firmware: Version | None = None
    nic_psid: (
        Annotated[str, _pattern(r"[A-Z]{2}_[0-9]{10}", "a PSID like MT_0000000223")] | None
    ) = None
    vbios: Version | None = None
    gpu_driver: Version | None = None
    cuda: Version | None = None
    firmware: Version | None = None  # switches: the one firmware image
    # Version keys compared by their first N dot-separated parts only, where the probe prints
    # no more (ipmitool: a BMC's major.minor); every other key is compared in full.
    mask: dict[str, Annotated[int, Field(ge=1)]] = _empty()

    def versions(self) -> dict[str, str]:
        """The versions this baseline sets, by key (the mask is not one). Read off the fields:
        `model_dump` would have pydantic build the model's serializer, on every cold start."""
        return {key: value for key, value in self if key != "mask" and value is not None}


class Ring(Strict_):
    name: Name
    nodes: tuple[Name, ...] = ()  # empty: every node not in an earlier ring


def _iso_date(value: str) -> str:
    """a calendar date"""
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a calendar date") from None
    return value


# Quoted: an unquoted YAML date loads as a date object, which the source digest cannot hold.
IsoDate = Annotated[
    str,
    _pattern(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "a date YYYY-MM-DD (quote it)"),
    AfterValidator(_iso_date),
]


class Rollout(Strict_):
    """A staged upgrade in progress: nodes of `rings` may still run the `previous` versions
    until `until` (inclusive) without being drift; the audit's clock decides, not the compile."""

    rings: tuple[Name, ...] = Field(min_length=1)
    previous: dict[Name, Version] = Field(min_length=1)  # version key -> the version replaced
    until: IsoDate


class Firmware(Strict_):
    software: dict[str, Version]  # fleet-wide: ofed, kernel
    baselines: dict[Name, Baseline]
    rings: tuple[Ring, ...] = Field(min_length=1)
    rollouts: tuple[Rollout, ...] = ()


# --- provisioning.yaml ----------------------------------------------------------------------


class Repo(Strict_):
    name: Name
    path: str  # below the provisioning server's HTTP root


class Profile(Strict_):
    """The installer's package set (%packages): the environment group and what the first boot
    needs before any service; what a role runs comes from services.yaml."""

    packages: tuple[str, ...]


class BootFiles(Strict_):
    """The loaders, on the provisioning server's TFTP root as the firmware asks for them, and
    the installer's kernel and initrd, which the loaders fetch over HTTP."""

    # The loaders the TFTP root serves: those Rocky 8's packages install (pxe/tftpboot.conf).
    # BIOS: PXELINUX's build with an HTTP client, since the menu loads the kernel by URL.
    bios: Literal["lpxelinux.0"] | None = None  # for client architecture 0
    uefi: Literal["shimx64.efi"] | None = None  # shim, which loads GRUB; architectures 7 and 9
    kernel: str  # below the HTTP root: the install tree's images/pxeboot/vmlinuz
    initrd: str


# The provisioning host's own install source: the installer's `cdrom`, or an upstream tree.
InstallSource = Annotated[
    str, _pattern(r"cdrom|https?://[A-Za-z0-9.-]+(:[0-9]+)?/\S*", "'cdrom' or an http(s) URL")
]
Url = Annotated[str, _pattern(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?/\S*", "an http(s) URL")]


class Bootstrap(Strict_):
    """How the provisioning host itself is installed: it serves every other install, so its
    own cannot come from itself; it gets no PXE menu and no DHCP boot file."""

    install: InstallSource  # its installer's tree: `cdrom` (the DVD) or the upstream BaseOS URL
    repos: dict[Name, Url] = _empty()  # the upstream of each of `repos`, by name, its install uses
    nameservers: tuple[IPv4, ...] = ()  # its installer's resolvers: the site's DNS is not up yet


class Provisioning(Strict_):
    os: str
    os_version: Version
    http_root: str  # the provisioning host's HTTP document root: kickstarts, bundles, mirrors
    install_path: str
    repos: tuple[Repo, ...]
    pxe_network: Name  # the NIC that PXE boots and installs: the only one given a boot file
    dhcp_networks: tuple[Name, ...]  # networks whose rack subnets the DHCP server serves
    boot_files: BootFiles
    bootstrap: Bootstrap
    root_password_hash: SecretSource
    profiles: dict[Name, Profile]
    role_profiles: dict[str, Name]


# --- services.yaml --------------------------------------------------------------------------

# A generated path, where `{host}` and `{role}` stand for the host's name and role, and a final
# `*` matches every file of one folder (kickstart/*.ks); `{name}` in `dest` is the matched name.
Source = Annotated[str, _pattern(r"[a-z0-9{}][A-Za-z0-9._{}/*-]*", "a path under generated/")]
AbsPath = Annotated[
    str, _pattern(r"(/[A-Za-z0-9_{}][A-Za-z0-9._{}-]*)+", "an absolute path without '..'")
]
Mode = Annotated[str, _pattern(r"0[0-7]{3}", "a file mode like '0644' (quote it)")]
Owner = Annotated[str, _pattern(r"[a-z_][a-z0-9_-]*:[a-z_][a-z0-9_-]*", "user:group")]
PortSpec = Annotated[
    str, _pattern(r"[0-9]{1,5}(-[0-9]{1,5})?/(tcp|udp)", "a port like 9100/tcp or 100-200/udp")
]
Unit = Annotated[
    str, _pattern(r"[A-Za-z0-9@_.-]+\.(service|socket|timer|target)", "a systemd unit name")
]


class FileHome(Strict_):
    """Where generated files live on the hosts of a service, and what reads them."""

    source: Source
    dest: AbsPath
    mode: Mode = "0644"
    owner: Owner = "root:root"
    reload: Unit | None = None  # reload-or-restart when the file changes
    check: Annotated[FileCheck, Lax] = FileCheck.CONTENT
    # A kind of file the cluster may not have today (PXELINUX menus: no model boots BIOS).
    optional: bool = False


class Scrape(Strict_):
    """The Prometheus job that scrapes this service's exporter on every host that runs it."""

    job: Name
    port: int = Field(ge=1, le=65535)


class Service(Strict_):
    """What a host runs: packages (`{key}` is the host's pinned version of that key, `{key_major}`
    its first dotted part), dnf module streams enabled before them, units enabled and active,
    kernel modules built for the pinned kernel and loaded at boot, ports opened on restricted
    networks, and the generated files it reads."""

    description: str
    module_streams: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    units: tuple[Unit, ...] = ()
    kernel_modules: tuple[Annotated[str, _pattern(r"[a-z0-9_-]+", "a module name")], ...] = ()
    ports: tuple[PortSpec, ...] = ()
    files: tuple[FileHome, ...] = ()
    scrape: Scrape | None = None
    # The groups the audit's probes name (as EPEL's packages name them: lldpd) as this
    # service's OS names them where it differs (Debian's lldpd: _lldpd): the account joins
    # these instead (`access/{role}/sysusers.conf`).
    groups: dict[GroupName, GroupName] = _empty()


class ServiceCatalog(Strict_):
    """services.yaml: the service catalogue, the services of each host role and of each
    Ethernet switch OS (in install order), and the generated files that have no home on any
    host or switch (read by people, not by a service)."""

    services: dict[Name, Service]
    roles: dict[Annotated[Role, Lax], tuple[Name, ...]]
    # A configured switch runs its OS's services: its files have homes like a host's, `{role}`
    # in them standing for the OS (cumulus, eos), which no host role is named.
    switch_os: dict[Annotated[SwitchOs, Lax], tuple[Name, ...]] = _empty()
    review_only: tuple[Source, ...] = ()
    # Services whose content-checked files the audit keeps whole in its snapshots.
    snapshot: tuple[Name, ...] = ()


# --- acceptance.yaml ------------------------------------------------------------------------

# NCCL derives these from the plan (the HCAs of the hosts, their management interface): a
# hand-written value could name the storage NIC and send the bootstrap the wrong way.
DERIVED_NCCL = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")


def _nccl_setting(value: str) -> str:
    if not re.fullmatch(r"NCCL_[A-Z0-9_]+", value):
        raise ValueError(f"{value!r} is not an NCCL variable (NCCL_...)")
    if value in DERIVED_NCCL:
        raise ValueError(f"{value} is derived from the plan; it cannot be set by hand")
    return value


NcclName = Annotated[str, AfterValidator(_nccl_setting)]
ModuleOption = Annotated[str, _pattern(r"[A-Za-z][A-Za-z0-9_]*", "a module parameter name")]


class Nccl(Strict_):
    """/etc/nccl.conf beyond what the plan derives; values are strings, as NCCL reads them."""

    settings: dict[NcclName, str] = _empty()


class Threshold(Strict_):
    """A pass mark: `fraction` of the physical ceiling, unless `min_gb_s` names it outright."""

    fraction: float = Field(0.72, gt=0, le=1)
    min_gb_s: float | None = Field(None, gt=0)


class PairTest(Threshold):
    """ib_write_bw between two servers: RDMA writes for `duration_s` seconds."""

    duration_s: int = Field(10, ge=1)


Step = Annotated[int, Field(ge=2)] | Literal["all"]  # nodes in a step, or every GPU server


class NcclTests(Threshold):
    """all_reduce_perf steps at growing scale, judged by the bus bandwidth at `max_bytes`."""

    steps: tuple[Step, ...] = (4, 16, "all")
    min_bytes: str = "8"
    max_bytes: Annotated[str, _pattern(r"[0-9]+[KMG]?", "a size like 8G")] = "8G"


class BurnIn(Strict_):
    """DCGM diagnostics (`dcgmi diag -r LEVEL -j`); level 3 runs the stress tests (~30 min)."""

    level: int = Field(3, ge=1, le=4)


class Acceptance(Strict_):
    """acceptance.yaml: GPUDirect/NCCL set-up and the pass marks of the acceptance run."""

    nccl: Nccl = Nccl()
    module_options: dict[Name, dict[ModuleOption, str]] = _empty()  # /etc/modprobe.d, per module
    ib_write_bw: PairTest = PairTest()
    nccl_tests: NcclTests = NcclTests()
    burn_in: BurnIn = BurnIn()


# --- slurm.yaml -----------------------------------------------------------------------------

SlurmName = Annotated[str, _pattern(r"[A-Za-z][A-Za-z0-9_-]{0,31}", "a Slurm name")]
SlurmTime = Annotated[
    str,
    _pattern(r"INFINITE|UNLIMITED|([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}", "a time like 7-00:00:00"),
]


class SlurmPartition(Strict_):
    """A partition of production nodes: every node of `roles`, and `hosts` by name."""

    roles: tuple[Annotated[Role, Lax], ...] = ()
    hosts: tuple[Name, ...] = ()
    default: bool = False
    max_time: SlurmTime = "INFINITE"


class Slurm(Strict_):
    """slurm.yaml: what the generated Slurm files (generated/slurm/) say beyond the hardware:
    the partitions, the memory Slurm leaves to the OS, and the nodes' scheduling weights.
    Spares (role `spare`) are configured but drained with the reason `spare`, in no production
    partition (in an inactive one of their own, `spare`)."""

    # Installed memory less this is RealMemory: the kernel reserves some, the OS and the
    # daemons need some; a node that shows less than RealMemory is drained by Slurm.
    memory_headroom_gib: int = Field(32, ge=0)
    weight: int = Field(1, ge=1)  # production nodes; lower weights are scheduled first
    spare_weight: int = Field(1000, ge=1)  # a spare put back to work is used last
    # Without slurm.yaml: one default partition of every gpu node.
    partitions: dict[SlurmName, SlurmPartition] = {
        "gpu": SlurmPartition(roles=(Role.GPU,), default=True)
    }


# --- ethernet.yaml -------------------------------------------------------------------------


class EthernetTier(Strict_):
    """The rack switches of role `switch` uplink to every switch of role `to`, `links` each,
    from the model's first uplink port on; on an upper switch, the rack of id N lands on ports
    (N-1)*links+1 onwards, and a rack of id `top_down_from` or more (service and network
    racks) from the last port downwards, so neither group ever moves the other's cables.
    Each uplink is a routed port with a BGP unnumbered session: the upper switches share
    `asn`, a rack switch is `asn` + its rack id (eBGP everywhere, as Cumulus designs do: one
    ASN for the spines keeps a path from leaving one spine for another)."""

    switch: Annotated[SwitchRole, Lax]
    to: Annotated[SwitchRole, Lax]
    links: int = Field(1, ge=1)
    asn: int = Field(ge=1, le=4294967294)
    top_down_from: int = Field(100, ge=1)


class EthernetFabric(Strict_):
    """ethernet.yaml: the storage and management networks' switches. Each rack switch is its
    rack subnets' gateway (an SVI on each network's VLAN); its uplinks route between racks.
    Without this file, the Ethernet switches get no configuration and no uplinks."""

    mtu: int = Field(9216, ge=1280, le=65535)  # every switch port; a network's mtu fits below
    tiers: tuple[EthernetTier, ...] = Field(min_length=1)
    lldp: bool = True  # lldpd on every switch: the cabling can be read back from its neighbours


# --- the whole ------------------------------------------------------------------------------


class Cluster(Strict_):
    site: Site
    networks: dict[Name, Network]
    hardware: Hardware
    fabric: Fabric
    firmware: Firmware
    provisioning: Provisioning
    services: ServiceCatalog
    racks: tuple[Rack, ...]
    acceptance: Acceptance = Acceptance()
    slurm: Slurm = Slurm()
    ethernet: EthernetFabric | None = None


def validate(data: dict[str, Any]) -> Cluster:
    """Build the model from loaded data; raises pydantic.ValidationError."""
    if isinstance(data.get("racks"), tuple):
        try:
            racks = tuple(_rack(rack) for rack in data["racks"])
        except ValidationError:  # the whole model's validation says where, in its terms
            return Cluster.model_validate(data)
        data = {**data, "racks": racks}  # kept as they are: instances are not validated again
    return Cluster.model_validate(data)


# Each rack on its own: a diff's two sides then hold the same Rack for each unchanged rack
# file, and every marked function of its nodes (compiler/plan.py `_links`) knows it at once.
@memo.by_value
def _rack(data: Any) -> Rack:
    return Rack.model_validate(data)


def _unwrap(tp: Any) -> Any:
    """The type under Annotated[...] and `X | None`."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, UnionType):
            rest = [a for a in get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def model_at(path: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class whose instance sits at `path` of the cluster (None: not a model), so
    messages and the field reference can name the keys a place takes."""
    tp: Any = Cluster
    for key in path:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            info = tp.model_fields.get(str(key))
            if info is None:
                return None
            tp = info.annotation
        elif get_origin(tp) is tuple:
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None
