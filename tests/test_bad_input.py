"""Broken cluster/ trees give located errors, exit code 2, no traceback, generated/ untouched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterforge.cli import main
from common.errors import SourceError
from common.rules import Rule
from common.yaml import _UNPRINTABLE
from compiler import pipeline
from compiler.load import load
from compiler.output import read_tree
from tests.conftest import REPO

CASES = YAML(typ="safe").load((Path(__file__).parent / "bad_input" / "cases.yaml").read_text())


def broken_copy(tmp: Path, case: dict[str, Any]) -> Path:
    base = REPO / case.get("base", ".")  # "base": a shipped site other than the reference
    shutil.copytree(base / "cluster", tmp / "cluster")
    shutil.copytree(base / "generated", tmp / "generated")
    for edit in (case, *case.get("also", ())):  # "also": more edits the one fault needs
        path = tmp / "cluster" / edit["file"]
        if "create" in edit:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(edit["create"])
            continue
        text = path.read_text()
        assert edit["find"] in text, f"case no longer applies: {edit['find']!r} not in {path.name}"
        path.write_text(text.replace(edit["find"], edit["replace"], 1))
    return tmp


@pytest.mark.parametrize("name", sorted(CASES))
def test_broken_input_is_located(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = broken_copy(tmp_path, CASES[name])
    before = read_tree(repo / "generated")

    code = main(["-C", str(repo), "compile"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    for internal in ("Input should", "Value error", "validation error", "pydantic"):
        assert internal not in err, f"validator wording leaks: {err}"
    reported = {":".join(line.split(":")[:2]) + ":" + line.split(":")[3] for line in _diags(err)}
    for expected in CASES[name]["expect"]:
        assert expected in reported, f"{expected!r} not in:\n{err}"
    assert read_tree(repo / "generated") == before


def _diags(err: str) -> list[str]:
    """Diagnostic lines look like `path:line:col: rule: message`."""
    lines = err.splitlines()
    return [line for line in lines if line.count(":") >= 4 and line.startswith("cluster/")]


# Rules no edit of a copy of cluster/ can reach, each with the test that makes it fire.
ELSEWHERE = {
    Rule.MISSING_FILE: "test_a_missing_required_file_is_located",
    Rule.UNREADABLE_SECRET: "test_an_unreadable_secret_file_is_located",
    # Loading refuses such a value first; the rendering guard behind it is fed directly.
    Rule.UNSAFE_VALUE: "tests/test_render.py::test_the_guard_names_the_field_it_came_from",
}


def test_every_rule_has_a_case() -> None:
    """A rule the compiler can report but no broken input exercises is an untested rule."""
    covered = {e.split(": ")[-1] for case in CASES.values() for e in case["expect"]}
    covered |= {where.split(": ")[-1] for _, where in HOSTILE_FILES.values()}
    assert set(Rule) - covered - set(ELSEWHERE) == set()
    assert covered & set(ELSEWHERE) == set(), "a rule with a case needs no other test"
    assert covered <= set(Rule), "a case expects a rule the compiler does not have"
    assert len(CASES) >= 15


def test_a_missing_required_file_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    (tmp_path / "cluster" / "site.yaml").unlink()
    assert main(["-C", str(tmp_path), "validate"]) == 2
    err = capsys.readouterr().err
    assert f"cluster/site.yaml:0:0: {Rule.MISSING_FILE}: cluster/site.yaml is required" in err


def test_an_unreadable_secret_file_is_located(tmp_path: Path) -> None:
    """A secret's file that is there but cannot be read (a folder here) is an error at the
    key naming it, not a placeholder silently used."""
    secret = tmp_path / "root.hash"
    secret.mkdir()
    repo = broken_copy(
        tmp_path,
        {
            "file": "provisioning.yaml",
            "find": "file: /etc/clusterforge/root.hash",
            "replace": f"file: {secret}",
        },
    )
    with pytest.raises(SourceError) as raised:
        pipeline.compile_source(load(repo / "cluster"), {})
    [problem] = raised.value.diagnostics
    assert problem.rule == Rule.UNREADABLE_SECRET
    assert str(problem.location).startswith("cluster/provisioning.yaml:28:")


def test_clean_input_compiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus' base is valid, so each case fails for its own edit alone."""
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    assert main(["-C", str(tmp_path), "validate"]) == 0, capsys.readouterr().err


