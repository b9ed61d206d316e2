"""Rack elevations: the front of each rack, U by U, and the row view of every rack in floor order.

Each device is drawn at its U span with its name, model and role colour; empty U are drawn as
empty slots, so free space is seen, not inferred; a switch shows its ports in use and in all.
A device's hover text names its cables. Marked devices (drift, a change) get a thick outline in
the mark's colour and the mark written beside the name; a device BASE had and HEAD removed is
an outline only, dashed.
"""

from __future__ import annotations

from contract.scene import Device, Mark, RackSpot, Scene
from draw.figure import Dot, Figure, Group, Rect, Shape, Text, clip, fit
from draw.scene import COLOURS, rail_colour, rails

U = 14.0  # points per rack unit: one line of 9 pt text fits a 1U device
RACK_W = 210.0
GUTTER = 24.0  # left of the rack: U numbers
HEAD = 36.0  # above the rack: its name and place
FOOT = 8.0
END = 9.0  # one cable end beside a host: a 7-point square and a gap
ENDS_PER_LINE = 4
WIDTH = GUTTER + RACK_W + 6 + ENDS_PER_LINE * END + 4
GAP = 14.0  # between racks in the row view
ROW_HEAD = 26.0  # above each floor row in the row view

ROLE_COLOURS = {
    "gpu": "#c6dbef",
    "login": "#c7e9c0",
    "subnet-manager": "#dadaeb",
    "provisioning": "#fdd0a2",
    "monitoring": "#fdae6b",
    "spare": "#eeeeee",
    "leaf": "#9ecae1",
    "spine": "#6baed6",
    "core": "#4292c6",
    "management": "#fee391",
    "storage": "#fcbba1",
}


NETWORK_COLOURS = {"ipoib": "#3182bd", "mgmt": "#e6b800", "storage": "#e6550d", "bmc": "#756bb1"}


def height(rack: RackSpot) -> float:
    return HEAD + rack.height_u * U + FOOT


def _ports(scene: Scene, device: Device) -> str:
    """Front ports in use of all: a cable's end on the switch at a numbered port. Its own
    management port ("mgmt", cabled to a management switch, on a management switch sometimes
    to itself) is not one of the front ports the model counts."""
    used = {
        end.port
        for c in scene.cables_of(device.name)
        for end in (c.a, c.b)
        if end.device == device.name and end.port.isdigit()
    }
    return f"{len(used)}/{device.ports} ports"


def _hover(scene: Scene, rack: RackSpot, d: Device) -> str:
    span = f"U{d.u}" if d.height_u == 1 else f"U{d.u}-U{d.u + d.height_u - 1}"
    kind = f"{d.role} switch, {_ports(scene, d)}" if d.switch else d.role
    lines = [f"{d.name}: {d.model}, {kind}, {rack.name} {span}"]
    for c in scene.cables_of(d.name):
        here, there = (c.a, c.b) if c.a.device == d.name else (c.b, c.a)
        lines.append(f"{c.id}: {here.port} to {there.device} {there.port} ({c.network})")
    return scene.hover(d.name, "\n".join(lines))


