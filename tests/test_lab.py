"""`clusterforge lab`: the compiled cluster played on loopback, audited end to end.

The whole reference cluster comes up, audits ok, and goes down leaving no process, user or
file; a faults file stages an incident and the audit names exactly it; the shipped example
recording replays to exactly the faults it was recorded with. Bad faults files get located
errors, and nothing but loopback is ever bound.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest

from audits import expected
from clusterforge.cli import main
from clusterforge.lab import faults, lab, topology
from clusterforge.lab.fleet import as_state
from clusterforge.lab.ibsim import LabError
from common.hostlist import expand
from tests.conftest import require_tool

EXAMPLE = "examples/incident"
FAULTS = "examples/faults.yaml"


def _report(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    return data


def _staged(repo: Path) -> tuple[set[tuple[str, str]], list[list[str]], set[str]]:
    """What examples/faults.yaml stages, as the report must say it: (host, drifted version)
    pairs, swapped cable pairs, hosts down."""
    e = expected.read(repo)
    contracts = {h: as_state(c) for h, c in e.hosts.items()}
    staged = faults.read(repo / FAULTS, contracts, [c.id for c in e.fabric.cables])
    drift = {
        (h, f.version)
        for f in staged.faults
        if isinstance(f, faults.VersionDrift)
        for h in expand(f.hosts)
    }
    swapped = [sorted(f.cables) for f in staged.faults if isinstance(f, faults.CableSwapped)]
    return drift, swapped, staged.hosts(faults.Kind.HOST_DOWN)


def _names_exactly_the_staged_faults(report: dict[str, Any], repo: Path) -> None:
    drift, swapped, down = _staged(repo)
    assert drift and swapped and down  # the example stages one of each
    hosts = [f for f in report["findings"] if f["host"] != "fabric"]
    assert {(f["host"], f["kind"]) for f in hosts} == drift
    assert {h["host"] for h in report["hosts"] if h["status"] == "unreachable"} == down
    assert {h["host"] for h in report["hosts"] if h["status"] == "drift"} == {h for h, _ in drift}
    assert {h["status"] for h in report["hosts"]} <= {"ok", "drift", "unreachable"}
    fabric = report["fabric"]
    assert fabric["swapped"] == swapped
    assert fabric["miswired"] == sorted(c for pair in swapped for c in pair)
    assert fabric["missing"] == fabric["degraded"] == fabric["unexpected"] == []
    assert report["exit_code"] == 2  # a host down wins over drift


def test_the_shipped_example_replays_to_exactly_its_staged_faults(
    repo: Path, tmp_path: Path
) -> None:
    """When cluster/ changes what a host must run, re-record it as docs/lab.md says."""
    code = main(["-C", str(repo), "audit", "--replay", str(repo / EXAMPLE), "--out", str(tmp_path)])
    assert code == 2
    _names_exactly_the_staged_faults(_report(tmp_path), repo)


@pytest.mark.realtool
def test_ethernet_cables_staged_swapped_and_unplugged_are_named_by_cable_id(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lab's hosts answer lldpcli over SSH as cabled now: two hosts' management cables
    swapped on their switch, a storage cable pulled."""
    faults = (
        "- fault: ethernet-swapped\n  cables: [R01-MG03, R01-MG04]\n"
        "- fault: ethernet-unplugged\n  cable: R01-ST02\n"
    )
    report = staged_audit(repo, tmp_path, capsys, faults, "gpu[001-004]")
    found = {(f["host"], f["path"]): f["message"] for f in report["findings"]}
    assert found == {
        ("gpu003", "R01-MG03"): "R01-MG03 and R01-MG04 look swapped: far ends exchanged",
        ("gpu004", "R01-MG04"): "R01-MG03 and R01-MG04 look swapped: far ends exchanged",
        ("gpu002", "R01-ST02"): "R01-ST02 not seen (stor01/swp2 - gpu002/ens2f0)",
    }