def test_a_rack_id_beyond_the_plan_is_one_problem_per_network_with_its_devices_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU rack given an id no network has a subnet for: one located problem per network,
    naming the fix, each device it leaves without an address folded under it, and the
    leaf's uplinks one problem, not one per spine."""
    case = {"file": "racks/r25.yaml", "find": "id: 25\n", "replace": "id: 200\n"}
    repo = broken_copy(tmp_path, case)
    assert main(["-C", str(repo), "validate"]) == 2
    err = capsys.readouterr().err
    top = [line for line in err.splitlines() if line.startswith("cluster/")]
    assert [":".join(line.split(":")[:4]) for line in top] == [
        "cluster/racks/r25.yaml:4:1: rack-subnet-too-small",  # bmc: every device of the rack
        "cluster/racks/r25.yaml:4:1: rack-subnet-too-small",  # mgmt: its servers
        "cluster/racks/r25.yaml:8:5: port-out-of-range",  # the leaf's uplinks
    ]
    assert all("give rack 'r25' a free id up to" in line for line in top[:2])
    assert "give the rack a lower free id" in top[2]
    rack = YAML(typ="safe").load((REPO / "cluster" / "racks" / "r25.yaml").read_text())
    devices = [d["name"] for d in (*rack["switches"], *rack["nodes"])]
    assert f"so {len(devices)} device(s) of 'r25' would have no 'bmc' address" in top[0]
    assert f"which also causes {len(devices)} problems" in err
    assert (
        f"3 problem(s) in cluster/ (and {len(devices) + len(rack['nodes']) + 6} that follow" in err
    )


SECRET = "root:$6$do-not-print-this-hash$"


def _link_out(cluster: Path) -> None:
    secret = cluster.parent / "shadow"
    secret.write_text(f"{SECRET}\n")
    (cluster / "racks" / "r99.yaml").symlink_to(secret)


def _rack(data: bytes) -> Any:
    return lambda cluster: (cluster / "racks" / "r99.yaml").write_bytes(data)


