"""The ibsim lab on a hand-written fat tree: real opensm and ibnetdiscover, and fault injection.

The plan below is what ``fixtures/small.net`` describes; every test compares what the real
programs report against it, so a wrong net-file rule shows up here first.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clusterforge.lab.ibsim import (
    LabError,
    SimFabric,
    SimFabricError,
    ToolTimeout,
    find_umad2sim,
    opensm_problems,
    reached_master,
    routing_engine,
)
from tests.conftest import require_tool

FIXTURES = Path(__file__).parent / "fixtures"

SPINES = {1: 0xB8CEF60300A00001, 2: 0xB8CEF60300A00002}
LEAVES = {1: 0xB8CEF60300B00001, 2: 0xB8CEF60300B00002, 3: 0xB8CEF60300B00003}
# name -> (CA node GUID, leaf number, leaf port); ibsim gives port 1 the GUID node + 1.
CAS = {
    "gpu001": (0x1070FD0300C00000, 1, 1),
    "gpu002": (0x1070FD0300C00010, 1, 2),
    "gpu003": (0x1070FD0300C00020, 2, 1),
    "gpu004": (0x1070FD0300C00030, 2, 2),
    "gpu005": (0x1070FD0300C00040, 3, 1),
    "sm01": (0x1070FD0300D00000, 3, 2),
}
UPLINK_BASE = 20  # leaf L port 20+S goes to spine S port L

End = tuple[int, int]  # (node GUID, port)
Link = frozenset[End]


def sw_id(guid: int) -> str:
    return f"S-{guid:016x}"


def planned_links() -> set[Link]:
    links = {
        frozenset({(LEAVES[leaf], UPLINK_BASE + s), (SPINES[s], leaf)})
        for leaf in LEAVES
        for s in SPINES
    }
    links |= {frozenset({(LEAVES[leaf], port), (guid, 1)}) for guid, leaf, port in CAS.values()}
    return links


def planned_descriptions() -> dict[int, str]:
    desc = {guid: f"spine{s:02d}" for s, guid in SPINES.items()}
    desc |= {guid: f"leaf{n:02d}" for n, guid in LEAVES.items()}
    desc |= {guid: f"{name} mlx5_0" for name, (guid, _, _) in CAS.items()}
    return desc


# -- a deliberately small ibnetdiscover reader (the audit's real one is contract/probes) -------

_HEADER = re.compile(r'^(Switch|Ca)\s+\d+\s+"[SH]-([0-9a-f]{16})"\s+# "([^"]*)"')
_SW_PORT = re.compile(
    r'^\[(\d+)\]\s+"[SH]-([0-9a-f]{16})"\[(\d+)\](?:\([0-9a-f]+\))?\s+# "[^"]*" lid \d+ (\S+)'
)
_CA_PORT = re.compile(
    r'^\[(\d+)\]\(([0-9a-f]+)\)\s+"[SH]-([0-9a-f]{16})"\[(\d+)\]\s+# lid \d+ lmc \d+ "[^"]*" '
    r"lid \d+ (\S+)"
)


@dataclass
class Discovered:
    links: set[Link] = field(default_factory=set)
    rates: dict[Link, str] = field(default_factory=dict)
    descriptions: dict[int, str] = field(default_factory=dict)
    port_guids: dict[int, int] = field(default_factory=dict)  # CA node GUID -> port 1 GUID


def parse_ibnetdiscover(text: str) -> Discovered:
    found = Discovered()
    node: int | None = None
    for line in text.splitlines():
        if m := _HEADER.match(line):
            node = int(m[2], 16)
            found.descriptions[node] = m[3]
            continue
        if node is None:
            continue
        if m := _SW_PORT.match(line):
            local, remote, rport, rate = int(m[1]), int(m[2], 16), int(m[3]), m[4]
        elif m := _CA_PORT.match(line):
            local, remote, rport, rate = int(m[1]), int(m[3], 16), int(m[4]), m[5]
            found.port_guids[node] = int(m[2], 16)
        else:
            continue
        link = frozenset({(node, local), (remote, rport)})
        found.links.add(link)
        found.rates[link] = rate
    return found


# -- fixtures -----------------------------------------------------------------------------------


def require_lab() -> None:
    for tool in ("ibsim", "opensm", "ibnetdiscover", "ibstat", "setpriv"):
        require_tool(tool)
    try:
        find_umad2sim()
    except LabError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[SimFabric]:
    require_lab()
    with SimFabric(FIXTURES / "small.net", tmp_path / "lab", sim_host="sm01 mlx5_0") as fab:
        yield fab


def discover(fab: SimFabric) -> Discovered:
    proc = fab.run(["ibnetdiscover"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    return parse_ibnetdiscover(proc.stdout)


# -- tests --------------------------------------------------------------------------------------


@pytest.mark.realtool
def test_opensm_reaches_master_with_ftree_and_no_problems(fabric: SimFabric) -> None:
    result = fabric.run_opensm_once(FIXTURES / "opensm.conf")

    assert result.returncode == 0, result.output
    assert result.master, result.log
    assert result.routing_engine == "ftree", result.log
    assert result.problems == []
    # The GUID files took effect: two roots, and sm01 is not counted as a compute node.
    assert "Fabric has 6 CAs, 6 CA ports (5 of them CNs), 5 switches" in result.log
    assert "Fabric has 2 switches at rank 0 (roots)" in result.log
    assert (result.dump_dir / "opensm-ftree-ca-order.dump").is_file()
    ibstat = fabric.run(["ibstat"], sim_host="gpu001 mlx5_0")
    assert "State: Active" in ibstat.stdout, ibstat.stdout


@pytest.mark.realtool
def test_ibnetdiscover_sees_the_planned_fabric(fabric: SimFabric) -> None:
    found = discover(fabric)

    assert found.links == planned_links()
    assert found.descriptions == planned_descriptions()
    assert set(found.rates.values()) == {"4xHDR"}
    assert found.port_guids == {guid: guid + 1 for guid, _, _ in CAS.values()}


@pytest.mark.realtool
def test_swap_exchanges_the_far_ends_of_two_cables(fabric: SimFabric) -> None:
    gpu001, gpu003 = CAS["gpu001"][0], CAS["gpu003"][0]
    fabric.swap((sw_id(LEAVES[1]), 1), (sw_id(LEAVES[2]), 1))

    expected = planned_links()
    expected -= {frozenset({(LEAVES[1], 1), (gpu001, 1)}), frozenset({(LEAVES[2], 1), (gpu003, 1)})}
    expected |= {frozenset({(LEAVES[1], 1), (gpu003, 1)}), frozenset({(LEAVES[2], 1), (gpu001, 1)})}
    found = discover(fabric)
    assert found.links == expected
    assert set(found.rates.values()) == {"4xHDR"}  # re-linked ports keep their speed masks


@pytest.mark.realtool
def test_unplug_removes_exactly_that_link(fabric: SimFabric) -> None:
    far = fabric.unplug(sw_id(LEAVES[3]), UPLINK_BASE + 2)

    assert far == (sw_id(SPINES[2]), 3)
    gone = frozenset({(LEAVES[3], UPLINK_BASE + 2), (SPINES[2], 3)})
    assert discover(fabric).links == planned_links() - {gone}
    with pytest.raises(SimFabricError, match="no cable"):
        fabric.unplug(sw_id(LEAVES[3]), UPLINK_BASE + 2)


BROKEN_CONFIGS = {
    "unknown key": ("bogus_key 1\n", "", 'Unrecognized token: "bogus_key"', "ftree"),
    "lmc above 0": ("lmc 1\n", "", "Falling back to default routing", "minhop"),
    "root GUID without 0x": (
        "root_guid_file bad_roots\n",
        "b8cef60300a00001\n",
        "ERR AB2A",
        None,
    ),
    "missing partitions file": (
        "partition_config_file nowhere.conf\n",
        "",
        "partition_config_file",
        "ftree",
    ),
    "lower-case boolean": ("honor_guid2lid_file true\n", "", "reads as FALSE", "ftree"),
}


@pytest.mark.realtool
@pytest.mark.parametrize("case", BROKEN_CONFIGS, ids=list(BROKEN_CONFIGS))
def test_a_broken_config_yields_a_problem_line(
    fabric: SimFabric, tmp_path: Path, case: str
) -> None:
    extra, bad_roots, expected, engine = BROKEN_CONFIGS[case]
    confdir = tmp_path / "conf"
    shutil.copytree(FIXTURES, confdir, ignore=shutil.ignore_patterns("*.net"))
    (confdir / "bad_roots").write_text(bad_roots)
    with (confdir / "opensm.conf").open("a") as conf:
        conf.write(extra)

    result = fabric.run_opensm_once(confdir / "opensm.conf")

    assert result.master
    assert any(expected in line for line in result.problems), result.problems
    if engine is not None:
        assert result.routing_engine == engine


@pytest.mark.realtool
def test_parallel_fabrics_do_not_meet(fabric: SimFabric, tmp_path: Path) -> None:
    other = tmp_path / "other.net"
    other.write_text(
        "switchguid=0xb8cef60300f00001\n"
        'Switch\t8 "S-b8cef60300f00001"\t# "lonely" enhanced port 0 lid 0 lmc 0\n'
        '[1]\t"H-1070fd0300f00000"[1]\t# "solo mlx5_0" lid 0 4xHDR\n\n'
        "caguid=0x1070fd0300f00000\n"
        'Ca\t1 "H-1070fd0300f00000"\t# "solo mlx5_0"\n'
        '[1]\t"S-b8cef60300f00001"[1]\t# "lonely" lid 0 4xHDR\n'
    )
    with SimFabric(other, tmp_path / "other") as second:
        assert set(discover(second).descriptions.values()) == {"lonely", "solo mlx5_0"}
        assert discover(fabric).descriptions == planned_descriptions()


@pytest.mark.realtool
def test_a_hung_tool_is_killed_and_frees_its_ibsim_slot(fabric: SimFabric, tmp_path: Path) -> None:
    # opensm without -o never exits. A killed client never detaches from ibsim, which has only
    # 10 client slots, so the lab has to free the slot itself.
    env = {"OSM_CACHE_DIR": str(tmp_path), "OSM_TMP_DIR": str(tmp_path)}
    errors: list[BaseException] = []

    def hang() -> None:
        try:
            fabric.run(["opensm", "-f", str(tmp_path / "osm.log")], timeout=3, extra_env=env)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=hang)
    runner.start()
    deadline = time.monotonic() + 3
    while "Client 0" not in fabric.console("Attached") and time.monotonic() < deadline:
        time.sleep(0.02)  # polling a console that has no "client attached" event
    attached = fabric.console("Attached")
    runner.join(timeout=30)

    assert "Client 0" in attached
    assert len(errors) == 1 and isinstance(errors[0], ToolTimeout)
    assert fabric.console("Attached").strip() == ""
    assert fabric.run(["ibstat"]).returncode == 0


@pytest.mark.realtool
def test_a_net_file_with_a_one_sided_link_fails_at_start(tmp_path: Path) -> None:
    require_lab()
    net = tmp_path / "bad.net"
    net.write_text(
        'switchguid=0xb8cef60300f00001\nSwitch\t8 "S-b8cef60300f00001"\n[1]\t"S-x"[1]\n\n'
        'switchguid=0xb8cef60300f00002\nSwitch\t8 "S-x"\n'
    )
    with pytest.raises(SimFabricError, match="is not connected"), SimFabric(net, tmp_path / "w"):
        pass


# -- pure helpers (no programs run) -------------------------------------------------------------

OPENSM_SAMPLES = """\
 Unrecognized token: "bogus_key"
