"""Facts that hold on real hardware (issue 12): IPoIB MTU, boot mode, disk names, DNS serials,
spine cages, versions compared in full. Each test failed on the output before the fix."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compiler.load import Source, load
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.targets.shared import boot_nic
from tests.conftest import REPO, require_tool
from tests.test_provisioning import dhcpd_check, kea_check, parse_ks


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def _text(compiled: Compiled, path: str) -> str:
    return compiled.files[path].decode()


# --- IPoIB MTU (item 6) -----------------------------------------------------------------


def test_ipoib_runs_at_the_partition_mtu(compiled: Compiled) -> None:
    """The Default partition (where ib0 lives) sets IB MTU 4096 (mtu=5); ib0 runs 4092 in
    datagram mode, the same in the keyfile and the audit's contract."""
    partitions = _text(compiled, "opensm/partitions.conf")
    assert "Default=0x7fff, ipoib, mtu=5, defmember=full" in partitions
    for host in compiled.plan.hosts:
        for iface in host.interfaces:
            if iface.mac is not None:
                continue  # Ethernet
            assert iface.mtu == 4092, host.name
            keyfile = _text(compiled, f"routes/{host.name}/{iface.name}.nmconnection")
            assert "transport-mode=datagram\nmtu=4092\n" in keyfile
            contract = json.loads(compiled.files[f"expected/hosts/{host.name}.json"])
            assert {"name": iface.name, "mtu": 4092}.items() <= next(
                i for i in contract["interfaces"] if i["name"] == iface.name
            ).items()


def test_no_partition_claims_ipoib_without_an_interface(compiled: Compiled) -> None:
    lines = _text(compiled, "opensm/partitions.conf").splitlines()
    named = [line for line in lines if "=0x" in line and not line.startswith("Default=")]
    assert named, "the reference cluster has a named partition"
    assert not [line for line in named if "ipoib" in line]


# --- boot mode and disk names (items 2, 3) --------------------------------------------------


def _variant(edit: Callable[[dict[str, Any]], None]) -> Compiled:
    """The reference cluster with its data edited in place (locations stay those of the files)."""
    source = load(REPO / "cluster")
    data = copy.deepcopy(source.data)
    edit(data)
    return compile_source(Source(data, source.locations))


def _bios_services(data: dict[str, Any]) -> None:
    """svc-eth (prov01, mon01) boots BIOS; prov01 keeps its disks by WWN."""
    data["hardware"]["servers"]["svc-eth"]["boot"] = "bios"
    racks = list(data["racks"])
    for i, rack in enumerate(racks):
        if rack["name"] == "s01":
            nodes = [dict(n) for n in rack["nodes"]]
            nodes[0]["os_disks"] = (WWN_A, WWN_B)
            racks[i] = {**rack, "nodes": tuple(nodes)}
    data["racks"] = tuple(racks)


WWN_A = "/dev/disk/by-id/wwn-0x5002538e00000001"
WWN_B = "/dev/disk/by-id/wwn-0x5002538e00000002"


@pytest.fixture(scope="module")
def bios(compiled: Compiled) -> Compiled:
    return _variant(_bios_services)


def _boot_mac(compiled: Compiled, host: str) -> str:
    nic = boot_nic(compiled.plan, compiled.plan.host(host))
    assert nic is not None and nic.mac is not None
    return "01-" + nic.mac.replace(":", "-")


def test_uefi_hosts_get_only_the_uefi_loader(compiled: Compiled) -> None:
    """Every reference model boots UEFI: no PXELINUX menu, no BIOS boot file offered, an ESP
    on RAID1 and no biosboot in every kickstart."""
    assert {h.boot.value for h in compiled.plan.hosts} == {"uefi"}
    assert not [p for p in compiled.files if p.startswith("pxe/pxelinux.cfg/")]
    assert "pxelinux.0" not in _text(compiled, "dhcp/dhcpd.conf")
    assert "pxelinux.0" not in _text(compiled, "dhcp/kea-dhcp4.json")
    for path in compiled.files:
        if path.startswith("kickstart/"):
            ks = _text(compiled, path)
            assert "raid /boot/efi --level=RAID1" in ks and "biosboot" not in ks, path


