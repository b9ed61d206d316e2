"""The HTML pages: `audit`'s report.html and `diff --html`, opened by a real browser.

Headless Chromium (the Debian package) opens report.html from a file inside a network
namespace of its own (no network at all), dumps the DOM and takes a screenshot: the summary's
numbers must be in the DOM, the page must not be blank, and the console must show no error.
A page that throws proves the console check can fail. A recording with one swapped cable pair
and one drifted host must mark exactly those, in the fabric map and the rack elevations.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from ruamel.yaml import YAML

from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from compiler.load import load
from compiler.plan import build
from compiler.targets.scene import scene
from compiler.validation import check
from contract.scene import Mark
from draw import pages
from draw.report import Renderer
from draw.scene import COLOURS
from tests.conftest import REPO, require_tool
from tests.reference import compile_reference
from tests.test_diff import add_rack, git, move_spare, repatch

DRIFTED = "gpu017"
SWAPPED_HOSTS = ("gpu001", "gpu002")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


class _Marks(HTMLParser):
    """Every element's data-device / data-cable name with its data-mark, and all ids' text."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: set[tuple[str, str]] = set()
        self.named: set[str] = set()
        self.ids: dict[str, str] = {}
        self.urls: list[str] = []
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name = a.get("data-device") or a.get("data-cable")
        if name:
            self.named.add(name)
            if a.get("data-mark"):
                self.marks.add((name, a["data-mark"] or ""))
        self.urls += [v for k, v in attrs if k in ("src", "href", "action") and v]
        if tag == "link" or (tag == "script" and "src" in a):
            self.urls.append(f"<{tag}>")
        self._id = a.get("id")

    def handle_data(self, data: str) -> None:
        if self._id is not None:
            self.ids[self._id] = self.ids.get(self._id, "") + data.strip()

    def handle_endtag(self, tag: str) -> None:
        self._id = None


def _parse(html: str) -> _Marks:
    parser = _Marks()
    parser.feed(html)
    return parser