-E- Parsing error in field sm_priority, expected numeric input received: true
Nov 30 10:57:00 000001 [B04CD6C0] 0x02 -> LMC > 0 is not supported by fat-tree routing.
Falling back to default routing
Nov 30 10:57:00 000002 [B04CD6C0] 0x01 -> ucast_mgr_route: ftree: cannot build lid matrices
Nov 30 10:57:00 000003 [B04CD6C0] 0x01 -> setup_routing_engine: cannot find or setup routing \
engine 'nosuch'
WARNING failed to parse node name map "/tmp/badmap"
Nov 30 10:57:00 000004 [B04CD6C0] 0x01 -> fabric_load_roots: ERR AB2A: cannot parse root guids \
file '/tmp/r'
PARSE ERROR: line 2: bad PortGUID
Nov 30 10:57:00 000005 [B04CD6C0] 0x02 -> Failed reading guid files - falling back to default \
routing
Nov 30 10:57:00 000006 [B04CD6C0] 0x80 -> Entering MASTER state
Nov 30 10:57:00 000007 [B04CD6C0] 0x02 -> osm_ucast_mgr_process: minhop tables configured on \
all switches
Nov 30 10:57:00 000008 [B04CD6C0] 0x02 -> SUBNET UP
"""


def test_opensm_problems_finds_each_bad_line_and_nothing_else() -> None:
    problems = opensm_problems(OPENSM_SAMPLES)

    assert problems == OPENSM_SAMPLES.splitlines()[:-3]  # all but MASTER, tables, SUBNET UP
    assert reached_master(OPENSM_SAMPLES)
    assert routing_engine(OPENSM_SAMPLES) == "minhop"
    assert routing_engine("") is None
