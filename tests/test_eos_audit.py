"""EOS switches in the audit: the audit account in the startup-config pyavd renders, the
running-config read by `show running-config` and compared with that startup-config by
hier_config (contract/eos.py), kept in each run's snapshot, named line by line in the
history, and the change plan's pre-check refusing a switch edited by hand.

A site variant of the reference whose Ethernet switch models run EOS, as tests/test_eos.py
builds it, compiled in a scratch repository (`base`, then a bad port of stor01 moved, which
changes stor01's startup-config); the runs replay the lab twin's recordings of `base`, whose
EOS switches print their generated startup-config under EOS's header.
"""

from __future__ import annotations

import getpass
import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from audits import expected
from audits.compare import SWITCH_CHECKS, compare_host, host_probes
from audits.sink import Sink
from audits.ssh import SshCollector, SshOptions, Target, probe_command, probe_words
from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from compiler.load import load
from compiler.pipeline import compile_source
from compiler.targets import access, eos
from contract import EthernetSwitch, Kind, snapshot
from contract import eos as eos_config
from contract.probes import Probe, ProbeError, eos_running_config
from tests.conftest import git, loopback_sshd

FIXTURES = Path(__file__).parent / "fixtures" / "eos_running_config"
PORT3 = "   description gpu003 ens2f0 R01-ST03\n"
EDITED = "   description spare, moved by hand\n"
ADDED = "ip name-server vrf MGMT 10.60.1.53"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where `site` puts `base`'s generated/."""
    return tmp_path_factory.mktemp("eos-base")


@pytest.fixture(scope="module")
def reference(site: Path, base: Path) -> Path:
    """What the devices run: `base`'s generated/ (-C for the audit)."""
    return base


