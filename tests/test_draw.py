"""Pictures: rack elevations, the row view and the fabric map (SVG), and their PDF front page.

Oracles: `xmllint` says every SVG is well-formed XML; the names are parsed back out of the SVG
text (visible text and hover titles); poppler reads the pull sheet's front page. The layout is
checked where it carries meaning: a device at its U span, a cable dot where its leaf's riser
crosses its spine's bus.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import fields
from pathlib import Path

import pytest

from clusterforge.cli import main
from compiler.load import load
from compiler.plan import Plan, build
from compiler.targets import labels as target
from compiler.targets.scene import scene
from compiler.validation import check
from contract import scene as scene_file
from contract.scene import Device, End, Link, RackSpot, Scene
from draw import labels
from draw.fabric import fabric_figure, tiers
from draw.figure import Line, svg
from draw.racks import HEAD, U
from tests.conftest import REPO, require_tool

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return build(check(load(REPO / "cluster")))


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("draw")
    assert main(["-C", str(REPO), "draw", "--out", str(out)]) == 0
    return out


def _words(path: Path) -> set[str]:
    """Every whitespace- or punctuation-separated word of the SVG's texts and titles."""
    root = ET.parse(path).getroot()
    words: set[str] = set()
    for el in root.iter():
        if el.tag in (f"{SVG}text", f"{SVG}title") and el.text:
            words |= set(re.split(r"[\s,:;()]+", el.text))
    return words


def _visible(path: Path) -> set[str]:
    root = ET.parse(path).getroot()
    return {el.text or "" for el in root.iter(f"{SVG}text")}


def test_draw_writes_an_elevation_per_rack_the_row_view_and_the_fabric_map(
    drawn: Path, plan: Plan
) -> None:
    files = sorted(str(p.relative_to(drawn)) for p in drawn.rglob("*.svg"))
    racks = sorted(f"racks/{r.name}.svg" for r in plan.racks)
    assert files == sorted([*racks, "racks.svg", "fabric.svg"])


