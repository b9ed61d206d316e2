"""Node and fabric acceptance (`clusterforge accept`, generated/acceptance/): rounds and
paths (properties, and OpenSM's own forwarding tables as the oracle of the path rule), the
plan's thresholds, and `accept` on synthetic runs: clean, one slow cable, failing nodes,
missing logs."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audits.accept import blame, judge, read_inputs
from clusterforge.cli import main
from clusterforge.lab.ibsim import SimFabric
from compiler import generate, pipeline, targets
from compiler.acceptance import Server, Tree, plan_rounds
from compiler.load import load
from compiler.output import write
from compiler.pipeline import Compiled
from compiler.targets.acceptance import servers
from draw.report import readiness
from tests.conftest import REPO, require_tool
from tests.lab.acceptance_run import Run
from tests.reference import compile_reference

# -- rounds: properties -----------------------------------------------------------------------


@st.composite
def fabrics(draw: st.DrawFn) -> tuple[list[Server], list[str], int, dict[Any, str]]:
    """A two-tier fabric: leaves with 0-8 servers, 1-6 spines, 1-2 links per spine, some
    uplinks not installed."""
    spines = [f"s{i}" for i in range(draw(st.integers(1, 6)))]
    links = draw(st.integers(1, 2))
    leaves = [f"l{i:02d}" for i in range(draw(st.integers(2, 7)))]
    found = [
        Server(leaf, rank, f"{leaf}h{rank}", f"{leaf}-host{rank}")
        for leaf in leaves
        for rank in range(draw(st.integers(0, 8)))
    ]
    up = {
        (leaf, spine, j): f"{leaf}-{spine}-{j}"
        for leaf in leaves
        for spine in spines
        for j in range(links)
        if draw(st.integers(0, 9)) > 0
    }
    return found, spines, links, up


@settings(deadline=None, max_examples=150)
@given(fabric=fabrics())
def test_rounds_cover_every_routable_uplink_and_use_a_host_once_per_round(
    fabric: tuple[list[Server], list[str], int, dict[Any, str]],
) -> None:
    found, spines, links, up = fabric
    tree = Tree.two_tier(found, spines, links, up)
    test = plan_rounds(found, tree)
    covered = set()
    for pairs in test.rounds:
        hosts = [h for p in pairs for h in (p.client, p.server)]
        assert len(hosts) == len(set(hosts)), "a host twice in one round"
        covered |= {c for p in pairs for c in p.cables}
    uplinks = set(up.values())
    # Every uplink is either carried by some pair or idle, never both, never neither.
    assert covered & uplinks | set(test.idle) == uplinks
    assert not covered & set(test.idle)
    # Idle means no route at all crosses it: brute force over every pair of servers.
    routable = {
        c
        for a in found
        for b in found
        if (pair := tree.route(a, b)) is not None
        for c in pair.cables
    }
    assert set(test.idle) == uplinks - routable


def test_reference_rounds_and_idle_uplinks(generated: Path) -> None:
    plan = json.loads((generated / "acceptance" / "plan.json").read_text())
    bw = plan["ib_write_bw"]
    # 25 leaves x 7 spines; leaves hold at most 5 servers, so under ftree the uplinks to
    # spine06 and spine07 carry no host traffic and no pair can test them.
    idle = [e["cable"] for e in bw["untested"] if e["reason"].startswith("an uplink")]
    assert len(idle) == 50
    assert {c[:3] for c in idle} == {f"R{n:02d}" for n in range(1, 26)}
    hosts_per_round = [len(r["pairs"]) * 2 for r in bw["rounds"]]
    assert hosts_per_round[:3] == [120, 120, 120], "whole rounds load nearly every server"
    assert (bw["ceiling_gb_s"], bw["min_gb_s"]) == (25.0, 18.0)
    steps = {s["step"]: s for s in plan["nccl_tests"]["steps"]}
    assert sorted(steps) == ["nccl-004", "nccl-016", "nccl-all"]
    assert (steps["nccl-004"]["leaves"], steps["nccl-004"]["ceiling_gb_s"]) == (1, 25.0)
    assert steps["nccl-016"]["min_bus_gb_s"] == 18.0
    sbatch = (generated / "acceptance" / "nccl" / "nccl-016.sbatch").read_text()
    assert "#SBATCH --nodelist=gpu[001-016]" in sbatch and "#SBATCH --switches=4" in sbatch


def test_a_round_script_dials_each_server_as_one_shell_word() -> None:
    # The client's command is quoted part by part; the shell must still read it as the
    # run and the server's address whole, whatever the address holds.
    rows = [
        {"server": "b", "client": "a", "log": "ib_write_bw/round-01/a-b.txt"},
        {"server": "d", "client": "c", "log": "ib_write_bw/round-01/c-d.txt"},
    ]
    runs = ["ib_write_bw -d mlx5_0 -i 1 -F", "ib_write_bw -d mlx5_0 -i 1 -F"]
    dial = {"b": "10.0.0.2", "d": "it's d; $(true)"}
    script = targets.acceptance._round_script("round-01", rows, runs, dial)
    clients = [shlex.split(line) for line in script.splitlines() if line.startswith("ssh a ")]
    clients += [shlex.split(line) for line in script.splitlines() if line.startswith("ssh c ")]
    assert [words[2] for words in clients] == [f"{runs[0]} 10.0.0.2", f"{runs[1]} {dial['d']}"]
    assert clients[1][3:] == [">", "$out/c-d.txt", "2>&1", "&"]


@pytest.mark.realtool
@pytest.mark.parametrize("which", ["reference", "three-tier", "rails-three-tier"])
def test_ftree_routes_as_the_plan_says(which: str, tmp_path: Path) -> None:
    """The path rule against OpenSM itself: ftree on ibsim, with the planned static LIDs.
    From every leaf to every compute node on another, the forwarding tables lead over the
    cables the rule names (through the cores of a three-tier fabric too), and every pair
    of the plan crosses exactly the cables it says it tests."""
    from tests.test_fabric import rails_three_tier, three_tier

    source = {
        "reference": lambda: load(REPO / "cluster"), "three-tier": three_tier,
        "rails-three-tier": rails_three_tier,
    }[which]()  # fmt: skip
    compiled = pipeline.compile_source(source)
    lfts = ftree_tables(compiled, tmp_path)
    found, tree = servers(compiled.plan)
    checked = 0
    for server in found:
        for leaf in set(tree.leaves) - {server.leaf}:
            client = next((s for s in found if s.leaf == leaf), Server(leaf, 0, "-", "-"))
            pair = tree.route(client, server)
            assert pair is not None and path(compiled, lfts, leaf, server) == pair.cables[1:], (
                leaf, server
            )  # fmt: skip
            checked += 1
    assert checked == len(found) * (len(tree.leaves) - 1) >= 196
    plan = json.loads(compiled.files["acceptance/plan.json"])
    by_cable = {s.cable: s for s in found}
    pairs = [p for r in plan["ib_write_bw"]["rounds"] for p in r["pairs"]]
    for p in pairs:
        client, server = by_cable[p["cables"][0]], by_cable[p["cables"][-1]]
        assert (client.name, server.name) == (p["client"], p["server"])
        assert [client.cable, *path(compiled, lfts, client.leaf, server)] == p["cables"]
    crossed = {c for p in pairs for c in p["cables"]}
    to_core = {c.id for c in compiled.plan.cables if c.b.device.startswith("core")}
    untested = {e["cable"]: e["reason"] for e in plan["ib_write_bw"]["untested"]}
    # Every spine-core link is crossed by a pair or idle under ftree, and says so.
    assert all(c in crossed or untested[c].startswith("a spine-core link") for c in to_core)
    if to_core:
        assert len(crossed & to_core) >= 32


def ftree_tables(compiled: Compiled, tmp_path: Path) -> dict[str, dict[int, int]]:
    """OpenSM's forwarding tables for the compiled fabric: ftree once on ibsim, from the
    generated opensm.conf with the planned static LIDs seeded."""
    for tool in ("ibsim", "opensm"):
        require_tool(tool)
    out = tmp_path / "generated"
    write(out, compiled.files)
    opensm = out / "opensm"
    master = max(compiled.plan.fabric.subnet_managers, key=lambda sm: sm.priority).host
    conf = opensm / master / "opensm.conf"
    overrides = local_files(conf)
    # OpenSM dumps its forwarding tables at ROUTING level (0x40); without FUNCS and FRAMES,
    # whose lines for hundreds of CAs would overflow log_max_size and lose the engine's
    # last word.
    overrides["log_flags"] = "0xc3"
    with SimFabric(out / "fabric" / "topology.net", tmp_path / "sim") as sim:
        result = sim.run_opensm_once(
            conf, overrides=overrides, sim_host=f"{master} mlx5_0", seed_cache=[opensm / "guid2lid"]
        )
        assert result.routing_engine == "ftree"
        assert "ftree tables configured on all switches" in result.log
        dump = (result.run_dir / "dump" / "opensm-lfts.dump").read_text()
    return _lfts(dump)


def path(
    compiled: Compiled, lfts: dict[str, dict[int, int]], leaf: str, server: Server
) -> tuple[str, ...]:
    """The cables OpenSM's tables lead over from `leaf` to `server`'s HCA (its own cable
    last), switch by switch."""
    plan = compiled.plan
    switches = {s.name for s in plan.switches}
    far: dict[tuple[str, int], tuple[str, str]] = {}
    for c in plan.cables:
        if c.installed and c.network in plan.ib_networks:
            far[(c.a.device, int(c.a.port))] = (c.b.device, c.id)
            if c.b.device in switches:
                far[(c.b.device, int(c.b.port))] = (c.a.device, c.id)
    device = next(c.b.port.split("/")[0] for c in plan.cables if c.id == server.cable)
    lid = next(p.lid for p in plan.host(server.name).ib_ports if p.device == device)
    hops: list[str] = []
    at = leaf
    while at in switches and len(hops) < 8:
        at, cable = far[(at, lfts[at][lid])]
        hops.append(cable)
    return tuple(hops)


def local_files(conf: Path) -> dict[str, str]:
    """opensm.conf's /etc/opensm/ paths pointed at the compiled files beside it, for a run
    outside /etc."""
    opensm = conf.parent.parent
    return {
        key: str(opensm / Path(value).name)
        for key, value in (
            line.split(None, 1)
            for line in conf.read_text().splitlines()
            if line and not line.startswith("#")
        )
        if value.startswith("/etc/opensm/")
    }


def _lfts(dump: str) -> dict[str, dict[int, int]]:
    """`opensm-lfts.dump`: per switch (by node description), destination LID -> out port."""
    tables: dict[str, dict[int, int]] = {}
    current: dict[int, int] = {}
    for line in dump.splitlines():
        if m := re.match(r"Unicast lids \[.*\] of switch .*\('(?P<name>[^']+)'\)", line):
            current = tables.setdefault(m["name"], {})
        elif m := re.match(r"0x(?P<lid>[0-9a-fA-F]+) (?P<port>\d+) ", line):
            current[int(m["lid"], 16)] = int(m["port"])
    return tables


# -- accept ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_reference(REPO, tmp_path_factory.mktemp("reference")) / "generated"


@pytest.fixture
def run(generated: Path) -> Run:
    return Run.load(generated)


def _judge(generated: Path, run: Run, tmp_path: Path) -> dict[str, Any]:
    return judge(read_inputs(generated.parent), run.write(tmp_path / "results"))


def test_a_clean_run_admits_every_node_and_passes_every_testable_cable(
    generated: Path, run: Run, tmp_path: Path
) -> None:
    report = _judge(generated, run, tmp_path)
    assert report["exit_code"] == 0
    assert report["summary"]["nodes"] == {"admitted": 126}
    assert report["summary"]["pairs"] == {"passed": sum(report["summary"]["pairs"].values())}
    planned = {e["cable"] for e in run.plan["ib_write_bw"]["untested"]}
    untested = {c["cable"] for c in report["cables"] if c["status"] == "not-tested"}
    # Not tested: only what the plan said no pair can cross (idle uplinks, service hosts).
    assert untested == planned
    assert report["suspects"] == []


@pytest.mark.parametrize("cable", ["R07-IB23", "R12-IB03"])
def test_one_slow_cable_is_named_and_nothing_else(
    generated: Path, run: Run, tmp_path: Path, cable: str
) -> None:
    """An uplink (R07-IB23: leaf07 to spine03) or a server's own cable (R12-IB03) training
    slow: every pair crossing it fails, and it is the one cable the report blames."""
    run.slow[cable] = 9.6
    report = _judge(generated, run, tmp_path)
    assert report["exit_code"] == 1
    failed = [c["cable"] for c in report["cables"] if c["status"] == "failed"]
    assert failed == [cable]
    assert report["suspects"] == [cable]
    failing = [p for p in report["pairs"] if p["status"] == "failed"]
    assert failing and all(cable in p["cables"] for p in failing)
    assert all("below 18" in p["message"] for p in failing)
    assert report["summary"]["nodes"] == {"admitted": 126}
    md = readiness.markdown(report)
    assert f"Common to every failing pair: `{cable}`" in md


def test_failing_nodes_name_their_check(generated: Path, run: Run, tmp_path: Path) -> None:
    run.burn_in_fail["gpu017"] = (5, "Pending page retirements on GPU 5")
    run.fleet.unload("gpu042", "nvidia-peermem")
    run.fleet.hosts["gpu042"].inactive_nvlinks[2] = 1
    report = _judge(generated, run, tmp_path)
    nodes = {n["host"]: n for n in report["nodes"]}
    assert nodes["gpu017"]["failed"] == [
        {"check": "burn_in", "message": "GPU 5 GPU Memory: Pending page retirements on GPU 5"}
    ]
    assert [f["check"] for f in nodes["gpu042"]["failed"]] == ["gpus", "gpudirect"]
    assert "nvidia-peermem is not loaded" in nodes["gpu042"]["failed"][1]["message"]
    assert report["summary"]["nodes"] == {"admitted": 124, "failed": 2}
    xml = readiness.junit(report)
    assert xml.count("<failure") == 2 and 'name="gpu017"' in xml


def test_missing_and_garbled_logs(generated: Path, run: Run, tmp_path: Path) -> None:
    pair = run.plan["ib_write_bw"]["rounds"][0]["pairs"][0]
    run.missing |= {"burn_in/gpu003.json", "nccl/nccl-all.log", pair["log"]}
    results = run.write(tmp_path / "results")
    (results / "probes" / "gpu009" / "lsmod.txt").write_text("lsmod: command not found\n")
    report = judge(read_inputs(generated.parent), results)
    nodes = {n["host"]: n for n in report["nodes"]}
    assert (nodes["gpu003"]["status"], nodes["gpu003"]["not_tested"]) == ("not-tested", ["burn_in"])
    assert nodes["gpu009"]["status"] == "failed"
    assert nodes["gpu009"]["failed"][0]["check"] == "lsmod"
    steps = {s["step"]: s["status"] for s in report["nccl"]}
    assert steps == {"nccl-004": "passed", "nccl-016": "passed", "nccl-all": "not-tested"}
    pairs = {p["pair"]: p["status"] for p in report["pairs"]}
    assert pairs[f"{pair['client']}->{pair['server']}"] == "not-tested"
    assert report["exit_code"] == 1  # gpu009 failed


def test_a_pair_between_other_ports_than_planned_fails(
    generated: Path, run: Run, tmp_path: Path
) -> None:
    results = run.write(tmp_path / "results")
    pair = run.plan["ib_write_bw"]["rounds"][1]["pairs"][3]
    log = results / pair["log"]
    log.write_text(log.read_text().replace(f"LID {pair['lids'][1]:#06x}", "LID 0x1fff"))
    report = judge(read_inputs(generated.parent), results)
    entry = next(
        p for p in report["pairs"] if p["client"] == pair["client"] and p["round"] == "round-02"
    )
    assert entry["status"] == "failed" and "planned" in entry["message"]


def test_cli_writes_every_rendering(generated: Path, run: Run, tmp_path: Path) -> None:
    run.slow["R03-IB22"] = 12.0
    results = run.write(tmp_path / "results")
    out, metrics = tmp_path / "report", tmp_path / "textfile" / "acceptance.prom"
    code = main(["-C", str(generated.parent), "accept", str(results), "--out", str(out),
                 "--textfile", str(metrics)])  # fmt: skip
    assert code == 1
    report = json.loads((out / "readiness.json").read_text())
    assert report["suspects"] == ["R03-IB22"]
    assert "R03-IB22" in (out / "readiness.md").read_text()
    assert 'classname="cables" name="R03-IB22"' in (out / "junit.xml").read_text()
    text = metrics.read_text()
    assert 'clusterforge_acceptance{kind="cables",status="failed"} 1.0' in text
    assert 'clusterforge_acceptance_node{host="gpu001",status="admitted"} 1.0' in text


def test_cli_without_a_plan_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    assert main(["-C", str(tmp_path), "accept", str(tmp_path / "results")]) == 4


@pytest.fixture(scope="module")
def three_tier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled three-tier fat tree: four pods of four racks, two cores a plane."""
    repo = tmp_path_factory.mktemp("three-tier")
    source = generate.source(64, per_rack=4, racks_per_pod=4, spines=4, cores_per_plane=2)
    write(repo / "generated", pipeline.compile_source(source).files)
    return repo