@pytest.fixture(scope="module")
def site(repo: Path, base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The EOS variant's repository: `base` compiled and committed, then HEAD, stor01's
    server cable moved from port 3 to 30 (its startup-config changes), compiled."""
    root = tmp_path_factory.mktemp("eos-site")
    shutil.copytree(repo / "cluster", root / "cluster")
    hardware = root / "cluster" / "hardware.yaml"
    hardware.write_text(hardware.read_text().replace("os: cumulus", "os: eos"))
    git(root, "init", "-q", "-b", "main")
    assert main(["-C", str(root), "compile"]) == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    git(root, "tag", "base")
    shutil.copytree(root / "generated", base / "generated")
    yaml = YAML()
    fabric = yaml.load((root / "cluster" / "fabric.yaml").read_text())
    fabric["cables"] = [{"device": "stor01", "port": 3, "use_port": 30, "note": "bad"}]
    with (root / "cluster" / "fabric.yaml").open("w") as f:
        yaml.dump(fabric, f)
    assert main(["-C", str(root), "compile"]) == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "stor01 port 3 bad")
    return root


def _run(reference: Path, fleet: Fleet, folder: Path) -> tuple[Path, Any]:
    recording = fleet.record(folder / "recording")
    out = folder / "report"
    code = main(["-C", str(reference), "audit", "--replay", str(recording), "--out", str(out)])
    assert code in (0, 1)
    return out, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def runs(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, Any]]:
    """Two runs: as planned, then with stor01's port 3 description changed and a name
    server added on the switch, by hand."""
    tmp = tmp_path_factory.mktemp("eos-runs")
    fleet = Fleet.load(reference / "generated")
    first = _run(reference, fleet, tmp / "first")
    fleet.edit_text("stor01", eos_config.RUNNING, PORT3, EDITED)
    fleet.edit_text(
        "stor01", eos_config.RUNNING, "hostname stor01\n", f"hostname stor01\n{ADDED}\n"
    )
    second = _run(reference, fleet, tmp / "second")
    return [first, second]


def _switches(reference: Path) -> list[str]:
    return sorted(p.stem for p in (reference / "generated/expected/switches").glob("*.json"))


def test_the_audit_account_is_in_the_startup_config_and_pyavd_accepts_it(
    site: Path, reference: Path
) -> None:
    plan = compile_source(load(site / "cluster")).plan
    audit = plan.site.audit
    assert audit is not None
    for name in ("stor01", "mgmt-spine01"):
        config = eos.structured_config(plan, plan.ethernet.switch(name))
        assert config["local_users"] == [
            {
                "name": audit.user,
                "privilege": 15,
                "role": "network-operator",
                "no_password": True,
                "ssh_key": audit.public_key,
            }
        ]
        assert eos.refusals(config) == []
    text = (reference / "generated/switches/stor01/startup-config").read_text()
    assert f"username {audit.user} privilege 15 role network-operator nopassword\n" in text
    assert f"username {audit.user} ssh-key {audit.public_key}\n" in text
    assert "aaa authorization exec default local\n" in text
    # A user without a password logs in remotely only under this policy: never generated.
    assert "allow-nopassword-remote-login" not in text
    # No forced command on EOS: the command is not the hosts' account's to run.
    assert eos_running_config.PROBE not in access.forced_command(audit)


def test_the_collector_sends_the_command_itself_to_eos() -> None:
    assert probe_words(eos_running_config.PROBE) == ["show", "running-config"]
    assert probe_command(eos_running_config.PROBE, ["show", "running-config"], 30) == (
        "show running-config"
    )
    # A host's probe still goes to its forced command, told how long it has.
    assert probe_command("uname_r", probe_words("uname_r"), 30) == "--within 30 uname_r"


def test_an_eos_switch_is_asked_its_running_config_only(reference: Path) -> None:
    switches = expected.read(reference).switches
    assert sorted(switches) == _switches(reference) and switches
    for sw in switches.values():
        assert sw.eos and sw.intended is not None
        assert host_probes(sw) == (eos_running_config.PROBE,)
    applies = [c.name for c in SWITCH_CHECKS.values() if c.applies(switches["stor01"])]
    assert applies == ["running_config"]


def test_a_clean_replay_finds_every_eos_switch_ok(
    reference: Path, runs: list[tuple[Path, Any]]
) -> None:
    _, report = runs[0]
    entries = {h["host"]: h for h in report["hosts"]}
    for name in _switches(reference):
        assert entries[name]["status"] == "ok", entries[name]
        assert [(c["check"], c["outcome"]) for c in entries[name]["checks"]] == [
            ("running_config", "complies")
        ]
    assert report["findings"] == []


def test_a_hand_edited_running_config_is_named_line_by_line(
    runs: list[tuple[Path, Any]],
) -> None:
    _, report = runs[1]
    entries = {h["host"]: h for h in report["hosts"]}
    assert entries["stor01"]["status"] == "drift"
    assert [h for h, e in entries.items() if e["status"] != "ok"] == ["stor01"]
    [finding] = report["findings"]
    assert finding["check"] == "running_config" and finding["kind"] == "config"
    assert finding["expected"] == ["interface Ethernet3 / description gpu003 ens2f0 R01-ST03"]
    assert sorted(finding["observed"]) == sorted(
        [ADDED, "interface Ethernet3 / description spare, moved by hand"]
    )
    assert "- interface Ethernet3 / description gpu003 ens2f0 R01-ST03" in finding["message"]
    assert f"+ {ADDED}" in finding["message"]


def test_each_run_keeps_the_running_config_and_history_names_the_changed_lines(
    reference: Path, runs: list[tuple[Path, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    (first, _), (second, _) = runs
    kept = first / "snapshots" / "stor01" / "running-config"
    assert kept.is_file()
    text = kept.read_text()
    assert text.startswith("! Command: show running-config\n! device: stor01 (")
    startup = (reference / "generated/switches/stor01/startup-config").read_text()
    assert startup in text and text.endswith("end\n")
    taken = snapshot.read(first)
    assert set(taken) == set(_switches(reference)) | {"prov01"}
    assert set(taken["stor01"]) == {eos_config.RUNNING}
    # The recording holds what the switch printed, as the report folder does.
    recorded = first.parent / "recording/hosts/stor01/eos_running_config.txt"
    assert recorded.read_text() == text
    assert main(["audit", "history", str(first / "report.json"), str(second / "report.json")]) == 0
    section = capsys.readouterr().out.split("## Configuration changes between runs", 1)[1]
    assert "**stor01** `running-config`" in section
    assert f"-{PORT3.rstrip()}" in section and f"+{EDITED.rstrip()}" in section
    assert f"+{ADDED}" in section
    assert section.count("**") == 2  # one device, one snapshot


def test_the_history_masks_the_header_eos_rewrites() -> None:
    shown = (FIXTURES / "storage_leaf.txt").read_bytes()
    later = shown.replace(b"EOS-4.31.2F", b"EOS-4.32.1F")
    assert snapshot.changed({"running-config": shown}, {"running-config": later}) == {}


def test_the_plan_refuses_an_eos_switch_edited_by_hand(
    site: Path, runs: list[tuple[Path, Any]], tmp_path: Path
) -> None:
    (first, _), (second, _) = runs

    def plan(snapshots: Path, out: str) -> tuple[int, Any]:
        argv = ["-C", str(site), "plan", "base", "HEAD", "--snapshots", str(snapshots)]
        code = main([*argv, "--out", str(tmp_path / out)])
        return code, json.loads((tmp_path / out / "plan.json").read_text())

    code, ok = plan(first, "ok")
    assert code == 0
    devices = {d["device"]: d for s in ok["stages"] for d in s["devices"]}
    assert devices["stor01"]["kind"] == "switch eos"
    assert devices["stor01"]["precheck"]["status"] == "ok"
    assert devices["stor01"]["commands"]["remediation"]  # hier_config's, BASE to HEAD
    code, no = plan(second, "no")
    assert code == 1
    [refused] = no["refused"]
    assert refused["device"] == "stor01"
    assert refused["precheck"]["drift"] == [
        "running-config: - interface Ethernet3 / description gpu003 ens2f0 R01-ST03",
        f"running-config: + {ADDED}",
        "running-config: + interface Ethernet3 / description spare, moved by hand",
    ]
    assert "stor01" not in {d["device"] for s in no["stages"] for d in s["devices"]}


def test_what_eos_adds_and_hides_by_itself_is_no_difference() -> None:
    """The fixture is stor01 trimmed to three ports as EOS shows it (its own default lines,
    an unconfigured port bare, pyavd's explicit defaults gone); pyavd's rendering of the same
    structured config is no difference, and a line that is the switch's own is one."""
    import pyavd

    rendered = str(pyavd.get_device_config(_trimmed_stor01()))
    shown = (FIXTURES / "storage_leaf.txt").read_text()
    assert not eos_config.difference(shown, rendered)
    rogue = shown.replace(
        "!\nhostname", "username admin privilege 15 role network-admin\n!\nhostname"
    )
    assert eos_config.difference(rogue, rendered).lines() == [
        "+ username admin privilege 15 role network-admin"
    ]
    shut = shown.replace(
        "   description gpu002 ens2f0 R01-ST02\n",
        "   description gpu002 ens2f0 R01-ST02\n   shutdown\n",
    )
    assert eos_config.difference(shut, rendered).lines() == ["+ interface Ethernet2 / shutdown"]


def _trimmed_stor01() -> dict[str, Any]:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMkD0LRYwYL3yRGeueMOJgv++Palp7O9dNIJ5nt3pjM"

    def port(n: int, description: str, vlan: int | None = None) -> dict[str, Any]:
        p: dict[str, Any] = {
            "name": f"Ethernet{n}",
            "description": description,
            "shutdown": False,
            "mtu": 9216,
        }
        if vlan is None:
            return p | {"switchport": {"enabled": False}, "ipv6_enable": True}
        return p | {"switchport": {"enabled": True, "mode": "access", "access_vlan": vlan}}

    return {
        "hostname": "stor01",
        "service_routing_protocols_model": "multi-agent",
        "ip_routing": True,
        "ipv6_unicast_routing": True,
        "ip_routing_ipv6_interfaces": True,
        "vlans": [{"id": 70, "name": "vlan70"}],
        "ethernet_interfaces": [
            port(1, "gpu001 ens2f0 R01-ST01", 70),
            port(2, "gpu002 ens2f0 R01-ST02", 70),
            port(49, "stor-spine01 swp1 R01-SU01"),
        ],
        "vlan_interfaces": [
            {
                "name": "Vlan70",
                "description": "storage gateway of rack r01",
                "ip_address": "10.70.1.1/24",
                "mtu": 9216,
                "shutdown": False,
            }
        ],
        "vrfs": [{"name": "MGMT", "ip_routing": False}],
        "management_interfaces": [
            {
                "name": "Management1",
                "vrf": "MGMT",
                "ip_address": "10.60.1.240/24",
                "shutdown": False,
            }
        ],
        "static_routes": [{"vrf": "MGMT", "prefix": "0.0.0.0/0", "next_hop": "10.60.1.1"}],
        "router_bgp": {
            "as": "4200070001",
            "router_id": "10.60.1.240",
            "maximum_paths": {"paths": 64},
            "neighbor_interfaces": [
                {"name": "Ethernet49", "peer_group": "FABRIC", "remote_as": "4200070000"}
            ],
            "peer_groups": [{"name": "FABRIC", "send_community": "all"}],
            "address_family_ipv4": {
                "peer_groups": [
                    {
                        "name": "FABRIC",
                        "activate": True,
                        "next_hop": {"address_family_ipv6": {"enabled": True, "originate": True}},
                    }
                ],
                "networks": [{"prefix": "10.70.1.0/24"}],
            },
        },
        "local_users": [
            {
                "name": "clusterforge-audit",
                "privilege": 15,
                "role": "network-operator",
                "no_password": True,
                "ssh_key": f"{key} clusterforge-audit@dc1",
            }
        ],
        "aaa_authorization": {"exec": {"default": "local"}},
    }


_LINE = st.tuples(
    st.integers(0, 9), st.text(st.characters(exclude_characters="\n\r\x00"), max_size=20)
).map(lambda t: " " * t[0] + t[1])


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINE, max_size=20))
def test_the_running_config_check_is_total(
    reference_switch: EthernetSwitch, lines: list[str]
) -> None:
    """Whatever lines a switch printed that parsed, the check gives findings, never raises: a
    section given twice (which hier_config cannot hold) is a finding that it cannot compare."""
    sink = Sink("stor01", "running_config", Kind.FILE, date(2026, 5, 4))
    SWITCH_CHECKS["running_config"].run(reference_switch, {eos_running_config.PROBE: lines}, sink)
    for f in sink.findings:
        assert f["severity"] == "critical" and f["message"]


