"""audits/sanitize.py: what a host prints reaches no report raw, and costs a bounded size.

The sanitizer on its own (controls escaped, cut with the sha256 kept, idempotent), then a
replay of the reference cluster with hostile hosts: 10 MB BIOS lines, terminal escapes
(window title, hyperlink, clear screen), NULs, a bidirectional override, HTML and Markdown
that would link, embed or mention, 100,000 `[` as `ip -j` output. Every report file stays
under a stated bound, holds no control character, and is read by the programs that read it:
`xmllint` (junit.xml; report.html's SVG), `promtool check metrics` (the textfile) and
`cmark-gfm`, GitHub's own Markdown, with its table extension (report.md: no raw HTML, link,
image or escape in what it renders).
"""

from __future__ import annotations

import json
import re
import subprocess
import tracemalloc
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audits import expected, pipeline
from audits.collect import ReplayCollector
from audits.sanitize import LIMIT, VALUE_LIMIT, clean, text, xml_legal
from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from contract.probes import PROBES
from tests.conftest import require_tool
from tests.reference import compile_reference

ESCAPES = (
    "\x1b]0;owned\x07"  # window title
    "\x1b[2J\x1b[H"  # clear screen
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # hyperlink
    "\x00\x7f\x9b\u202e\u2028"  # NUL, DEL, C1 CSI, right-to-left override, line separator
)
MARKUP = "<script>alert(1)</script> | forged | row | ![x](https://evil.example/x.png) @admin"
# One line as Python splits lines (U+2028 would end it): the parser takes it as the version.
HOSTILE_BIOS = f"2.1.{ESCAPES.replace(chr(0x2028), '')}{MARKUP}"
TEN_MB = "A" * 10**7
# Any character a report may hold: the printable ones, line breaks and tabs of its own layout.
RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
)


def test_controls_are_shown_escaped_and_plain_text_is_left_alone() -> None:
    assert text("2.1.3 (2024-05-01)") == "2.1.3 (2024-05-01)"
    assert text("a\x1b[2Jb\x00c\nd\u202ee") == "a\\x1b[2Jb\\x00c\\nd\\u202ee"
    assert not RAW_CONTROL.search(text(ESCAPES))


def test_a_long_value_is_cut_with_its_length_and_sha256() -> None:
    cut = text(TEN_MB)
    assert len(cut) == LIMIT
    assert cut.startswith("AAAA")
    assert cut.endswith(f"[cut: {10**7} characters, sha256 {sha256(TEN_MB.encode()).hexdigest()}]")
    assert len(text(TEN_MB, VALUE_LIMIT)) == VALUE_LIMIT


@given(st.text(max_size=3000))
def test_sanitizing_twice_changes_nothing_and_leaves_xml_legal_text(value: str) -> None:
    once = text(value)
    assert text(once) == once
    assert len(once) <= LIMIT
    assert xml_legal(once) == once
    assert not RAW_CONTROL.search(once)


def test_clean_walks_keys_values_and_bounds_nesting() -> None:
    data: Any = {"\x1bk": ["\x00", {"n": 1, "b": None}]}
    assert clean(data) == {"\\x1bk": ["\\x00", {"n": 1, "b": None}]}
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    flat = json.dumps(clean(deep))
    assert "nested deeper than" in flat and flat.count("[") < 40


# -- a replay with hostile hosts ----------------------------------------------------------------

# The bound each report file keeps with the hostile hosts below: what the clean fleet's report
# takes, plus this much per hostile host (measured: about 2 KiB each in report.json, less in the
# others), whatever the hosts printed (tens of megabytes here).
PER_HOSTILE_HOST = 16 * 2**10
FLOODED = [f"gpu{n:03}" for n in range(5, 13)]  # 8 hosts with a 10 MB BIOS line each
HOSTILE = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu013", *FLOODED]


def _hostile(fleet: Fleet) -> list[str]:
    """Make hosts of `fleet` hostile; returns their names."""
    fleet.hosts["gpu001"].overrides["dmidecode_bios"] = TEN_MB + "\n"
    fleet.hosts["gpu002"].overrides["dmidecode_bios"] = HOSTILE_BIOS + "\n"
    xid = "Dec  1 06:00:00 gpu003 kernel: NVRM: Xid (PCI:0000:03:00): 79, pid=1, name=x, "
    xid += f"{ESCAPES}{MARKUP}\n"
    fleet.hosts["gpu003"].overrides["xid"] = xid
    fleet.hosts["gpu004"].overrides["ip_route"] = "[" * 100_000
    fleet.hosts["gpu013"].overrides["dmidecode_bios"] = "B" * 3000 + "\n"  # under the cap: cut
    for name in FLOODED:
        fleet.hosts[name].overrides["dmidecode_bios"] = TEN_MB + "\n"
    return HOSTILE


