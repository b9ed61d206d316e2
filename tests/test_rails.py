"""Servers of eight HCAs on a rail-optimised fabric: the shipped example (examples/rails/)
compiles to its committed generated/, every rail of a server lands on its unit's rail leaf,
and the downstream files (OpenSM, NCCL, IPoIB, acceptance) follow the rails. OpenSM routing
the fabric on ibsim: tests/test_fabric.py (`rails`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from audits.accept import judge, read_inputs
from audits.collect import Collected
from audits.compare import compare_host
from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet, as_record
from common.errors import SourceError
from common.rules import Rule
from compiler import generate_rails, pipeline, validation
from compiler.load import Source
from compiler.model import ScalableUnit, validate
from compiler.output import read_tree, write
from compiler.pipeline import Compiled
from compiler.plan import build, room
from compiler.rails import RAIL_LID_TOP, Rails
from compiler.targets.acceptance import servers
from compiler.targets.labels import cabling
from compiler.targets.render import to_yaml
from compiler.targets.routes import ipoib_hwaddr
from compiler.targets.scene import scene
from contract.probes import nvidia_smi_topo
from draw import labels as sheets
from tests.conftest import REPO, require_tool
from tests.lab.acceptance_run import Run
from tests.test_accept import ftree_tables, path
from tests.test_labels import _text as pdf_text

EXAMPLE = REPO / "examples" / "rails"
NOW = datetime(2026, 5, 4, 6, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def example() -> Compiled:
    return pipeline.compile_repo(EXAMPLE)


def test_example_compiles_to_its_committed_generated(example: Compiled) -> None:
    on_disk = read_tree(EXAMPLE / "generated")
    assert sorted(on_disk) == sorted(example.files), "examples/rails/generated/ is stale"
    differing = [p for p in example.files if on_disk[p] != example.files[p]]
    assert differing == [], "run `clusterforge -C examples/rails compile`"


def test_example_check_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(EXAMPLE), "compile", "--check"]) == 0, capsys.readouterr().err


def test_validate_counts_the_room_in_units(capsys: pytest.CaptureFixture[str]) -> None:
    """The example's eight spines are full with two units (64 ports, 16 leaves x 4 links);
    so are one unit's four (8 leaves x 8 links): a unit more needs more spines."""
    assert main(["-C", str(EXAMPLE), "validate"]) == 0
    assert "0 more scalable units (up to 2: spine ports)" in capsys.readouterr().out
    one = validation.check(generate_rails.source(1))
    assert str(room(one)).endswith("0 more scalable units (up to 1: spine ports)")


def test_every_rail_on_its_units_leaf_at_the_servers_port(example: Compiled) -> None:
    units = example.cluster.fabric.scalable_units
    unit_of = {rack: (unit, place) for unit in units for place, rack in enumerate(unit.racks)}
    racks = {rack.name: rack for rack in example.cluster.racks}
    to_host = [c for c in example.plan.cables if c.b.device.startswith("gpu")]
    seen: Counter[str] = Counter()
    for c in to_host:
        if c.network.startswith("ib"):
            device = c.b.port.split("/")[0]
            rail = int(device.removeprefix("mlx5_"))
            unit, place = unit_of[c.b.rack]
            node = next(n for n in racks[c.b.rack].nodes if n.name == c.b.device)
            assert c.a.device == unit.leaves[rail], c
            assert int(c.a.port) == place * unit.servers_per_rack + node.slot, c
            assert c.id == f"{c.a.device.upper()}-{int(c.a.port):02d}"
            assert c.rate == "4xNDR"
            seen[c.b.device] += 1
    gpus = [h.name for h in example.plan.hosts if h.role.value == "gpu"]
    assert len(gpus) == 63  # two units of 32, the last position the fabric managers'
    assert seen == dict.fromkeys(gpus, 8)


def test_leaves_link_evenly_to_every_spine(example: Compiled) -> None:
    spines = {s.name for s in example.plan.switches if s.role.value == "spine"}
    up: Counter[tuple[str, str]] = Counter(
        (c.a.device, c.b.device) for c in example.plan.cables if c.b.device in spines
    )
    leaves = {leaf for unit in example.cluster.fabric.scalable_units for leaf in unit.leaves}
    assert {leaf for leaf, _ in up} == leaves
    assert set(up.values()) == {example.cluster.fabric.links_per_spine}
    assert len(up) == len(leaves) * len(spines)
    # Every spine port is used once: a unit's leaves land after the units before it.
    ends = [(c.b.device, c.b.port) for c in example.plan.cables if c.b.device in spines]
    assert len(ends) == len(set(ends)) == 64 * len(spines)


