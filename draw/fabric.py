"""The fabric map: InfiniBand switches in tiers (leaf, spine, and core if there is one), every
planned cable, hosts under their leaves.

Tiers follow the cables, not role names: hosts are tier 0, switches cabled to a tier are the
next one up. A full mesh between two tiers (25 leaves x 7 spines) drawn as straight lines is a
hairball, so cables between tiers are grouped on buses: one horizontal bus per upper switch,
one vertical riser per lower switch, and each cable is a dot where its two ends' lines cross.
Every dot, and every host's tick under its leaf, is one cable: its ID, ends and rate are its
hover text, and a marked cable (missing, miswired, degraded; added, removed, moved) is drawn
large in the mark's colour. Links no tier pair explains are listed below the map.
"""

from __future__ import annotations

from collections import defaultdict

from contract.scene import Device, Link, Mark, Scene
from draw import racks
from draw.figure import Dot, Figure, Group, Line, Rect, Shape, Text, clip, fit, width
from draw.racks import ROLE_COLOURS
from draw.scene import COLOURS, rail_colour

LEFT = 86.0  # bus names
TOP = 44.0
BOX_H = 32.0
BUS = 12.0  # between two buses
ROW = 13.0  # one host under its leaf
MIN_COL = 74.0


def tiers(scene: Scene) -> list[list[str]]:
    """Switch names by tier, from the one above the hosts upwards; each tier sorted."""
    devices = {d.name: d for d in scene.devices}
    links = _fabric_links(scene)
    switches = {d.name for d in scene.devices if d.switch and d.infiniband}
    switches |= {e.device for c in links for e in (c.a, c.b) if devices[e.device].switch}
    near: dict[str, set[str]] = defaultdict(set)
    for c in links:
        near[c.a.device].add(c.b.device)
        near[c.b.device].add(c.a.device)
    level = {n: 0 for c in links for n in (c.a.device, c.b.device) if n not in switches}
    frontier = set(level)
    while frontier:
        step = max(level[n] for n in frontier) + 1
        found = {s for n in frontier for s in near[n] if s in switches and s not in level}
        level |= {s: step for s in found}
        frontier = found
    top = max([v for v in level.values()] + [1])
    for s in switches - level.keys():  # cabled to no host: a leaf by role, else the top
        level[s] = 1 if devices[s].role == "leaf" else max(top, 2)
    out: list[list[str]] = []
    for t in range(1, max([level[s] for s in switches] + [0]) + 1):
        out.append(sorted(s for s in switches if level[s] == t))
    return [t for t in out if t]


def _fabric_links(scene: Scene) -> list[Link]:
    """The InfiniBand cables; a cable to a device the scene does not hold cannot be drawn."""
    names = {d.name for d in scene.devices}
    return [c for c in scene.links if c.infiniband and {c.a.device, c.b.device} <= names]


def _switch(scene: Scene, d: Device, cx: float, y: float, w: float) -> Group:
    mark = scene.marks.get(d.name)
    used = len({c.a.port if c.a.device == d.name else c.b.port for c in scene.cables_of(d.name)})
    detail = f"{d.model} · {used}/{d.ports}"
    if mark == Mark.REMOVED:
        box = Rect(cx - w / 2, y, w, BOX_H, stroke=COLOURS[mark], width=2, dash=True)
    else:
        stroke, thick = (COLOURS[mark], 3.0) if mark else ("#333333", 0.8)
        box = Rect(cx - w / 2, y, w, BOX_H, ROLE_COLOURS.get(d.role, "#ffffff"), stroke, thick)
    items: tuple[Shape, ...] = (
        box,
        Text(cx, y + 13, d.name, fit(d.name, 9.5, w - 6, bold=True), anchor="middle", bold=True),
        Text(cx, y + 25, clip(detail, 7, w - 6), 7, "#333333", "middle"),
    )
    hover = scene.hover(
        d.name,
        f"{d.name}: {d.model}, {d.role}, rack {d.rack} U{d.u}, {used} of {d.ports} ports cabled",
    )
    attrs = [("data-device", d.name)] + ([("data-mark", mark.value)] if mark else [])
    return Group(items, hover, tuple(attrs))


def _cable_attrs(scene: Scene, c: Link) -> tuple[tuple[str, str], ...]:
    mark = scene.marks.get(c.id)
    return (("data-cable", c.id),) + ((("data-mark", mark.value),) if mark else ())


def _cable_hover(scene: Scene, c: Link) -> str:
    ends = f"{c.a.device} {c.a.port} to {c.b.device} {c.b.port}"
    return scene.hover(c.id, f"{c.id}: {ends}, {c.text}")