def _device(scene: Scene, rack: RackSpot, d: Device, top: float) -> Group:
    mark = scene.marks.get(d.name)
    y = top + (rack.height_u - (d.u + d.height_u - 1)) * U
    x, w, h = GUTTER + 2, RACK_W - 4, d.height_u * U - 2
    items: list[Shape] = []
    if mark == Mark.REMOVED:
        items.append(Rect(x, y + 1, w, h, stroke=COLOURS[mark], width=2, dash=True))
    else:
        stroke, thick = (COLOURS[mark], 3.0) if mark else ("#555555", 0.6)
        items.append(Rect(x, y + 1, w, h, ROLE_COLOURS.get(d.role, "#ffffff"), stroke, thick))
    badge = mark.upper() if mark else ""
    room = w - 8
    if mark:
        items.append(
            Text(
                x + w - 4, y + 1 + min(h, 2 * U) / 2 + 3, badge, 7, COLOURS[mark], "end", bold=True
            )
        )
        room -= 6 + len(badge) * 5
    # A switch's role is its colour (and its hover text); its ports in use matter more.
    detail = f"{d.model} · {_ports(scene, d) if d.switch else d.role}"
    if d.height_u == 1:
        size = fit(d.name, 8.5, room * 0.45, bold=True)
        items.append(Text(x + 4, y + 1 + h / 2 + 3, d.name, size, bold=True))
        items.append(
            Text(x + 8 + room * 0.45, y + 1 + h / 2 + 3, clip(detail, 7, room * 0.55), 7, "#333333")
        )
    else:
        items.append(Text(x + 4, y + 12, d.name, fit(d.name, 10, room, bold=True), bold=True))
        items.append(Text(x + 4, y + 23, clip(detail, 7.5, room), 7.5, "#333333"))
    attrs = [("data-device", d.name)] + ([("data-mark", mark.value)] if mark else [])
    group = Group(tuple(items), _hover(scene, rack, d), tuple(attrs))
    return group if d.switch else Group((group, *_ends(scene, d, y + 1)))


