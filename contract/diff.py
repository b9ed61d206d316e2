"""The record types of a diff report: what `compiler.diff` finds when it compares two compiled
revisions, and what `draw` renders for a reviewer (the pull-request comment, the change
picture). The JSON form is `compiler.diff`'s (its module docstring); these are the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from common.errors import Diagnostic
from contract.labels import CableEnd

Value = str | int | float | bool | None


class RiskKind(StrEnum):
    """What a reviewer must not miss; each is raised by `_risks`, the one place risks are
    decided, from the report's sections."""

    HEAD_FAILS = "head-fails"
    ADDRESS_RENUMBERED = "address-renumbered"
    LID_RENUMBERED = "lid-renumbered"
    ROUTING_ENGINE = "routing-engine"
    SM_PRIORITY = "sm-priority"
    LARGE_CHANGE = "large-change"  # more than routine work of its kind touches
    ROOT_GUIDS = "root-guids-changed"  # OpenSM's ftree roots: its routing is recomputed
    ADDRESS_REMOVED = "address-removed"  # with its device: its DHCP and DNS entries go
    ADDRESS_LOST = "address-lost"  # a device that stays loses one
    ROLE_CHANGED = "role-changed"  # gpu -> spare: its services, partitions, Slurm change
    REINSTALL = "reinstall"  # newly marked: its next PXE boot wipes its disks
    KICKSTART_CHANGED = "kickstart-changed"  # shown line by line: it runs as root at install
    FLOW_CONTROL = "flow-control-changed"  # a RoCE class: every end of the network at once


@dataclass(frozen=True)
class Revision:
    ref: str
    commit: str
    compiles: bool
    errors: tuple[Diagnostic, ...]


@dataclass(frozen=True)
class Risk:
    kind: RiskKind
    message: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class Place:
    rack: str
    u: int
    slot: int | None


@dataclass(frozen=True)
class Placed:
    name: str
    place: Place


@dataclass(frozen=True)
class Move:
    name: str
    old: Place
    new: Place


@dataclass(frozen=True)
class Rename:
    old: str
    new: str
    place: Place  # HEAD's


@dataclass(frozen=True)
class Devices:
    added: tuple[Placed, ...] = ()
    removed: tuple[Placed, ...] = ()
    moved: tuple[Move, ...] = ()
    renamed: tuple[Rename, ...] = ()


@dataclass(frozen=True)
class IdentityChange:
    device: str
    key: str  # serial, mac <port>, guid, guid <hca/port>
    old: str | None
    new: str | None


@dataclass(frozen=True)
class RoleChange:
    device: str
    old: str
    new: str


@dataclass(frozen=True)
class GuidSet:
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


@dataclass(frozen=True)
class LidMove:
    device: str
    port: str  # "" on a switch
    old: int
    new: int


@dataclass(frozen=True)
class Identity:
    devices: tuple[IdentityChange, ...] = ()
    roles: tuple[RoleChange, ...] = ()
    root_guids: GuidSet = field(default_factory=GuidSet)
    lids_kept: int = 0
    lids: tuple[LidMove, ...] = ()


@dataclass(frozen=True)
class Part:
    medium: str
    rate: str
    length_m: str
    old: int
    new: int


@dataclass(frozen=True)
class RolloutChange:
    status: str  # added, removed
    rings: tuple[str, ...]
    previous: dict[str, str]
    until: str


@dataclass(frozen=True)
class AddressChange:
    device: str
    network: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Change:
    key: str
    old: Value
    new: Value


@dataclass(frozen=True)
class CableRef:
    id: str
    network: str
    a: CableEnd
    b: CableEnd


@dataclass(frozen=True)
class CableChange:
    id: str
    repatched: bool  # an end is now on another device or port
    relabel: bool  # what the label shows changed: an end, the medium or the length
    changes: tuple[Change, ...]  # every fact that differs, by its key in `old` and `new`
    old: CableRef
    new: CableRef


@dataclass(frozen=True)
class Cables:
    added: tuple[CableRef, ...] = ()
    removed: tuple[CableRef, ...] = ()
    changed: tuple[CableChange, ...] = ()


@dataclass(frozen=True)
class ModelChange:
    model: str
    key: str
    old: Value
    new: Value


@dataclass(frozen=True)
class VersionChange:
    key: str
    old: str | None
    new: str | None
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class RingChanges:
    ring: str
    hosts: int  # hosts in the ring on HEAD
    changes: tuple[VersionChange, ...]


@dataclass(frozen=True)
class Firmware:
    software: tuple[Change, ...] = ()
    baselines: tuple[ModelChange, ...] = ()
    rings: tuple[RingChanges, ...] = ()
    switches: tuple[VersionChange, ...] = ()


@dataclass(frozen=True)
class FileOption:
    file: str
    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class LidChange:
    file: str
    guid: str
    old: str
    new: str


@dataclass(frozen=True)
class FabricChanges:
    settings: tuple[Change, ...] = ()
    subnet_managers: tuple[Change, ...] = ()
    opensm_options: tuple[FileOption, ...] = ()
    lids: tuple[LidChange, ...] = ()


@dataclass(frozen=True)
class RouteChange:
    host: str
    removed: tuple[str, ...]
    added: tuple[str, ...]


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # added, removed, changed
    lines_added: int | None  # None: not UTF-8 text (a PDF), so lines mean nothing
    lines_removed: int | None


@dataclass(frozen=True)
class Family:
    family: str
    files_added: int
    files_removed: int
    files_changed: int
    lines_added: int
    lines_removed: int
    files: tuple[FileDiff, ...]


@dataclass(frozen=True)
class Touched:
    hosts: int
    hosts_total: int  # on BASE
    cables: int
    cables_total: int
    share_limit: float
    host_kinds: dict[str, int] = field(default_factory=dict)
    cable_kinds: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DiffReport:
    """Everything `diff` found; see the module docstring for its JSON form."""

    base: Revision
    head: Revision
    risks: tuple[Risk, ...] = ()
    nodes: Devices = field(default_factory=Devices)
    switches: Devices = field(default_factory=Devices)
    addresses: tuple[AddressChange, ...] = ()
    renumbered_nothing: bool = False
    cables: Cables = field(default_factory=Cables)
    labels_to_reprint: tuple[str, ...] = ()
    label_commands: tuple[str, ...] = ()
    firmware: Firmware = field(default_factory=Firmware)
    fabric: FabricChanges = field(default_factory=FabricChanges)
    routes: tuple[RouteChange, ...] = ()
    identity: Identity = field(default_factory=Identity)
    parts: tuple[Part, ...] = ()
    rollouts: tuple[RolloutChange, ...] = ()
    artifacts: tuple[Family, ...] = ()
    touched: Touched | None = None  # None when a side does not compile

    @property
    def compiles(self) -> bool:
        return self.base.compiles and self.head.compiles

    @property
    def changed(self) -> bool:
        return bool(self.artifacts)