def test_a_section_printed_twice_cannot_be_compared(reference_switch: EthernetSwitch) -> None:
    lines = ["! Command: show running-config", "hostname a", "hostname a", "end"]
    sink = Sink("stor01", "running_config", Kind.FILE, date(2026, 5, 4))
    SWITCH_CHECKS["running_config"].run(reference_switch, {eos_running_config.PROBE: lines}, sink)
    [finding] = sink.findings
    assert "cannot compare: the running-config is no EOS config" in finding["message"]


@pytest.fixture(scope="module")
def reference_switch(reference: Path) -> EthernetSwitch:
    return expected.read(reference).switches["stor01"]


def test_the_collector_reads_the_running_config_over_ssh(
    reference: Path, reference_switch: EthernetSwitch, tmp_path: Path
) -> None:
    """A real sshd on loopback whose forced command stands in for EOS's CLI (the account's
    login shell there): it answers `show running-config` with the switch's config under
    EOS's header and refuses anything else, as a CLI does. The live collector sends exactly
    that command line, and the switch, judged from what it read, is ok."""
    fleet = Fleet.load(reference / "generated")
    config = tmp_path / "running-config"
    config.write_text(fleet.outputs("stor01")[eos_running_config.PROBE], encoding="utf-8")
    cli = tmp_path / "eos-cli.sh"
    cli.write_text(
        f'printf "%s\\n" "$SSH_ORIGINAL_COMMAND" >> {tmp_path / "commands.log"}\n'
        f'if [ "$SSH_ORIGINAL_COMMAND" = "show running-config" ]; then exec cat {config}; fi\n'
        'echo "% Invalid input" >&2\nexit 1\n',
        encoding="utf-8",
    )
    served = f"AuthorizedKeysFile {tmp_path / 'client_key.pub'}\nForceCommand /bin/sh {cli}\n"
    with loopback_sshd(tmp_path, served, host="stor01") as (port, known):
        options = SshOptions(tmp_path / "client_key", known, user=getpass.getuser(), timeout=30)
        collector = SshCollector({"stor01": Target("127.0.0.1", port)}, options, None)
        collected = collector.collect({"stor01": host_probes(reference_switch)}, []).hosts
    stor01 = collected["stor01"]
    assert stor01.unreachable is None and stor01.failed == {}, stor01
    assert stor01.outputs[eos_running_config.PROBE] == config.read_text(encoding="utf-8")
    assert (tmp_path / "commands.log").read_text() == "show running-config\n"
    judged = compare_host(reference_switch, stor01, datetime(2026, 5, 4, tzinfo=UTC))
    assert judged.entry["status"] == "ok" and judged.findings == []


def test_an_eos_cli_probe_has_no_program_and_a_snapshot_is_a_plain_name() -> None:
    with pytest.raises(ProbeError, match="no program"):
        Probe("show_x", ("show", "x"), "eos", "/usr/bin/show")
    with pytest.raises(ProbeError, match="no program"):
        Probe("show_x", ("show", "x"), "eos", "", root=True)
    with pytest.raises(ProbeError, match="absolute path"):
        Probe("uname", ("uname", "-r"), "host", "")
    for name in ("files", "../x", "Running", "a/b"):
        with pytest.raises(ProbeError, match="not a plain name"):
            Probe("show_x", ("show", "x"), "eos", "", snapshot=name)
    assert eos_running_config.SPEC.snapshot == eos_config.RUNNING