def test_guids_and_static_lids_are_one_per_port(example: Compiled) -> None:
    ports = [p for h in example.plan.hosts for p in h.ib_ports]
    assert len(ports) == 63 * 8 + 4
    assert len({p.guid for p in ports}) == len(ports)
    lids = [p.lid for p in ports] + [s.lid for s in example.plan.switches if s.lid]
    assert len(set(lids)) == len(lids)
    assert all(0 < lid <= 0xBFFF for lid in lids)
    guid2lid = (example.files["opensm/guid2lid"]).decode()
    assert guid2lid.count("\n\n") == len(lids)
    cn = example.files["opensm/cn_guids"].decode().splitlines()
    assert sorted(cn[2:]) == sorted(
        p.guid for h in example.plan.hosts if h.role.value == "gpu" for p in h.ib_ports
    )


def test_the_lid_plan_holds_4096_eight_rail_servers() -> None:
    """128 units of 32: the last HCA of the last server inside the rails' block."""
    units = tuple(
        ScalableUnit(
            name=f"su{u}",
            racks=tuple(f"r{u:03d}{k}" for k in range(8)),
            leaves=tuple(f"su{u}-leaf{k}" for k in range(8)),
            servers_per_rack=4,
        )
        for u in range(128)
    )
    plan = Rails(8, 32, units, {"last": (127, 7)}, {})
    cluster = validate(dict(generate_rails.source(1).data))
    first = next(rack for rack in cluster.racks if rack.name == "r001")
    rack = first.model_copy(update={"name": "last"})
    node = first.nodes[0].model_copy(update={"slot": 4})
    model = cluster.hardware.servers["hgx-h100"]
    lids = [plan.host_lid(rack, node, nic) for nic in model.nics if nic.rail is not None]
    assert max(lids) == RAIL_LID_TOP == 0x1000 + 4096 * 8 - 1


def test_nccl_lists_the_rails_in_gpu_order(example: Compiled) -> None:
    conf = example.files["gpudirect/gpu/nccl.conf"].decode()
    hcas = ",".join(f"mlx5_{k}:1" for k in range(8))
    assert f"NCCL_IB_HCA=={hcas}\n" in conf


def test_the_gpu_order_follows_affinity_not_the_listing() -> None:
    """A board whose HCAs are listed out of GPU order: NCCL_IB_HCA follows the GPUs."""
    tree = generate_rails.generate_rails(1)
    hardware = tree["hardware.yaml"]
    swapped = hardware.replace("hca: mlx5_0, gpus: [0]", "hca: mlx5_0, gpus: [1]").replace(
        "hca: mlx5_1, gpus: [1]", "hca: mlx5_1, gpus: [0]"
    )
    assert swapped != hardware
    tree["hardware.yaml"] = swapped
    from compiler.load import parse

    source = parse({f"cluster/{p}": t.encode() for p, t in tree.items()})
    conf = pipeline.compile_source(source).files["gpudirect/gpu/nccl.conf"].decode()
    assert "NCCL_IB_HCA==mlx5_1:1,mlx5_0:1,mlx5_2:1," in conf


def test_each_ipoib_interface_matches_its_own_hca(example: Compiled) -> None:
    host = example.plan.host("gpu001")
    guid = {p.device: p.guid for p in host.ib_ports}
    for k in range(8):
        conn = example.files[f"routes/gpu001/ib{k}.nmconnection"].decode()
        assert f"mac-address={ipoib_hwaddr(guid[f'mlx5_{k}'])}" in conn, conn


def test_acceptance_ceiling_is_eight_ndr_rails(example: Compiled) -> None:
    plan = json.loads(example.files["acceptance/plan.json"])
    assert plan["ib_write_bw"]["ceiling_gb_s"] == 50.0  # one 4x NDR link
    steps = plan["nccl_tests"]["steps"]
    assert steps and {s["ceiling_gb_s"] for s in steps} == {400.0}  # 8 x 400 Gb/s
    assert {s["min_bus_gb_s"] for s in steps} == {round(400 * 0.72, 2)}


def test_a_fat_tree_refuses_several_hcas(capsys: pytest.CaptureFixture[str]) -> None:
    """The shape a site without rails would write: eight HCAs, one leaf per rack."""
    tree = generate_rails.generate_rails(1)
    tree["fabric.yaml"] = tree["fabric.yaml"].replace("topology: rail-optimised\n", "")
    from compiler.load import parse

    source = parse({f"cluster/{p}": t.encode() for p, t in tree.items()})
    with pytest.raises(SourceError) as info:
        pipeline.compile_source(source)
    rules = {d.rule for d in info.value.diagnostics}
    assert Rule.RAIL_LAYOUT in rules and Rule.SCALABLE_UNIT in rules, rules


def test_init_writes_a_rail_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "site"), "--rails", "8", "--units", "1"]) == 0
    assert main(["-C", str(tmp_path / "site"), "compile"]) == 0, capsys.readouterr().err
    compiled = pipeline.compile_repo(tmp_path / "site")
    gpus = [h for h in compiled.plan.hosts if h.role.value == "gpu"]
    assert len(gpus) == 31 and {len(h.ib_ports) for h in gpus} == {8}


