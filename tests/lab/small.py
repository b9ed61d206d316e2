"""A small cluster for the lab tests: the reference cluster cut down to five hosts (and the
four switches of their two racks).

``compile_lab(repo, into)`` compiles it into ``into/generated/``: two GPU servers (rack r01),
the provisioning, monitoring and subnet-manager hosts (rack s01), two spines. A lab of it is
up in a second, so each scenario of tests/test_audit_live.py gets a lab of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler import output, pipeline
from compiler.load import Source, load

_RACKS = {"r01": ("gpu001", "gpu002"), "s01": ("prov01", "mon01", "sm01")}
_SPINES = ("spine01", "spine02")


def lab_cluster(repo: Path) -> Source:
    """`repo`'s cluster/ cut down to the lab's five hosts: gpu001 and gpu002 (rack r01), and
    prov01, mon01 and sm01 (rack s01, sm01 the one subnet manager); spines 01 and 02."""
    reference = load(repo / "cluster")
    data: dict[str, Any] = dict(reference.data)
    racks = []
    for rack in data["racks"]:
        if rack["name"] in _RACKS:
            nodes = tuple(n for n in rack["nodes"] if n["name"] in _RACKS[rack["name"]])
            racks.append({**rack, "nodes": nodes})
        elif rack["name"] == "n01":
            spines = tuple(s for s in rack["switches"] if s["name"] in _SPINES)
            racks.append({**rack, "switches": spines})
    firmware = {
        **data["firmware"],
        "rings": ({"name": "canary", "nodes": ("gpu001",)}, {"name": "main"}),
    }
    # Two links to each spine keep the one leaf (three hosts on it) within 1:1.
    fabric = {
        **data["fabric"],
        "links_per_spine": 2,
        "subnet_managers": ({"host": "sm01", "priority": 14},),
    }
    data.update(racks=tuple(racks), firmware=firmware, fabric=fabric)
    return Source(data, reference.locations)


def compile_lab(repo: Path, into: Path) -> Path:
    """Compile the lab cluster into `into/generated/`; returns `into`, to pass as `-C`."""
    output.write(into / "generated", pipeline.compile_source(lab_cluster(repo)).files)
    return into
