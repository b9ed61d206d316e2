"""What a picture shows: racks on the floor, devices at their U, cables between ports, and the
marks a page puts on some of them (drift, a change). Built from a plan, nothing recomputed.

A `Scene` is the one input of every layout. Pages that compare two states (a diff) draw one
scene: HEAD's, plus what BASE had and HEAD removed, marked `removed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property

from compiler.model import Medium
from compiler.plan import Plan, grid


class Mark(StrEnum):
    """Why a device or cable stands out. Audit: drift, unreachable, error for hosts; missing,
    miswired, degraded for cables. Diff: added, removed, moved (re-patched), changed."""

    DRIFT = "drift"
    UNREACHABLE = "unreachable"
    ERROR = "error"
    MISSING = "missing"
    MISWIRED = "miswired"
    DEGRADED = "degraded"
    ADDED = "added"
    REMOVED = "removed"
    MOVED = "moved"
    CHANGED = "changed"


COLOURS = {
    Mark.DRIFT: "#d62728",
    Mark.UNREACHABLE: "#7b3294",
    Mark.ERROR: "#7b3294",
    Mark.MISSING: "#d62728",
    Mark.MISWIRED: "#ff7f0e",
    Mark.DEGRADED: "#b8860b",
    Mark.ADDED: "#2ca02c",
    Mark.REMOVED: "#d62728",
    Mark.MOVED: "#ff7f0e",
    Mark.CHANGED: "#1f77b4",
}


@dataclass(frozen=True)
class RackSpot:
    name: str
    row: str
    col: int
    height_u: int
    grid: str  # the floor-grid name, A01


@dataclass(frozen=True)
class Device:
    name: str
    switch: bool
    rack: str
    u: int
    height_u: int
    model: str
    role: str
    ports: int | None  # a switch's port count
    infiniband: bool  # on the compute fabric (an IB switch, or a host with an HCA)


@dataclass(frozen=True)
class End:
    device: str
    port: str


@dataclass(frozen=True)
class Link:
    id: str
    network: str
    infiniband: bool
    a: End  # the switch end
    b: End
    text: str  # medium, length and rate, for hover text
    installed: bool


@dataclass(frozen=True)
class Scene:
    site: str
    room: str
    racks: tuple[RackSpot, ...]  # in floor order: by row, then position
    devices: tuple[Device, ...]  # by name
    links: tuple[Link, ...]  # by ID
    marks: Mapping[str, Mark] = field(default_factory=dict)  # device name or cable ID
    notes: Mapping[str, str] = field(default_factory=dict)  # extra hover text, same keys

    def rack_devices(self, rack: str) -> list[Device]:
        return self._by_rack.get(rack, [])

    def cables_of(self, device: str) -> list[Link]:
        """The cables with an end on `device`, by ID."""
        return self._by_device.get(device, [])

    # Indexes, so a picture of a thousand hosts is linear in its size, not quadratic.
    @cached_property
    def _by_rack(self) -> dict[str, list[Device]]:
        out: dict[str, list[Device]] = {}
        for d in self.devices:
            out.setdefault(d.rack, []).append(d)
        return out

    @cached_property
    def _by_device(self) -> dict[str, list[Link]]:
        out: dict[str, list[Link]] = {}
        for c in self.links:
            for name in dict.fromkeys((c.a.device, c.b.device)):
                out.setdefault(name, []).append(c)
        return out

    def hover(self, name: str, text: str) -> str:
        """`text`, with the mark and the note of `name` when it has them."""
        mark, note = self.marks.get(name), self.notes.get(name)
        return "\n".join(x for x in (text, mark and f"{mark.upper()}", note) if x)


def floor_order(rack: RackSpot) -> tuple[int, str, int]:
    return (len(rack.row), rack.row, rack.col)


def scene(plan: Plan) -> Scene:
    """The plan as a picture's facts."""
    ib = {n for n, net in plan.networks.items() if net.medium == Medium.INFINIBAND}
    racks = tuple(
        sorted(
            (RackSpot(r.name, r.row, r.col, r.height_u, grid(r)) for r in plan.racks),
            key=floor_order,
        )
    )
    devices = [
        Device(
            h.name, False, h.rack, h.u, h.height_u, h.model, h.role.value, None, bool(h.ib_ports)
        )
        for h in plan.hosts
    ]
    devices += [
        Device(
            s.name,
            True,
            s.rack,
            s.u,
            plan.hardware.switches[s.model].height_u,
            s.model,
            s.role.value,
            s.ports,
            s.medium == Medium.INFINIBAND,
        )
        for s in plan.switches
    ]
    links = tuple(
        Link(
            c.id,
            c.network,
            c.network in ib,
            End(c.a.device, c.a.port),
            End(c.b.device, c.b.port),
            f"{c.medium} {c.length_m:g} m, {c.rate}"
            + ("" if c.installed else ", not installed")
            + (", spare: its port down by design" if c.spare else ""),
            c.installed,
        )
        for c in plan.cables
    )
    return Scene(
        plan.site.name,
        plan.site.room,
        racks,
        tuple(sorted(devices, key=lambda d: d.name)),
        links,
    )


def marked(base: Scene, marks: Mapping[str, Mark], notes: Mapping[str, str] | None = None) -> Scene:
    """`base` with marks (and hover notes) on the devices and cables they name."""
    return replace(base, marks=dict(marks), notes=dict(notes or {}))


def merged(head: Scene, base: Scene, devices: Iterable[str], links: Iterable[str]) -> Scene:
    """HEAD's scene plus the named devices and cables of BASE (what HEAD removed), with the
    racks they stood in; the caller marks them."""
    gone, cut = set(devices), set(links)
    racks = {r.name: r for r in head.racks}
    extra = [d for d in base.devices if d.name in gone]
    for d in extra:
        racks.setdefault(d.rack, next(r for r in base.racks if r.name == d.rack))
    return replace(
        head,
        racks=tuple(sorted(racks.values(), key=floor_order)),
        devices=tuple(sorted((*head.devices, *extra), key=lambda d: d.name)),
        links=tuple(sorted((*head.links, *(c for c in base.links if c.id in cut)), key=_id)),
    )


def _id(link: Link) -> str:
    return link.id
