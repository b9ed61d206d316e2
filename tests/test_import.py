"""`clusterforge import --csv`: real serials, MACs and GUIDs into the rack files, as round-trip
edits (comments, order, flow style and quotes kept), every conflict reported, none guessed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusterforge.cli import main
from compiler import pipeline
from tests.conftest import REPO

R03 = "cluster/racks/r03.yaml"
# gpu011 at U2 of r03 and gpu012 at U6, as the reference cluster plans them.
SHEET = """\
Rack,U,Serial,MAC eno1,ens2f0 MAC,BMC MAC,GUID
r03,2,s420gp99a00001,3C-EC-EF-00-00-01,0c42.a100.0001,3cecef000002,0c42:a1ff:fe00:0001
r03,7,S420GP99A00002,,,,
"""


def _site(tmp: Path) -> Path:
    shutil.copytree(REPO / "cluster", tmp / "cluster")
    return tmp


def _run(repo: Path, sheet: str, *more: str) -> int:
    (repo / "sheet.csv").write_text(sheet)
    return main(["-C", str(repo), "import", "--csv", str(repo / "sheet.csv"), *more])


def test_a_sheet_sets_just_its_values_and_keeps_the_file_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _site(tmp_path)
    before = (repo / R03).read_text().splitlines()
    assert _run(repo, SHEET) == 0
    out = capsys.readouterr().out
    assert (
        f"{R03}: gpu011 mac.eno1: 3c:ec:ef:43:33:87 -> 3c:ec:ef:00:00:01 (from sheet.csv:2)" in out
    )
    assert f"{R03}: gpu012 serial: S420GP24A18549 -> S420GP99A00002 (from sheet.csv:3)" in out
    after = (repo / R03).read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 4  # gpu011: serial, its MACs (one line), GUID; gpu012: serial
    assert all(a.split(":")[0] == b.split(":")[0] for a, b in changed), "keys and layout stay"
    assert after[0].startswith("#"), "comments stay"
    assert (
        '    mac: {eno1: "3c:ec:ef:00:00:01", ens2f0: "0c:42:a1:00:00:01", '
        'bmc: "3c:ec:ef:00:00:02"}' in after
    )
    assert '    guid: "0x0c42a1fffe000001"' in after
    # Every other rack file is untouched, byte for byte, and the result compiles.
    for path in (REPO / "cluster" / "racks").glob("*.yaml"):
        if path.name != "r03.yaml":
            assert (repo / "cluster" / "racks" / path.name).read_bytes() == path.read_bytes()
    compiled = pipeline.compile_repo(repo)
    assert b"3c:ec:ef:00:00:01" in compiled.files["dhcp/dhcpd.conf"]


def test_conflicts_are_reported_and_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _site(tmp_path)
    before = (repo / "cluster").joinpath("racks", "r03.yaml").read_bytes()
    sheet = (
        "rack,u,eno1,serial,ib0\n"
        "r03,2,3c:ec:ef:20:95:a1,,\n"  # gpu012's MAC, given to gpu011
        "r03,30,,S420GP99A00003,\n"  # nothing planned there
        "r03,6,3c:ec:ef:43:33,,\n"  # no MAC
        "r03,10,,S420GP99A00004,\n"
        "r03,11,,S420GP99A00005,\n"  # gpu013 again (U10-U13), with another serial
        "r03,14,,,0c:42:a1:00:00:09\n"  # IPoIB has no MAC of its own
    )
    assert _run(repo, sheet) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "sheet.csv:2: conflict: gpu011 mac.eno1: 3c:ec:ef:20:95:a1 would also be gpu012 mac.eno1's",
        "sheet.csv:3: conflict: no device planned at rack 'r03' U30",
        "sheet.csv:4: conflict: '3c:ec:ef:43:33' is not a MAC address (like 3c:ec:ef:43:33:87)",
        "sheet.csv:5: conflict: gpu013 serial: S420GP99A00004 vs S420GP99A00005 "
        "(sheet.csv:5, sheet.csv:6)",
        "sheet.csv:7: conflict: gpu014 has no port 'ib0' (its ports: eno1, ens2f0, bmc)",
    ]
    assert (repo / "cluster" / "racks" / "r03.yaml").read_bytes() == before


def test_dry_run_changes_nothing_and_a_sheet_without_places_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _site(tmp_path)
    before = (repo / R03).read_bytes()
    assert _run(repo, SHEET, "--dry-run") == 0
    assert "6 value(s) would change; 0 conflict(s)" in capsys.readouterr().out
    assert (repo / R03).read_bytes() == before
    assert _run(repo, "serial,eno1\nX,Y\n") == 2
    assert "needs a 'rack' and a 'u' column" in capsys.readouterr().err


def test_a_replaced_hca_seen_by_the_audit_becomes_a_one_line_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _site(tmp_path)
    report = tmp_path / "audit-report"
    report.mkdir()
    findings = [
        {"host": "gpu011", "kind": "ib-port", "path": "ib_ports[mlx5_0/1].port_guid",
         "expected": "0x0c42a103005ef939", "observed": "0x0c42a10300aaaaaa"},
        {"host": "gpu011", "kind": "firmware", "path": "versions.bios",
         "expected": "2.6", "observed": "2.5"},  # a fault to fix on the box, not a new part
    ]  # fmt: skip
    (report / "report.json").write_text(json.dumps({"findings": findings}))
    before = (repo / R03).read_text().splitlines()
    assert main(["-C", str(repo), "import", "--audit", str(report)]) == 0
    assert "gpu011 guid: 0x0c42a103005ef939 -> 0x0c42a10300aaaaaa" in capsys.readouterr().out
    after = (repo / R03).read_text().splitlines()
    assert [(a, b) for a, b in zip(before, after, strict=True) if a != b] == [
        ('    guid: "0x0c42a103005ef939"', '    guid: "0x0c42a10300aaaaaa"')
    ]


def test_a_fabric_scan_names_the_guids_at_planned_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterforge.lab.fleet import Fleet

    repo = _site(tmp_path)
    scan = Fleet.load(REPO / "generated").record(tmp_path / "recording") / "fabric"
    rack = repo / R03
    text = rack.read_text()
    for real in ('"0xb8cef603006dbcca"', '"0x0c42a103005ef939"'):  # leaf03, gpu011's HCA
        assert real in text
        text = text.replace(
            real, '"0x02000000000000ff"' if "b8" in real else '"0x0200000000000011"'
        )
    rack.write_text(text)  # as typed before the hardware came: placeholders
    assert (
        main(["-C", str(repo), "import", "--ibnetdiscover", str(scan / "ibnetdiscover.txt")]) == 0
    )
    out = capsys.readouterr().out
    assert "leaf03 guid: 0x02000000000000ff -> 0xb8cef603006dbcca" in out
    assert "gpu011 guid: 0x0200000000000011 -> 0x0c42a103005ef939" in out
    assert rack.read_bytes() == (REPO / R03).read_bytes()


def test_a_fabric_scan_names_each_hca_of_an_eight_rail_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a rail-optimised fabric every HCA of a server is cabled to its own rail's leaf; the
    scan gives each its GUID, filed under its device in `guids`, never as the host's one."""
    from clusterforge.lab.fleet import Fleet

    example = REPO / "examples" / "rails"
    shutil.copytree(example / "cluster", tmp_path / "cluster")
    scan = Fleet.load(example / "generated").record(tmp_path / "recording") / "fabric"
    rack = tmp_path / "cluster" / "racks" / "r001.yaml"
    real = ('"0xa088c2030000020b"', '"0xa088c2030000020f"')  # gpu001's mlx5_3 and mlx5_7
    text = rack.read_text()
    for n, guid in enumerate(real):
        assert guid in text
        text = text.replace(guid, f'"0x020000000000000{n}"')
    rack.write_text(text)
    ibnetdiscover = str(scan / "ibnetdiscover.txt")
    assert main(["-C", str(tmp_path), "import", "--ibnetdiscover", ibnetdiscover]) == 0
    out = capsys.readouterr().out
    assert "gpu001 guids.mlx5_3: 0x0200000000000000 -> 0xa088c2030000020b" in out
    assert "gpu001 guids.mlx5_7: 0x0200000000000001 -> 0xa088c2030000020f" in out
    assert rack.read_bytes() == (example / "cluster" / "racks" / "r001.yaml").read_bytes()


