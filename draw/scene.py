"""The marks a page puts on a compiled scene (`contract.scene`), and their colours.

Pages that compare two states (a diff) draw one scene: HEAD's, plus what BASE had and HEAD
removed, marked `removed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from contract.scene import Link, Mark, Scene, floor_order

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


# A rail-optimised fabric's rails, k for rail k (ColorBrewer's Dark2: eight hues apart from
# one another and from the marks' bright red, orange and green); more rails repeat them.
RAIL_COLOURS = (
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"
)  # fmt: skip


def rail_colour(rail: int) -> str:
    return RAIL_COLOURS[rail % len(RAIL_COLOURS)]


def rails(scene: Scene) -> list[int]:
    """The rails the scene's cables are on, in order; none on a fabric without rails."""
    return sorted({c.rail for c in scene.links if c.rail is not None})


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
