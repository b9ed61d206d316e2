"""The compile as a whole: golden output, determinism, stable allocation, atomic output."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterforge.cli import main
from common.errors import RegistryError
from common.registry import Registry
from compiler import output, pipeline
from compiler.load import Source, load
from compiler.output import read_tree, write
from compiler.plan import Plan
from compiler.targets import TARGETS
from tests.conftest import REPO


def test_golden_reference_cluster_compiles_to_committed_generated() -> None:
    compiled = pipeline.compile_repo(REPO)
    on_disk = read_tree(REPO / "generated")
    assert sorted(on_disk) == sorted(compiled.files), "generated/ has missing or stale files"
    differing = [p for p in compiled.files if on_disk[p] != compiled.files[p]]
    assert differing == [], "run `clusterforge compile`"


def _shuffled_yaml(text: str, rng: random.Random) -> str:
    """The same YAML with the keys of every block mapping in random order (comments dropped)."""
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load(text)

    def shuffle(node: Any) -> Any:
        if isinstance(node, dict):
            items = list(node.items())
            rng.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(node, list):
            return [shuffle(v) for v in node]
        return node

    import io

    out = io.StringIO()
    dumper = YAML(typ="safe", pure=True)
    dumper.default_flow_style = False  # libyaml reads a MAC in a flow mapping as a key
    dumper.dump(shuffle(data), out)
    return out.getvalue()


def _compile_in_subprocess(repo: Path, seed: str) -> dict[str, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    subprocess.run(
        [sys.executable, "-m", "clusterforge.cli", "-C", str(repo), "compile"],
        check=True,
        env=env,
        capture_output=True,
        timeout=120,
    )
    return read_tree(repo / "generated")


def test_deterministic_across_hash_seeds_and_key_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(REPO / "cluster", a / "cluster")
    # DNS serials continue from the generated/ a compile replaces: both start from the same.
    for root in (a, b):
        shutil.copytree(REPO / "generated", root / "generated")
    rng = random.Random(7)
    for src in sorted((REPO / "cluster").rglob("*.yaml")):
        dst = b / src.relative_to(REPO)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(_shuffled_yaml(src.read_text(), rng))
    first = _compile_in_subprocess(a, "1")
    second = _compile_in_subprocess(b, "4242")
    assert first.keys() == second.keys()
    assert [p for p in first if first[p] != second[p]] == []
    assert first == read_tree(REPO / "generated")


def _node(rack_id: int, slot: int, serial: int) -> dict[str, Any]:
    """A new GPU server with identities that cannot clash with the shipped ones (OUI 02:...)."""
    tail = f"{rack_id:02x}:{slot:02x}"
    return {
        "name": f"gpu{rack_id:03d}{slot:02d}",
        "model": "hgx-a100",
        "role": "gpu",
        "slot": slot,
        "u": 2 + (slot - 1) * 4,
        "serial": f"TEST{serial:08d}",
        "mac": {
            "eno1": f"02:00:01:00:{tail}",
            "ens2f0": f"02:00:02:00:{tail}",
            "bmc": f"02:00:03:00:{tail}",
        },
        "guid": f"0x0200000000{rack_id:02x}{slot:02x}00",
    }


def _addresses(plan: Plan) -> dict[tuple[str, str], str]:
    return {(h.name, i.network): i.address for h in plan.hosts for i in (*h.interfaces, h.bmc)}


BASE = load(REPO / "cluster")
BASE_ADDRESSES = _addresses(pipeline.compile_source(BASE).plan)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # An InfiniBand spine has 64 ports, one per leaf; an Ethernet spine too, but s01 and n01
    # hold the top two of the management spines'.
    rack_id=st.integers(min_value=26, max_value=62),
    slots=st.integers(min_value=1, max_value=5),
    extra_slot_in_r25=st.booleans(),
)
def test_adding_nodes_or_racks_never_renumbers(
    rack_id: int, slots: int, extra_slot_in_r25: bool
) -> None:
    racks = list(BASE.data["racks"])
    row = "C"
    racks.append(
        {
            "name": f"r{rack_id:02d}",
            "id": rack_id,
            "row": row,
            "col": rack_id,
            "nodes": tuple(_node(rack_id, s, rack_id * 10 + s) for s in range(1, slots + 1)),
            "switches": tuple(
                {
                    "name": f"{role[:4]}{rack_id:03d}",
                    "model": model,
                    "role": role,
                    "u": u,
                    "serial": f"TESTSW{rack_id:04d}{u}",
                    "mac": f"02:00:04:00:{rack_id:02x}:{u:02x}",
                    **({"guid": f"0x0300000000{rack_id:04x}00"} if role == "leaf" else {}),
                }
                for role, model, u in (
                    ("leaf", "qm8700", 42),
                    ("management", "sn2201", 41),
                    ("storage", "sn2410", 40),
                )
            ),
        }
    )
    if extra_slot_in_r25:
        index = next(i for i, r in enumerate(racks) if r["name"] == "r25")
        r25 = dict(racks[index])
        r25["nodes"] = (*r25["nodes"], _node(25, 5, 99))
        racks[index] = r25
    grown = Source({**BASE.data, "racks": tuple(racks)}, BASE.locations)

    after = _addresses(pipeline.compile_source(grown).plan)

    assert {k: after[k] for k in BASE_ADDRESSES} == BASE_ADDRESSES
    assert len(set(after.values())) == len(after), "a new address collides"


def test_output_is_atomic_and_removes_stale_files(tmp_path: Path) -> None:
    root = tmp_path / "generated"
    write(root, {"a.txt": b"1", "d/b.txt": b"2"})
    (root / "stale.txt").write_text("old")
    assert write(root, {"a.txt": b"1", "d/b.txt": b"3"})
    assert read_tree(root) == {"a.txt": b"1", "d/b.txt": b"3"}
    assert not write(root, {"a.txt": b"1", "d/b.txt": b"3"}), "unchanged tree is not rewritten"
    # Only the tree and its lock file (which git ignores) are left: no staging folder.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".generated.lock", "generated"]
    assert not (root / "d").exists() or list((root / "d").iterdir()), "no empty folder left"


def test_output_touches_only_changed_files_and_writes_the_manifest_last(
    tmp_path: Path, monkeypatch: Any
) -> None:
    root = tmp_path / "generated"
    write(root, {"MANIFEST.json": b"m1", "a.txt": b"1", "d/b.txt": b"2", "e/c.txt": b"3"})
    unchanged = (root / "a.txt").stat().st_ino
    replaced: list[str] = []
    real = Path.replace

    def spy(self: Path, target: Any) -> Path:
        replaced.append(Path(target).relative_to(root).as_posix())
        # While a write is under way, the manifest is gone: a reader knows not to trust it.
        assert not (root / "MANIFEST.json").exists()
        return real(self, target)

    monkeypatch.setattr(Path, "replace", spy)
    assert write(root, {"MANIFEST.json": b"m2", "a.txt": b"1", "d/b.txt": b"4", "f.txt": b"5"})
    assert replaced[-1] == "MANIFEST.json" and sorted(replaced[:-1]) == ["d/b.txt", "f.txt"]
    assert (root / "a.txt").stat().st_ino == unchanged, "an unchanged file is not rewritten"
    after = {"MANIFEST.json": b"m2", "a.txt": b"1", "d/b.txt": b"4", "f.txt": b"5"}
    assert read_tree(root) == after
    assert not (root / "e").exists(), "a folder emptied of stale files goes too"
    assert not [p for p in root.rglob(".*")], "no partial file left behind"


def test_check_reports_stale_files_and_writes_nothing(tmp_path: Path, capsys: Any) -> None:
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    shutil.copytree(REPO / "generated", tmp_path / "generated")
    (tmp_path / "generated" / "hosts").write_text("edited by hand\n")
    (tmp_path / "generated" / "left-over.txt").write_text("x")
    before = read_tree(tmp_path / "generated")

    assert main(["-C", str(tmp_path), "compile", "--check"]) == 1
    err = capsys.readouterr().err
    assert "differs  hosts" in err and "stale    left-over.txt" in err
    assert read_tree(tmp_path / "generated") == before
    assert main(["-C", str(tmp_path), "compile"]) == 0
    assert main(["-C", str(tmp_path), "compile", "--check"]) == 0


def test_compare_finds_an_edit_that_keeps_the_size(tmp_path: Path) -> None:
    """`compare` reads a file only when its size matches: an edit of the same length, a
    longer or shorter file, an empty one and a stale one are each told apart."""
    from compiler.output import compare

    files = {"a": b"abc\n", "b": b"abc\n", "c": b"abc\n", "d": b"", "e": b"abc\n"}
    for name, data in {"a": b"abd\n", "b": b"abc\n\n", "c": b"ab", "d": b"", "x": b"1"}.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e").write_bytes(b"abc\n")
    files["sub/e"] = files.pop("e")
    difference = compare(tmp_path, files)
    assert difference.changed == ("a", "b", "c")
    assert (difference.missing, difference.extra) == ((), ("x",))
    # A Difference is a tuple of three, true as a tuple always is: it says false itself when
    # nothing differs, which is how `write` knows to touch nothing.
    assert difference and not compare(tmp_path, read_tree(tmp_path))


def test_manifest_lists_every_file_with_its_digest() -> None:
    import hashlib
    import json

    files = read_tree(REPO / "generated")
    manifest = json.loads(files.pop(pipeline.MANIFEST))
    assert manifest["files"] == {p: hashlib.sha256(d).hexdigest() for p, d in files.items()}
    assert manifest["source_sha256"] == BASE.digest()


# Words YAML reads as booleans or null; text it reads as a number, a date or a merge key; text
# that only looks like one (a version, a date without its zeros).
_WORDISH = st.sampled_from(["yes", "No", "ON", "off", "Y", "n", "True", "NULL", "null", "~"])
_NUMBERISH = st.sampled_from(
    ["2.6", "12", "0x1F", "0o17", "1_000", "1e3", "0.", "2026-11-30", "<<"]
)
_VERSIONS = st.sampled_from(["535.183.06", "4.18.0-513.el8_9.x86_64", "2026-1-3"])
_KEYS = st.one_of(
    _WORDISH,
    _NUMBERISH,
    _VERSIONS,
    st.text(alphabet="aZ09_-.:/ #'\"{},[]&*!|>%@`?~=<é°\t\n\\", max_size=16),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,70}", fullmatch=True),
)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _KEYS)


# Mappings and lists nested in each other, empty ones too: the shapes the generated files have
# (lists of mappings in rules and routes) and the ones the writer leaves to ruamel.
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _SCALARS, min_size=1), st.dictionaries(_KEYS, _TREES, min_size=1))
def test_yaml_writer_writes_what_ruamel_writes(doc: dict[str, Any], tree: dict[str, Any]) -> None:
    """The block writer's shortcuts (plain names, numbers, booleans, null) and its nesting of
    mappings and lists give ruamel's text."""
    from compiler.targets.render import _ruamel_yaml, to_yaml

    nested = {"outer": doc, "items": list(doc.values()), "rules": [doc, {"x": doc}]}
    assert to_yaml(nested) == _ruamel_yaml(nested)
    assert to_yaml(tree) == _ruamel_yaml(tree)


