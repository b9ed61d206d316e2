"""`common.memo`: the two compiles of one diff compute what they agree on once, and what each
side gets is what it would have compiled alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import pytest

from common import memo
from compiler import acceptance, gitsource, load, pipeline, targets
from tests.conftest import GIT_ENV, REPO

RAILS = REPO / "examples" / "rails"


def test_a_marked_function_computes_once_per_value_and_only_inside_a_comparison() -> None:
    calls: list[tuple[int, ...]] = []

    @memo.by_value
    def total(values: tuple[int, ...]) -> int:
        calls.append(values)
        return sum(values)

    assert total((1, 2)) == total((1, 2)) == 3
    assert len(calls) == 2  # outside shared(): nothing kept
    with memo.shared():
        # Equal values, distinct objects: one computation; another value: its own.
        assert total(tuple([1, 2])) == total(tuple([1, 2])) == 3
        assert total((1, 3)) == 4
    assert calls == [(1, 2), (1, 2), (1, 2), (1, 3)]
    total((1, 2))
    assert len(calls) == 5  # the block's results went with it


def test_a_text_a_marked_function_returned_is_encoded_once_and_no_other_text_is_kept() -> None:
    """`by_object` answers once for a text the block holds (a marked function's, alone or in
    a tuple), and computes every other text anew: kept, it would outlive the compile."""
    encoded: list[str] = []

    @memo.by_value
    def render(n: int) -> tuple[tuple[str, str], ...]:
        return ((f"f{n}", "x" * n),)

    @memo.by_object
    def encode(text: str) -> bytes:
        encoded.append(text)
        return text.encode()

    with memo.shared():
        ((_, text),) = render(3)
        first, again = encode(text), encode(render(3)[0][1])
        assert first is again and encoded == ["xxx"]  # one object, encoded once
        loose = "".join(["y", "y"])  # no marked function's: computed each time
        assert encode(loose) == encode(loose) == b"yy" and encoded.count("yy") == 2
    assert encode(text) == b"xxx" and encoded.count("xxx") == 2  # outside: computed


def test_an_argument_that_does_not_hash_is_compared_by_its_pickle() -> None:
    calls: list[dict[str, int]] = []

    @memo.by_value
    def size(counts: dict[str, int]) -> int:
        calls.append(counts)
        return sum(counts.values())

    with memo.shared():
        assert size({"a": 1}) == size(dict(a=1)) == 1
        assert size({"a": 2}) == 2
    assert calls == [{"a": 1}, {"a": 2}]


class _Node(NamedTuple):
    """A planned host in small: a record holding a dict (its versions) and a shared part."""

    name: str
    versions: dict[str, str]
    software: tuple[tuple[str, dict[str, str]], ...]


def test_a_record_holding_a_dict_is_keyed_by_its_value_without_pickling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    @memo.by_value
    def render(node: _Node) -> str:
        calls.append(node.name)
        return f"{node.name} {node.versions['ofed']}"

    def refused(*_: object, **__: object) -> bytes:
        raise AssertionError("a record that freezes is not pickled")

    monkeypatch.setattr(memo.pickle, "dumps", refused)
    software = (("slurmd", {"slurm": "slurm"}),)
    with memo.shared():
        base = _Node("gpu001", {"ofed": "24.10"}, software)
        # HEAD's own objects, equal in value: BASE's result.
        assert render(_Node("gpu001", {"ofed": "24.10"}, (("slurmd", {"slurm": "slurm"}),))) == (
            render(base)
        )
        assert render(_Node("gpu001", {"ofed": "24.07"}, software)) == "gpu001 24.07"
        # A set inside does not freeze: pickled, as before (the refusal says so).
        with pytest.raises(AssertionError, match="not pickled"):
            render(_Node("gpu002", {"ofed": "24.10"}, (("x", {"s": {1}}),)))  # type: ignore[dict-item]
    assert calls == ["gpu001", "gpu001"]


class _Counted(tuple[int, ...]):
    """A tuple that counts its hashes and comparisons (a cable plan's, in small)."""

    hashed: ClassVar[list[int]] = []
    compared: ClassVar[list[int]] = []

    def __hash__(self) -> int:
        self.hashed.append(1)
        return super().__hash__()

    def __eq__(self, other: object) -> bool:
        self.compared.append(1)
        return super().__eq__(other)


def test_an_argument_is_hashed_once_a_side_and_compared_once_however_many_take_it() -> None:
    @memo.by_value
    def first(cables: tuple[int, ...]) -> int:
        return len(cables)

    @memo.by_value
    def second(cables: tuple[int, ...]) -> int:
        return sum(cables)

    with memo.shared():
        base, head = _Counted((1, 2)), _Counted((1, 2))
        assert (first(base), second(base), first(head), second(head)) == (2, 3, 2, 3)
        assert second(head) == 3
    assert len(_Counted.hashed) == 2  # once each side
    assert len(_Counted.compared) == 1  # HEAD's found equal to BASE's once, then BASE's


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def test_a_diff_plans_the_pair_test_once_and_each_side_is_its_own_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storage MAC changed (a NIC swapped): the fabric is the same, so the eight rails'
    pair plans and topology.net are made for BASE only, and HEAD's plan holds BASE's racks,
    hosts and cables but the changed ones; HEAD's files are byte for byte a compile of its
    own."""
    shutil.copytree(RAILS / "cluster", tmp_path / "cluster")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    rack = tmp_path / "cluster" / "racks" / "r001.yaml"
    rack.write_text(rack.read_text().replace("02:02:00:01:00:01", "02:ee:ee:ee:ee:01", 1))
    git(tmp_path, "commit", "-qam", "head")

    planned: list[object] = []
    plan_rounds = acceptance.plan_rounds

    def counted(*args: object) -> acceptance.FabricTest:
        planned.append(args)
        return plan_rounds(*args)  # type: ignore[arg-type]

    scripted: list[str] = []
    round_script = targets.acceptance._round_script

    def written(name: str, *rest: Any) -> str:
        scripted.append(name)
        return round_script(name, *rest)

    topologies: list[str] = []
    fabric_template = targets.fabric.template

    def drawn(name: str, **values: Any) -> str:
        topologies.append(name)
        return fabric_template(name, **values)

    keyfiles: list[str] = []
    keyfile = targets.routes._keyfile

    def configured(host: str, iface: Any, *rest: Any) -> str:
        keyfiles.append(f"{host}/{iface.name}")
        return keyfile(host, iface, *rest)

    monkeypatch.setattr("compiler.targets.routes._keyfile", configured)
    kickstarts: list[str] = []
    kickstart_template = targets.kickstart.template

    def installed(name: str, **values: Any) -> str:
        if name == "kickstart.ks.j2":
            kickstarts.append(values["host"].name)
        return kickstart_template(name, **values)

    monkeypatch.setattr("compiler.targets.kickstart.template", installed)
    monkeypatch.setattr("compiler.targets.fabric.template", drawn)
    monkeypatch.setattr("compiler.targets.acceptance.plan_rounds", counted)
    monkeypatch.setattr("compiler.targets.acceptance._round_script", written)
    compared = gitsource.diff_revisions(tmp_path, "HEAD~1", "HEAD")
    in_diff = list(keyfiles)
    assert len(planned) == 8  # one per rail, for both sides
    assert topologies == ["topology.net.j2"]  # a MAC is no fabric fact: one for both sides
    rounds = len(scripted)  # and each round's script written once
    assert rounds and rounds == len(set(scripted))
    alone = pipeline.compile_source(load.load(tmp_path / "cluster"))
    assert len(planned) == 16  # a compile outside a diff plans its own
    assert len(scripted) == 2 * rounds
    assert len(topologies) == 2
    # Each host's kickstart written once for both sides, but the changed host's: HEAD's own.
    hosts = len(kickstarts) // 2
    assert sorted(kickstarts[: hosts + 1]) == sorted([*kickstarts[hosts + 1 :], "gpu001"])
    base, head = compared.base.compiled, compared.head.compiled
    assert base is not None and head is not None and head.files == alone.files
    changed = {p for p, data in head.files.items() if base.files.get(p) != data}
    # The MAC did reach HEAD's files (the NIC's keyfile matches it), and only HEAD's.
    assert "routes/gpu001/ens2f0.nmconnection" in changed
    # Every keyfile written once for both sides, but the changed host's: HEAD's own.
    made = sum(p.startswith("routes/") for p in base.files)
    gpu001 = sum(p.startswith("routes/gpu001/") for p in base.files)
    assert len(in_diff) == made + gpu001 and in_diff.count("gpu001/ens2f0") == 2
    assert b"02:ee:ee:ee:ee:01" not in base.files["expected/hosts/gpu001.json"]
    # HEAD holds BASE's objects for what did not change, so every later key on them is known
    # at once: each unchanged rack, each unchanged host's record, the whole cable plan.
    assert [a is b for a, b in zip(base.plan.racks, head.plan.racks, strict=True)].count(False) == 1
    assert head.plan.cables is base.plan.cables
    theirs = {h.name: h for h in base.plan.hosts}
    assert [h.name for h in head.plan.hosts if h is not theirs[h.name]] == ["gpu001"]
