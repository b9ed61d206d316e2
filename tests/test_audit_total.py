"""The audit is total: whatever a host returns, every host ends with a status and a report.

Property tests (hypothesis): every parser turns arbitrary text into facts or a `ParseError`;
every host check and the fabric compare turn arbitrary parser-shaped facts (the fixtures'
facts with any string, number and list replaced) into a result, never an exception. Then the
pipeline: a host whose comparison raises anyway is an `error` with the exception named, every
other host is reported, and the exit code is 3.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audits import compare, expected, pipeline
from audits.collect import Collected, Collection, probe_of
from audits.compare import compare_host, compare_observed, host_probes
from audits.fabric import compare_fabric_observed
from audits.model import ProbeFailure
from audits.observe import Observed
from audits.report import EXIT_BUG
from clusterforge.lab.fleet import Fleet, as_record, as_switch_record
from contract import Fabric, Host
from contract.probes import PROBES, ParseError
from tests.reference import compile_reference

NOW = datetime(2026, 5, 4, 6, 0, tzinfo=UTC)
FIXTURES = Path(__file__).parent / "fixtures"
# One host of each kind the reference cluster has: GPU server, login, subnet manager.
HOSTS = ("gpu001", "login01", "sm01")
# A rack switch, a spine, a management switch (its patches to the other switches' eth0).
SWITCHES = ("stor01", "stor-spine01", "mgmt01")


@functools.cache
def _facts(probe: str) -> list[Any]:
    """Every fixture output of `probe` that parses: the shapes its parser really returns."""
    found = []
    for text in sorted((FIXTURES / probe).glob("*.txt")):
        try:
            found.append(PROBES[probe].parse(text.read_text(encoding="utf-8")))
        except ParseError:
            continue
    assert found, probe
    return found


def mutated(value: Any) -> st.SearchStrategy[Any]:
    """`value` with any string, number or list possibly replaced: same shape, any content."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-(2**40), 2**40)
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):
        return st.one_of(st.just(value), st.text(max_size=12))
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        # Records (interfaces, GPUs, links): any number of them, each changed.
        return st.lists(st.one_of(*(mutated(v) for v in value)), max_size=len(value) + 2)
    if isinstance(value, list):
        # Tuples (a link's two ends) keep their length; their items change.
        return st.tuples(*(mutated(v) for v in value)).map(list)
    if isinstance(value, dict):
        return st.fixed_dictionaries({k: mutated(v) for k, v in value.items()})
    return st.just(value)


@functools.cache
def facts_of(probe: str) -> st.SearchStrategy[Any]:
    return st.one_of(*(mutated(facts) for facts in _facts(probe)))