def _ends(scene: Scene, d: Device, top: float) -> list[Shape]:
    """A host's cable ends beside it, one square each, coloured by network: the labels a
    technician finds at its back. A switch's ends are its port count (and the far ends)."""
    out: list[Shape] = []
    for k, c in enumerate(scene.cables_of(d.name)):
        x = GUTTER + RACK_W + 6 + (k % ENDS_PER_LINE) * END
        y = top + 2 + (k // ENDS_PER_LINE) * END
        mark = scene.marks.get(c.id)
        colour = NETWORK_COLOURS.get(c.network, "#999999")
        if c.rail is not None:  # a rail-optimised server's HCA ends, each its rail's
            colour = rail_colour(c.rail)
        if mark:
            square = Rect(x - 1, y - 1, END - 1, END - 1, COLOURS[mark], "#000000", 1.0)
        elif c.installed:
            square = Rect(x, y, END - 2, END - 2, colour)
        else:  # planned, not pulled yet: an outline
            square = Rect(x, y, END - 2, END - 2, "#ffffff", colour, 1.0, dash=True)
        hover = scene.hover(
            c.id,
            f"{c.id}: {c.a.device} {c.a.port} to {c.b.device} {c.b.port}, {c.network}, {c.text}",
        )
        attrs = [("data-cable", c.id)] + ([("data-mark", mark.value)] if mark else [])
        out.append(Group((square,), hover, tuple(attrs)))
    return out


def elevation(scene: Scene, rack: RackSpot) -> Group:
    """One rack's front, its top left at (0, 0): WIDTH wide, `height(rack)` tall."""
    top = HEAD
    items: list[Shape] = [
        Text(GUTTER, 16, rack.name, 13, bold=True),
        Text(
            GUTTER,
            29,
            f"{scene.room}.{rack.grid} · row {rack.row}, position {rack.col}",
            8,
            "#555555",
        ),
        Rect(GUTTER, top, RACK_W, rack.height_u * U, "#f7f7f7", "#222222", 1.5),
    ]
    devices = scene.rack_devices(rack.name)
    taken = {
        u
        for d in devices
        if scene.marks.get(d.name) != Mark.REMOVED
        for u in range(d.u, d.u + d.height_u)
    }
    for u in range(1, rack.height_u + 1):
        y = top + (rack.height_u - u) * U
        items.append(Text(GUTTER - 4, y + U - 4, str(u), 7.5, "#555555", "end"))
        if u not in taken:
            items.append(
                Rect(GUTTER + 2, y + 1, RACK_W - 4, U - 2, stroke="#cccccc", width=0.5, dash=True)
            )
    # Removed devices last: their outline must stay visible over what replaced them.
    for d in sorted(devices, key=lambda d: scene.marks.get(d.name) == Mark.REMOVED):
        items.append(_device(scene, rack, d, top))
    return Group(tuple(items), attrs=(("data-rack", rack.name),))


def rack_figure(scene: Scene, rack: RackSpot) -> Figure:
    key, tall = rail_legend(scene, GUTTER, height(rack), WIDTH - GUTTER)
    return Figure(
        WIDTH,
        height(rack) + tall,
        (*elevation(scene, rack).items, *key),
        f"{scene.site} rack {rack.name}: front elevation",
    )


def row_figure(
    scene: Scene, racks: tuple[RackSpot, ...] | None = None, fit_width: float | None = None
) -> Figure:
    """The racks side by side in floor order, one line per floor row; with `fit_width`
    (points) a row wraps onto more lines, none wider than that."""
    chosen = scene.racks if racks is None else racks
    rows: dict[str, list[RackSpot]] = {}
    for rack in chosen:
        rows.setdefault(rack.row, []).append(rack)
    per_line = max(1, int((fit_width + GAP) // (WIDTH + GAP))) if fit_width else None
    items: list[Shape] = []
    y, w = 0.0, 0.0
    for row, members in rows.items():
        step = per_line or len(members)
        lines = [members[i : i + step] for i in range(0, len(members), step)]
        for line in lines:
            title = f"Row {row}"
            if len(lines) > 1:
                title += f": {line[0].name}" + (f" to {line[-1].name}" if len(line) > 1 else "")
            items.append(Text(GUTTER, y + 18, title, 14, bold=True))
            x = 0.0
            tallest = max(height(r) for r in line)
            for rack in line:
                group = elevation(scene, rack)
                items.append(Group(group.items, attrs=group.attrs, dx=x, dy=y + ROW_HEAD))
                x += WIDTH + GAP
            w = max(w, x - GAP)
            y += ROW_HEAD + tallest + GAP
    items += legend(scene, GUTTER, y)
    # The rails' key under the marks' (which takes a line when anything is marked).
    below = y + (20 if scene.marks else 0)
    key, tall = rail_legend(scene, GUTTER, below, w - GUTTER)
    items += key
    y = below + tall if key else y
    return Figure(w, y + 20, tuple(items), f"{scene.site}: racks in floor order")


def legend(scene: Scene, x: float, y: float) -> list[Shape]:
    """The marks present, with their colours; nothing when nothing is marked."""
    out: list[Shape] = []
    for mark in sorted(set(scene.marks.values()), key=list(Mark).index):
        out.append(Dot(x + 5, y + 8, 5, COLOURS[mark]))
        out.append(Text(x + 14, y + 11, mark.value, 9))
        x += 90
    return out


RAIL_KEY_W = 56.0  # one rail's swatch and name in the legend
RAIL_KEY_H = 16.0


def rail_legend(scene: Scene, x: float, y: float, room: float) -> tuple[list[Shape], float]:
    """The rails' colours, a swatch each, on as many lines as `room` takes, and the height
    they take; nothing (and 0) on a fabric without rails."""
    found = rails(scene)
    if not found:
        return [], 0.0
    per_line = max(1, int((room - 40) // RAIL_KEY_W))
    out: list[Shape] = [Text(x, y + 11, "Rails", 9, bold=True)]
    for i, rail in enumerate(found):
        left = x + 40 + (i % per_line) * RAIL_KEY_W
        top = y + (i // per_line) * RAIL_KEY_H
        out.append(
            Group(
                (Rect(left, top + 3, 9, 9, rail_colour(rail)),
                 Text(left + 13, top + 11, f"rail {rail}", 9)),
                f"rail {rail}: its HCAs' cables to their unit's leaf {rail}, and that "
                "leaf's uplinks",
                (("data-rail", str(rail)),),
            )
        )  # fmt: skip
    return out, -(-len(found) // per_line) * RAIL_KEY_H + 4