def test_a_three_tier_plan_crosses_the_spine_core_links(three_tier: Path) -> None:
    """Pairs between pods cross the spines' links to the cores; the links ftree leaves
    without host traffic (a spine routes 16 targets over 2 cores of 10 links) are untested,
    with why; admission and the NCCL steps are planned all the same."""
    body = json.loads((three_tier / "generated/acceptance/plan.json").read_text())
    bw = body["ib_write_bw"]
    pairs = [p for r in bw["rounds"] for p in r["pairs"]]
    through = [p for p in pairs if len(p["cables"]) == 6]
    assert through and all(p["cables"][2].startswith("SPINE") for p in through)
    cores = {c for p in through for c in p["cables"][2:4]}
    idle = {e["cable"] for e in bw["untested"] if e["reason"].startswith("a spine-core link")}
    assert len(cores) == 192 and len(idle) == 128 and not cores & idle  # 16 spines x 20 links
    for r in bw["rounds"]:
        hosts = [h for p in r["pairs"] for h in (p["client"], p["server"])]
        assert len(hosts) == len(set(hosts))
    assert len(bw["rounds"]) <= 20
    assert [s["step"] for s in body["nccl_tests"]["steps"]] == ["nccl-004", "nccl-016", "nccl-all"]
    assert len(body["nodes"]) >= 64