def test_every_svg_is_well_formed_xml(drawn: Path) -> None:
    xmllint = require_tool("xmllint")
    files = sorted(str(p) for p in drawn.rglob("*.svg"))
    done = subprocess.run([xmllint, "--noout", "--nonet", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_xmllint_rejects_a_broken_svg(tmp_path: Path) -> None:
    xmllint = require_tool("xmllint")
    bad = tmp_path / "bad.svg"
    bad.write_text('<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>')
    assert subprocess.run([xmllint, "--noout", "--nonet", str(bad)]).returncode != 0


def test_every_device_and_cable_appears_by_name(drawn: Path, plan: Plan) -> None:
    devices = {h.name for h in plan.hosts} | {s.name for s in plan.switches}
    cables = {c.id for c in plan.cables}
    # The row view holds everything: devices as text, each device's cables in its hover text.
    row = _words(drawn / "racks.svg")
    assert devices <= _visible(drawn / "racks.svg")
    assert cables <= row
    # Each rack's elevation: its devices, and every cable with an end in it.
    for rack in plan.racks:
        words = _words(drawn / "racks" / f"{rack.name}.svg")
        assert {d.name for d in rack.nodes} | {s.name for s in rack.switches} <= words
        ends = {c.id for c in plan.cables if rack.name in (c.a.rack, c.b.rack)}
        assert ends <= words, rack.name
    # The fabric map: every InfiniBand cable (hover text) and every device on the fabric.
    fabric = _words(drawn / "fabric.svg")
    ib = [c for c in plan.cables if c.network == "ipoib"]
    assert {c.id for c in ib} <= fabric
    assert {e.device for c in ib for e in (c.a, c.b)} <= _visible(drawn / "fabric.svg")


def _groups(path: Path, attr: str) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {g.attrib[attr]: g for g in root.iter(f"{SVG}g") if attr in g.attrib}


def test_each_device_stands_at_its_u_span_and_empty_units_are_drawn(
    drawn: Path, plan: Plan
) -> None:
    rack = next(r for r in plan.racks if r.name == "r01")
    groups = _groups(drawn / "racks" / "r01.svg", "data-device")
    spans = {h.name: (h.u, h.height_u) for h in plan.hosts if h.rack == "r01"}
    spans |= {s.name: (s.u, 1) for s in plan.switches if s.rack == "r01"}
    assert groups.keys() == spans.keys()
    for name, (u, height) in spans.items():
        box = groups[name].find(f"{SVG}rect")
        assert box is not None
        top = HEAD + (rack.height_u - (u + height - 1)) * U
        assert float(box.attrib["y"]) == pytest.approx(top + 1), name
        assert float(box.attrib["height"]) == pytest.approx(height * U - 2), name
    root = ET.parse(drawn / "racks" / "r01.svg").getroot()
    empty = [r for r in root.findall(f"{SVG}rect") if r.attrib.get("stroke-dasharray")]
    assert len(empty) == rack.height_u - sum(h for _, h in spans.values())


@pytest.mark.parametrize(
    ("rack", "name"),
    # A leaf; a rack's management switch, which also takes the switches' management ports and
    # its uplink; the network rack's management switch and a storage spine (uplinks only).
    [("r01", "leaf01"), ("r01", "mgmt01"), ("n01", "mgmt-n01"), ("n01", "stor-spine01")],
)
def test_switches_show_their_ports_in_use(drawn: Path, plan: Plan, rack: str, name: str) -> None:
    switch = next(s for s in plan.switches if s.name == name)
    ends = [end for c in plan.cables for end in (c.a, c.b) if end.device == name]
    used = len({end.port for end in ends if end.port.isdigit()})  # front ports, not "mgmt"
    assert used > (1 if "spine" in name else 5) and "mgmt" in {e.port for e in ends}, name
    shown = f"{switch.model} · {used}/{switch.ports} ports"
    assert shown in _visible(drawn / "racks" / f"{rack}.svg")


def test_the_row_view_puts_racks_in_floor_order(drawn: Path, plan: Plan) -> None:
    root = ET.parse(drawn / "racks.svg").getroot()
    placed = {
        g.attrib["data-rack"]: tuple(map(float, re.findall(r"[-\d.]+", g.attrib["transform"])))
        for g in root.iter(f"{SVG}g")
        if "data-rack" in g.attrib
    }
    racks = sorted(plan.racks, key=lambda r: (r.row, r.col))
    assert list(placed) == [r.name for r in racks]
    for a, b in itertools.pairwise(racks):
        (ax, ay), (bx, by) = placed[a.name], placed[b.name]
        assert (by > ay) if a.row != b.row else (by == ay and bx > ax)


def test_the_fabric_map_puts_each_uplink_where_its_leaf_meets_its_spine(
    drawn: Path, plan: Plan
) -> None:
    cables = _groups(drawn / "fabric.svg", "data-cable")
    devices = _groups(drawn / "fabric.svg", "data-device")

    def centre(name: str) -> float:
        box = devices[name].find(f"{SVG}rect")
        assert box is not None
        return float(box.attrib["x"]) + float(box.attrib["width"]) / 2

    uplinks = [c for c in plan.cables if c.network == "ipoib" and c.b.device.startswith("spine")]
    assert len(uplinks) == 25 * 7
    bus: dict[str, set[float]] = {}
    seen = set()
    for c in uplinks:
        dot = cables[c.id].find(f"{SVG}circle")
        assert dot is not None, c.id
        x, y = float(dot.attrib["cx"]), float(dot.attrib["cy"])
        assert x == pytest.approx(centre(c.a.device), abs=0.01), c.id
        bus.setdefault(c.b.device, set()).add(y)
        seen.add((x, y))
    assert len(seen) == len(uplinks)  # no two cables on one spot
    assert all(len(ys) == 1 for ys in bus.values())  # one bus per spine
    assert len({y for ys in bus.values() for y in ys}) == 7


@pytest.mark.parametrize("fit", [None, 1300.0])
def test_no_two_lines_of_the_fabric_map_run_over_each_other(plan: Plan, fit: float | None) -> None:
    """Vertical lines at one x never share a stretch: a spine's drop to its bus stands between
    two leaf columns, not on a leaf's riser, drawn whole or in panels to fit a page."""
    figure = fabric_figure(scene(plan), fit_width=fit)
    upright: dict[float, list[tuple[float, float]]] = {}
    for shape in figure.items:
        if isinstance(shape, Line) and shape.x1 == shape.x2:
            top, bottom = sorted((shape.y1, shape.y2))
            upright.setdefault(round(shape.x1, 2), []).append((top, bottom))
    assert upright
    for x, spans in upright.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"two lines overlap at x={x}: {spans}"
    if fit is not None:
        assert figure.w <= fit


def _device(name: str, switch: bool, role: str) -> Device:
    return Device(name, switch, "r1", 1, 1, "m", role, 40 if switch else None, True)


def test_tiers_follow_the_cables_up_to_a_core() -> None:
    names = {"h1": "gpu", "h2": "gpu", "l1": "leaf", "l2": "leaf", "s1": "spine", "s2": "spine"}
    devices = [_device(n, n[0] != "h", r) for n, r in names.items()] + [_device("c1", True, "core")]
    pairs = [("l1", "h1"), ("l2", "h2")]
    pairs += [(leaf, s) for leaf in ("l1", "l2") for s in ("s1", "s2")]
    pairs += [("s1", "c1"), ("s2", "c1")]
    links = tuple(
        Link(f"X-IB{i:02d}", "ib", True, End(a, "1"), End(b, "1"), "", True)
        for i, (a, b) in enumerate(pairs)
    )
    facts = Scene("t", "H1", (RackSpot("r1", "A", 1, 42, "A01"),), tuple(devices), links)
    assert tiers(facts) == [["l1", "l2"], ["s1", "s2"], ["c1"]]
    text = svg(fabric_figure(facts))
    assert "Other links" not in text  # every cable found its place between two tiers
    assert all(f'data-cable="{c.id}"' in text for c in links)


_HASH_SCRIPT = """
import contextlib, hashlib, io, sys
from pathlib import Path
from clusterforge.cli import main
out = Path(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["-C", sys.argv[1], "draw", "--out", str(out)]) == 0
for path in sorted(p for p in out.rglob("*") if p.is_file()):
    print(path.relative_to(out), hashlib.sha256(path.read_bytes()).hexdigest())
"""


def test_pictures_are_byte_identical_across_runs_and_hash_seeds(tmp_path: Path) -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", _HASH_SCRIPT, str(REPO), str(tmp_path / seed)],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("0", "4242")
    ]
    assert runs[0] == runs[1] and len(runs[0].splitlines()) == 29


def test_the_pull_sheet_opens_with_the_racks_elevation(plan: Plan, tmp_path: Path) -> None:
    files = labels.sheets(target.cabling(plan), scene(plan), racks=["r01"])
    pdf = tmp_path / "r01-pull.pdf"
    pdf.write_bytes(files["r01-pull.pdf"])
    first = subprocess.run(
        [require_tool("pdftotext"), "-f", "1", "-l", "1", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = {h.name for h in plan.hosts if h.rack == "r01"} | {
        s.name for s in plan.switches if s.rack == "r01"
    }
    assert names <= set(first)
    assert "r01" in first and "42" in first  # the rack's name and its top U number
    assert not any(re.fullmatch(r"R01-[A-Z]{2}\d+", w) for w in first)  # the table is later
    assert (
        hashlib.sha256(files["r01-pull.pdf"]).digest()
        == hashlib.sha256(
            labels.sheets(target.cabling(plan), scene(plan), racks=["r01"])["r01-pull.pdf"]
        ).digest()
    )


def test_nothing_but_the_cli_imports_draw() -> None:
    """Drawing reads scenes, diffs and reports; no stage imports it back, only the command
    line's commands (clusterforge/commands/) hand it what to draw."""
    importing = re.compile(r"^\s*(from|import) draw\b", re.M)
    found = sorted(
        str(p.relative_to(REPO))
        for top in ("compiler", "audits", "contract", "clusterforge")
        for p in (REPO / top).rglob("*.py")
        if importing.search(p.read_text(encoding="utf-8"))
    )
    assert found == ["clusterforge/commands/audit.py", "clusterforge/commands/review.py"]


# --- the compiled scene ---------------------------------------------------------------------


def test_a_rail_sites_scene_reads_back_with_each_links_rail() -> None:
    text = (REPO / "examples" / "rails" / "generated" / scene_file.PATH).read_text(encoding="utf-8")
    facts = Scene.from_json(text)
    assert facts.to_json() == text
    assert {link.rail for link in facts.links if link.infiniband} == set(range(8))
    # A link's line is written field by field (scene._link): every field of Link is in it.
    railed = next(link for link in facts.links if link.rail is not None)
    written = json.loads(facts.to_json())["links"][facts.links.index(railed)]
    assert written.keys() == {f.name for f in fields(Link)}


@pytest.mark.parametrize("rail", [None, 0, 7])
def test_a_links_line_is_the_json_encoders_own(rail: int | None) -> None:
    # Written field by field (scene._link), a line must stay what json.dumps writes for the
    # link's fields, keys sorted: quotes, backslashes, control characters and non-ASCII text
    # escaped as it escapes them, and no rail key for a link on no rail.
    link = Link(
        'R01-IB05 "a"', "ipo\\ib", rail is not None, End("leaf-01\u00e9", "1"),
        End("gpu\u2028001", "mlx5_0/1"), "AOC 3 m, 4xHDR\t\U0001f600", rail == 0, rail,
    )  # fmt: skip
    fields_of = {f.name: getattr(link, f.name) for f in fields(Link)}
    fields_of["a"], fields_of["b"] = vars(link.a), vars(link.b)
    if rail is None:
        del fields_of["rail"]
    assert scene_file._link(link) == json.dumps(fields_of, sort_keys=True)


def test_the_compiled_scene_is_the_plans_one_record_a_line(plan: Plan) -> None:
    text = (REPO / "generated" / scene_file.PATH).read_text(encoding="utf-8")
    facts = Scene.from_json(text)
    assert facts == scene(plan) and facts.to_json() == text
    # The header, three list brackets each side, and every rack, device and cable on its own.
    records = len(facts.racks) + len(facts.devices) + len(facts.links)
    assert len(text.splitlines()) == 7 + records and records > 300


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('"schema": 1', '"schema": 2', "schema 2, not 1"),
        ('"u": 42', '"u": "42"', "valid integer"),  # strict: no string for a number
        ('"installed": true', '"installed": 1', "valid boolean"),
        ('"col": 1,', '"col": 1, "colour": "red",', "colour"),  # no key the record lacks
    ],
)
def test_a_scene_file_that_is_not_one_is_refused_naming_it(old: str, new: str, said: str) -> None:
    text = (REPO / "generated" / scene_file.PATH).read_text(encoding="utf-8")
    assert old in text
    with pytest.raises(scene_file.SceneError) as caught:
        Scene.from_json(text.replace(old, new, 1), "generated/draw/scene.json")
    assert str(caught.value).startswith("generated/draw/scene.json: ") and said in str(caught.value)


def test_a_rail_fabric_is_drawn_a_colour_per_rail(tmp_path: Path) -> None:
    """The rails example: every rail leaf's cable (a server's, an uplink) is drawn in its
    rail's colour, in the fabric map and at the servers' backs in the elevations, eight
    rails eight colours, each in the legend; the SVGs stay well-formed."""
    rails_repo = REPO / "examples" / "rails"
    out = tmp_path / "draw"
    assert main(["-C", str(rails_repo), "draw", "--out", str(out)]) == 0
    xmllint = require_tool("xmllint")
    files = sorted(str(p) for p in out.rglob("*.svg"))
    done = subprocess.run([xmllint, "--noout", "--nonet", *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    railed = build(check(load(rails_repo / "cluster")))
    assert railed.rails is not None
    rail_of = {
        c.id: railed.rails.leaf[c.a.device][1]
        for c in railed.cables
        if c.a.device in railed.rails.leaf and c.network in railed.ib_networks
    }

    def colours(path: Path) -> dict[int, set[str]]:
        """Rail -> the colours its cables' shapes are painted in."""
        found: dict[int, set[str]] = {}
        for group in ET.parse(path).getroot().iter(f"{SVG}g"):
            cable = group.get("data-cable")
            if cable not in rail_of:
                continue
            for shape in group:
                paint = shape.get("stroke") if shape.tag == f"{SVG}line" else shape.get("fill")
                if paint and paint != "none":
                    found.setdefault(rail_of[cable], set()).add(paint)
        return found

    fabric = colours(out / "fabric.svg")
    assert sorted(fabric) == list(range(8))
    assert all(len(c) == 1 for c in fabric.values()), fabric  # one colour a rail
    per_rail = {rail: next(iter(c)) for rail, c in fabric.items()}
    assert len(set(per_rail.values())) == 8, "eight rails, eight colours"
    # A server's eight HCA ends at its back, each in its rail's colour.
    assert colours(out / "racks" / "r001.svg") == {r: {c} for r, c in per_rail.items()}
    for name in ("fabric.svg", "racks.svg", "racks/r001.svg"):
        key = {
            int(g.get("data-rail", "")): g.find(f"{SVG}rect").get("fill")  # type: ignore[union-attr]
            for g in ET.parse(out / name).getroot().iter(f"{SVG}g")
            if g.get("data-rail") is not None
        }
        assert key == per_rail, name
    # A site without rails has no rails' key.
    assert "data-rail" not in svg(fabric_figure(scene(build(check(load(REPO / "cluster"))))))
