"""`clusterforge diff BASE HEAD`: the review of a pull request, from two git revisions.

A scratch git repository (in a temporary directory) holds this checkout's `cluster/` as its
base commit, and one commit per change a reviewer must see, each made on top of the base:
a new rack, two re-patched cables, a moved server, an OFED bump for the canary ring, a
renumbered address, a firmware baseline bump, an SM priority change, a comment-only edit, a
YAML error and a failing check. Each is diffed against the base through the library, and
some through the CLI (also in a shallow clone).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterforge.cli import main
from compiler import diff, gitsource
from compiler.diff import DiffReport, RiskKind, Side
from draw import review
from tests.conftest import REPO

# A scratch repository must not pick up the user's git config (signing, hooks, templates).
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}
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
    assert f"| mgmt | {mgmt} | 0 | 0 |" in markdown
    assert markdown.rstrip().endswith(f"clusterforge labels --rack {NEW_RACK}\n```")
    # Lines are added, none removed, except a zone's serial (it follows the content).
    families = {f.family: f for f in report.artifacts}
    assert families["expected"].files_added == len(NEW_NODES)
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
    assert report.risks == ()
    markdown = review.to_markdown(report)
    assert f"| {ring.ring} | ofed |" in markdown


def test_a_renumbered_address_is_a_risk(sides: dict[str, Side]) -> None:
    host, network, address = RENUMBERED
    report = compare(sides, "renumber")
    [change] = report.addresses
    assert (change.device, change.network) == (host, network)
    assert change.old is not None and change.new == f"{address}/24"
    assert change.old != change.new
    assert kinds(report) == [RiskKind.ADDRESS_RENUMBERED]
    assert not report.renumbered_nothing
    assert "No existing address or LID renumbered" not in review.to_markdown(report)
    [risk] = report.risks
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
    assert kinds(report) == [RiskKind.LARGE_CHANGE]
    assert not compare(sides, "bios-bump", share_limit=1.0).risks
    assert RiskKind.LARGE_CHANGE in kinds(compare(sides, "add-rack", share_limit=0.01))


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
}


def test_json_has_the_fixed_schema_and_is_deterministic(sides: dict[str, Side]) -> None:
    for tag in ("base", "renumber", "broken-yaml"):
        text = diff.to_json(compare(sides, tag))
        assert text == diff.to_json(compare(sides, tag))
        body = json.loads(text)
        assert body["schema"] == 1 and set(body) == JSON_KEYS
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
    report = compare(sides, "bios-bump")
    markdown = review.to_markdown(report)
    assert markdown.startswith(review.MARKER + "\n")
    assert len(markdown) <= review.MARKDOWN_LIMIT
    # Risks and counts first, details folded below them.
    assert markdown.index("⚠️ **large-change**") < markdown.index("| change | count |")
    assert markdown.index("| change | count |") < markdown.index("<details>")
    assert markdown.count("<details>") == markdown.count("</details>")
    # A tight limit cuts the lists, not the summary.
    short = review.to_markdown(report, limit=4000)
    assert len(short) <= 4000 and "more" in short
    assert short.startswith(review.MARKER) and "⚠️ **large-change**" in short


def test_markdown_escapes_text_from_the_pull_request(sides: dict[str, Side]) -> None:
    base = _with_files(sides["base"], {"opensm/x.conf": "routing_engine ftree\n"})
    head = _with_files(
        sides["base"], {"opensm/x.conf": "routing_engine <b>x</b>|y ``` </details>\n"}
    )
    markdown = review.to_markdown(diff.diff(base, head))
    assert "<b>" not in markdown and "&lt;/details&gt;" in markdown
    assert markdown.count("<details>") == markdown.count("</details>")


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
    assert out.startswith(review.MARKER) and "| hgx-a100 | bios |" in out
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
