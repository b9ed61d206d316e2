"""Snapshots: each run keeps the snapshotted devices' files as they hold them, `audit history`
names the line that changed between two runs, and `clusterforge plan --snapshots` refuses a
device whose snapshot is not what BASE generated.

The runs replay the lab twin's recordings of the compiled reference (the provisioning host's
DHCP, TFTP and DNS files are snapshotted: services.yaml `snapshot`); the plan compiles two
commits of a scratch repository holding this checkout's cluster/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from contract import snapshot
from tests.conftest import git

DHCPD = "/etc/dhcp/dhcpd.conf"
ROGUE = "host rogue { hardware ethernet 02:00:00:00:00:99; fixed-address 10.60.2.250; }"
FRR = "/etc/frr/frr.conf"
FIX = " neighbor swp52 interface remote-as external"  # an emergency fix, made by hand
# A session set live in vtysh on stor02 and never written to its frr.conf.
LIVE = "router bgp 4200070002 > neighbor swp51 interface remote-as external"


@pytest.fixture(scope="module")
def site(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site's repository as CI keeps it: `base`, cluster/ and its compiled generated/
    committed; then `HEAD`, another time source (prov01's chrony.conf changes) and a bad
    port of stor01 (its server's cable moves: stor01's interfaces changes), compiled."""
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(repo / "cluster", root / "cluster")
    git(root, "init", "-q", "-b", "main")
    for message in ("base", "another time source"):
        if message != "base":
            site = root / "cluster" / "site.yaml"
            site.write_text(
                site.read_text().replace("ntp2.dc1.example.net", "ntp3.dc1.example.net")
            )
            yaml = YAML()
            fabric = yaml.load((root / "cluster" / "fabric.yaml").read_text())
            fabric["cables"] = [{"device": "stor01", "port": 3, "use_port": 30, "note": "bad"}]
            with (root / "cluster" / "fabric.yaml").open("w") as f:
                yaml.dump(fabric, f)
        assert main(["-C", str(root), "compile"]) == 0
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", message)
        if message == "base":
            git(root, "tag", "base")
            shutil.copytree(root / "generated", root.parent / "base-generated" / "generated")
    return root


@pytest.fixture(scope="module")
def reference(site: Path) -> Path:
    """What the devices run: `base`'s committed generated/ (-C for the audit)."""
    return site.parent / "base-generated"


def _run(reference: Path, fleet: Fleet, folder: Path) -> Path:
    recording = fleet.record(folder / "recording")
    code = main(
        ["-C", str(reference), "audit", "--replay", str(recording), "--out", str(folder / "report")]
    )
    assert code in (0, 1)
    return folder / "report"


