"""`clusterforge audit --replay` end to end on the reference cluster, in all four formats.

A fleet recorded as planned audits clean (exit 0). Then drift is injected (OFED on three hosts,
BIOS on every host of one model, a missing storage route, an IB port at half rate, two swapped
cables, one host unreachable) and every format must name exactly that, and nothing else.
"""

from __future__ import annotations

import json
import tracemalloc
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from audits import expected, pipeline
from audits.collect import ReplayCollector
from audits.compare import host_probes
from audits.report import Report
from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from contract import snapshot
from draw.report import markdown
from tests.reference import compile_reference

OFED_HOSTS = ["gpu017", "gpu042", "gpu101"]
OLD_OFED = "5.8-1.0.1.1"
ROUTE_HOST, STORAGE_ROUTE = "gpu005", "10.70.0.0/16"
SLOW_HOST, SWAPPED_HOSTS, DOWN_HOST = "gpu030", ("gpu001", "gpu002"), "gpu050"


@dataclass(frozen=True)
class Run:
    code: int
    out: Path

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "report.json").read_text(encoding="utf-8"))
        return data

    def text(self, name: str) -> str:
        return (self.out / name).read_text(encoding="utf-8")


def audit(repo: Path, recording: Path, out: Path, *extra: str) -> Run:
    code = main(["-C", str(repo), "audit", "--replay", str(recording), "--out", str(out), *extra])
    return Run(code, out)