def test_pairs_run_rail_to_rail_and_cross_every_rail_cable(example: Compiled) -> None:
    plan = json.loads(example.files["acceptance/plan.json"])
    rails = example.plan.rails
    assert rails is not None
    leaf_of = {c.id: c.a.device for c in example.plan.cables}
    crossed = set()
    for round_ in plan["ib_write_bw"]["rounds"]:
        logs = [p["log"] for p in round_["pairs"]]
        assert len(logs) == len(set(logs))
        for p in round_["pairs"]:
            assert p["client"] != p["server"]
            on = {rails.leaf[leaf_of[c]][1] for c in p["cables"]}
            assert len(on) == 1, p  # one rail end to end
            [rail] = on
            assert p["log"].endswith(f"-mlx5_{rail}.txt")
            assert p["lids"] == [
                next(q.lid for q in example.plan.host(h).ib_ports if q.device == f"mlx5_{rail}")
                for h in (p["client"], p["server"])
            ]
            crossed |= set(p["cables"])
    gpus = {h.name for h in example.plan.hosts if h.role.value == "gpu"}
    rail_cables = {c.id for c in example.plan.cables if c.b.device in gpus and "/" in c.b.port}
    assert rail_cables <= crossed
    script = example.files["acceptance/ib_write_bw/round-01.sh"].decode()
    assert "ib_write_bw -d mlx5_7 -i 1 -p 18522 " in script


def test_the_pairs_that_split_cables_share_rounds(example: Compiled) -> None:
    # Two units: a round of leaf pairs and one of the pair over the uplink it left, then the
    # pairs added to tell apart the cables those cross together. Those took 31 rounds of one
    # pair a rail when each rail's were all one client's (the first host, whose routes came
    # first); spread over clients, they fit in two.
    rounds = json.loads(example.files["acceptance/plan.json"])["ib_write_bw"]["rounds"]
    assert len(rounds) <= 4
    added = [p for r in rounds[2:] for p in r["pairs"] if p["hca"] == "mlx5_3"]
    assert len({p["client"] for p in added}) > len(added) // 2


def test_slurm_sees_a_unit_as_one_switch(example: Compiled) -> None:
    """A server under eight leaves is no tree: Slurm's leaf level is the unit."""
    topology = example.files["fabric/slurm-topology.conf"].decode().splitlines()
    assert "SwitchName=su1 Nodes=gpu[001-032]" in topology
    assert "SwitchName=su2 Nodes=gpu[033-063]" in topology
    spines = [line for line in topology if line.startswith("SwitchName=spine")]
    assert len(spines) == 8 and all(line.endswith(" Switches=su[1-2]") for line in spines)
    nodes = example.files["slurm/nodes.conf"].decode()
    assert "NodeName=gpu033 " in nodes and "Features=r009,su2,hgx-h100 " in nodes
    steps = json.loads(example.files["acceptance/plan.json"])["nccl_tests"]["steps"]
    assert [(s["step"], s["nodes"], s["leaves"]) for s in steps] == [
        ("nccl-004", 4, 1), ("nccl-016", 16, 1), ("nccl-all", 63, 2)
    ]  # fmt: skip


@pytest.mark.realtool
def test_ftree_routes_each_rail_as_the_pair_plan_says(example: Compiled, tmp_path: Path) -> None:
    """The pair rule of compiler/acceptance.py against OpenSM itself, on the example's two
    units: ftree on ibsim with the planned static LIDs; on every rail, each leaf's forwarding
    table leads rail k of a server of the other unit over the cables the plan names."""
    lfts = ftree_tables(example, tmp_path)
    rails = example.plan.rails
    assert rails is not None
    found, tree = servers(example.plan)
    checked = 0
    for server in found:
        rail = rails.leaf[server.leaf][1]
        for leaf in {s.leaf for s in found if rails.leaf[s.leaf][1] == rail} - {server.leaf}:
            client = next(s for s in found if s.leaf == leaf)
            pair = tree.route(client, server)
            assert pair is not None and path(example, lfts, leaf, server) == pair.cables[1:]
            checked += 1
    assert checked == 63 * 8  # every rail HCA, from the other unit's leaf of its rail


def _copy(tmp: Path) -> Path:
    shutil.copytree(EXAMPLE / "cluster", tmp / "cluster")
    return tmp


