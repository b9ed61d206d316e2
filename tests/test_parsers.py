"""Probe parsers against recorded command output, and the registries that hold them.

Every `tests/fixtures/<probe>/<case>.txt` is parsed by the parser of `<probe>` and compared with
`<case>.json`: the expected result, or `{"error": {"line": N, "contains": "..."}}` for output
the parser must refuse.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audits.parsers import RESULTS
from common.errors import ClusterforgeError, RegistryError
from contract import probes
from contract.probes import PROBES, ParseError, Probe, ProbeError

PARSERS = {name: entry.parse for name, entry in PROBES.items()}
ALL = PARSERS | dict(RESULTS)  # every fixture folder's parser: a probe's, or an acceptance log's
FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(FIXTURES.glob("*/*.txt"))
# Robustness, not speed, is under test: a loaded CI runner must not turn these into failures.
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parser(name: str) -> object:
    """The parser of a fixture folder: a probe's, or an acceptance log's."""
    return ALL[name]


def _expected(case: Path) -> object:
    return json.loads(case.with_suffix(".json").read_text(encoding="utf-8"))


def _is_failure(expected: object) -> bool:
    return isinstance(expected, dict) and set(expected) == {"error"}


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.parent.name}/{case.stem}")
def test_fixture(case: Path) -> None:
    name = case.parent.name
    parse = RESULTS[name] if name in RESULTS else PROBES[name].parse
    text = case.read_text(encoding="utf-8")
    expected = _expected(case)
    if _is_failure(expected):
        assert isinstance(expected, dict)
        with pytest.raises(ParseError) as caught:
            parse(text)
        assert caught.value.probe == case.parent.name
        assert caught.value.line == expected["error"]["line"]
        assert expected["error"]["contains"] in caught.value.message
    else:
        result = parse(text)
        assert result == expected
        # A tuple or set would compare unequal above only by luck; the report serialises results.
        assert json.loads(json.dumps(result)) == result


@pytest.mark.parametrize("probe", sorted(ALL))
def test_every_parser_has_three_cases_one_of_them_failing(probe: str) -> None:
    cases = sorted((FIXTURES / probe).glob("*.txt"))
    assert len(cases) >= 3, f"{probe} has {len(cases)} fixture cases"
    assert any(_is_failure(_expected(case)) for case in cases), f"{probe} has no failing case"


def test_every_fixture_folder_belongs_to_a_parser() -> None:
    folders = {path.name for path in FIXTURES.iterdir() if path.is_dir()}
    assert folders - set(ALL) == set()


def test_every_fixture_is_a_pair() -> None:
    texts = {path.with_suffix("") for path in FIXTURES.glob("*/*.txt")}
    expectations = {path.with_suffix("") for path in FIXTURES.glob("*/*.json")}
    assert texts == expectations


@pytest.mark.parametrize("probe", sorted(ALL))
def test_parser_lives_in_the_module_named_after_its_probe(probe: str) -> None:
    parse = ALL[probe]
    home = "audits.parsers" if probe in RESULTS else "contract.probes"
    assert getattr(parse, "__module__", None) == f"{home}.{probe}"


def test_every_probe_module_of_the_package_is_registered() -> None:
    modules = {m.__name__.rsplit(".", 1)[1] for m in probes.discover()}
    assert modules == set(PROBES) and not modules & set(RESULTS)
    assert {"uname_r", "ibnetdiscover", "sha256sum"} <= modules


@FUZZ
@given(case=st.sampled_from(CASES), data=st.data())
def test_cut_or_damaged_output_is_parsed_or_refused_never_crashes(
    case: Path, data: st.DataObject
) -> None:
    text = case.read_text(encoding="utf-8")
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, len(text)), label="end")
    noise = data.draw(st.text(max_size=5), label="noise")
    damaged = text[:start] + noise + text[end:]
    try:
        result = ALL[case.parent.name](damaged)
    except ParseError:
        return
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("probe", sorted(ALL))
@FUZZ
@given(text=st.text())
def test_arbitrary_text_is_parsed_or_refused_never_crashes(probe: str, text: str) -> None:
    try:
        result = ALL[probe](text)
    except ParseError:
        return
    json.dumps(result, allow_nan=False)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


def _json_cases() -> list[Path]:
    cases = []
    for case in CASES:
        try:
            json.loads(case.read_text(encoding="utf-8"))
        except (ValueError, RecursionError):  # not JSON, or nested past what Python decodes
            continue
        cases.append(case)
    return cases


def _paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


@pytest.mark.parametrize("case", _json_cases(), ids=lambda case: f"{case.parent.name}/{case.stem}")
@FUZZ
@given(data=st.data())
def test_json_with_a_value_replaced_is_parsed_or_refused_never_crashes(
    case: Path, data: st.DataObject
) -> None:
    document = json.loads(case.read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(_paths(document)), label="path")
    replacement = data.draw(_JSON, label="replacement")
    if not path:
        document = replacement
    else:
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = replacement
    try:
        result = ALL[case.parent.name](json.dumps(document))
    except ParseError:
        return
    json.dumps(result, allow_nan=False)


def test_parse_error_names_host_probe_and_line() -> None:
    error = ParseError("ibstat", 12, "expected 'Port N:'")
    located = error.at_host("gpu001")
    assert str(located) == "gpu001: ibstat:12: expected 'Port N:'"
    assert (located.probe, located.line, located.message) == ("ibstat", 12, "expected 'Port N:'")
    assert str(error) == "ibstat:12: expected 'Port N:'"
    assert error.host is None


def test_parse_error_without_a_line_leaves_it_out() -> None:
    error = ParseError("uname_r", 0, "empty output").at_host("gpu002")
    assert str(error) == "gpu002: uname_r: empty output"


def test_parse_error_is_a_clusterforge_error_and_survives_pickling() -> None:
    error = ParseError("xid", 3, "unreadable Xid line", host="gpu003")
    assert isinstance(error, ClusterforgeError)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.host) == (str(error), "gpu003")


def test_unknown_probe_names_the_closest_one() -> None:
    with pytest.raises(RegistryError, match="no probe named 'ibstatus'; did you mean 'ibstat'"):
        PROBES["ibstatus"]


def test_probe_registry_refuses_a_name_twice() -> None:
    uname = next(m for m in probes.discover() if m.__name__.endswith(".uname_r"))
    with pytest.raises(RegistryError, match="'uname_r' is registered twice"):
        probes.build([uname, uname])


def test_per_interface_probe_fills_in_a_checked_interface() -> None:
    probe = PROBES["ethtool_i"].spec
    assert probe.argv_for("ib0") == ("ethtool", "-i", "ib0")
    for bad in (None, "", "ib0; reboot", "$(id)", "a" * 16):
        with pytest.raises(ProbeError):
            probe.argv_for(bad)


def test_host_probe_takes_no_interface() -> None:
    assert PROBES["uname_r"].spec.argv_for() == ("uname", "-r")
    with pytest.raises(ProbeError):
        PROBES["uname_r"].spec.argv_for("eth0")


def test_placeholder_and_per_interface_go_together() -> None:
    with pytest.raises(ProbeError):
        Probe("ethtool_i", ("ethtool", "-i", "{iface}"), "host", "/usr/sbin/ethtool")
    with pytest.raises(ProbeError):
        Probe(
            "ethtool_i", ("ethtool", "-i", "eth0"), "host", "/usr/sbin/ethtool", per_interface=True
        )