@pytest.fixture(scope="module")
def reference(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's expectations, compiled into a temporary folder."""
    return compile_reference(repo, tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="module")
def clean(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("clean")
    recording = Fleet.load(reference / "generated").record(tmp / "recording")
    return audit(reference, recording, tmp / "report", "--textfile", str(tmp / "audit.prom"))


@dataclass(frozen=True)
class Drift:
    run: Run
    bios_hosts: list[str]
    slow_cable: str
    swapped: list[str]


@pytest.fixture(scope="module")
def drift(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> Drift:
    tmp = tmp_path_factory.mktemp("drift")
    fleet = Fleet.load(reference / "generated")
    by_model: dict[str, list[str]] = {}
    for name, host in fleet.hosts.items():
        by_model.setdefault(host.state["model"], []).append(name)
    cable_of = {c["b"]["name"]: cable for cable, c in fleet.cables.items()}
    fleet.set_version(OFED_HOSTS, "ofed", OLD_OFED)
    fleet.set_version(by_model["svc-ib"], "bios", "1.13.0")
    fleet.drop_route(ROUTE_HOST, STORAGE_ROUTE)
    fleet.degrade(cable_of[SLOW_HOST], "4xEDR")
    swapped = sorted(cable_of[h] for h in SWAPPED_HOSTS)
    fleet.swap_far_ends(*swapped)
    fleet.unreachable(DOWN_HOST, "ssh: connect to host gpu050 port 22: Connection timed out")
    recording = fleet.record(tmp / "recording")
    run = audit(reference, recording, tmp / "report", "--textfile", str(tmp / "audit.prom"))
    return Drift(run, sorted(by_model["svc-ib"]), cable_of[SLOW_HOST], swapped)


# -- clean ----------------------------------------------------------------------------------


def test_a_fleet_as_planned_audits_clean(clean: Run) -> None:
    report = clean.json()
    assert clean.code == 0 == report["exit_code"]
    assert report["schema"] == 1
    # 132 hosts and 57 Cumulus switches, each audited as a host.
    assert report["summary"]["status"] == {"ok": 189, "drift": 0, "unreachable": 0, "error": 0}
    assert report["findings"] == [] and report["fabric"]["status"] == "ok"
    assert len(report["fabric"]["checked"]) == 303
    assert report["collected_at"] == report["now"] == "2026-05-04T06:00:00+00:00"
    assert report["expectations"]["commit"] is None  # the temporary copy is not in git
    assert len(report["expectations"]["source_sha256"]) == 64
    assert all(c["outcome"] == "complies" for h in report["hosts"] for c in h["checks"])
    assert clean.text("report.md").startswith("# Drift audit: 189/189 hosts ok, 0 drift\n")
    suites = ET.fromstring(clean.text("junit.xml"))
    assert (suites.get("failures"), suites.get("errors"), suites.get("skipped")) == ("0", "0", "0")
    metrics = _metrics(clean.out.parent / "audit.prom")
    assert {v for (name, _), v in metrics.items() if name == "clusterforge_drift_findings"} == {0}
    assert metrics[("clusterforge_hosts", (("status", "ok"),))] == 189


def test_the_report_names_the_git_commit_of_the_expectations(
    repo: Path, clean: Run, tmp_path: Path
) -> None:
    """Run against the checkout itself: its generated/ may be stale, only the naming counts."""
    run = audit(repo, clean.out.parent / "recording", tmp_path / "report")
    commit = run.json()["expectations"]["commit"]
    assert commit is not None and len(commit) == 40


# -- drift ----------------------------------------------------------------------------------


def _expected_findings(d: Drift) -> set[tuple[str, str, str]]:
    return (
        {(h, "ofed", "versions.ofed") for h in OFED_HOSTS}
        | {(h, "firmware", "versions.bios") for h in d.bios_hosts}
        | {(ROUTE_HOST, "route", f"routes[{STORAGE_ROUTE}]")}
        | {(SLOW_HOST, "ib-port", "ib_ports[mlx5_0/1].rate")}
        | {("fabric", "cable", cable) for cable in [d.slow_cable, *d.swapped]}
    )


def test_drift_in_report_json_is_exactly_what_was_injected(drift: Drift) -> None:
    report = drift.run.json()
    assert drift.run.code == 2 == report["exit_code"]  # unreachable wins over drift
    found = {(f["host"], f["kind"], f["path"]) for f in report["findings"]}
    assert found == _expected_findings(drift)
    status = {h["host"]: h["status"] for h in report["hosts"]}
    drifted = {*OFED_HOSTS, *drift.bios_hosts, ROUTE_HOST, SLOW_HOST}
    assert {h for h, s in status.items() if s == "drift"} == drifted
    assert {h for h, s in status.items() if s == "unreachable"} == {DOWN_HOST}
    assert {h for h, s in status.items() if s == "error"} == set()
    fabric = report["fabric"]
    assert fabric["swapped"] == [drift.swapped] and fabric["degraded"] == [drift.slow_cable]
    assert fabric["missing"] == fabric["unexpected"] == []
    rank = {"critical": 0, "warning": 1}
    place = {h["host"]: (h["rack"], h["u"]) for h in report["hosts"]}
    order = [
        (rank[f["severity"]], f["host"] == "fabric", place.get(f["host"], ("", 0)))
        for f in report["findings"]
    ]
    assert order == sorted(order), "severity first, then rack and U, the fabric's last"
    ofed = [f for f in report["findings"] if f["kind"] == "ofed"]
    assert {(f["expected"], f["observed"]) for f in ofed} == {("23.10-1.1.9.0", OLD_OFED)}


def test_drift_in_markdown_is_folded_and_names_exactly_it(drift: Drift) -> None:
    text = drift.run.text("report.md")
    assert text.startswith("# Drift audit: 179/189 hosts ok, 9 drift, 1 could not be collected")
    assert f"- 126/129 hosts OFED 23.10-1.1.9.0; gpu[017,042,101] on `{OLD_OFED}`\n" in text
    assert "- 2/6 hosts BIOS 1.14.1; login[01-02],sm[01-02] on `1.13.0`\n" in text
    rows = _table(text, "## Findings")
    assert {(r[1], r[4]) for r in rows} == {
        ("gpu[017,042,101]", "`versions.ofed`"),
        ("login[01-02],sm[01-02]", "`versions.bios`"),
        (ROUTE_HOST, f"`routes[{STORAGE_ROUTE}]`"),
        (SLOW_HOST, "`ib_ports[mlx5_0/1].rate`"),
    }
    fabric = {r[0] for r in _table(text, "## Fabric")}
    assert fabric == {f"`{c}`" for c in (drift.slow_cable, *drift.swapped)}
    assert [r[:2] for r in _table(text, "## Could not collect")] == [[DOWN_HOST, "unreachable"]]
    one, two = drift.swapped
    assert f"2 miswired ({one} and {two} look swapped), 1 degraded" in text
    # For the night shift: the worst first, where each host is, short text, what to do.
    rank = {"critical": 0, "warning": 1}
    assert [rank[r[0]] for r in rows] == sorted(rank[r[0]] for r in rows)
    hosts = {h["host"]: h for h in drift.run.json()["hosts"]}
    route_row = next(r for r in rows if r[1] == ROUTE_HOST)
    assert route_row[2] == f"{hosts[ROUTE_HOST]['rack']} U{hosts[ROUTE_HOST]['u']}"
    assert not any("{" in cell or '"' in cell for r in rows for cell in r), "no JSON in cells"
    remedies = text.split("## What to do\n", 1)[1].split("\n## ", 1)[0]
    for kind in ("ofed", "firmware", "route", "ib-port", "cable"):
        assert f"- **{kind}**: " in remedies
    # Data first: the stored report.json renders the same Markdown again.
    assert markdown.render(cast(Report, drift.run.json())) == text


def test_drift_in_junit_fails_exactly_its_cases(drift: Drift) -> None:
    suites = ET.fromstring(drift.run.text("junit.xml"))
    cases = list(suites.iter("testcase"))
    failed = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    assert failed == (
        {(h, "ofed") for h in OFED_HOSTS}
        | {(h, "bios") for h in drift.bios_hosts}
        | {(ROUTE_HOST, "routes"), (SLOW_HOST, "ib_ports")}
        | {("fabric", cable) for cable in [drift.slow_cable, *drift.swapped]}
    )
    errors = [(c.get("classname"), c.get("name"), c.find("error")) for c in cases]
    assert [(h, name, e.get("type")) for h, name, e in errors if e is not None] == [
        (DOWN_HOST, "collect", "unreachable")
    ]
    skipped = {c.get("classname") for c in cases if c.find("skipped") is not None}
    assert skipped == {DOWN_HOST}
    assert suites.get("failures") == str(len(failed)) and suites.get("errors") == "1"
    assert suites.get("tests") == str(len(cases))


def test_drift_in_the_textfile_counts_exactly_it(drift: Drift) -> None:
    metrics = _metrics(drift.run.out.parent / "audit.prom")
    nonzero = {
        dict(labels)["host"]: dict(labels)["kind"]
        for (name, labels), value in metrics.items()
        if name == "clusterforge_drift_findings" and value
    }
    expected = {h: k for h, k, _ in _expected_findings(drift)}
    assert nonzero == expected
    assert metrics[("clusterforge_drift_findings", (("host", "fabric"), ("kind", "cable")))] == 3
    assert not any(dict(labels).get("host") == DOWN_HOST for _, labels in metrics)
    assert metrics[("clusterforge_hosts", (("status", "unreachable"),))] == 1
    assert metrics[("clusterforge_hosts", (("status", "drift"),))] == 9
    assert metrics[("clusterforge_hosts_unreachable", ())] == 1
    stamp = metrics[("clusterforge_audit_last_success_timestamp_seconds", ())]
    assert stamp == 1777874400.0  # 2026-05-04T06:00:00Z


def test_a_replay_reproduces_its_report_byte_for_byte(
    drift: Drift, reference: Path, tmp_path: Path
) -> None:
    again = audit(reference, drift.run.out.parent / "recording", tmp_path / "again")
    assert again.code == drift.run.code
    for name in ("report.json", "report.md", "junit.xml"):
        assert again.text(name) == drift.run.text(name), name


# -- bounded memory: a replay reads each host when it is compared, and keeps nothing --------


def test_a_replay_reads_a_host_when_it_is_looked_up_and_keeps_nothing(
    reference: Path, tmp_path: Path
) -> None:
    recording = Fleet.load(reference / "generated").record(tmp_path / "recording")
    hosts = expected.read(reference).hosts
    collection = ReplayCollector(recording).collect(
        {name: host_probes(c) for name, c in hosts.items()}, []
    )
    kernel = recording / "hosts" / "gpu001" / "uname_r.txt"
    for release in ("6.1.0-after-collect\n", "6.1.0-and-again\n"):
        kernel.write_text(release, encoding="utf-8")  # after collect() returned
        assert collection.hosts["gpu001"].outputs["uname_r"] == release
    assert len(collection.hosts) == len(hosts) and list(collection.hosts) == sorted(hosts)


CHATTY = "Nov 30 06:00:00 {host} kernel: a harmless line of a chatty kernel log\n"


def test_a_replay_holds_one_host_s_outputs_at_a_time(reference: Path, tmp_path: Path) -> None:
    # Every host's kernel log is 256 KiB: together far more than the audit may hold at once.
    fleet = Fleet.load(reference / "generated")
    for name, host in fleet.hosts.items():
        host.overrides["xid"] = CHATTY.format(host=name) * (2**18 // len(CHATTY) + 1)
    recording = fleet.record(tmp_path / "recording")
    expectations = expected.read(reference)
    total = sum(p.stat().st_size for p in (recording / "hosts").rglob("*.txt"))
    tracemalloc.start()
    try:
        report = pipeline.audit(expectations, ReplayCollector(recording))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report["exit_code"] == 0  # the logs were read, and hold no Xid
    assert total > 30 * 2**20
    # Held whole, the outputs alone would be `total` (35 MiB); read in turn, the audit's
    # allocations peak at under 2 MiB. A quarter leaves room for any allocator or Python.
    assert peak < total / 4, (peak, total)


# -- Ethernet cabling -------------------------------------------------------------------------


def test_ethernet_cables_swapped_and_unplugged_are_named_by_cable_id(
    reference: Path, tmp_path: Path
) -> None:
    """Two hosts' cables on one switch swapped, one host's two cables swapped, one pulled:
    each named by its cable ID, the pairs as the fabric audit names a swap, nothing else."""
    fleet = Fleet.load(reference / "generated")
    fleet.swap_ethernet("R01-MG03", "R01-MG04")  # gpu003 and gpu004 on mgmt01
    fleet.swap_ethernet("R02-MG01", "R02-ST01")  # gpu006's management and storage cables
    fleet.unplug_ethernet("R02-ST05")
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 1
    assert report["fabric"]["status"] == "ok"
    found = {(f["host"], f["path"]): f for f in report["findings"]}
    assert sorted(found) == [
        ("gpu003", "R01-MG03"),
        ("gpu004", "R01-MG04"),
        ("gpu006", "R02-MG01"),
        ("gpu006", "R02-ST01"),
        ("gpu010", "R02-ST05"),
    ]
    assert {(f["kind"], f["check"]) for f in found.values()} == {("cable", "ethernet")}
    swap = "{} and {} look swapped: far ends exchanged"
    assert found["gpu003", "R01-MG03"]["message"] == swap.format("R01-MG03", "R01-MG04")
    assert found["gpu004", "R01-MG04"]["message"] == swap.format("R01-MG03", "R01-MG04")
    assert found["gpu003", "R01-MG03"]["observed"] == "mgmt01/swp4 - gpu003/eno1"
    assert found["gpu006", "R02-MG01"]["message"] == swap.format("R02-MG01", "R02-ST01")
    assert found["gpu006", "R02-ST01"]["observed"] == "mgmt02/swp1 - gpu006/ens2f0"
    unplugged = found["gpu010", "R02-ST05"]
    assert unplugged["message"] == "R02-ST05 not seen (stor02/swp5 - gpu010/ens2f0)"
    assert "R02-ST05" in run.text("report.md")


# -- could not collect, and the command line ------------------------------------------------


def test_output_that_cannot_be_used_makes_an_error_host(reference: Path, tmp_path: Path) -> None:
    fleet = Fleet.load(reference / "generated")
    fleet.fail("gpu007", "ipmitool_mc_info", "exit 127: ipmitool: command not found")
    fleet.hosts["gpu008"].overrides["ofed_info"] = "ofed_info: command garbled\n\n??\n"
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 2
    assert {h["host"]: h["status"] for h in report["hosts"] if h["status"] != "ok"} == {
        "gpu007": "error",
        "gpu008": "error",
    }
    assert report["findings"] == []
    errors = {
        c.get("classname")
        for c in ET.fromstring(run.text("junit.xml")).iter("testcase")
        if c.find("error") is not None
    }
    assert errors == {"gpu007", "gpu008"}


def test_now_decides_rollout_windows_and_defaults_to_collection_time(
    clean: Run, reference: Path, tmp_path: Path
) -> None:
    run = audit(
        reference,
        clean.out.parent / "recording",
        tmp_path / "r",
        "--now",
        "2027-01-01T00:00:00+00:00",
    )
    assert run.json()["now"] == "2027-01-01T00:00:00+00:00"
    with pytest.raises(SystemExit):
        main(["audit", "--replay", str(tmp_path), "--now", "2027-01-01T00:00:00"])  # no offset


def test_without_replay_live_collection_is_refused(
    reference: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["-C", str(reference), "audit"]) == 4
    needs = "live collection needs --ssh-key FILE (or --ssh-agent) and --known-hosts FILE"
    assert needs in capsys.readouterr().err
    assert not (tmp_path / "audit-report").exists()


def test_a_folder_that_is_no_recording_is_refused(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit(reference, tmp_path, tmp_path / "report").code == 4
    assert "meta.json is missing" in capsys.readouterr().err


def test_the_report_goes_to_build_in_the_repository_by_default(
    clean: Run, reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recording = clean.out.parent / "recording"
    assert main(["-C", str(reference), "audit", "--replay", str(recording)]) == 0
    assert not (tmp_path / "audit-report").exists()
    assert sorted(p.name for p in (reference / "build" / "audit-report").iterdir()) == [
        "junit.xml",
        "report.html",
        "report.json",
        "report.md",
        "snapshots",  # the provisioning host's served files, as it holds them
    ]


# -- helpers --------------------------------------------------------------------------------


def _metrics(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = path.read_text(encoding="utf-8")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _table(text: str, heading: str) -> list[list[str]]:
    """The body rows of the Markdown table under `heading`, as lists of cells."""
    section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_every_kind_of_finding_has_a_remedy() -> None:
    from contract import Kind

    assert set(markdown.REMEDIES) == set(Kind)


# -- sharded ---------------------------------------------------------------------------------


def test_four_shards_merge_into_the_unsharded_report(
    reference: Path, drift: Drift, tmp_path: Path
) -> None:
    recording = drift.run.out.parent / "recording"
    parts = []
    for k in range(1, 5):
        run = audit(reference, recording, tmp_path / f"shard{k}", "--shard", f"{k}/4")
        shard = run.json()["shard"]
        parts.append(run)
        # A shard audits whole racks, and only shard 1 scans the fabric.
        racks = {h["rack"] for h in run.json()["hosts"]}
        assert shard["fabric"] == (k == 1) and racks and shard["hosts"]
        assert all(f["host"] != "fabric" for f in run.json()["findings"]) or k == 1
    hosts = [set(p.json()["shard"]["hosts"]) for p in parts]
    assert sum(map(len, hosts)) == len(set().union(*hosts)) == 189, "disjoint and complete"
    racks = [{h["rack"] for h in p.json()["hosts"]} for p in parts]
    assert sum(map(len, racks)) == len(set().union(*racks)), "no rack split across shards"

    merged = tmp_path / "merged"
    code = main(
        ["audit", "merge", *(str(p.out) for p in reversed(parts)), "--out", str(merged),
         "--textfile", str(tmp_path / "merged.prom")]
    )  # fmt: skip
    assert code == drift.run.code == 2
    for name in ("report.json", "report.md", "junit.xml"):
        assert (merged / name).read_text() == drift.run.text(name), name
    # The devices' snapshots too: what the change plan and `audit history` read.
    kept = snapshot.read(drift.run.out)
    assert kept and snapshot.read(merged) == kept
    assert (tmp_path / "merged.prom").read_text() == (
        drift.run.out.parent / "audit.prom"
    ).read_text()


def test_merge_refuses_an_incomplete_set_of_shards(
    reference: Path, clean: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = clean.out.parent / "recording"
    one = audit(reference, recording, tmp_path / "one", "--shard", "1/3")
    two = audit(reference, recording, tmp_path / "two", "--shard", "2/3")
    code = main(["audit", "merge", str(one.out), str(two.out), "--out", str(tmp_path / "m")])
    assert code == 4
    assert "need shards 1..3 of 3, each once; got 1/3, 2/3" in capsys.readouterr().err


def test_hosts_narrows_the_audit_to_a_host_range(
    reference: Path, clean: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = clean.out.parent / "recording"
    run = audit(reference, recording, tmp_path / "few", "--hosts", "gpu[001-010],login01")
    assert run.code == 0
    names = [h["host"] for h in run.json()["hosts"]]
    assert names == [f"gpu{n:03d}" for n in range(1, 11)] + ["login01"]
    bad = audit(reference, recording, tmp_path / "bad", "--hosts", "gpu[998-999]")
    assert bad.code == 4
    assert "does not: ['gpu998', 'gpu999']" in capsys.readouterr().err


# -- Ethernet switches: cabling, files, units and BGP, as a host's -------------------------

SWITCH, SESSION_SWITCH, SESSION_PORT = "stor01", "stor02", "swp49"


def test_a_cumulus_switch_is_audited_like_a_host(reference: Path, tmp_path: Path) -> None:
    """frr.conf edited by hand on one switch is file drift; a BGP session down on another is a
    bgp finding; nothing else, and each switch's row names what was checked."""
    fleet = Fleet.load(reference / "generated")
    assert SWITCH in fleet.ethernet and "stor-spine01" in fleet.ethernet
    fleet.edit_file(SWITCH, "/etc/frr/frr.conf")
    fleet.bgp_down(SESSION_SWITCH, SESSION_PORT)
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 1
    found = {(f["host"], f["check"], f["path"]): f for f in report["findings"]}
    assert sorted(found) == [
        (SWITCH, "files", "files[/etc/frr/frr.conf]"),
        (SESSION_SWITCH, "bgp", f"bgp[{SESSION_PORT}].state"),
    ]
    edited = found[SWITCH, "files", "files[/etc/frr/frr.conf]"]
    assert edited["kind"] == "file"
    assert (
        edited["message"]
        == f"/etc/frr/frr.conf differs from generated/switches/{SWITCH}/etc/frr/frr.conf"
    )
    down = found[SESSION_SWITCH, "bgp", f"bgp[{SESSION_PORT}].state"]
    assert (down["kind"], down["severity"], down["observed"]) == ("bgp", "critical", "Idle")
    assert (
        down["message"] == f"BGP session on {SESSION_PORT} to stor-spine01 is Idle, not Established"
    )
    rows = {h["host"]: h for h in report["hosts"]}
    assert rows[SWITCH]["status"] == "drift" and rows["stor03"]["status"] == "ok"
    checks = [c["check"] for c in rows["stor03"]["checks"]]
    assert checks == ["ethernet", "files", "units", "bgp", "running_config"]
    assert {c["outcome"] for c in rows["stor03"]["checks"]} == {"complies"}
    assert f"{SESSION_SWITCH}" in run.text("report.md")


def test_a_switch_session_up_without_prefixes_and_one_missing_are_findings(
    reference: Path, tmp_path: Path
) -> None:
    fleet = Fleet.load(reference / "generated")
    summary = json.loads(fleet.outputs(SWITCH)["vtysh_bgp_summary"])
    peers = summary["ipv4Unicast"]["peers"]
    peers["swp49"]["pfxRcd"] = 0
    del peers["swp50"]
    fleet.ethernet[SWITCH].overrides["vtysh_bgp_summary"] = json.dumps(summary)
    report = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report").json()
    assert sorted((f["host"], f["path"], f["message"]) for f in report["findings"]) == [
        (
            SWITCH,
            "bgp[swp49].prefixes_received",
            "BGP session on swp49 to stor-spine01 is up but has received no prefixes",
        ),
        (
            SWITCH,
            "bgp[swp50]",
            "no BGP session on swp50 (to stor-spine02): frr.conf has no such neighbour",
        ),
    ]


# stor01's two uplinks, to stor-spine01's and stor-spine02's port 1 (expected/switches/).
UPLINKS = ("R01-ST49", "R01-ST50")


def test_clean_switches_hear_every_planned_switch_cable(reference: Path, tmp_path: Path) -> None:
    """Every Cumulus switch's uplinks and management-port patches, heard by its lldpd as
    planned: no finding, each switch's ethernet check complies."""
    fleet = Fleet.load(reference / "generated")
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 0 and report["findings"] == []
    rows = {h["host"]: h for h in report["hosts"] if h["host"] in fleet.ethernet}
    checked = [r for r in rows.values() if any(c["check"] == "ethernet" for c in r["checks"])]
    assert len(checked) == len(fleet.ethernet)
    stor01 = json.loads(fleet.outputs(SWITCH)["lldpcli_neighbors"])["lldp"]["interface"]
    heard = {iface: body["port"]["id"]["value"] for e in stor01 for iface, body in e.items()}
    assert heard == {"eth0": "swp46", "swp49": "swp1", "swp50": "swp1"}


def test_a_swapped_uplink_pair_is_named_from_both_ends(reference: Path, tmp_path: Path) -> None:
    """stor01's two uplinks plugged into each other's spine: stor01 names both as a swapped
    pair by cable ID, and so does each spine on its own port; nothing else."""
    fleet = Fleet.load(reference / "generated")
    fleet.swap_ethernet(*UPLINKS)
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 1
    found = {(f["host"], f["path"]): f for f in report["findings"]}
    assert sorted(found) == [
        ("stor-spine01", "R01-ST49"),
        ("stor-spine02", "R01-ST50"),
        (SWITCH, "R01-ST49"),
        (SWITCH, "R01-ST50"),
    ]
    assert {(f["kind"], f["check"]) for f in found.values()} == {("cable", "ethernet")}
    swap = "R01-ST49 and R01-ST50 look swapped: far ends exchanged"
    assert {f["message"] for f in found.values()} == {swap}
    assert found[SWITCH, "R01-ST49"]["expected"] == "stor-spine01/swp1 - stor01/swp49"
    assert found[SWITCH, "R01-ST49"]["observed"] == "stor-spine02/swp1 - stor01/swp49"
    assert found["stor-spine01", "R01-ST49"]["observed"] == "stor01/swp50 - stor-spine01/swp1"


def test_an_unplugged_uplink_is_named_by_both_switches(reference: Path, tmp_path: Path) -> None:
    fleet = Fleet.load(reference / "generated")
    fleet.unplug_ethernet(UPLINKS[0])
    report = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report").json()
    assert sorted((f["host"], f["path"], f["message"]) for f in report["findings"]) == [
        ("stor-spine01", "R01-ST49", "R01-ST49 not seen (stor01/swp49 - stor-spine01/swp1)"),
        (SWITCH, "R01-ST49", "R01-ST49 not seen (stor-spine01/swp1 - stor01/swp49)"),
    ]
