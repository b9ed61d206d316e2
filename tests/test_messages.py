"""Messages an operator can act on: the cause first with what follows from it folded under
it, the value as typed, a "quote it" or "did you mean" where that is the fix, and MACs
accepted the way vendors print them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterforge.cli import main
from common.errors import Diagnostic, SourceError
from compiler import pipeline, validation
from compiler.load import load, parse_document
from tests.conftest import REPO


def _edited(tmp: Path, name: str, find: str, replace: str) -> Path:
    shutil.copytree(REPO / "cluster", tmp / "cluster")
    # DNS serials continue from the committed zones (docs/dns-serials.md), as in the repository.
    shutil.copytree(REPO / "generated" / "dns", tmp / "generated" / "dns")
    path = tmp / "cluster" / name
    text = path.read_text()
    assert find in text, f"{find!r} not in {name}"
    path.write_text(text.replace(find, replace, 1))
    return tmp


def _problems(repo: Path) -> list[Diagnostic]:
    with pytest.raises(SourceError) as raised:
        validation.check(load(repo / "cluster"))
    return raised.value.diagnostics


def _shown(d: Diagnostic) -> str:
    return f"{d.location.file}:{d.location.line}: {d.rule}: {d.message}"


def test_a_duplicate_rack_id_is_the_one_problem_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", "\nid: 3\n", "\nid: 2\n")
    [cause] = _problems(repo)
    assert _shown(cause).startswith("cluster/racks/r03.yaml:4: duplicate-name: rack id 2")
    follows = {d.rule for d in cause.consequences}
    assert follows == {"subnet-overlap", "port-reused", "duplicate-ip", "bgp-asn"}
    assert main(["-C", str(repo), "validate"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("cluster/racks/r03.yaml:4:1: duplicate-name")
    assert err[-1].startswith(f"1 problem(s) in cluster/ (and {len(cause.consequences)} that")


def test_a_duplicate_slot_folds_the_addresses_and_ports_it_takes(tmp_path: Path) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", "slot: 2\n", "slot: 1\n")
    [cause] = _problems(repo)
    assert _shown(cause) == (
        "cluster/racks/r03.yaml:23: duplicate-slot: rack 'r03': slot 1 already used at "
        "cluster/racks/r03.yaml:15:5"
    )
    assert {d.rule for d in cause.consequences} == {"duplicate-ip", "port-reused"}


def test_an_independent_problem_is_not_folded(tmp_path: Path) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", "slot: 2\n", "slot: 1\n")
    text = (repo / "cluster" / "racks" / "r05.yaml").read_text()
    (repo / "cluster" / "racks" / "r05.yaml").write_text(
        text.replace("serial: ", "serial: S420GP24A94948\n    x_serial: ", 1)
    )
    with pytest.raises(SourceError):
        validation.check(load(repo / "cluster"))
    shutil.copy(REPO / "cluster" / "racks" / "r05.yaml", repo / "cluster" / "racks" / "r05.yaml")
    # A MAC of r03's gpu011 given to r05's first node as well: its own problem, not the slot's.
    r05 = repo / "cluster" / "racks" / "r05.yaml"
    first_eno1 = r05.read_text().split('eno1: "', 1)[1].split('"', 1)[0]
    r05.write_text(r05.read_text().replace(first_eno1, "3c:ec:ef:43:33:87", 1))
    rules = [d.rule for d in _problems(repo)]
    assert sorted(rules) == ["duplicate-mac", "duplicate-slot"]


@pytest.mark.parametrize(
    ("find", "replace", "expected"),
    [
        ('    bios: "2.6"', "    bios: 2.6", 'bios: 2.6 reads as a number, not text: quote it, '
         'bios: "2.6"'),
        ('    cuda: "12.2"', "    cuda: 12.20", 'quote it, cuda: "12.20"'),
    ],
)  # fmt: skip
def test_a_number_where_text_is_wanted_says_quote_it_as_typed(
    tmp_path: Path, find: str, replace: str, expected: str
) -> None:
    [problem] = _problems(_edited(tmp_path, "firmware.yaml", find, replace))
    assert problem.rule == "wrong-type" and expected in problem.message


def test_a_misspelt_key_gets_did_you_mean_and_the_missing_key_folds_under_it(
    tmp_path: Path,
) -> None:
    [problem] = _problems(_edited(tmp_path, "racks/r03.yaml", "\nid: 3\n", "\nidd: 3\n"))
    assert (
        _shown(problem)
        == "cluster/racks/r03.yaml:4: unknown-key: unknown key 'idd'; did you mean 'id'?"
    )
    assert [d.message for d in problem.consequences] == ["required key 'id' is missing"]


def test_an_unknown_key_with_nothing_close_lists_the_keys_there(tmp_path: Path) -> None:
    [problem] = _problems(_edited(tmp_path, "racks/r03.yaml", "\nid: 3\n", "\nid: 3\nzzz: 1\n"))
    assert problem.message.startswith("unknown key 'zzz' (this place takes: name, id, row, col")


def test_an_empty_rack_file_says_so(tmp_path: Path) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", "", "")
    (repo / "cluster" / "racks" / "r26.yaml").write_text("# to be racked\n")
    [problem] = _problems(repo)
    assert _shown(problem) == (
        "cluster/racks/r26.yaml:1: wrong-type: this file is empty; it needs the keys "
        "name, id, row, col"
    )


def test_an_unknown_reference_gets_did_you_mean(tmp_path: Path) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", "model: hgx-a100", "model: hgx-a10o")
    [problem] = _problems(repo)
    assert problem.rule == "unknown-reference"
    assert "did you mean 'hgx-a100'?" in problem.message


@pytest.mark.parametrize("typed", ["3C-EC-EF-43-33-87", "3CEC.EF43.3387", "3cecef433387"])
def test_macs_in_vendor_notation_are_normalised(tmp_path: Path, typed: str) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", '"3c:ec:ef:43:33:87"', f'"{typed}"')
    compiled = pipeline.compile_repo(repo)
    assert compiled.files == pipeline.compile_repo(REPO).files | {
        "MANIFEST.json": compiled.files["MANIFEST.json"]  # the source text differs, not the output
    }


def test_a_mac_that_is_no_mac_is_refused_as_typed(tmp_path: Path) -> None:
    repo = _edited(tmp_path, "racks/r03.yaml", '"3c:ec:ef:43:33:87"', '"3c:ec:ef:43:33"')
    [problem] = _problems(repo)
    assert problem.message == "'3c:ec:ef:43:33' is not a MAC address (like 3c:ec:ef:43:33:87)"


def test_yaml_is_read_by_the_1_2_rules_whatever_the_file_says() -> None:
    """`yes`/`on` stay text and `0755` is decimal, with or without a %YAML 1.1 directive;
    the text of what did not load as text is kept for messages."""
    for text in (b"a: yes\nb: on\nc: 0755\n", b"%YAML 1.1\n---\na: yes\nb: on\nc: 0755\n"):
        source = parse_document("f.yaml", text)
        assert source.data == {"document": {"a": "yes", "b": "on", "c": 755}}
        assert source.texts == {("document", "c"): "0755"}