def test_a_miswired_hca_is_a_conflict_not_a_swap_of_identities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterforge.lab.fleet import Fleet

    repo = _site(tmp_path)
    fleet = Fleet.load(REPO / "generated")
    cable_of = {c["b"]["name"]: cable for cable, c in fleet.cables.items()}
    fleet.swap_far_ends(cable_of["gpu011"], cable_of["gpu012"])
    scan = fleet.record(tmp_path / "recording") / "fabric" / "ibnetdiscover.txt"
    before = (repo / R03).read_bytes()
    assert main(["-C", str(repo), "import", "--ibnetdiscover", str(scan)]) == 2
    err = capsys.readouterr().err
    assert "gpu012's HCA is where gpu011's is planned (a miswire?)" in err
    assert "gpu011's HCA is where gpu012's is planned (a miswire?)" in err
    assert (repo / R03).read_bytes() == before


def test_the_leases_of_a_running_dhcp_server_give_the_macs_by_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _site(tmp_path)
    leases = tmp_path / "dhcpd.leases"
    leases.write_text(
        "# The format of this file is documented in the dhcpd.leases(5) manual page.\n"
        "lease 10.60.6.11 {\n  starts 1 2026/05/04 06:00:00;\n  binding state active;\n"
        "  hardware ethernet 3c:ec:ef:00:00:0a;\n}\n"
        "lease 10.60.5.11 {\n  binding state free;\n  hardware ethernet 3c:ec:ef:00:00:0b;\n}\n"
        "lease 10.60.6.11 {\n  binding state active;\n  hardware ethernet 3C:EC:EF:00:00:0C;\n}\n"
        "lease 10.99.0.1 {\n  binding state active;\n  hardware ethernet 3c:ec:ef:00:00:0d;\n}\n"
    )
    assert main(["-C", str(repo), "import", "--leases", str(leases)]) == 0
    out = capsys.readouterr().out
    # The last active lease of gpu011's mgmt address; a free lease and a stranger say nothing.
    assert out.splitlines() == [
        f"{R03}: gpu011 mac.eno1: 3c:ec:ef:43:33:87 -> 3c:ec:ef:00:00:0c (from dhcpd.leases:11)",
        "1 value(s) changed in 1 rack file(s); 0 conflict(s) left as they were; now run "
        "`clusterforge compile`",
    ]
