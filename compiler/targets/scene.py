"""`generated/draw/scene.json`: the plan as a picture's facts (`contract.scene`), compiled so
that every page `draw` makes, the audit's report.html above all, shows the state generated/
was compiled from and never re-plans whatever cluster/ holds when it is drawn."""

from __future__ import annotations

from collections.abc import Iterator

from common import memo
from compiler.model import Medium
from compiler.plan import Cable, Plan, grid
from contract.scene import (
    PATH,
    Device,
    End,
    Link,
    RackSpot,
    Scene,
    floor_order,
    link_line,
    scene_text,
)


def scene(plan: Plan) -> Scene:
    """The plan as a picture's facts."""
    racks, devices = _floor(plan)
    links = tuple(
        Link(cable, network, ib, End(a, a_port), End(b, b_port), text, installed, rail)
        for cable, network, ib, a, a_port, b, b_port, text, installed, rail in _link_fields(
            plan.cables, plan.ib_networks, _rails(plan)
        )
    )
    return Scene(plan.site.name, plan.site.room, racks, devices, links)


def _floor(plan: Plan) -> tuple[tuple[RackSpot, ...], tuple[Device, ...]]:
    """The racks in floor order and the devices by name."""
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
    return racks, tuple(sorted(devices, key=lambda d: d.name))


def _rails(plan: Plan) -> tuple[tuple[str, int], ...]:
    """Each rail leaf's rail (none off a rail-optimised fabric)."""
    rails = {leaf: rail for leaf, (_, rail) in plan.rails.leaf.items()} if plan.rails else {}
    return tuple(sorted(rails.items()))


# A link's fields in Link's order, its ends flat: (id, network, infiniband, a's device and
# port, b's device and port, text, installed, rail).
_LinkFields = tuple[str, str, bool, str, str, str, str, str, bool, int | None]


def _link_fields(
    cables: tuple[Cable, ...], ib_networks: frozenset[str], rails: tuple[tuple[str, int], ...]
) -> Iterator[_LinkFields]:
    """Each cable as the pictures draw it. A rail leaf's cables, to its servers and up to the
    spines, carry its rail (`rails`: leaf -> rail): a rail-optimised fabric is coloured by
    rail."""
    rail_of = dict(rails)
    for c in cables:
        infiniband = c.network in ib_networks
        yield (
            c.id,
            c.network,
            infiniband,
            c.a.device,
            c.a.port,
            c.b.device,
            c.b.port,
            f"{c.medium} {c.length_m:g} m, {c.rate}"
            + ("" if c.installed else ", not installed")
            + (", spare: its port down by design" if c.spare else ""),
            c.installed,
            rail_of.get(c.a.device) if infiniband else None,
        )


@memo.by_value  # a diff's two sides draw the same links unless a cable changed
def _link_lines(
    cables: tuple[Cable, ...], ib_networks: frozenset[str], rails: tuple[tuple[str, int], ...]
) -> tuple[str, ...]:
    """The links' lines of the scene file, straight from the cables: a Link and two Ends a
    cable, made only to be written, were half of the scene's time."""
    return tuple(link_line(*f) for f in _link_fields(cables, ib_networks, rails))


def render(plan: Plan) -> dict[str, str]:
    racks, devices = _floor(plan)
    links = _link_lines(plan.cables, plan.ib_networks, _rails(plan))
    return {PATH: _text(plan.site.name, plan.site.room, racks, devices, links)}


@memo.by_value  # a diff's two sides draw one floor unless a rack, device or cable changed
def _text(
    site: str,
    room: str,
    racks: tuple[RackSpot, ...],
    devices: tuple[Device, ...],
    links: tuple[str, ...],
) -> str:
    """The scene file's text: its records hashed and compared (frozen dataclasses, a few
    tenths of a second at 4,096 servers), not encoded again (two seconds)."""
    return scene_text(site, room, racks, devices, links)