def test_bios_hosts_get_pxelinux_and_biosboot(bios: Compiled) -> None:
    """A model that boots BIOS: its hosts get the PXELINUX menu alone (booting local unless
    marked for reinstall, the kernel by URL), PXELINUX's HTTP build in their own DHCP group and
    Kea class, and a biosboot partition on each mirrored disk. The provisioning host, of the
    same model, gets neither menu nor boot file: it installs from media or upstream."""
    mon01 = bios.plan.host("mon01")
    assert mon01.boot.value == "bios" and bios.plan.host("prov01").boot.value == "bios"
    mac = _boot_mac(bios, "mon01")
    assert f"pxe/pxelinux.cfg/{mac}" in bios.files and f"pxe/grub.cfg-{mac}" not in bios.files
    assert not [p for p in bios.files if p.endswith(_boot_mac(bios, "prov01"))]
    assert f"pxe/grub.cfg-{_boot_mac(bios, 'gpu001')}" in bios.files
    menu = _text(bios, f"pxe/pxelinux.cfg/{mac}")
    assert "\nDEFAULT local\n" in menu and "\nLABEL local\n  LOCALBOOT 0\n" in menu
    server = bios.plan.address("prov01", "mgmt")
    kernel = bios.plan.provisioning.boot_files.kernel
    assert f"\n  KERNEL http://{server}{kernel}\n" in menu
    isc = _text(bios, "dhcp/dhcpd.conf")
    bios_group = isc[isc.index('filename "lpxelinux.0"') :]
    bios_group = bios_group[: bios_group.index("\n}\n")]
    assert "host mon01 " in bios_group and "host gpu001 " not in bios_group
    assert "host prov01 " not in bios_group
    kea = json.loads(_text(bios, "dhcp/kea-dhcp4.json"))["Dhcp4"]
    reservations = {r["hostname"]: r for s in kea["subnet4"] for r in s["reservations"]}
    assert reservations["mon01"]["client-classes"] == ["bios"]
    assert "client-classes" not in reservations["prov01"]
    assert reservations["gpu001"]["client-classes"] == ["uefi"]
    assert "C /var/lib/tftpboot/lpxelinux.0 - - - - /tftpboot/lpxelinux.0\n" in _text(
        bios, "pxe/tftpboot.conf"
    )
    ks = _text(bios, "kickstart/prov01.ks")
    assert "/boot/efi" not in ks
    assert f"part biosboot --fstype=biosboot --size=1 --ondisk={WWN_A}\n" in ks
    assert f"part None --fstype=biosboot --size=1 --ondisk={WWN_B}\n" in ks


def test_disks_have_stable_names(compiled: Compiled, bios: Compiled) -> None:
    """Every disk a kickstart names is a udev by-path or by-id link, never a kernel name;
    a node's own disks (by WWN) replace its model's."""
    disk_args = re.compile(r"--(?:ondisk|boot-drive|drives|only-use)=(\S+)")
    for path in compiled.files:
        if path.startswith("kickstart/"):
            found = [d for m in disk_args.findall(_text(compiled, path)) for d in m.split(",")]
            assert found and all(
                d.startswith(("/dev/disk/by-path/", "/dev/disk/by-id/")) for d in found
            )
    assert bios.plan.host("prov01").os_disks == (WWN_A, WWN_B)
    assert f"--boot-drive={WWN_A}" in _text(bios, "kickstart/prov01.ks")
    assert WWN_A not in _text(bios, "kickstart/mon01.ks")


