"""`generated/firmware/`: the versions every box must run, so a baseline change shows its reach.

  manifest.yaml   rings in rollout order; per model its baseline (firmware plus the fleet's
                  software: ofed, kernel); per node its model, ring, versions and pins with
                  their reasons; per switch its firmware;
  manifest.csv    one row per node (then switch) per version key, in rollout order: in a pull
                  request's diff every changed row names the node and the ring it rolls out in.
Node versions are `Host.versions`, the same values generated/expected/ makes the audit check.
"""

from __future__ import annotations

from typing import Any

from compiler.plan import Plan, versions
from compiler.targets.render import template, to_csv, to_yaml

SCHEMA = 1
CSV_COLUMNS = ("device", "model", "ring", "key", "version", "pin_reason")


def manifest(plan: Plan) -> dict[str, Any]:
    servers = plan.hardware.servers
    return {
        "schema": SCHEMA,
        "rings": [ring.name for ring in plan.firmware.rings],
        "baselines": {
            model: dict(
                sorted(
                    versions(plan.firmware, model).items()
                    if model in servers
                    else baseline.versions().items()
                )
            )
            for model, baseline in sorted(plan.firmware.baselines.items())
        },
        "nodes": {
            h.name: {"model": h.model, "ring": h.ring, "versions": dict(h.versions)}
            | ({"pinned": dict(h.pinned)} if h.pinned else {})
            for h in plan.hosts
        },
        "switches": {
            s.name: {"model": s.model, "firmware": s.firmware} for s in plan.switches if s.firmware
        },
    }


def rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    """The CSV's rows: nodes in rollout order (ring, then name), then switches, no ring."""
    order = {ring.name: i for i, ring in enumerate(plan.firmware.rings)}
    out = [
        (h.name, h.model, h.ring, key, version, h.pinned.get(key, ""))
        for h in sorted(plan.hosts, key=lambda h: (order[h.ring], h.name))
        for key, version in sorted(h.versions.items())
    ]
    out += [(s.name, s.model, "", "firmware", s.firmware, "") for s in plan.switches if s.firmware]
    return out


def render(plan: Plan) -> dict[str, str]:
    return {
        "firmware/manifest.yaml": template("firmware-header.j2") + to_yaml(manifest(plan)),
        "firmware/manifest.csv": to_csv(CSV_COLUMNS, rows(plan)),
    }