@pytest.mark.realtool
def test_a_swapped_uplink_is_named_by_the_switches_at_both_ends(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lab's switches answer lldpcli through their OS's forced command as cabled now:
    stor01's two uplinks swapped on the spines, its management patch pulled."""
    faults = (
        "- fault: ethernet-swapped\n  cables: [R01-ST49, R01-ST50]\n"
        "- fault: ethernet-unplugged\n  cable: R01-MG46\n"
    )
    played = "stor01,stor-spine01,stor-spine02,mgmt01"
    report = staged_audit(repo, tmp_path, capsys, faults, played)
    found = {(f["host"], f["path"]): f["message"] for f in report["findings"]}
    swap = "R01-ST49 and R01-ST50 look swapped: far ends exchanged"
    assert found == {
        ("stor01", "R01-ST49"): swap,
        ("stor01", "R01-ST50"): swap,
        ("stor-spine01", "R01-ST49"): swap,
        ("stor-spine02", "R01-ST50"): swap,
        ("stor01", "R01-MG46"): "R01-MG46 not seen (mgmt01/swp46 - stor01/eth0)",
        ("mgmt01", "R01-MG46"): "R01-MG46 not seen (stor01/eth0 - mgmt01/swp46)",
    }


@pytest.mark.realtool
def test_the_rails_site_plays_eight_hcas_a_server_and_names_a_rail_swap(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/rails in the lab: ibsim plays its NDR fabric as HDR (all it trains), the scans
    read back as NDR, so the plan audits clean but for what is staged: gpu001's rail-3 and
    rail-4 cables in each other's HCA, named as a swapped pair by both cable IDs and by HCA;
    gpu002's rail-5 cable trained at EDR, named by its ID, and seen by its host too."""
    faults = (
        "- fault: cable-swapped\n  cables: [SU1-LEAF3-01, SU1-LEAF4-01]\n"
        "- fault: cable-degraded\n  cable: SU1-LEAF5-02\n  rate: 4xEDR\n"
    )
    report = staged_audit(repo / "examples" / "rails", tmp_path, capsys, faults, "gpu[001-004]")
    fabric = report["fabric"]
    assert fabric["swapped"] == [["SU1-LEAF3-01", "SU1-LEAF4-01"]]
    assert fabric["degraded"] == ["SU1-LEAF5-02"]
    assert fabric["missing"] == fabric["unexpected"] == []
    found = {(f["host"], f["path"]): f["observed"] for f in report["findings"]}
    assert found == {
        ("fabric", "SU1-LEAF3-01"): "su1-leaf3/1 - gpu001 mlx5_4/1",
        ("fabric", "SU1-LEAF4-01"): "su1-leaf4/1 - gpu001 mlx5_3/1",
        ("fabric", "SU1-LEAF5-02"): "4xEDR",
        ("gpu002", "ib_ports[mlx5_5/1].rate"): 100,
    }


@pytest.mark.realtool
def test_an_hca_of_two_lanes_is_played_at_its_width(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/rails with its servers' mlx5_3 an NDR200 port (2x NDR): ibsim trains those
    links at two lanes, as planned, so the fabric audit finds only the staged fault (a rail-5
    cable at EDR), not every rail-3 cable at the wrong width."""
    site = tmp_path / "site"
    shutil.copytree(repo / "examples" / "rails" / "cluster", site / "cluster")
    hardware = site / "cluster" / "hardware.yaml"
    rail3 = "speed_gbps: 400, device: mlx5_3, port: 1,"
    text = hardware.read_text(encoding="utf-8")
    assert text.count(rail3) == 1
    hardware.write_text(text.replace(rail3, "speed_gbps: 200, device: mlx5_3, port: 1, width: 2x,"))
    assert main(["-C", str(site), "compile"]) == 0
    faults = "- fault: cable-degraded\n  cable: SU1-LEAF5-02\n  rate: 4xEDR\n"
    report = staged_audit(site, tmp_path, capsys, faults, "gpu[001-004]")
    # ibnetdiscover on ibsim, as the audit recorded it: each leaf's link to gpu001's HCAs.
    scan = tmp_path / "report" / "recording" / "fabric" / "ibnetdiscover.txt"
    seen = {}
    for line in scan.read_text(encoding="utf-8").splitlines():
        if line.startswith("[") and '# "gpu001 mlx5_' in line:
            seen[line.split('# "', 1)[1].split('"', 1)[0]] = line.split()[-1]
    assert seen == {f"gpu001 mlx5_{k}": "2xNDR" if k == 3 else "4xNDR" for k in range(8)}
    fabric = report["fabric"]
    assert fabric["degraded"] == ["SU1-LEAF5-02"]
    assert fabric["missing"] == fabric["unexpected"] == fabric["swapped"] == []
    found = {(f["host"], f["path"]) for f in report["findings"]}
    assert found == {("fabric", "SU1-LEAF5-02"), ("gpu002", "ib_ports[mlx5_5/1].rate")}


def test_a_fabric_faster_than_ibsim_plays_at_hdr_and_reads_back_as_planned() -> None:
    net = '[1]\t"H-01"[1]\t# "gpu001 mlx5_0" lid 0 4xNDR\n[2]\t"H-02"[1]\t# "x" lid 0 4xEDR\n'
    played, speed = topology.stand_in(net)
    assert speed == "NDR" and played == net.replace("4xNDR", "4xHDR")
    assert topology.stand_in(played) == (played, None)  # HDR and slower play as they are
    script = topology.played_back("NDR")
    assert "s/xHDR/xNDR/g" in script and "53\\.125 Gbps/ 106.25 Gbps" in script
    # A cable at HDR on an NDR fabric would read back as NDR: refused, not played wrong.
    with pytest.raises(LabError, match="degrade a cable to EDR or slower"):
        topology.stand_in(net.replace("4xEDR", "4xHDR"))


# -- faults as data -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- fault: host-gone\n  hosts: gpu001\n", "1:3: invalid-value: 'fault' must be one of"),
        (
            "- fault: host-down\n  hosts: gpu999\n",
            "2:3: unknown-host: not hosts this lab plays: gpu999",
        ),
        ("- fault: host-down\n  host: gpu001\n", "2:3: unknown-key: unknown key 'host'"),
        (
            "- fault: version-drift\n  hosts: gpu001\n  version: ofde\n  value: '1'\n",
            "3:3: unknown-version: gpu001 has no version 'ofde'",
        ),
        (
            "- fault: cable-unplugged\n  cable: R99-IB01\n",
            "2:3: unknown-cable: not cables this lab plays",
        ),
        (
            "- fault: cable-degraded\n  cable: R01-IB01\n  rate: 4xNDR\n",
            "3:3: invalid-value: rate: String should match pattern",
        ),
        (
            "- fault: ethernet-unplugged\n  cable: R01-IB01\n",
            "2:3: unknown-cable: not Ethernet cables of the hosts or switches this lab plays",
        ),
        (
            "- fault: ethernet-swapped\n  cables: [R01-MG01, R01-MG01]\n",
            "2:3: unknown-cable: a cable cannot be swapped with itself",
        ),
        ("- fault: probe-hangs\n  hosts: gpu001\n  probe: rm\n", "3:3: unknown-probe: 'rm'"),
        ("- [unclosed\n", "yaml-syntax"),
    ],
)
def test_a_bad_faults_file_is_a_located_error_and_starts_nothing(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(text, encoding="utf-8")
    state = tmp_path / "lab"
    argv = ["-C", str(repo), "lab", "up", "--dir", str(state), "--faults", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and message in err, err
    assert not state.exists()


def test_cable_faults_rewrite_both_ends_in_the_topology(repo: Path) -> None:
    e = expected.read(repo)
    cables = {c["id"]: c for c in e.fabric.as_dict()["cables"]}
    net = (repo / "generated" / "fabric" / "topology.net").read_text(encoding="utf-8")
    staged = [
        faults.CableSwapped(fault=faults.Kind.CABLE_SWAPPED, cables=("R03-IB02", "R03-IB03")),
        faults.CableUnplugged(fault=faults.Kind.CABLE_UNPLUGGED, cable="R04-IB01"),
        faults.CableDegraded(fault=faults.Kind.CABLE_DEGRADED, cable="R05-IB01", rate="4xEDR"),
    ]
    before, after = net.splitlines(), topology.stage(net, cables, staged).splitlines()

    def port_lines(node: str, lines: list[str]) -> list[str]:
        start = next(i for i, line in enumerate(lines) if f'"{node}"\t' in line)
        return [line for line in lines[start + 1 :] if line.startswith("[")][:1]

    assert len(before) - len(after) == 2  # the unplugged cable, from both ends
    # The swap, seen from both hosts and from the leaf: gpu012 is now in leaf03's port 3.
    assert port_lines("H-0c42a10300839b02", after) == [
        '[1]\t"S-b8cef603006dbcca"[3]\t# "leaf03" lid 0 4xHDR'
    ]
    assert port_lines("H-0c42a10300a1d319", after) == [
        '[1]\t"S-b8cef603006dbcca"[2]\t# "leaf03" lid 0 4xHDR'
    ]
    assert '[2]\t"H-0c42a10300a1d319"[1]\t# "gpu013 mlx5_0" lid 0 4xHDR' in after
    assert '[3]\t"H-0c42a10300839b02"[1]\t# "gpu012 mlx5_0" lid 0 4xHDR' in after
    # The unplugged host has no cable left; the degraded cable carries its rate at both ends.
    assert not any('"gpu016 mlx5_0" lid' in line for line in after)
    assert [line for line in after if "4xEDR" in line] == [
        '[1]\t"H-0c42a10300235888"[1]\t# "gpu021 mlx5_0" lid 0 4xEDR',
        '[1]\t"S-b8cef603000e8cd0"[1]\t# "leaf05" lid 0 4xEDR',
    ]


def test_a_lab_never_takes_over_a_folder_that_is_not_its_own(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(LabError, match="not an empty folder"):
        lab.up(repo, tmp_path)
    with pytest.raises(LabError, match="holds no lab"):
        lab.down(tmp_path)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    (tmp_path / lab.STATE_FILE).write_text('{"processes": []}', encoding="utf-8")
    with pytest.raises(LabError, match="already up"):
        lab.up(repo, tmp_path)


# -- nothing but loopback -------------------------------------------------------------------------


def test_every_host_is_played_at_the_loopback_twin_of_its_address() -> None:
    assert lab.twin("10.60.2.11/24") == "127.60.2.11"
    assert lab.loopback("127.60.2.11") == "127.60.2.11"
    for address in ("10.60.2.11", "0.0.0.0", "::", "192.168.1.1", "gpu001"):
        with pytest.raises(LabError, match="loopback addresses only"):
            lab.loopback(address)


def test_a_host_is_played_at_the_twin_of_the_address_its_default_route_leaves_by() -> None:
    """Whatever the site calls its management network: here `oob`, beside an IB network."""
    interfaces = [
        {"name": "ib0", "network": "ib", "address": "10.70.0.5/16"},
        {"name": "eno1", "network": "oob", "address": "10.60.2.11/16"},
    ]
    routed = {"interfaces": interfaces, "routes": [{"dst": "default", "dev": "eno1"}]}
    unrouted = {"interfaces": interfaces, "routes": [{"dst": "10.70.0.0/16", "dev": "ib0"}]}
    addresses = lab._addresses({"a": routed, "b": unrouted}, ["a", "b"])
    assert addresses == {"a": "127.60.2.11", "b": "127.255.0.1"}


# -- the whole reference cluster, live ---------------------------------------------------------


def _state() -> Path:
    # Not below pytest's folder: as root the lab runs as a user of its own, who must reach it.
    return Path(tempfile.mkdtemp(prefix="cf-lab-"))


def _tools() -> None:
    for tool in ("sshd", "ssh-keygen", "ibsim", "ibnetdiscover", "setpriv"):
        require_tool(tool)


def _up(repo: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    """`lab up`, and the audit line it prints, as arguments for main()."""
    try:
        assert main(["-C", str(repo), "lab", "up", "--dir", str(state), *extra]) == 0
    except BaseException:
        lab.down(state)
        raise
    printed = capsys.readouterr().out.splitlines()
    words = shlex.split(printed[-1])
    assert words[0] == "clusterforge"
    return words[1:]


def staged_audit(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], faults: str, hosts: str
) -> dict[str, Any]:
    """`lab up` of `hosts` with the faults file `faults`, its audit (drift: exit 1) into
    tmp_path/report, `lab down`; the report."""
    _tools()
    staged = tmp_path / "faults.yaml"
    staged.write_text(faults, encoding="utf-8")
    state = _state()
    audit = _up(repo, state, capsys, "--hosts", hosts, "--faults", str(staged))
    try:
        assert main([*audit, "--out", str(tmp_path / "report")]) == 1
    finally:
        lab.down(state)
    return _report(tmp_path / "report")


def _leftovers(state: Path, user: str | None) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(state).encode() in cmdline.read_bytes():
                found.append(f"process {cmdline.parent.name}")
        except OSError:
            continue  # gone meanwhile
    if user is not None and user != pwd.getpwuid(os.getuid()).pw_name:
        try:
            pwd.getpwnam(user)
            found.append(f"user {user}")
        except KeyError:
            pass
    if state.exists():
        found.append(f"folder {state}")
    return found


@pytest.mark.realtool
def test_the_reference_cluster_is_up_audits_ok_and_leaves_nothing_behind(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tools()
    state = _state()
    audit = _up(repo, state, capsys)
    try:
        record = json.loads((state / lab.STATE_FILE).read_text(encoding="utf-8"))
        assert main(["-C", str(repo), "lab", "status", "--dir", str(state)]) == 0
        assert "lab up" in capsys.readouterr().out
        assert main([*audit, "--out", str(tmp_path / "report")]) == 0
        report = _report(tmp_path / "report")
        # Every host and every audited switch, each through its own forced command.
        hosts = len(expected.read(repo).machines)
        assert report["summary"]["status"] == {
            "ok": hosts,
            "drift": 0,
            "unreachable": 0,
            "error": 0,
        }
        assert report["fabric"]["status"] == "ok" and report["findings"] == []
        sshd = [p for p in record["processes"] if p["what"].startswith("sshd")]
        assert len(sshd) == -(-hosts // lab.PER_SSHD)  # a few sshd, each for many hosts
    finally:
        assert main(["-C", str(repo), "lab", "down", "--dir", str(state)]) == 0
    assert _leftovers(state, record["user"]) == []
    assert main(["-C", str(repo), "lab", "status", "--dir", str(state)]) == 1


@pytest.mark.realtool
def test_a_staged_incident_is_named_exactly(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/faults.yaml, on the hosts it names and their neighbours (and the whole fabric)."""
    _tools()
    state = _state()
    spec = "gpu[011-020],gpu050"
    audit = _up(repo, state, capsys, "--hosts", spec, "--faults", str(repo / FAULTS))
    try:
        assert main([*audit, "--out", str(tmp_path / "report")]) == 2
        # A lab process that died is a broken lab, and down still takes the rest away.
        record = json.loads((state / lab.STATE_FILE).read_text(encoding="utf-8"))
        ibsim = next(p["pid"] for p in record["processes"] if p["what"] == "ibsim")
        os.kill(ibsim, signal.SIGKILL)
        os.waitpid(ibsim, 0)
        assert main(["lab", "status", "--dir", str(state)]) == 1
        assert "lab broken" in capsys.readouterr().out
    finally:
        lab.down(state)
    report = _report(tmp_path / "report")
    played = {h["host"] for h in report["hosts"]}
    assert played == {*expand(spec), "sm01", "sm02"}  # and the subnet managers
    _names_exactly_the_staged_faults(report, repo)
    assert _leftovers(state, None) == []


@pytest.mark.realtool
def test_a_cluster_straight_from_init_is_up_and_audits_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The adopter's first hour: `init`, `compile`, `lab up`, the audit line it prints; no
    file is copied by hand in between (the audit account comes with init)."""
    _tools()
    site = tmp_path / "site"
    assert main(["init", str(site), "--racks", "2", "--per-rack", "2"]) == 0
    assert main(["-C", str(site), "compile"]) == 0
    capsys.readouterr()
    state = _state()
    audit = _up(site, state, capsys)
    try:
        assert main([*audit, "--out", str(tmp_path / "report")]) == 0
        report = _report(tmp_path / "report")
        hosts = len(expected.read(site).hosts)
        assert report["summary"]["status"]["ok"] == hosts and report["findings"] == []
    finally:
        assert main(["-C", str(site), "lab", "down", "--dir", str(state)]) == 0