@pytest.fixture(scope="module")
def runs(reference: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs: as planned, then with a host line added to prov01's dhcpd.conf and a BGP
    neighbour to stor01's frr.conf, by hand, and one set live in stor02's FRR."""
    tmp = tmp_path_factory.mktemp("runs")
    fleet = Fleet.load(reference / "generated")
    first = _run(reference, fleet, tmp / "first")
    fleet.edit_file("prov01", DHCPD, ROGUE)
    fleet.edit_file("stor01", FRR, FIX)
    fleet.frr_live("stor02", LIVE)
    second = _run(reference, fleet, tmp / "second")
    return first, second


def test_a_run_keeps_the_snapshotted_files_as_the_device_holds_them(
    reference: Path, runs: tuple[Path, Path]
) -> None:
    first, second = runs
    deploy = json.loads((reference / "generated" / "deploy" / "prov01.json").read_text())
    kept = {f["path"]: f["source"] for f in deploy["files"] if f.get("snapshot")}
    assert DHCPD in kept and "/etc/named.conf" in kept
    # Only what the deploy map marks: no kickstart (it holds the root hash), no GPU host.
    assert not any(p.startswith("/var/www/html/ks/") for p in kept)
    taken = snapshot.read(first)
    # The provisioning host and every audited (Cumulus) switch; no GPU host.
    switches = {p.stem for p in (reference / "generated" / "expected" / "switches").glob("*.json")}
    assert set(taken) == {"prov01"} | switches
    assert (
        taken["stor01"][FRR]
        == (reference / "generated/switches/stor01/etc/frr/frr.conf").read_bytes()
    )
    assert {p: taken["prov01"][p] for p in kept} == {
        p: (reference / "generated" / s).read_bytes() for p, s in kept.items()
    }
    assert (first / "snapshots" / "prov01" / "files" / "etc" / "dhcp" / "dhcpd.conf").is_file()
    assert "snapshots" not in json.loads((first / "report.json").read_text())
    assert snapshot.read(second)["prov01"][DHCPD].endswith(f"{ROGUE}\n".encode())
    # The hand-edited frr.conf is file drift of the switch too.
    report = json.loads((second / "report.json").read_text())
    drift = [(f["host"], f["check"], f["path"]) for f in report["findings"]]
    assert ("stor01", "files", f"files[{FRR}]") in drift


def test_history_names_the_changed_line_of_the_device(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = runs
    assert main(["audit", "history", str(first / "report.json"), str(second / "report.json")]) == 0
    out = capsys.readouterr().out
    section = out.split("## Configuration changes between runs", 1)[1]
    assert "**prov01** `/etc/dhcp/dhcpd.conf`" in section
    assert f"+{ROGUE}" in section
    assert "**stor01** `/etc/frr/frr.conf`" in section and f"+{FIX}" in section
    # FRR's running configuration, kept as its own text: the live line, as FRR prints it.
    assert f"**stor02** `{snapshot.RUNNING}`" in section
    assert "+ neighbor swp51 interface remote-as external" in section
    assert section.count("**") == 6  # three devices, one text each, and nothing else


def test_a_run_keeps_each_switch_running_config_and_a_live_change_is_drift(
    reference: Path, runs: tuple[Path, Path]
) -> None:
    """Every routed switch's `show running-config` kept whole beside its files; a line set
    live in FRR and not in frr.conf is the one running_config finding, named by that line."""
    first, second = runs
    kept = first / "snapshots" / "stor02" / snapshot.RUNNING
    assert kept.read_text().startswith("Building configuration...\n")
    assert snapshot.read(first)["stor02"][snapshot.RUNNING] == kept.read_bytes()
    assert "neighbor swp51" in snapshot.read(second)["stor02"][snapshot.RUNNING].decode()
    first_report = json.loads((first / "report.json").read_text())
    assert first_report["findings"] == []
    report = json.loads((second / "report.json").read_text())
    live = [f for f in report["findings"] if f["check"] == "running_config"]
    assert [(f["host"], f["kind"], f["path"], f["observed"]) for f in live] == [
        ("stor02", "config", f"running-config[{LIVE}]", LIVE)
    ]
    assert live[0]["message"] == (
        f"FRR runs `{LIVE}`, which frr.conf does not hold: set live, not in the file"
    )


def test_the_plan_refuses_a_device_whose_snapshot_drifted_and_names_the_line(
    site: Path, runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = runs

    def run_plan(snapshots: Path, out: str) -> int:
        argv = ["-C", str(site), "plan", "base", "HEAD", "--snapshots", str(snapshots)]
        return main([*argv, "--out", str(tmp_path / out)])

    # As the last run saw them, prov01 and stor01 are BASE's.
    ok = run_plan(first, "ok")
    assert ok == 0
    plan = json.loads((tmp_path / "ok" / "plan.json").read_text())
    checked = {d["device"]: d["precheck"]["status"] for s in plan["stages"] for d in s["devices"]}
    assert checked["prov01"] == checked["stor01"] == "ok"
    # Edited by hand since: refused (exit 1), the line named, and not in the playbook.
    capsys.readouterr()
    refused = run_plan(second, "no")
    assert refused == 1
    plan = json.loads((tmp_path / "no" / "plan.json").read_text())
    refused_by = {d["device"]: d["precheck"]["drift"] for d in plan["refused"]}
    # The switch's part of the change (its moved port) waits: its frr.conf was fixed by hand.
    assert refused_by == {"prov01": [f"{DHCPD}: +{ROGUE}"], "stor01": [f"{FRR}: +{FIX}"]}
    said = capsys.readouterr().out
    assert ROGUE in said and FIX in said
    inventory = (tmp_path / "no" / "inventory.yml").read_text()
    assert "prov01" not in inventory and "stor01:" not in inventory


def test_a_base_this_clusterforge_no_longer_compiles_is_planned_from_its_committed_files(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """BASE as a commit from before an upgrade: its cluster/ gives a newer target's files no
    home (here: the LLDP file's home taken out), but its committed generated/ is what runs."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(site), str(clone)], check=True)
    git(clone, "checkout", "-q", "-b", "old", "base")
    services = clone / "cluster" / "services.yaml"
    lines = services.read_text().splitlines(keepends=True)
    [home] = [line for line in lines if '"switches/{host}/etc/lldpd.d/clusterforge.conf"' in line]
    services.write_text("".join(line for line in lines if line != home))
    git(clone, "commit", "-q", "-am", "old: before the switches' LLDP file had a home")
    capsys.readouterr()
    code = main(["-C", str(clone), "plan", "old", "origin/main", "--out", str(tmp_path / "p")])
    assert code == 0
    err = capsys.readouterr().err
    assert "BASE old: does not compile with this clusterforge" in err
    assert "committed generated/ is used" in err and "homeless-file" not in err
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    changed = {
        d["device"]: [f["path"] for f in d["files"]] for s in plan["stages"] for d in s["devices"]
    }
    assert changed["stor01"] == ["/etc/network/interfaces"]
    assert "/etc/chrony.conf" in changed["prov01"]


@pytest.mark.realtool
def test_in_the_lab_a_switch_edited_by_hand_is_drift_and_blocks_its_part_of_the_plan(
    site: Path, reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SSH lab plays the switches as it plays hosts (their forced command, over sshd):
    stor01's frr.conf edited on the switch is file drift, the run keeps the edited file, and
    the plan from it refuses stor01, naming the line."""
    from tests.test_lab import staged_audit

    faults = f"- fault: file-changed\n  hosts: stor01\n  path: {FRR}\n"
    report = staged_audit(reference, tmp_path, capsys, faults, "gpu001,stor01")
    drift = {(f["host"], f["path"]) for f in report["findings"]}
    assert drift == {("stor01", f"files[{FRR}]")}
    assert {h["host"] for h in report["hosts"]} == {"gpu001", "stor01", "sm01", "sm02"}
    assert snapshot.read(tmp_path / "report")["stor01"][FRR].endswith(b"# edited by hand\n")
    capsys.readouterr()
    argv = ["-C", str(site), "plan", "base", "HEAD", "--snapshots", str(tmp_path / "report")]
    assert main([*argv, "--out", str(tmp_path / "plan")]) == 1
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert {d["device"]: d["precheck"]["drift"] for d in plan["refused"]} == {
        "stor01": [f"{FRR}: +# edited by hand"]
    }