def _chromium(tmp: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """Chromium on `url` with a fresh profile, in a new user and network namespace: only a
    loopback device that is down, so nothing can be fetched."""
    chromium, unshare = require_tool("chromium"), require_tool("unshare")
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    namespace = [unshare, "--map-root-user", "--net"]
    return subprocess.run(
        [*namespace, chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _console_errors(stderr: str, url: str) -> list[str]:
    """Console messages of the page itself (not Chromium's own pages), and uncaught errors."""
    return [
        line
        for line in stderr.splitlines()
        if "Uncaught" in line or ("CONSOLE" in line and url.split("#")[0] in line)
    ]


@dataclass(frozen=True)
class Audit:
    repo: Path
    code: int
    out: Path
    cables: list[str]

    @property
    def html(self) -> str:
        return (self.out / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cluster/ and what it compiles to, as a repository the audit reads (-C)."""
    root = tmp_path_factory.mktemp("reference")
    shutil.copytree(REPO / "cluster", root / "cluster")
    return compile_reference(REPO, root)


@pytest.fixture(scope="module")
def drift(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Audit:
    tmp = tmp_path_factory.mktemp("drift")
    fleet = Fleet.load(reference / "generated")
    fleet.set_version([DRIFTED], "ofed", "5.8-1.0.1.1")
    cable_of = {c["b"]["name"]: cable for cable, c in fleet.cables.items()}
    swapped = sorted(cable_of[h] for h in SWAPPED_HOSTS)
    fleet.swap_far_ends(*swapped)
    recording = fleet.record(tmp / "recording")
    argv = ["-C", str(reference), "audit", "--replay", str(recording), "--out", str(tmp / "out")]
    return Audit(reference, main(argv), tmp / "out", swapped)


def test_the_page_marks_exactly_the_swapped_cables_and_the_drifted_host(drift: Audit) -> None:
    assert drift.code == 1
    page = _parse(drift.html)
    one, two = drift.cables
    assert page.marks == {(DRIFTED, "drift"), (one, "miswired"), (two, "miswired")}
    # Both pictures are there: the host on the fabric map and in its rack.
    assert drift.html.count(f'data-device="{DRIFTED}" data-mark="drift"') == 2
    # A host's cable on the map, and its end beside the host in the rack.
    assert drift.html.count(f'data-cable="{one}" data-mark="miswired"') == 2


def test_the_page_is_self_contained(drift: Audit) -> None:
    page = _parse(drift.html)
    assert page.urls == []  # no src, href, <link> or external script
    assert "@import" not in drift.html and "url(" not in drift.html
    outside = set(re.findall(r"https?://[^\s\"'<>]+", drift.html))
    assert outside <= {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched
    assert "default-src 'none'" in drift.html  # and the browser is told to fetch nothing


def test_the_summary_and_findings_follow_report_json(drift: Audit) -> None:
    page = _parse(drift.html)
    assert {k: page.ids[k] for k in ("hosts", "ok", "drift", "findings", "fabric")} == {
        "hosts": "189",  # 132 hosts and 57 Cumulus switches
        "ok": "188",
        "drift": "1",
        "findings": "3",
        "fabric": "drift",
    }
    row = r"<tr><td class=\"(\w+)\"[^>]*>\w+</td><td>(\w*)</td><td>(\d*)</td><td>([\w-]+)</td>"
    rows = re.findall(row, drift.html)
    assert rows == [
        ("critical", "r01", "42", "fabric"),  # a cable where its leaf end is
        ("critical", "r01", "42", "fabric"),
        ("critical", "r04", "6", DRIFTED),
    ]


def test_chromium_renders_the_page_offline_without_console_errors(
    drift: Audit, tmp_path: Path
) -> None:
    url = (drift.out / "report.html").as_uri()
    dom = _chromium(tmp_path, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console_errors(dom.stderr, url) == []
    page = _parse(dom.stdout)
    assert (page.ids["hosts"], page.ids["ok"], page.ids["drift"]) == ("189", "188", "1")
    assert (page.ids["findings"], page.ids["fabric"]) == ("3", "drift")
    shot = tmp_path / "page.png"
    done = _chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1400,2000")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    assert _console_errors(done.stderr, url) == []
    with Image.open(shot) as image:
        grey = image.convert("L")
        inked = sum(n for n, level in (grey.getcolors(256) or []) if level < 200)
        assert grey.size == (1400, 2000)
        assert inked > 0.02 * 1400 * 2000  # text, tables and pictures, not a blank page
        assert len(image.convert("RGB").getcolors(1 << 16) or []) > 20  # role and mark colours


def test_the_table_sorts_in_the_browser(drift: Audit, tmp_path: Path) -> None:
    """report.html#sort=Message clicks that header when the page loads: the script runs."""
    url = (drift.out / "report.html").as_uri() + "#sort=Message"
    dom = _chromium(tmp_path, url, "--dump-dom")
    assert _console_errors(dom.stderr, url) == []
    row = r"<tr><td class=\"\w+\"[^>]*>\w+</td><td>\w*</td><td>\d*</td><td>([\w-]+)</td>"
    hosts = re.findall(row, dom.stdout)
    assert hosts == [DRIFTED, "fabric", "fabric"]  # "ofed ..." before "R01-IB0..."
    assert 'aria-sort="ascending"' in dom.stdout


def test_the_console_check_catches_a_script_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><title>x</title><p>x</p><script>undefinedCall();</script>")
    done = _chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert any("Uncaught" in line for line in _console_errors(done.stderr, page.as_uri()))


def test_the_page_is_byte_identical_for_the_same_recording(drift: Audit, tmp_path: Path) -> None:
    recording = drift.out.parent / "recording"
    again = tmp_path / "again"
    code = main(["-C", str(drift.repo), "audit", "--replay", str(recording), "--out", str(again)])
    assert code == drift.code
    assert (again / "report.html").read_bytes() == (drift.out / "report.html").read_bytes()


def _audited(repo: Path, drift: Audit, out: Path) -> str:
    """report.html of the drift recording audited against `repo`."""
    recording = drift.out.parent / "recording"
    code = main(["-C", str(repo), "audit", "--replay", str(recording), "--out", str(out)])
    assert code == drift.code
    return (out / "report.html").read_text(encoding="utf-8")


def test_the_pictures_are_of_the_compiled_state_not_of_cluster_as_it_is_now(
    drift: Audit, tmp_path: Path
) -> None:
    """cluster/ moved on after the compile (a rack renamed, not recompiled): the page draws
    what generated/ holds, which the expectations were compiled with."""
    repo = tmp_path / "repo"
    shutil.copytree(drift.repo, repo)
    racks = repo / "cluster" / "racks"
    text = (racks / "r04.yaml").read_text(encoding="utf-8")
    (racks / "r04.yaml").unlink()
    (racks / "r4x.yaml").write_text(text.replace("\nname: r04\n", "\nname: r4x\n"))
    assert "name: r4x" in (racks / "r4x.yaml").read_text()
    html = _audited(repo, drift, tmp_path / "out")
    assert 'data-rack="r04"' in html and "r4x" not in html
    assert html == drift.html  # the same compile and recording: the same page


def test_without_cluster_the_page_is_drawn_from_generated(drift: Audit, tmp_path: Path) -> None:
    bare = compile_reference(REPO, tmp_path / "bare")  # generated/ only
    html = _audited(bare, drift, tmp_path / "out")
    assert html == drift.html and "<svg" in html


def test_a_tree_compiled_without_a_scene_gets_a_page_saying_why(
    drift: Audit, tmp_path: Path
) -> None:
    """generated/ from before the scene was compiled: the findings, and no pictures."""
    bare = compile_reference(REPO, tmp_path / "bare")
    (bare / "generated" / "draw" / "scene.json").unlink()
    manifest = bare / "generated" / "MANIFEST.json"
    listed = json.loads(manifest.read_text(encoding="utf-8"))
    del listed["files"]["draw/scene.json"]
    manifest.write_text(json.dumps(listed), encoding="utf-8")
    html = _audited(bare, drift, tmp_path / "out")
    assert "No pictures" in html and "draw/scene.json" in html and "<svg" not in html
    assert _parse(html).ids["drift"] == "1"


def test_a_scene_compiled_from_another_source_is_drawn_under_a_warning(drift: Audit) -> None:
    """A merge of shards audited against another compile than the one generated/ holds."""
    report = json.loads((drift.out / "report.json").read_text(encoding="utf-8"))
    facts = scene(build(check(load(drift.repo / "cluster"))))
    same = Renderer(facts, report["expectations"]["source_sha256"]).files(report)
    other = Renderer(facts, "0" * 64).files(report)
    assert same["report.html"] == drift.html
    assert "not compiled from the source" in other["report.html"]
    assert "not compiled from the source" not in drift.html


# --- diff --html --------------------------------------------------------------------------


def _remove_spare(cluster: Path) -> None:
    path = cluster / "racks" / "s01.yaml"
    rack = YAML(typ="safe").load(path.read_text())
    rack["nodes"] = [n for n in rack["nodes"] if n["name"] != "gpu126"]
    path.write_text(json.dumps(rack, indent=1) + "\n")  # JSON is YAML, as test_diff saves


@pytest.fixture(scope="module")
def change(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository: `base` (this cluster/) and `head` (a new rack, two re-patched cables,
    a spare moved up and another removed)."""
    root = tmp_path_factory.mktemp("change")
    shutil.copytree(REPO / "cluster", root / "cluster")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "cluster")
    git(root, "commit", "-q", "-m", "base")
    git(root, "tag", "base")
    for edit in (add_rack, repatch, move_spare, _remove_spare):
        edit(root / "cluster")
    git(root, "add", "-A", "cluster")
    git(root, "commit", "-q", "-m", "head")
    git(root, "tag", "head")
    with (root / "cluster" / "racks" / "r03.yaml").open("a") as f:
        f.write("notes: [unclosed\n")
    git(root, "commit", "-q", "-am", "broken")
    git(root, "tag", "broken")
    return root


def test_the_change_picture_marks_what_the_diff_reports(change: Path, tmp_path: Path) -> None:
    html, js = tmp_path / "diff.html", tmp_path / "diff.json"
    argv = ["-C", str(change), "diff", "base", "head", "--html", str(html), "--json", str(js)]
    assert main([*argv, "--markdown", str(tmp_path / "diff.md")]) == 0
    report = json.loads(js.read_text())
    expected = {(n["name"], "added") for k in ("nodes", "switches") for n in report[k]["added"]}
    expected |= {
        (n["name"], "removed") for k in ("nodes", "switches") for n in report[k]["removed"]
    }
    expected |= {(n["name"], "moved") for k in ("nodes", "switches") for n in report[k]["moved"]}
    expected |= {(c["id"], "added") for c in report["cables"]["added"]}
    expected |= {(c["id"], "removed") for c in report["cables"]["removed"]}
    expected |= {
        (c["id"], "moved" if c["repatched"] else "changed") for c in report["cables"]["changed"]
    }
    assert ("gpu126", "removed") in expected and ("gpu125", "moved") in expected
    assert any(m == "moved" and n.startswith("R") for n, m in expected)  # a re-patched cable
    # A cable between two Ethernet switches (an uplink, a management port) has neither a host
    # end the elevations draw nor a place on the InfiniBand map: the picture leaves it out.
    between = {
        c["id"]
        for c in report["cables"]["added"]
        if c["network"] != "ipoib" and (c["b"]["port"] == "mgmt" or c["b"]["port"].isdigit())
    }
    assert between, "r26's switches add uplinks and management-port cables"
    expected = {(n, m) for n, m in expected if n not in between}
    page = _parse(html.read_text(encoding="utf-8"))
    assert {(n, m) for n, m in page.marks} == expected
    assert page.urls == []
    # The removed spare is drawn where it stood (from BASE); it had no InfiniBand cable (its
    # rack has no leaf), so it is in its rack only, not on the fabric map.
    assert html.read_text().count('data-device="gpu126" data-mark="removed"') == 1
    again = tmp_path / "again.html"
    assert main(["-C", str(change), "diff", "base", "head", "--html", str(again)]) == 0
    assert again.read_bytes() == html.read_bytes()


def test_chromium_renders_the_change_picture(change: Path, tmp_path: Path) -> None:
    html = tmp_path / "diff.html"
    assert main(["-C", str(change), "diff", "base", "head", "--html", str(html)]) == 0
    dom = _chromium(tmp_path, html.as_uri(), "--dump-dom")
    assert dom.returncode == 0 and _console_errors(dom.stderr, html.as_uri()) == []
    assert _parse(dom.stdout).ids["removed"] != "0"


def test_a_head_that_does_not_compile_gets_a_page_with_its_errors(
    change: Path, tmp_path: Path
) -> None:
    html = tmp_path / "diff.html"
    argv = ["-C", str(change), "diff", "head", "broken", "--html", str(html)]
    assert main([*argv, "--markdown", str(tmp_path / "diff.md")]) == 2
    text = html.read_text(encoding="utf-8")
    assert "nothing is drawn" in text and "r03.yaml" in text and "<svg" not in text


def test_missing_and_degraded_cables_are_coloured_too(drift: Audit) -> None:
    """The classes the recording above has none of, from a report.json that has them."""
    report = json.loads((drift.out / "report.json").read_text(encoding="utf-8"))
    report["fabric"] |= {"missing": ["R05-IB01"], "degraded": ["R06-IB02"]}
    facts = scene(build(check(load(drift.repo / "cluster"))))
    marks = _parse(pages.audit_page(report, facts)).marks
    assert {("R05-IB01", "missing"), ("R06-IB02", "degraded")} <= marks
    colours = {m: COLOURS[Mark(m)] for m in ("missing", "degraded", "miswired")}
    assert len(set(colours.values())) == 3  # each class its own colour


def test_a_change_with_nothing_physical_says_so(change: Path, tmp_path: Path) -> None:
    html = tmp_path / "diff.html"
    assert main(["-C", str(change), "diff", "head", "head", "--html", str(html)]) == 0
    page = _parse(html.read_text(encoding="utf-8"))
    assert page.marks == set() and "Nothing physical changes" in html.read_text()


# -- the 3 am view: what to do, where, and pictures that fit ----------------------------------

# Run in the page once it has laid out: the page's and every picture's right edge, the
# smallest text as it is drawn on screen, and where each marked device or cable is.
_MEASURE = """<script>
var out = {width: innerWidth, page: document.documentElement.scrollWidth, pictures: [],
           marks: []};
document.querySelectorAll(".picture svg").forEach(function (svg) {
  var box = svg.getBoundingClientRect();
  var scale = box.width / svg.viewBox.baseVal.width;
  var smallest = 1e9;
  svg.querySelectorAll("text").forEach(function (t) {
    smallest = Math.min(smallest, parseFloat(t.getAttribute("font-size")) * scale);
  });
  out.pictures.push({id: svg.parentNode.id, right: box.right, smallest: smallest});
});
document.querySelectorAll("[data-mark]").forEach(function (e) {
  var name = e.getAttribute("data-device") || e.getAttribute("data-cable");
  out.marks.push({name: name, right: e.getBoundingClientRect().right});
});
var pre = document.createElement("pre");
pre.id = "measured";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _measure(page: Path, tmp: Path, width: int) -> dict[str, Any]:
    measured = tmp / f"measured-{width}.html"
    measured.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"),
        encoding="utf-8",
    )
    url = measured.as_uri()
    dom = _chromium(tmp, url, "--dump-dom", f"--window-size={width},1200")
    assert dom.returncode == 0 and _console_errors(dom.stderr, url) == [], dom.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the measuring script did not run"
    data: dict[str, Any] = json.loads(unescape(found[1]))
    return data


def test_the_pictures_fit_the_window_and_every_mark_is_on_screen(
    drift: Audit, tmp_path: Path
) -> None:
    """At 1400 px, the page has no horizontal scroll, the pictures end inside the window
    drawn at full size (their smallest text at least 7 px), and every marked device and cable
    (the drifted host, the swapped cables) is inside the window; at 700 px they shrink to fit."""
    wide = _measure(drift.out / "report.html", tmp_path, 1400)
    assert wide["page"] <= wide["width"]
    assert {p["id"] for p in wide["pictures"]} == {"fabric", "racks"}
    for picture in wide["pictures"]:
        assert picture["right"] <= wide["width"], picture
        assert picture["smallest"] >= 7, picture
    marked = {m["name"] for m in wide["marks"]}
    assert {DRIFTED, *drift.cables} <= marked
    assert all(m["right"] <= wide["width"] for m in wide["marks"]), wide["marks"]
    narrow = _measure(drift.out / "report.html", tmp_path, 700)
    assert narrow["page"] <= narrow["width"]
    assert all(p["right"] <= narrow["width"] for p in narrow["pictures"])


def test_the_page_says_what_to_do_and_where(reference: Path, tmp_path: Path) -> None:
    """A drifted host, a swapped pair and a host down: a "What to do" item for each kind of
    finding and for the host not collected, and the rack and U of each row."""
    fleet = Fleet.load(reference / "generated")
    fleet.set_version([DRIFTED], "ofed", "5.8-1.0.1.1")
    recording = fleet.record(tmp_path / "recording")
    down = "gpu050"
    (recording / "hosts" / down / "status.json").write_text(
        json.dumps({"status": "unreachable", "reason": "ssh: connect: Connection refused"}),
        encoding="utf-8",
    )
    for stale in (recording / "hosts" / down).glob("*.txt"):
        stale.unlink()
    out = tmp_path / "out"
    main(["-C", str(reference), "audit", "--replay", str(recording), "--out", str(out)])
    html = (out / "report.html").read_text(encoding="utf-8")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    todo = html.split('<ul class="todo" id="what-to-do">', 1)[1].split("</ul>", 1)[0]
    kinds = {f["kind"] for f in report["findings"]}
    assert kinds and all(f"<b>{kind}</b>" in todo for kind in kinds)
    assert "<b>unreachable</b>: the audit could not log in" in todo
    assert "<th>Rack</th><th>U</th><th>Host</th>" in html
    place = {h["host"]: (h["rack"], h["u"]) for h in report["hosts"]}
    rack, u = place[DRIFTED]
    assert f"<td>{rack}</td><td>{u}</td><td>{DRIFTED}</td>" in html
    rack, u = place[down]
    assert f"<td>{down}</td><td>{rack}</td><td>{u}</td><td>unreachable</td>" in html