@pytest.mark.realtool
def test_grub_script_check_accepts_every_grub_menu(
    compiled: Compiled, bios: Compiled, tmp_path: Path
) -> None:
    check = require_tool("grub-script-check")
    menus = [p for p in compiled.files if p.startswith("pxe/grub.cfg-")]
    # Every host that installs from the provisioning host has one; that host has none.
    assert len(menus) == len([p for p in compiled.files if p.startswith("kickstart/")]) - 1
    for path in menus:
        (tmp_path / "grub.cfg").write_bytes(compiled.files[path])
        done = subprocess.run([check, str(tmp_path / "grub.cfg")], capture_output=True, timeout=30)
        assert done.returncode == 0, (path, done.stderr)
    (tmp_path / "broken.cfg").write_text("menuentry 'x' {\n  linuxefi /vmlinuz\n")  # no }
    done = subprocess.run([check, str(tmp_path / "broken.cfg")], capture_output=True, timeout=30)
    assert done.returncode != 0


@pytest.mark.realtool
def test_the_bios_variant_is_accepted_by_the_real_programs(bios: Compiled, tmp_path: Path) -> None:
    """dhcpd -t and kea-dhcp4 -t take both boot groups; pykickstart takes the BIOS layout."""
    assert dhcpd_check(_text(bios, "dhcp/dhcpd.conf"), tmp_path).returncode == 0
    assert kea_check(_text(bios, "dhcp/kea-dhcp4.json"), tmp_path).returncode == 0
    handler = parse_ks(_text(bios, "kickstart/prov01.ks"))
    assert {r.mountpoint for r in handler.raid.raidList} == {"/boot", "/"}
    biosboot = [p.disk for p in handler.partition.partitions if p.fstype == "biosboot"]
    assert biosboot == [WWN_A, WWN_B]


# --- spine cages (item 8) -------------------------------------------------------------------


def test_leaf_uplinks_land_on_cage_halves(compiled: Compiled) -> None:
    """QM9700 spines: 32 twin-port OSFP cages; leaf N lands on cage (N+1)//2, half 1 or 2,
    named so on the cable's end, its location and both labels."""
    uplinks = [
        c for c in compiled.plan.cables if c.network == "ipoib" and c.b.device.startswith("spine")
    ]
    assert uplinks
    labels = _text(compiled, "labels/labels.csv")
    for c in uplinks:
        port = int(c.b.port)
        cage, half = (port + 1) // 2, 2 - port % 2
        assert c.b.face == f"P{cage}/{half}", c.id
        assert c.b.location.endswith(f":P{cage}-{half}"), c.id
        assert f"{c.b.location}/{c.a.location}" in labels
        assert c.assembly == f"{c.b.device.upper()}-P{cage:02d}"


def test_bom_buys_split_cables_once(compiled: Compiled) -> None:
    """Two leaf uplinks per spine cage, one OSFP-to-2xQSFP56 cable: the BOM counts the cable,
    and no spine link is bought as a plain cable."""
    uplinks = [
        c for c in compiled.plan.cables if c.network == "ipoib" and c.b.device.startswith("spine")
    ]
    rows = list(csv.DictReader(io.StringIO(_text(compiled, "fabric/bom.csv"))))
    split = sum(int(r["count"]) for r in rows if r["medium"].endswith("OSFP-2xQSFP56"))
    assert split == len({c.assembly for c in uplinks})
    assert {r["rate"] for r in rows if "OSFP" in r["medium"]} == {"2x4xHDR"}
    plain = sum(int(r["count"]) for r in rows if "OSFP" not in r["medium"])
    assert plain == len(compiled.plan.cables) - len(uplinks)


def test_split_port_configuration_is_an_artifact(compiled: Compiled) -> None:
    rows = list(csv.DictReader(io.StringIO(_text(compiled, "fabric/split-ports.csv"))))
    spines = {s.name for s in compiled.plan.switches if s.role.value == "spine"}
    assert {r["switch"] for r in rows} == spines
    first = next(r for r in rows if r["switch"] == "spine01" and r["port"] == "2")
    assert (first["cage"], first["half"], first["face"], first["lanes"]) == ("1", "2", "P1/2", "4x")
    assert first["peer"] == "leaf02" and first["assembly"] == "SPINE01-P01"