def test_two_compiles_at_once_leave_a_whole_tree(tmp_path: Path) -> None:
    """Two compiles of one repository at once (an editor's save hook and a terminal) each
    find the same stale and changed files; the lock makes them take turns, so neither trips
    over what the other removed and the tree ends whole, its manifest there and matching."""
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    shutil.copytree(REPO / "generated", tmp_path / "generated")
    generated = tmp_path / "generated"
    command = [str(Path(sys.executable).with_name("clusterforge")), "-C", str(tmp_path), "compile"]
    for _ in range(4):  # each round is a fresh race; bounded, each run under a minute
        stale = generated / "stale"
        stale.mkdir()
        for i in range(200):
            (stale / f"{i}.txt").write_text("left over\n")
        for path in sorted((generated / "kickstart").glob("*.ks"))[:60]:
            path.write_text("edited\n")
        runs = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in "ab"
        ]
        results = [(run.communicate(timeout=120)[1].decode(), run.returncode) for run in runs]
        assert [code for _, code in results] == [0, 0], results
        output.verify(generated)
        assert read_tree(generated) == read_tree(REPO / "generated")


def test_targets_import_the_plan_and_the_shared_helpers_never_each_other() -> None:
    """A target is plan in, files out: what two need is the plan's or a shared helper's
    (render, shared), so none depends on another's internals or its order in the registry."""
    helpers = {"render", "shared"}
    imported = re.compile(r"^\s*from compiler\.targets(?:\.(\w+))? import ([\w, ()\n]+?)$", re.M)
    found = {}
    for path in sorted((REPO / "compiler" / "targets").glob("*.py")):
        if path.stem == "__init__":  # the registry imports every target by design
            continue
        for module, names in imported.findall(path.read_text(encoding="utf-8")):
            used = {module} if module else set(re.findall(r"\w+", names))
            if used - helpers:
                found[path.stem] = sorted(used - helpers)
    assert found == {}
    assert set(TARGETS) == {
        p.stem for p in (REPO / "compiler" / "targets").glob("*.py")
    } - helpers - {"__init__"}


def test_the_registry_refuses_a_target_named_twice() -> None:
    with pytest.raises(RegistryError, match="target 'hosts' is registered twice"):
        Registry("target", [*TARGETS.items(), ("hosts", TARGETS["hosts"])])
    with pytest.raises(RegistryError, match="no target named 'host'; did you mean 'hosts'"):
        TARGETS["host"]