def _dot(scene: Scene, c: Link, x: float, y: float) -> Group:
    mark = scene.marks.get(c.id)
    if mark:
        dot = Dot(x, y, 5, COLOURS[mark], "#000000", 0.8)
    elif not c.installed:
        dot = Dot(x, y, 3, "#ffffff", "#555555", 1)
    else:
        dot = Dot(x, y, 3, "#444444" if c.rail is None else rail_colour(c.rail))
    return Group((dot,), _cable_hover(scene, c), _cable_attrs(scene, c))


def fabric_figure(scene: Scene, fit_width: float | None = None) -> Figure:
    """The map; an empty figure with a note when the plan has no InfiniBand switch. With
    `fit_width` (points), the leaves wrap into panels no wider than that."""
    title = f"{scene.site} InfiniBand fabric"
    levels = tiers(scene)
    if not levels:
        return Figure(400, 40, (Text(10, 24, "No InfiniBand fabric in the plan.", 11),), title)
    devices = {d.name: d for d in scene.devices}
    links = _fabric_links(scene)
    tier_of = {s: t + 1 for t, names in enumerate(levels) for s in names}
    leaves = levels[0]
    under: dict[str, list[Link]] = defaultdict(list)  # leaf -> cables to hosts
    between: dict[tuple[str, str], list[Link]] = defaultdict(list)  # (lower, upper) -> cables
    other: list[Link] = []
    for c in links:
        ta, tb = tier_of.get(c.a.device, 0), tier_of.get(c.b.device, 0)
        if {ta, tb} == {0, 1}:
            under[c.a.device if ta == 1 else c.b.device].append(c)
        elif ta and tb and abs(ta - tb) == 1:
            low, high = (c.a.device, c.b.device) if ta < tb else (c.b.device, c.a.device)
            between[(low, high)].append(c)
        else:
            other.append(c)

    names = [e.device for cs in under.values() for c in cs for e in (c.a, c.b)]
    col = max([MIN_COL] + [width(n, 8) + 26 for n in names])
    # Leaves in panels of at most `per_panel`, each under the whole upper tiers again, so a
    # wide fabric wraps into rows that fit a page instead of running off it.
    per_panel = len(leaves)
    if fit_width is not None:
        per_panel = max(1, min(len(leaves), int((fit_width - LEFT - 20) // col)))
    panels = [leaves[i : i + per_panel] for i in range(0, len(leaves), per_panel)]
    span = col * per_panel
    items: list[Shape] = [Text(LEFT, 20, title, 14, bold=True)]
    lines: list[Shape] = []
    boxes: list[Shape] = []
    dots: list[Shape] = []
    y = TOP
    for number, panel in enumerate(panels):
        if len(panels) > 1:
            first, last = panel[0], panel[-1]
            items.append(
                Text(LEFT, y + 4, f"leaves {first} to {last} ({number + 1} of {len(panels)})", 10,
                     "#333333", bold=True)
            )  # fmt: skip
            y += 14
        y = _panel(scene, devices, levels, panel, under, between, col, span, y, lines, boxes, dots)
        y += 18 if number < len(panels) - 1 else 0
    deepest = y
    y = deepest + 8
    if other:
        items.append(Text(LEFT, y + 12, "Other links", 10, bold=True))
        y += 16
        for c in sorted(other, key=lambda c: c.id):
            text = f"{c.id}: {c.a.device} {c.a.port} - {c.b.device} {c.b.port}"
            mark = scene.marks.get(c.id)
            shown = Text(
                LEFT, y + 11, text, 8, COLOURS[mark] if mark else "#000000", bold=bool(mark)
            )
            dots.append(Group((shown,), _cable_hover(scene, c), _cable_attrs(scene, c)))
            y += 12
    legend = racks.legend(scene, LEFT, y + 4)
    y += 24 if legend else 6
    w = LEFT + span + 20
    key, tall = racks.rail_legend(scene, LEFT, y, w - LEFT)
    y += tall
    return Figure(w, y, (*items, *lines, *boxes, *dots, *legend, *key), title)


def _panel(
    scene: Scene,
    devices: dict[str, Device],
    levels: list[list[str]],
    leaves: list[str],
    under: dict[str, list[Link]],
    between: dict[tuple[str, str], list[Link]],
    col: float,
    span: float,
    y: float,
    lines: list[Shape],
    boxes: list[Shape],
    dots: list[Shape],
) -> float:
    """One panel from `y` down: every upper tier over `span`, `leaves` and their hosts.
    Returns the y below it."""
    x_of: dict[str, float] = {n: LEFT + (i + 0.5) * col for i, n in enumerate(leaves)}
    box_w: dict[str, float] = {n: col - 8 for n in leaves}
    drop: dict[str, float] = {}  # where an upper switch's line goes down to its bus
    for names_ in levels[1:]:
        pitch = span / len(names_)
        for k, n in enumerate(names_):
            x_of[n] = LEFT + (k + 0.5) * pitch
            box_w[n] = min(pitch - 8, 120)
            # Between two leaf columns, never on a leaf's riser: the lines would merge.
            gap = round((x_of[n] - LEFT) / col)
            drop[n] = min(
                max(LEFT + gap * col, x_of[n] - box_w[n] / 2 + 4), x_of[n] + box_w[n] / 2 - 4
            )
    tiers_ = [leaves, *levels[1:]]
    top_of: dict[str, float] = {}
    for t in range(len(tiers_), 0, -1):
        for n in tiers_[t - 1]:
            top_of[n] = y
            boxes.append(_switch(scene, devices[n], x_of[n], y, box_w[n]))
        y += BOX_H
        if t == 1:
            break
        uppers, lowers = tiers_[t - 1], tiers_[t - 2]
        bus_y = {n: y + 14 + k * BUS for k, n in enumerate(uppers)}
        for n in uppers:
            ends = [drop[n]] + [x_of[lo] for lo in lowers if (lo, n) in between]
            lines.append(Line(drop[n], top_of[n] + BOX_H, drop[n], bus_y[n], "#888888", 1))
            lines.append(Line(min(ends) - 8, bus_y[n], max(ends) + 8, bus_y[n], "#aaaaaa", 1))
            lines.append(Text(LEFT - 6, bus_y[n] + 3, n, 9, "#222222", "end", bold=True))
        below = y + 14 + len(uppers) * BUS + 10
        for lo in lowers:
            reached = [bus_y[n] for n in uppers if (lo, n) in between]
            if reached:
                lines.append(Line(x_of[lo], min(reached), x_of[lo], below, "#888888", 1))
            for n in uppers:
                group = sorted(between.get((lo, n), []), key=lambda c: c.id)
                for m, c in enumerate(group):
                    dots.append(_dot(scene, c, x_of[lo] + (m - (len(group) - 1) / 2) * 7, bus_y[n]))
        y = below

    # Hosts under their leaves, in leaf port order: a tick per cable, the host's name after it.
    deepest = y
    for leaf in leaves:
        cables = sorted(under.get(leaf, []), key=lambda c: _port_order(c, leaf))
        if not cables:
            continue
        x = x_of[leaf] - col / 2 + 8
        first = y + 6 + ROW
        lines.append(Line(x, y, x, first + (len(cables) - 1) * ROW - 3, "#888888", 1))
        for r, c in enumerate(cables):
            row_y = first + r * ROW
            host = c.b.device if c.a.device == leaf else c.a.device
            mark = scene.marks.get(c.id)
            plain = "#444444" if c.rail is None else rail_colour(c.rail)
            colour, thick = (COLOURS[mark], 3.0) if mark else (plain, 1.0)
            tick: tuple[Shape, ...] = (
                Line(x, row_y - 3, x + 10, row_y - 3, colour, thick, dash=not c.installed),
            )
            if mark:
                tick += (Dot(x + 10, row_y - 3, 3.5, colour),)
            dots.append(Group(tick, _cable_hover(scene, c), _cable_attrs(scene, c)))
            dots.append(_host(scene, devices[host], x + 14, row_y, col - 24))
        deepest = max(deepest, first + len(cables) * ROW)
    return deepest


def _port_order(c: Link, leaf: str) -> tuple[int, str]:
    port = c.a.port if c.a.device == leaf else c.b.port
    return (int(port) if port.isdigit() else 1 << 30, port)


def _host(scene: Scene, d: Device, x: float, y: float, room: float) -> Group:
    mark = scene.marks.get(d.name)
    items: list[Shape] = []
    if mark:
        items.append(
            Rect(x - 2, y - 9, min(room, width(d.name, 8, True) + 4) + 2, 12, COLOURS[mark])
        )
    items.append(
        Text(x, y, clip(d.name, 8, room), 8, "#ffffff" if mark else "#000000", bold=bool(mark))
    )
    hover = scene.hover(d.name, f"{d.name}: {d.model}, {d.role}, rack {d.rack} U{d.u}")
    attrs = [("data-device", d.name)] + ([("data-mark", mark.value)] if mark else [])
    return Group(tuple(items), hover, tuple(attrs))
