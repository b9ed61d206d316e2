"""`generated/inventory.json`: every host and switch with its derived facts, for other tools."""

from __future__ import annotations

from typing import Any

from compiler.plan import Plan
from compiler.targets.render import to_json

SCHEMA = 1


def render(plan: Plan) -> dict[str, str]:
    hosts: dict[str, Any] = {}
    for h in plan.hosts:
        hosts[h.name] = {
            "role": h.role.value,
            "rack": h.rack,
            "slot": h.slot,
            "u": h.u,
            "model": h.model,
            "serial": h.serial,
            "ring": h.ring,
            "profile": h.profile,
            # These plan records are flat named tuples: _asdict(), not a deep copy (one was a
            # third of this target).
            "interfaces": {i.name: i._asdict() for i in (*h.interfaces, h.bmc)},
            "ib_ports": [p._asdict() for p in h.ib_ports],
        }
    switches = {
        s.name: {**s._asdict(), "role": s.role.value, "medium": s.medium.value}
        for s in plan.switches
    }
    for s in switches.values():
        del s["name"]
    return {
        "inventory.json": to_json(
            {"schema": SCHEMA, "site": plan.site.name, "hosts": hosts, "switches": switches}
        )
    }
