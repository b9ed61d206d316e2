"""`generated/draw/scene.json`: the plan as a picture's facts (`contract.scene`), compiled so
that every page `draw` makes, the audit's report.html above all, shows the state generated/
was compiled from and never re-plans whatever cluster/ holds when it is drawn."""

from __future__ import annotations

from common import memo
from compiler.model import Medium
from compiler.plan import Cable, Plan, grid
from contract.scene import PATH, Device, End, Link, RackSpot, Scene, floor_order


def scene(plan: Plan) -> Scene:
    """The plan as a picture's facts."""
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
    rails = {leaf: rail for leaf, (_, rail) in plan.rails.leaf.items()} if plan.rails else {}
    return Scene(
        plan.site.name,
        plan.site.room,
        racks,
        tuple(sorted(devices, key=lambda d: d.name)),
        _links(plan.cables, plan.ib_networks, tuple(sorted(rails.items()))),
    )


@memo.by_value  # a diff's two sides draw the same links unless a cable changed
def _links(
    cables: tuple[Cable, ...], ib_networks: frozenset[str], rails: tuple[tuple[str, int], ...]
) -> tuple[Link, ...]:
    """Each cable as the pictures draw it. A rail leaf's cables, to its servers and up to the
    spines, carry its rail (`rails`: leaf -> rail): a rail-optimised fabric is coloured by
    rail."""
    rail_of = dict(rails)
    return tuple(
        Link(
            c.id,
            c.network,
            c.network in ib_networks,
            End(c.a.device, c.a.port),
            End(c.b.device, c.b.port),
            f"{c.medium} {c.length_m:g} m, {c.rate}"
            + ("" if c.installed else ", not installed")
            + (", spare: its port down by design" if c.spare else ""),
            c.installed,
            rail_of.get(c.a.device) if c.network in ib_networks else None,
        )
        for c in cables
    )


def render(plan: Plan) -> dict[str, str]:
    drawn = scene(plan)
    return {PATH: _text(drawn.site, drawn.room, drawn.racks, drawn.devices, drawn.links)}


@memo.by_value  # a diff's two sides draw one floor unless a rack, device or cable changed
def _text(
    site: str,
    room: str,
    racks: tuple[RackSpot, ...],
    devices: tuple[Device, ...],
    links: tuple[Link, ...],
) -> str:
    """The scene file's text: its records hashed and compared (frozen dataclasses, a few
    tenths of a second at 4,096 servers), not encoded again (two seconds)."""
    return Scene(site, room, racks, devices, links).to_json()
