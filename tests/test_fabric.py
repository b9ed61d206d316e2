"""The fabric targets against the real programs: OpenSM on ibsim, then ibnetdiscover.

For the reference cluster and a small one: ibsim simulates the generated topology.net, the
generated master opensm.conf runs once (file paths pointed at the generated files, the
planned guid2lid seeded), and the fabric ibnetdiscover finds is exactly the cable plan.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import pytest

from clusterforge.lab.ibsim import SimFabric
from compiler import generate, generate_rails, pipeline
from compiler.load import Source, load
from compiler.pipeline import Compiled
from contract.probes import ibnetdiscover
from tests.conftest import REPO, require_tool

REFERENCE = load(REPO / "cluster")


def small_cluster() -> Source:
    """Two GPU racks, two spines, one subnet manager: the smallest fat tree worth routing."""
    data: dict[str, Any] = dict(REFERENCE.data)
    racks = []
    for rack in data["racks"]:
        if rack["name"] in ("r01", "r02"):
            racks.append(rack)
        elif rack["name"] == "n01":
            spines = [s for s in rack["switches"] if s["name"] in ("spine01", "spine02")]
            racks.append({**rack, "switches": tuple(spines)})
        elif rack["name"] == "s01":
            keep = ("prov01", "mon01", "sm01")
            racks.append({**rack, "nodes": tuple(n for n in rack["nodes"] if n["name"] in keep)})
    firmware = dict(data["firmware"])
    firmware["rings"] = ({"name": "canary", "nodes": ("gpu001",)}, {"name": "main"})
    # Three links to each of two spines keep the leaves within 1:1.
    fabric = {
        **data["fabric"],
        "links_per_spine": 3,
        "subnet_managers": ({"host": "sm01", "priority": 14},),
    }
    data.update(racks=tuple(racks), firmware=firmware, fabric=fabric)
    return Source(data, REFERENCE.locations)


def write_files(compiled: Compiled, root: Path) -> Path:
    for rel, body in compiled.files.items():
        if rel.startswith(("fabric/", "opensm/")):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
    return root


def planned_links(compiled: Compiled) -> set[frozenset[tuple[str, int]]]:
    """Installed InfiniBand cables as unordered pairs of (name, port)."""
    ib = {n for n, net in compiled.cluster.networks.items() if net.medium.value == "infiniband"}
    return {
        frozenset({(c.a.device, int(c.a.port)), (c.b.device, int(c.b.port.rsplit("/")[-1]))})
        for c in compiled.plan.cables
        if c.network in ib and c.installed
    }


def discovered_links(text: str) -> set[frozenset[tuple[str, int]]]:
    """ibnetdiscover's links as (name, port) pairs: switches named through the node-name
    map, hosts by their node description ("gpu001 mlx5_0")."""
    fabric = ibnetdiscover.parse(text)
    name = {n["guid"]: n["description"].split()[0] for n in fabric["nodes"]}
    return {frozenset({(name[g], p) for g, p in link["ends"]}) for link in fabric["links"]}


def three_tier() -> Source:
    """Two pods of four racks (four spines each), two cores per spine position: the smallest
    three-tier fat tree the generator makes, 1:1 at every tier."""
    return generate.source(32, per_rack=4, racks_per_pod=4, spines=4, cores_per_plane=2)


def rails() -> Source:
    """One scalable unit of eight-rail servers: eight HCAs (eight CAs) a server, each rail on
    its own leaf, four spines."""
    return generate_rails.source(1)


def rails_three_tier() -> Source:
    """The smallest rail fabric of three tiers: four units of two-rail servers on 8-port
    switches (a shrunk QM9700: 4 ports down, 4 up), spine groups of two units (four spines
    each), one core a plane: rail k of a server in pod 2 reaches pod 1 through a core."""
    return generate_rails.source(4, rails=2, racks_per_unit=2, per_rack=2, switch_ports=8, tiers=3)


@pytest.mark.realtool
@pytest.mark.parametrize("which", ["reference", "small", "three-tier", "rails", "rails-three-tier"])
def test_opensm_routes_the_planned_fabric(which: str, tmp_path: Path) -> None:
    for tool in ("ibsim", "opensm", "ibnetdiscover"):
        require_tool(tool)
    source = {
        "reference": REFERENCE, "small": small_cluster, "three-tier": three_tier, "rails": rails,
        "rails-three-tier": rails_three_tier,
    }[which]  # fmt: skip
    compiled = pipeline.compile_source(source if isinstance(source, Source) else source())
    out = write_files(compiled, tmp_path / "generated")
    opensm = out / "opensm"
    master = max(compiled.plan.fabric.subnet_managers, key=lambda sm: sm.priority).host
    # Every /etc/opensm path of the installed config points at the generated file instead.
    overrides = {
        key: str(opensm / Path(value).name)
        for key, value in (
            line.split(None, 1)
            for line in (opensm / master / "opensm.conf").read_text().splitlines()
            if line and not line.startswith("#")
        )
        if value.startswith("/etc/opensm/")
    }
    assert set(overrides) == {
        "root_guid_file", "cn_guid_file", "partition_config_file", "node_name_map_name"
    }  # fmt: skip

    with SimFabric(out / "fabric" / "topology.net", tmp_path / "sim") as sim:
        result = sim.run_opensm_once(
            opensm / master / "opensm.conf",
            overrides=overrides,
            sim_host=f"{master} mlx5_0",
            seed_cache=[opensm / "guid2lid"],
        )
        assert result.problems == [], result.problems
        assert result.lint == ()
        assert result.master, result.output[-2000:]
        assert result.routing_engine == "ftree"
        assert "ftree tables configured on all switches" in result.log
        roles = [s.role.value for s in compiled.plan.switches]
        cns = sum(len(h.ib_ports) for h in compiled.plan.hosts if h.role.value == "gpu")
        assert f"({cns} of them CNs)" in result.log, "cn_guid_file names every GPU HCA"
        # root_guid_file made the top tier (spines, or the cores of a three-tier fabric) the
        # roots, and every leaf sits one rank below each tier above it.
        tiers = [t for t in ("core", "spine") if t in roles]
        assert f"FatTree rank (roots to leaf switches): {len(tiers) + 1}" in result.log
        assert f"has {roles.count(tiers[0])} switches at rank 0 (roots)" in result.log
        if len(tiers) == 2:
            assert re.search(rf"has {roles.count('spine')} switches at rank 1$", result.log, re.M)
        leaves = roles.count("leaf")
        rank = len(tiers)
        assert f"has {leaves} switches at rank {rank} ({leaves} of them leafs)" in result.log

        scan = sim.run(["ibnetdiscover", "--node-name-map", str(opensm / "ib-node-name-map")])
        assert scan.returncode == 0, scan.stderr
        assert discovered_links(scan.stdout) == planned_links(compiled)

        # The planned static LIDs were taken: `ibnetdiscover -p` lines read
        # `CA <lid> <port> <port guid> 4x HDR - SW ...`.
        ports = sim.run(["ibnetdiscover", "-p"]).stdout.splitlines()
        seen = {f[3]: int(f[1]) for f in (line.split() for line in ports) if f[:1] == ["CA"]}
        planned = {p.guid: p.lid for h in compiled.plan.hosts for p in h.ib_ports}
        assert {g: seen[g] for g in planned if g in seen} == {
            g: lid for g, lid in planned.items() if g in seen
        }
        assert len(seen) >= len(planned) - 2, "every cabled HCA was seen"  # spares are uncabled


def test_adding_a_rack_and_leaf_only_adds_lines() -> None:
    """A new rack of 5 servers and its leaf: fabric and OpenSM files change only by the new
    cables and entries (no existing line moves or changes)."""
    base = pipeline.compile_source(REFERENCE)
    template = next(r for r in REFERENCE.data["racks"] if r["name"] == "r25")
    nodes = tuple(
        {**n, "name": f"gpu{200 + i}", "serial": f"NEWRACK{i:05d}", "slot": i + 1,
         "u": 2 + i * 4, "guid": f"0x0c42a10300f0{i:04x}",
         "mac": {k: f"02:00:0{j}:26:00:{i:02x}" for j, k in enumerate(n["mac"])}}
        for i, n in enumerate([*template["nodes"], template["nodes"][0]])
    )  # fmt: skip
    switches = tuple(
        {**s, "name": s["name"][:4] + "26", "serial": f"NEWSW{k:06d}",
         "mac": f"02:00:09:26:00:{k:02x}",
         **({"guid": "0xb8cef60300f00026"} if "guid" in s else {})}
        for k, s in enumerate(template["switches"])
    )  # fmt: skip
    rack = {**template, "name": "r26", "id": 26, "col": 13, "nodes": nodes, "switches": switches}
    grown = pipeline.compile_source(
        Source({**REFERENCE.data, "racks": (*REFERENCE.data["racks"], rack)}, REFERENCE.locations)
    )
    changed = 0
    for path, old in base.files.items():
        if not path.startswith(("fabric/", "opensm/")) or path == "fabric/bom.csv":
            continue
        diff = list(
            difflib.ndiff(old.decode().splitlines(), grown.files[path].decode().splitlines())
        )
        # A spine's Slurm line lists its leaves as one range, which grows by the new leaf.
        removed = [
            line
            for line in diff
            if line.startswith("- ") and not line.startswith("- SwitchName=spine")
        ]
        assert removed == [], f"{path} lost or changed lines: {removed[:3]}"
        changed += any(line.startswith("+ ") for line in diff)
    assert changed >= 6, "the new rack shows up in topology, cables, Slurm and OpenSM files"