# Files no text edit can make (bytes, links, special files, sizes), each with where its
# diagnostic must point (`file:line: rule`, as in cases.yaml).
HOSTILE_FILES: dict[str, tuple[Any, str]] = {
    "symlink-out-of-repo": (_link_out, "cluster/racks/r99.yaml:1: not-a-file"),
    "dangling-link": (
        lambda c: (c / "racks" / "r99.yaml").symlink_to("/nonexistent/r99.yaml"),
        "cluster/racks/r99.yaml:1: not-a-file",
    ),
    "linked-racks-folder": (
        lambda c: (shutil.rmtree(c / "racks"), (c / "racks").symlink_to(REPO / "cluster/racks")),
        "cluster/racks:1: not-a-file",
    ),
    "fifo": (lambda c: os.mkfifo(c / "racks" / "r99.yaml"), "cluster/racks/r99.yaml:1: not-a-file"),
    "folder": (
        lambda c: (c / "racks" / "r99.yaml").mkdir(),
        "cluster/racks/r99.yaml:1: not-a-file",
    ),
    "control-in-file-name": (
        lambda c: (c / "racks" / "r9\n9\x1b[2J.yaml").write_text("name: r99\n"),
        "cluster/racks/r9\\n9\\x1b[2J.yaml:1: file-name",
    ),
    "not-utf8": (_rack(b"name: r99\nid: \xff\xfe\n"), "cluster/racks/r99.yaml:2: yaml-encoding"),
    "nul": (_rack(b"name: r99\nrow: A\x00B\n"), "cluster/racks/r99.yaml:2: yaml-encoding"),
    "flow-nesting-100000": (
        _rack(b"name: [" + b"[" * 100_000 + b"]" * 100_000 + b"]\n"),
        "cluster/racks/r99.yaml:1: yaml-too-deep",
    ),
    "block-nesting-2800": (
        _rack(b"".join(b" " * i + b"k:\n" for i in range(2800))),
        "cluster/racks/r99.yaml:65: yaml-too-deep",
    ),
    "sequence-nesting-3000": (
        _rack(b"- " * 3000 + b"x\n"),
        "cluster/racks/r99.yaml:1: yaml-too-deep",
    ),
    "line-breaks-yaml-only-knows-as-1.1": (
        _rack("\u2028".join(" " * i + "k:" for i in range(100)).encode()),
        "cluster/racks/r99.yaml:65: yaml-too-deep",
    ),
    "file-of-200-mb": (
        lambda c: _sparse(c / "racks" / "r99.yaml", 200 << 20),
        "cluster/racks/r99.yaml:1: yaml-too-large",
    ),
}


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.write(b"# ")
        f.truncate(size)


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_file_is_located(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Never read through, never expanded, never printed: one located line, exit 2."""
    make, expected = HOSTILE_FILES[name]
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    make(tmp_path / "cluster")

    code = main(["-C", str(tmp_path), "validate"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert SECRET not in err
    assert "\x1b" not in err and "\x00" not in err
    reported = {":".join(line.split(":")[:2]) + ":" + line.split(":")[3] for line in _diags(err)}
    assert expected in reported, f"{expected!r} not in:\n{err}"


def test_an_editors_lock_link_is_not_a_cluster_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    (tmp_path / "cluster" / "racks" / ".#r03.yaml").symlink_to("root@host.4242:1700000000")
    assert main(["-C", str(tmp_path), "validate"]) == 0, capsys.readouterr().err


def test_long_unknown_key_is_quoted_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    site = tmp_path / "cluster" / "site.yaml"
    site.write_text(site.read_text() + "K" * 900 + ": 1\n")

    assert main(["-C", str(tmp_path), "validate"]) == 2
    err = capsys.readouterr().err
    assert "unknown-key" in err and "(900 characters)" in err
    assert max(len(line) for line in err.splitlines()) < 400


def test_committed_link_is_refused_in_review(tmp_path: Path) -> None:
    """`diff` reads revisions from git: a committed link is refused as on disk, so the review
    and the compile judge the same tree."""
    from compiler import gitsource
    from tests.test_diff import git

    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "cluster" / "racks" / "r99.yaml").symlink_to("/etc/passwd")
    git(tmp_path, "add", "cluster")
    git(tmp_path, "commit", "-q", "-m", "link")

    side = gitsource.compile_revision(tmp_path, "HEAD")

    assert [(str(d.location), d.rule) for d in side.errors] == [
        ("cluster/racks/r99.yaml:1:1", "not-a-file")
    ]


def test_asn_clashes_are_told_each_with_the_switch_it_shares_one_with(tmp_path: Path) -> None:
    """BGP ASNs: the spines given two, a management switch holding a storage switch's ASN
    under the same spines (the rack after it: asn one below), each clash folded under its
    tier with both switches named, and the ASN the plan gives the switches the same rule."""
    case = CASES["bgp-asn-shared-spines"]
    repo = broken_copy(tmp_path, case)
    with pytest.raises(SourceError) as raised:
        pipeline.compile_source(load(repo / "cluster"), {})
    found = {
        (str(d.location).split(":")[1], d.message.split(" ")[2]): d
        for d in raised.value.diagnostics
        if d.rule == Rule.BGP_ASN
    }
    # line 8 the storage tier, 10 the management one: its clashes, and its asn for the spines
    assert set(found) == {("8", "(asn"), ("10", "(asn"), ("10", "gives")}
    two = found[("10", "gives")].message
    assert two.startswith("tier 2 gives the storage-spine switches asn 4200069999, tier 1 ")
    # rack 2's management switch: 4200069999 + 2, rack 1's storage switch's 4200070000 + 1
    clash = found[("10", "(asn")].consequences
    assert "mgmt02: ASN 4200070001, as stor01's" in {c.message for c in clash}
    assert len(clash) == 24  # r02..r25 against stor01..stor24 (mgmt01's is its own)
    assert str(clash[0].location).startswith("cluster/racks/r02.yaml:9:")
    # the service rack's storage switch (id 100) and the network rack's management one (101)
    [far] = found[("8", "(asn")].consequences
    assert far.message == "stor-s01: ASN 4200070100, as mgmt-n01's"


def test_the_unprintable_characters_are_yaml_s() -> None:
    """The reader's class of refused characters is every code point YAML 1.2 (5.1) does not
    call printable, and no other: written as the ranges left out, it is checked here against
    the spec's own list of those kept."""

    def printable(c: int) -> bool:
        return (
            c in (0x09, 0x0A, 0x0D, 0x85)
            or 0x20 <= c <= 0x7E
            or 0xA0 <= c <= 0xD7FF
            or 0xE000 <= c <= 0xFFFD
            or 0x10000 <= c <= 0x10FFFF
        )

    wrong = [c for c in range(0x110000) if (_UNPRINTABLE.match(chr(c)) is None) != printable(c)]
    assert wrong == []