@pytest.fixture(scope="module")
def reference(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_reference(repo, tmp_path_factory.mktemp("reference"))


def _report(repo: Path, reference: Path, tmp: Path, hostile: bool) -> tuple[int, Path]:
    """A replay of the reference fleet (hostile or not), reported against the checkout, whose
    compiled scene (generated/draw/scene.json) gives report.html its pictures."""
    fleet = Fleet.load(reference / "generated")
    if hostile:
        _hostile(fleet)
    recording = fleet.record(tmp / "recording")
    out = tmp / "report"
    metrics = tmp / "audit.prom"
    replay = ["audit", "--replay", str(recording), "--out", str(out), "--textfile", str(metrics)]
    code = main(["-C", str(repo), *replay])
    return code, out


@pytest.fixture(scope="module")
def clean_run(repo: Path, reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(repo, reference, tmp_path_factory.mktemp("clean"), hostile=False)[1]


@pytest.fixture(scope="module")
def hostile_run(
    repo: Path, reference: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, Path]:
    return _report(repo, reference, tmp_path_factory.mktemp("hostile"), hostile=True)


def test_hostile_hosts_are_errors_or_drift_never_a_crash(hostile_run: tuple[int, Path]) -> None:
    code, out = hostile_run
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert code == 2 and report["summary"]["internal_errors"] == 0
    status = {h["host"]: h for h in report["hosts"]}
    bios_cap = PROBES["dmidecode_bios"].spec.max_output
    for name in ["gpu001", *FLOODED]:
        assert status[name]["status"] == "error"
        assert status[name]["failures"] == [
            {
                "probe": "dmidecode_bios",
                "message": f"output over {bios_cap} bytes: the recording keeps the first",
            }
        ]
    assert status["gpu004"]["status"] == "error"
    assert "ip_route" in status["gpu004"]["reason"] and "too deep" in status["gpu004"]["reason"]
    assert status["gpu002"]["status"] == "drift"
    observed = status["gpu002"]["versions"]["bios"]["observed"]
    assert observed == text(HOSTILE_BIOS, VALUE_LIMIT) and "\\x1b]0;owned\\x07" in observed
    cut = status["gpu013"]["versions"]["bios"]["observed"]
    assert len(cut) == VALUE_LIMIT and sha256(b"B" * 3000).hexdigest() in cut


def test_every_report_file_stays_under_its_bound_and_holds_no_control(
    clean_run: Path, hostile_run: tuple[int, Path]
) -> None:
    _, out = hostile_run
    hostile = len(HOSTILE)
    files = ["report.json", "report.md", "report.html", "junit.xml"]
    sizes = {}
    for name in files:
        size, before = (out / name).stat().st_size, (clean_run / name).stat().st_size
        sizes[name] = (before, size)
        assert size <= before + hostile * PER_HOSTILE_HOST, (name, before, size)
        body = (out / name).read_text(encoding="utf-8")
        assert not RAW_CONTROL.search(body), (name, RAW_CONTROL.search(body))
        assert "\x1b" not in body and "\x00" not in body
    metrics = (out.parent / "audit.prom").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(metrics)
    print("report sizes, clean -> hostile:", sizes)


@pytest.mark.realtool
def test_xmllint_reads_junit_and_the_pages_svg(
    hostile_run: tuple[int, Path], tmp_path: Path
) -> None:
    xmllint = require_tool("xmllint")
    _, out = hostile_run
    done = subprocess.run(
        [xmllint, "--noout", str(out / "junit.xml")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # report.html is HTML5; its pictures are SVG, XML of their own.
    page = (out / "report.html").read_text(encoding="utf-8")
    pictures = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    assert pictures
    for n, svg in enumerate(pictures):
        path = tmp_path / f"{n}.svg"
        path.write_text(svg, encoding="utf-8")
        done = subprocess.run([xmllint, "--noout", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@pytest.mark.realtool
def test_promtool_accepts_the_textfile(hostile_run: tuple[int, Path]) -> None:
    promtool = require_tool("promtool")
    _, out = hostile_run
    metrics = (out.parent / "audit.prom").read_bytes()
    done = subprocess.run([promtool, "check", "metrics"], input=metrics, capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.realtool
def test_github_markdown_renders_no_host_html_link_or_escape(hostile_run: tuple[int, Path]) -> None:
    cmark = require_tool("cmark-gfm")
    _, out = hostile_run
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "gpu002" in markdown  # the drifted host with the hostile BIOS is in it
    done = subprocess.run(
        [cmark, "--extension", "table", "--extension", "autolink", "--to", "html"],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
    )
    html = done.stdout
    assert "<script" not in html and "<img" not in html
    assert "evil.example" not in "".join(re.findall(r'(?:href|src)="[^"]*"', html))
    assert not RAW_CONTROL.search(html)
    # The hostile text is there, as text: escaped, in code.
    assert "&lt;script&gt;" in html or "\\x1b" in html


def test_a_replay_with_flooded_hosts_holds_little_memory(reference: Path, tmp_path: Path) -> None:
    fleet = Fleet.load(reference / "generated")
    _hostile(fleet)
    recording = fleet.record(tmp_path / "recording")
    total = sum(p.stat().st_size for p in (recording / "hosts").rglob("*.txt"))
    tracemalloc.start()
    try:
        pipeline.audit(expected.read(reference), ReplayCollector(recording))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 9 * 10**7  # nine 10 MB BIOS lines recorded
    # A flooded file is never read (its size is over the probe's cap): the audit holds one
    # host's outputs within their caps at a time.
    assert peak < 16 * 2**20, (peak, total)