def test_import_sets_each_hcas_guid_by_its_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A racking sheet's `guid mlx5_3` column and a drift report's replaced HCA land in the
    server's `guids`; a bare `guid` for a server of eight HCAs is a conflict, not a guess."""
    repo = _copy(tmp_path)
    (repo / "sheet.csv").write_text(
        "rack,u,guid mlx5_3,guid\nr001,2,a0:88:c2:03:00:aa:aa:03,\nr001,10,,0xa088c20300bbbbbb\n"
    )
    assert main(["-C", str(repo), "import", "--csv", str(repo / "sheet.csv")]) == 2
    out = capsys.readouterr()
    assert "gpu002 has 8 HCAs: name the one this GUID is of" in out.out + out.err
    assert "gpu001 guids.mlx5_3: 0xa088c2030000020b -> 0xa088c20300aaaa03" in out.out
    report = tmp_path / "report"
    report.mkdir()
    findings = [{"host": "gpu002", "kind": "ib-port", "path": "ib_ports[mlx5_5/1].port_guid",
                 "expected": "0xa088c20300000215", "observed": "0xa088c20300cccc05"}]  # fmt: skip
    (report / "report.json").write_text(json.dumps({"findings": findings}))
    assert main(["-C", str(repo), "import", "--audit", str(report)]) == 0
    compiled = pipeline.compile_repo(repo)
    guids = {p.device: p.guid for p in compiled.plan.host("gpu001").ib_ports}
    assert guids["mlx5_3"] == "0xa088c20300aaaa03" and guids["mlx5_2"] == "0xa088c2030000020a"
    assert {p.device: p.guid for p in compiled.plan.host("gpu002").ib_ports}["mlx5_5"] == (
        "0xa088c20300cccc05"
    )
    assert b"0xa088c20300aaaa03" in compiled.files["opensm/cn_guids"]