@pytest.fixture(scope="module")
def reference(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_reference(repo, tmp_path_factory.mktemp("reference")) / "generated"


@pytest.fixture(scope="module")
def contracts(reference: Path) -> dict[str, dict[str, Any]]:
    folder = reference / "expected" / "hosts"
    return {h: json.loads((folder / f"{h}.json").read_text(encoding="utf-8")) for h in HOSTS}


@pytest.mark.parametrize("probe", sorted(PROBES))
@settings(max_examples=40, deadline=None)
@given(text=st.text() | st.binary().map(lambda b: b.decode("utf-8", "replace")))
def test_every_parser_gives_facts_or_a_parse_error(probe: str, text: str) -> None:
    try:
        facts = PROBES[probe].parse(text)
    except ParseError as exc:
        assert exc.probe == probe
        return
    json.dumps(facts)  # JSON-shaped, as the parser's docstring promises


@pytest.mark.parametrize("host", HOSTS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_host_check_is_total(
    host: str, contracts: dict[str, dict[str, Any]], data: st.DataObject
) -> None:
    contract = contracts[host]
    keys = host_probes(as_record(contract))
    present = data.draw(st.sets(st.sampled_from(keys)), label="present")
    facts = {k: data.draw(facts_of(probe_of(k)), label=k) for k in sorted(present)}
    failures = [ProbeFailure(probe=k, message="not recorded") for k in keys if k not in facts]
    result = compare_observed(as_record(contract), Observed(facts, failures), None, NOW)
    assert result.entry["status"] == ("error" if failures else "drift" if result.findings else "ok")
    ran = {c["check"] for c in result.entry["checks"] if c["outcome"] != "skipped"}
    assert {f["check"] for f in result.findings} <= ran


@pytest.mark.parametrize("switch", SWITCHES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_switch_check_is_total(switch: str, reference: Path, data: st.DataObject) -> None:
    """The same for a Cumulus switch's checks: its cables, files, units, BGP, running config."""
    state = json.loads((reference / "expected" / "switches" / f"{switch}.json").read_text())
    state["deploy"] = json.loads((reference / "deploy" / f"{switch}.json").read_text())
    record = as_switch_record(state)
    keys = host_probes(record)
    present = data.draw(st.sets(st.sampled_from(keys)), label="present")
    facts = {k: data.draw(facts_of(probe_of(k)), label=k) for k in sorted(present)}
    failures = [ProbeFailure(probe=k, message="not recorded") for k in keys if k not in facts]
    result = compare_observed(record, Observed(facts, failures), None, NOW)
    assert result.entry["status"] == ("error" if failures else "drift" if result.findings else "ok")
    ran = {c["check"] for c in result.entry["checks"] if c["outcome"] != "skipped"}
    assert {f["check"] for f in result.findings} <= ran


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_fabric_compare_is_total(reference: Path, data: st.DataObject) -> None:
    contract = json.loads((reference / "expected" / "fabric.json").read_text(encoding="utf-8"))
    scan = data.draw(facts_of("ibnetdiscover"), label="ibnetdiscover")
    ports = data.draw(st.dictionaries(st.text(max_size=20), st.text(max_size=8), max_size=4))
    result = compare_fabric_observed(
        Fabric.from_json(contract), ports, Observed({"ibnetdiscover": scan}, []), None
    )
    assert result.entry["status"] in {"ok", "drift"}


def test_a_host_with_none_of_the_planned_interfaces_is_drift_not_a_crash(
    reference: Path, contracts: dict[str, dict[str, Any]]
) -> None:
    # Its NICs carry other names than planned: `ip addr` lists none of them, ibstat no HCA.
    outputs = Fleet.load(reference).outputs("gpu001")
    renamed = json.loads(outputs["ip_addr"])
    for i, link in enumerate(renamed):
        link["ifname"] = f"enp{i}s0"
    outputs |= {"ip_addr": json.dumps(renamed), "ibstat": ""}
    result = compare_host(as_record(contracts["gpu001"]), Collected(outputs, {}), NOW)
    missing = {f["path"] for f in result.findings if f["message"].endswith(" missing")}
    planned = {f"interfaces[{i['name']}]" for i in contracts["gpu001"]["interfaces"]}
    assert planned <= missing
    assert result.entry["status"] == "error"  # ibstat's empty output did not parse
    assert [f["probe"] for f in result.entry["failures"]] == ["ibstat"]


class _Boom(Exception):
    pass


def test_a_comparison_that_raises_costs_only_its_host(
    reference: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expectations = expected.read(reference.parent)
    fleet = Fleet.load(reference)

    class Replay:
        def collect(self, hosts: Any, fabric: Any) -> Collection:
            outputs = {h: Collected(fleet.outputs(h), {}) for h in hosts}
            scan = fleet.fabric_outputs()["ibnetdiscover"]
            return Collection(NOW, outputs, Collected({"ibnetdiscover": scan}, {}))

    real = compare.compare_host

    def flaky(c: Host, collected: Collected, now: datetime) -> Any:
        if c.host == "gpu002":
            raise _Boom("a bug")
        return real(c, collected, now)

    monkeypatch.setattr(pipeline, "compare_host", flaky)
    report = pipeline.audit(expectations, Replay())
    status = {h["host"]: (h["status"], h["reason"]) for h in report["hosts"]}
    assert status.pop("gpu002") == ("error", "internal error: _Boom: a bug")
    assert {s for s, _ in status.values()} == {"ok"}
    assert report["exit_code"] == EXIT_BUG
    assert report["summary"]["internal_errors"] == 1


def test_a_collector_that_raises_still_gives_a_report_of_every_host(reference: Path) -> None:
    class Broken:
        def collect(self, hosts: Any, fabric: Any) -> Collection:
            raise _Boom("collector")

    report = pipeline.audit(expected.read(reference.parent), Broken(), NOW)
    assert {h["status"] for h in report["hosts"]} == {"error"}
    assert report["fabric"]["status"] == "error"
    assert report["exit_code"] == EXIT_BUG