@pytest.mark.parametrize("cable", ["SPINE02-33", "SPINE07-22"])
def test_accept_names_the_one_slow_core_link(three_tier: Path, cable: str, tmp_path: Path) -> None:
    """A spine's link to a core training slow: every pair between pods over it fails, and
    it is the one cable `accept` blames, as it would a leaf's uplink."""
    run = Run.load(three_tier / "generated")
    run.slow[cable] = 9.6
    report = judge(read_inputs(three_tier), run.write(tmp_path / "results"))
    assert report["exit_code"] == 1
    assert [c["cable"] for c in report["cables"] if c["status"] == "failed"] == [cable]
    assert report["suspects"] == [cable]
    failing = [p for p in report["pairs"] if p["status"] == "failed"]
    assert failing and all(cable in p["cables"] for p in failing)


# -- honest blame ------------------------------------------------------------------------------


def _results(test: Any, bad: str, skipped: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Every planned pair as `accept` judges it with one bad cable: failed when it crosses
    the bad one, else passed; pairs whose index is in `skipped` did not run."""
    out = []
    for i, p in enumerate(p for pairs in test.rounds for p in pairs):
        status = "not-tested" if i in skipped else "failed" if bad in p.cables else "passed"
        out.append({"pair": f"{p.client}->{p.server}", "cables": list(p.cables), "status": status})
    return out


@settings(deadline=None, max_examples=150)
@given(fabric=fabrics(), data=st.data())
def test_one_bad_cable_anywhere_is_named_alone_or_in_a_set_that_says_so(
    fabric: tuple[list[Server], list[str], int, dict[Any, str]], data: st.DataObject
) -> None:
    test = plan_rounds(fabric[0], Tree.two_tier(*fabric))
    crossed = sorted({c for pairs in test.rounds for p in pairs for c in p.cables})
    if not crossed:
        return
    bad = data.draw(st.sampled_from(crossed))
    total = sum(len(pairs) for pairs in test.rounds)
    skipped = data.draw(st.frozensets(st.integers(0, total - 1)))
    pairs = _results(test, bad, skipped)
    sets = blame(pairs)
    if not any(p["status"] == "failed" for p in pairs):
        assert sets == []  # no pair over it ran: nothing to name, and nothing named
        return
    # One set, and the bad cable is in it: never another cable named in its place.
    [named] = sets
    assert bad in named["cables"]
    assert named["pairs"] == sorted(p["pair"] for p in pairs if p["status"] == "failed")
    if not skipped:
        # A whole run names it alone, or with cables no route tells from it, as the plan said.
        alone = [bad] if len(named["cables"]) == 1 else None
        together = [list(cs) for cs in test.inseparable if bad in cs]
        assert named["cables"] == alone or [named["cables"]] == together
        assert named["retest"] == []


def test_plan_splits_cables_the_rounds_cross_only_together() -> None:
    """Two leaves of one server each over one spine: the rounds' single pair crosses all four
    cables; no route splits them, and the plan says so. A third leaf gives routes that split
    the uplinks from the server cables, and the plan adds them."""
    spines = ["s0"]
    two = [Server("l0", 0, "a", "A"), Server("l1", 0, "b", "B")]
    up2 = {("l0", "s0", 0): "L0-UP", ("l1", "s0", 0): "L1-UP"}
    test = plan_rounds(two, Tree.two_tier(two, spines, 1, up2))
    assert test.inseparable == (("A", "B", "L0-UP", "L1-UP"),)
    three = [*two, Server("l2", 0, "c", "C"), Server("l2", 1, "d", "D")]
    up3 = {**up2, ("l2", "s0", 0): "L2-UP"}
    test = plan_rounds(three, Tree.two_tier(three, spines, 1, up3))
    crossing = {c: {p for r in test.rounds for p in r if c in p.cables} for c in "ABCD"}
    crossing |= {c: {p for r in test.rounds for p in r if c in p.cables} for c in up3.values()}
    groups = {frozenset(ps) for ps in crossing.values()}
    # A leaf's only server and its uplink carry the same pairs whatever the route: those
    # two stay together; every other cable has pairs of its own.
    assert sorted(test.inseparable) == [("A", "L0-UP"), ("B", "L1-UP")]
    assert len(groups) == len(crossing) - 2


def test_a_pair_added_to_split_a_set_has_its_new_cables_split_in_turn() -> None:
    """Hypothesis found it: one uplink of two leaves, so only servers of ranks 1 and 3 are
    reached. The pair added to split a server cable from the uplinks brings two cables no
    pair crossed before (l01-host2, l02-host3), crossed by it alone; they are a set of their
    own, and another pair (l01h2 -> l02h1) tells them apart."""
    found = [Server("l01", i, f"l01h{i}", f"l01-host{i}") for i in range(3)]
    found += [Server("l02", i, f"l02h{i}", f"l02-host{i}") for i in range(4)]
    up = {("l01", "s1", 0): "l01-s1-0", ("l02", "s1", 0): "l02-s1-0"}
    test = plan_rounds(found, Tree.two_tier(found, ["s0", "s1"], 1, up))
    pairs = [p for r in test.rounds for p in r]
    crossing: dict[str, set[int]] = {}
    for i, p in enumerate(pairs):
        for c in p.cables:
            crossing.setdefault(c, set()).add(i)
    together = sorted(
        tuple(sorted(c for c in crossing if crossing[c] == ps))
        for ps in {frozenset(v) for v in crossing.values()}
        if sum(crossing[c] == ps for c in crossing) > 1
    )
    assert together == list(test.inseparable) == [("l01-s1-0", "l02-s1-0")]
    assert {"l01-host2", "l02-host3"} <= set(crossing)


def test_a_failure_the_run_cannot_pin_on_one_cable_names_the_set_and_the_retest(
    generated: Path, run: Run, tmp_path: Path
) -> None:
    """The slow cable and another one crossed by its failing pairs: the pairs that would
    tell them apart did not run (their logs are missing), so the report says "one of" both,
    never one of them alone, and asks for exactly those pairs again."""
    bad = "R04-IB25"
    rows = [p for r in run.plan["ib_write_bw"]["rounds"] for p in r["pairs"]]
    over = [p for p in rows if bad in p["cables"]]
    other = next(c for c in over[0]["cables"] if c != bad and c.startswith("R03"))
    apart = [p for p in rows if (bad in p["cables"]) != (other in p["cables"])]
    run.slow[bad] = 11.5
    run.missing |= {p["log"] for p in apart}
    report = _judge(generated, run, tmp_path)
    assert report["exit_code"] == 1
    [named] = report["blame"]
    assert {bad, other} <= set(named["cables"])
    status = {c["cable"]: c for c in report["cables"]}
    assert all(status[c]["status"] == "one-of" for c in named["cables"])
    assert status[bad]["reason"].startswith(f"one of {', '.join(named['cables'])}")
    assert not [c for c in report["cables"] if c["status"] == "failed"]
    split = sorted(
        f"{p['client']}->{p['server']}"
        for p in apart
        if 0 < len(set(named["cables"]) & set(p["cables"])) < len(named["cables"])
    )
    assert split and named["retest"] == split
    md = readiness.markdown(report)
    assert f"| {', '.join(named['cables'])} |" in md and "retest " in md