@pytest.mark.parametrize(("rails", "units"), [(1, 1), (2, 8), (4, 2), (8, 4)])
def test_the_generator_makes_a_valid_site_of_any_shape_it_takes(rails: int, units: int) -> None:
    cluster = validation.check(generate_rails.source(units, rails=rails))
    plan = build(cluster)
    gpus = [h for h in plan.hosts if h.role.value == "gpu"]
    # Each unit 32 positions; the last unit leaves the fabric's four service hosts a port.
    assert len(gpus) == 32 * units - -(-4 // rails)
    assert {len(h.ib_ports) for h in gpus} == {rails}
    assert plan.rails is not None and len(plan.rails.leaf) == rails * units


def test_the_audit_names_a_servers_rail_3_and_rail_4_cables_as_swapped() -> None:
    """A technician plugs gpu001's rail-3 and rail-4 cables into each other's HCA: each leaf
    now reaches the wrong rail. The fabric audit names both cable IDs, as a swapped pair;
    the fabric as planned is clean."""
    from audits.collect import Collected
    from audits.fabric import compare_fabric
    from clusterforge.lab.fleet import Fleet
    from contract import Fabric

    generated = REPO / "examples" / "rails" / "generated"
    contract = Fabric.from_json(json.loads((generated / "expected" / "fabric.json").read_text()))

    def audit(fleet: Fleet) -> dict[str, list[object]]:
        ports = {p["port_guid"]: h for h, s in fleet.hosts.items() for p in s.state["ib_ports"]}
        scan = Collected({"ibnetdiscover": fleet.fabric_outputs()["ibnetdiscover"]}, {})
        return compare_fabric(contract, ports, scan).entry

    fleet = Fleet.load(generated)
    clean = audit(fleet)
    assert clean["miswired"] == clean["missing"] == clean["swapped"] == []
    cable_of = {c["b"]["guid"]: cable for cable, c in fleet.cables.items()}  # by HCA port
    hcas = {p["device"]: p["port_guid"] for p in fleet.hosts["gpu001"].state["ib_ports"]}
    three, four = cable_of[hcas["mlx5_3"]], cable_of[hcas["mlx5_4"]]
    assert three != four and three.startswith("SU1-LEAF3-") and four.startswith("SU1-LEAF4-")
    fleet.swap_far_ends(three, four)
    swapped = audit(fleet)
    assert swapped["swapped"] == [sorted([three, four])]
    assert swapped["miswired"] == sorted([three, four]) and swapped["missing"] == []


@pytest.mark.parametrize("cable", ["SU1-LEAF5-07", "SU2-LEAF5-20"])
def test_accept_names_the_one_slow_rail_5_cable(tmp_path: Path, cable: str) -> None:
    """A server's rail-5 cable training slow in a synthetic ib_write_bw run: the rail-5 pairs
    over it fail, the same servers' pairs on the other seven rails pass, and it is the one
    cable `accept` blames, its failing pairs named by their HCA."""
    run = Run.load(EXAMPLE / "generated")
    run.slow[cable] = 19.2
    report = judge(read_inputs(EXAMPLE), run.write(tmp_path / "results"))
    assert report["exit_code"] == 1
    assert report["summary"]["nodes"] == {"admitted": 63}
    failed = [c["cable"] for c in report["cables"] if c["status"] == "failed"]
    assert failed == [cable]
    assert report["suspects"] == [cable]
    failing = [p for p in report["pairs"] if p["status"] == "failed"]
    assert failing and all(cable in p["cables"] for p in failing)
    assert all(p["pair"].endswith(" mlx5_5") and "below 36" in p["message"] for p in failing)
    names = [p["pair"] for p in report["pairs"]]
    assert len(names) == len(set(names)), "two pairs of the report under one name"


def _pdf_tokens(pdf: bytes, tmp: Path, known: set[str]) -> Counter[str]:
    """The words of `known` in a PDF as poppler reads it laid out: a cell that ran into the
    next one reads as one word with it, and is not counted."""
    return Counter(word for word in pdf_text(pdf, tmp).split() if word in known)


@pytest.mark.realtool
def test_labels_print_a_rail_leafs_cables_and_its_pull_sheet(
    example: Compiled, tmp_path: Path
) -> None:
    """A technician cables a unit rail by rail: rail 3 of su1 is its leaf's sheets, the
    labels of both ends of its 32 servers' mlx5_3 cables and of its uplinks, and the pull
    sheet of those cables, each ID a cell of its own."""
    plan = example.plan
    files = sheets.sheets(cabling(plan), scene(plan), rails=[3], units=["su1"])
    assert sorted(files) == ["su1-leaf3-pull.pdf", "su1-leaf3.pdf"]
    mine = [c for c in plan.cables if c.a.device == "su1-leaf3"]
    assert plan.rails is not None
    unit = {h.name for h in plan.hosts if h.rack in plan.rails.units[0].racks}
    gpus = {h.name for h in plan.hosts if h.gpus and h.name in unit}
    assert {c.b.device for c in mine if c.b.port == "mlx5_3/1"} == gpus and len(gpus) == 32
    assert {c.b.device for c in mine if c.b.port.isdigit()} == {
        s.name for s in plan.switches if s.role.value == "spine"
    }
    ids = {c.id for c in plan.cables}
    assert _pdf_tokens(files["su1-leaf3.pdf"], tmp_path, ids) == {c.id: 2 for c in mine}
    assert _pdf_tokens(files["su1-leaf3-pull.pdf"], tmp_path, ids) == {c.id: 1 for c in mine}
    # A rail alone: its leaf in every unit.
    assert sorted(sheets.sheets(cabling(plan), scene(plan), rails=[5])) == [
        "su1-leaf5-pull.pdf", "su1-leaf5.pdf", "su2-leaf5-pull.pdf", "su2-leaf5.pdf"
    ]  # fmt: skip


def test_labels_refuse_a_rail_or_unit_the_site_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["labels", "--out", str(out)]
    assert main(["-C", str(EXAMPLE), *argv, "--rail", "9", "--unit", "su3"]) == 2
    assert main(["-C", str(EXAMPLE), *argv, "--rail", "0", "--rack", "n01"]) == 2
    assert main(["-C", str(REPO), *argv, "--rail", "0"]) == 2
    err = capsys.readouterr().err
    assert "no rail 9; the rails are 0 to 7; no unit 'su3' (did you mean 'su2'?)" in err
    assert "a rail or unit selects a leaf's sheets: not with a rack or IDs" in err
    assert "this site has no rails (its leaves are rack leaves): use --rack" in err
    assert not out.exists()


def test_gpudirect_checks_each_gpu_against_its_own_rail_hca(example: Compiled) -> None:
    """The model's affinity (GPU k -> mlx5_k at PIX) reaches each server's contract per HCA;
    the lab renders `nvidia-smi topo -m` with eight GPUs and eight mlx5 columns; GPU 5 moved
    across the sockets from mlx5_5 is the one finding, its other HCAs' paths unjudged."""
    model = example.cluster.hardware.servers["hgx-h100"]
    assert [(a.hca, a.gpus, a.path) for a in model.affinity] == [
        (f"mlx5_{k}", (k,), "PIX") for k in range(8)
    ]
    want = [{"gpu": k, "hca": f"mlx5_{k}", "path": "PIX"} for k in range(8)]
    contract = json.loads(
        (EXAMPLE / "generated" / "expected" / "hosts" / "gpu001.json").read_text()
    )
    assert contract["gpudirect"]["affinity"] == want
    fleet = Fleet.load(EXAMPLE / "generated")
    topo = nvidia_smi_topo.parse(fleet.outputs("gpu001")["nvidia_smi_topo"])
    assert topo["hcas"] == [f"mlx5_{k}" for k in range(8)]
    assert [g["paths"][f"mlx5_{g['index']}"] for g in topo["gpus"]] == ["PIX"] * 8
    fleet.pcie_path("gpu001", 5, "SYS")
    topo = nvidia_smi_topo.parse(fleet.outputs("gpu001")["nvidia_smi_topo"])
    assert topo["gpus"][5]["paths"]["mlx5_5"] == "SYS"
    assert [g["paths"][f"mlx5_{g['index']}"] for g in topo["gpus"] if g["index"] != 5] == [
        "PIX"
    ] * 7
    result = compare_host(as_record(contract), Collected(fleet.outputs("gpu001"), {}), NOW)
    assert [(f["kind"], f["path"], f["expected"], f["observed"]) for f in result.findings] == [
        ("gpudirect", "affinity[GPU5].mlx5_5", "PIX", "SYS")
    ]


def test_an_hca_of_two_lanes_is_planned_and_audited_at_its_own_width(tmp_path: Path) -> None:
    """The example with its servers' mlx5_3 an NDR200 port (2x NDR, 200 Gb/s) on the 4x NDR
    fabric: that port's contract, cable, alert and acceptance marks are 2x NDR, the other
    seven's 4x; the host audit passes it at 200 Gb/s and names it at 100."""
    repo = _copy(tmp_path)
    hardware = repo / "cluster" / "hardware.yaml"
    text = hardware.read_text()
    rail3 = "speed_gbps: 400, device: mlx5_3, port: 1,"
    assert text.count(rail3) == 1
    hardware.write_text(text.replace(rail3, "speed_gbps: 200, device: mlx5_3, port: 1, width: 2x,"))
    compiled = pipeline.compile_repo(repo)
    write(repo / "generated", compiled.files)
    host = json.loads(compiled.files["expected/hosts/gpu001.json"])
    assert [(p["device"], p["width"], p["rate"]) for p in host["ib_ports"]] == [
        (f"mlx5_{k}", "2x" if k == 3 else "4x", 200 if k == 3 else 400) for k in range(8)
    ]
    fabric = json.loads(compiled.files["expected/fabric.json"])
    rates = Counter(c["rate"] for c in fabric["cables"] if c["b"]["name"].startswith("gpu"))
    assert rates == {"4xNDR": 63 * 7, "2xNDR": 63}
    alerts = compiled.files["monitoring/alerts.yml"].decode()
    assert 'device="mlx5_3",port="1"} * 8 / 1e9 < 200 ' in alerts
    assert 'device="mlx5_4",port="1"} * 8 / 1e9 < 400 ' in alerts
    plan = json.loads(compiled.files["acceptance/plan.json"])
    assert {s["ceiling_gb_s"] for s in plan["nccl_tests"]["steps"]} == {(7 * 400 + 200) / 8}
    pairs = [p for r in plan["ib_write_bw"]["rounds"] for p in r["pairs"]]
    own = {(p.get("hca"), p.get("ceiling_gb_s"), p.get("min_gb_s")) for p in pairs}
    assert ("mlx5_3", 25.0, 18.0) in own and ("mlx5_4", None, None) in own
    assert {hca for hca, ceiling, _ in own if ceiling is not None} == {"mlx5_3"}
    # The synthetic run at each pair's own line rate passes them all.
    report = judge(read_inputs(repo), Run.load(repo / "generated").write(tmp_path / "run"))
    assert report["summary"]["pairs"] == {"passed": len(pairs)}

    planned = as_record(host)
    fleet = Fleet.load(repo / "generated")
    result = compare_host(planned, Collected(fleet.outputs("gpu001"), {}), NOW)
    assert result.findings == []
    port = fleet.hosts["gpu001"].state["ib_ports"][3]
    assert (port["device"], port["rate"]) == ("mlx5_3", 200)
    port["rate"] = 100  # trained down to one lane
    result = compare_host(planned, Collected(fleet.outputs("gpu001"), {}), NOW)
    assert [(f["kind"], f["path"], f["expected"], f["observed"]) for f in result.findings] == [
        ("ib-port", "ib_ports[mlx5_3/1].rate", 200, 100)
    ]


@pytest.mark.realtool
def test_ib_alerts_name_each_hcas_rail_and_its_planned_rate(
    example: Compiled, tmp_path: Path
) -> None:
    """promtool runs the example's IB port rules on one eight-rail server whose mlx5_5 is
    down and mlx5_3 trained to 200 of its planned 400 Gb/s: each alert names its HCA, its rail
    and the unit, and the other six HCAs stay quiet."""
    rules = YAML(typ="safe").load(example.files["monitoring/alerts.yml"].decode())
    keep = {"IbPortDown", "IbPortRateDegraded"}
    for group in rules["groups"]:
        group["rules"] = [r for r in group["rules"] if r.get("alert") in keep]
    (tmp_path / "alerts.yml").write_text(to_yaml(rules))
    [target] = [
        t["labels"]
        for t in json.loads(example.files["monitoring/targets/node.json"])
        if t["labels"]["instance"] == "gpu001"
    ]
    target = target | {"job": "node"}
    assert target["unit"] == "su1" and "leaf" not in target

    def series(name: str, value: str, **labels: str) -> dict[str, str]:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted((target | labels).items()))
        return {"series": f"{name}{{{inner}}}", "values": value}

    inputs = [series("up", "1x20")]
    for k in range(8):
        hca = {"device": f"mlx5_{k}", "port": "1"}
        inputs.append(series("node_infiniband_state_id", "1x20" if k == 5 else "4x20", **hca))
        rate = 25e9 if k == 3 else 50e9  # bytes/s: 200 and 400 Gb/s
        inputs.append(series("node_infiniband_rate_bytes_per_second", f"{rate:g}x20", **hca))

    def alert(name: str, k: int, severity: str, summary: str) -> dict[str, Any]:
        labels = target | {"device": f"mlx5_{k}", "port": "1", "rail": str(k)}
        return {
            "eval_time": "10m",
            "alertname": name,
            "exp_alerts": [
                {
                    "exp_labels": labels | {"severity": severity, "host": "gpu001"},
                    "exp_annotations": {
                        "summary": f"mlx5_{k} port 1 of gpu001 (rail {k} of su1) {summary}",
                        "first_command": f"ssh gpu001 ibstat mlx5_{k} 1",
                    },
                }
            ],
        }

    slow = "runs at 200 Gb/s, below plan (trained down: cable, optics or rate negotiation)"
    tests = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    alert("IbPortDown", 5, "critical", "is not Active"),
                    alert("IbPortRateDegraded", 3, "warning", slow),
                ],
            }
        ],
    }
    (tmp_path / "tests.yml").write_text(to_yaml(tests))
    done = subprocess.run(
        [require_tool("promtool"), "test", "rules", "tests.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- three tiers ----------------------------------------------------------------------------


def _small_three_tier() -> dict[str, str]:
    """Four units of two rails on 8-port switches: two spine groups, one core a plane."""
    return generate_rails.generate_rails(
        4, rails=2, racks_per_unit=2, per_rack=2, switch_ports=8, tiers=3
    )


def test_init_builds_the_rail_lid_plans_whole_reach() -> None:
    """128 units of eight rails (4,096 positions of eight HCAs): more racks than the one-HCA LID
    rule's 703 ids, valid because each rule bounds the rack ids it uses; every HCA's static
    LID unicast and its own, the service rack's off-rail ones too."""
    tree = generate_rails.generate_rails(128)
    cluster = validation.check(generate_rails.source(128))
    assert max(rack.id for rack in cluster.racks) > 703
    assert "id: 700\n" in tree["racks/s01.yaml"]
    lids = [p.lid for h in build(cluster).hosts for p in h.ib_ports]
    # The last position is the four service hosts on the fabric (one off-rail HCA each).
    assert len(lids) == 4095 * 8 + 4 and len(set(lids)) == len(lids)
    assert max(lids) <= 0xBFFF


def test_init_picks_three_tiers_beyond_what_two_hold() -> None:
    """Eight units of eight rails fill a 64-port spine (64 leaves, a link each): two-tier.
    Sixteen: spine groups of four units (32 leaves on 32 spines, a link each), the spines'
    32 up ports on the cores of their plane, 1:1 at every tier."""
    assert "units_per_pod" not in generate_rails.generate_rails(8)["fabric.yaml"]
    cluster = validation.check(generate_rails.source(16))
    plan = build(cluster)
    roles = Counter(s.role.value for s in plan.switches)
    assert (roles["leaf"], roles["spine"], roles["core"]) == (128, 128, 64)
    assert str(room(cluster)).endswith("0 more scalable units (up to 16: core ports)")
    rails = plan.rails
    assert rails is not None and rails.units_per_pod == 4
    role = {s.name: s.role.value for s in plan.switches}
    pod = {s.name: sw.pod for r in cluster.racks for sw in r.switches for s in [sw]}
    ups: dict[str, Counter[str]] = {}
    ends: list[tuple[str, str]] = []
    for c in plan.cables:
        if role.get(c.b.device) in ("spine", "core"):
            ups.setdefault(c.a.device, Counter())[c.b.device] += 1
            ends.append((c.b.device, c.b.port))
    assert len(ends) == len(set(ends)), "every upper port carries one cable"
    for name, links in ups.items():
        if role[name] == "leaf":  # all 32 spines of its own spine group, a link each
            assert set(links.values()) == {1} and len(links) == 32, name
            assert {pod[s] for s in links} == {rails.pod_place(name)[0]}
        else:  # the two cores of its plane, 16 links each (four pods on 64 ports)
            assert set(links.values()) == {16} and len(links) == 2, name
    # su5's rail-3 leaf is the first unit of spine group 2: place 3 on its spines, which
    # land it on their port 4; spine 7 of group 2 takes plane 7's cores on its ports 33-64.
    cable = {c.id: c for c in plan.cables}
    up = cable["SU5-LEAF3-39"]
    assert (up.b.device, up.b.port) == ("sg02-spine07", "4")
    assert cable["SG02-SPINE07-33"].b.device == "core013"  # plane 7: cores 13 and 14
    # Static LIDs: leaves from 0x101, spines from 0x801, cores from 0xc01; all distinct.
    lids = {s.name: s.lid for s in plan.switches if s.lid}
    assert lids["su1-leaf0"] == 0x101 and lids["su16-leaf7"] == 0x180
    assert lids["sg01-spine01"] == 0x801 and lids["core001"] == 0xC01
    hcas = [p.lid for h in plan.hosts for p in h.ib_ports]
    assert len(set(hcas) | set(lids.values())) == len(hcas) + len(lids)


def test_the_lid_plan_of_three_tiers_holds_4096_eight_rail_servers() -> None:
    """4,096 servers of eight rails, 1:1 with 64-port switches: 1,024 leaves, as many
    spines, 512 cores: each tier inside its own block."""
    from compiler.rails import RAIL_CORE_LID_BASE, RAIL_CORE_LID_TOP, RAIL_SPINE_LID_BASE

    leaves = range(0x101, 0x101 + 1024)
    spines = range(RAIL_SPINE_LID_BASE + 1, RAIL_SPINE_LID_BASE + 1 + 1024)
    cores = range(RAIL_CORE_LID_BASE + 1, RAIL_CORE_LID_BASE + 1 + 512)
    assert leaves[-1] < spines[0] and spines[-1] < cores[0] and cores[-1] <= RAIL_CORE_LID_TOP
    assert RAIL_CORE_LID_TOP < RAIL_LID_TOP - 4096 * 8 + 1, "below the first HCA's LID"


def test_three_tier_rules_on_a_rail_fabric() -> None:
    """Each tier is checked: the ratio reported over the stated limit, a pod with no
    spines, units_per_pod without a core port, or on a fat tree."""
    base = _small_three_tier()
    validation.check(_parse(base))  # the small fabric itself is clean

    def errors(tree: dict[str, str]) -> str:
        with pytest.raises(SourceError) as caught:
            validation.check(_parse(tree))
        return "\n".join(map(str, caught.value.diagnostics))

    tight = dict(base)
    tight["fabric.yaml"] = base["fabric.yaml"].replace(
        "max_oversubscription: 1.0", "max_oversubscription: 0.5"
    )
    text = errors(tight)
    assert "oversubscription: leaf 'su1-leaf0': 1600 Gb/s to servers vs 1600 Gb/s to " in text
    assert "(1:1) exceeds 0.5:1" in text
    assert "oversubscription: spine 'sg02-spine04'" in text
    # Spine group 2's spines gone: its units' leaves have nowhere to go.
    bare = dict(base)
    bare["racks/n03.yaml"] = "\n".join(
        line for line in base["racks/n03.yaml"].splitlines() if "pod: 2" not in line
    )
    bare["racks/n04.yaml"] = "\n".join(
        line for line in base["racks/n04.yaml"].splitlines() if "pod: 2" not in line
    )
    assert "pod-without-spines: leaf 'su3-leaf0' of unit 'su3' is in pod 2" in errors(bare)
    no_core = dict(base)
    no_core["fabric.yaml"] = base["fabric.yaml"].replace("core_port: 5\n", "")
    assert "missing-field: a three-tier fabric (units_per_pod) needs core_port" in errors(no_core)
    flat = dict(base)
    flat["fabric.yaml"] = base["fabric.yaml"].replace("units_per_pod: 2\n", "racks_per_pod: 2\n")
    assert "pods are of scalable units, not racks: set units_per_pod" in errors(flat)


def test_an_hca_guid_is_one_port_across_every_server() -> None:
    """Two servers' HCAs (gpu001's mlx5_1, gpu002's mlx5_0) given one GUID: a port GUID is
    OpenSM's key for its LID, so the second is refused where it is written."""
    tree = _small_three_tier()
    tree["racks/r001.yaml"] = tree["racks/r001.yaml"].replace(
        'mlx5_0: "0xa088c20300000210"', 'mlx5_0: "0xa088c20300000209"'
    )
    with pytest.raises(SourceError) as caught:
        validation.check(_parse(tree))
    found = [d for d in caught.value.diagnostics if d.rule == Rule.DUPLICATE_GUID]
    assert len(found) == 1 and "0xa088c20300000209" in str(found[0]), found
    assert "cluster/racks/r001.yaml:" in str(found[0])


def _parse(tree: dict[str, str]) -> Source:
    from compiler.load import parse

    return parse({f"cluster/{path}": text.encode() for path, text in tree.items()})
