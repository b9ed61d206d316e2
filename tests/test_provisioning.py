"""Provisioning targets: DHCP (ISC and Kea), PXE boot menus, kickstarts, and the root hash.

Oracles: `dhcpd -t`, `kea-dhcp4 -t` (in a private network namespace that has the interface
it must listen on) and pykickstart's RHEL 8 grammar with warnings as errors. Each one is
also shown a broken file, so its acceptance means something. Both DHCP servers then run for
real between two network namespaces and answer a relayed DISCOVER per client architecture:
the planned address, and a boot file for the PXE NIC alone. The property that ties the
three files together: every PXE MAC has exactly one reservation, the same in both DHCP
files, and the kickstart gives that NIC the same address.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from pykickstart.base import BaseHandler
from pykickstart.errors import KickstartError
from pykickstart.parser import KickstartParser
from pykickstart.version import RHEL8, makeVersion

from clusterforge.cli import main
from common.errors import SourceError
from compiler import bundle
from compiler.load import Source, load
from compiler.pipeline import MANIFEST, Compiled, compile_source
from compiler.targets.kickstart import PLACEHOLDER_ROOT_HASH
from compiler.targets.shared import boot_nic
from tests.conftest import REPO, require_tool

ISC_HOST = re.compile(r"host (\S+) \{ hardware ethernet ([0-9a-f:]+); fixed-address ([0-9.]+);")
# crypt(3) hashes: $id$[params$]salt$hash; a hash part of 20+ characters tells them from "$1$2".
CRYPT = re.compile(r"\$(?:1|5|6|y|2[aby])\$(?:[^$\s]+\$)+[./0-9A-Za-z]{20,}")
# Built at run time so that this file holds no hash itself.
TEST_HASH = "$6$" + "cftestsalt$" + "A1b2C3d4" * 10


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_source(load(REPO / "cluster"))


def text(compiled: Compiled, path: str) -> str:
    return compiled.files[path].decode()


def kickstarts(compiled: Compiled) -> dict[str, str]:
    return {
        p.removeprefix("kickstart/").removesuffix(".ks"): data.decode()
        for p, data in compiled.files.items()
        if p.startswith("kickstart/")
    }


@functools.cache
def _rhel8() -> BaseHandler:
    return makeVersion(RHEL8)


@functools.cache  # many tests read the same 132 files; nothing changes a parsed handler
def parse_ks(ks: str) -> BaseHandler:
    """pykickstart's RHEL 8 parser; a deprecation warning fails like an error."""
    handler = copy.deepcopy(_rhel8())  # ten times faster than makeVersion
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KickstartParser(handler).readKickstartFromString(ks)
    return handler


def copy_repo(tmp: Path, edits: dict[str, tuple[str, str]] | None = None) -> Path:
    """A copy of cluster/ under `tmp` with each file's first `find` replaced."""
    shutil.copytree(REPO / "cluster", tmp / "cluster")
    for name, (find, replace) in (edits or {}).items():
        path = tmp / "cluster" / name
        content = path.read_text()
        assert find in content, f"{find!r} not in {name}"
        path.write_text(content.replace(find, replace, 1))
    return tmp


def changed_line(repo: Path, name: str) -> int:
    """The first line of `name` that the copy in `repo` changed: where the error must point."""
    before = (REPO / "cluster" / name).read_text().splitlines()
    after = (repo / "cluster" / name).read_text().splitlines()
    return next(i for i, (a, b) in enumerate(zip(before, after, strict=False), 1) if a != b)


# --- ISC dhcpd --------------------------------------------------------------------------


def dhcpd_check(conf: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    dhcpd = require_tool("dhcpd")
    (tmp / "dhcpd.conf").write_text(conf)
    (tmp / "dhcpd.leases").write_text("")
    files = ["-cf", tmp / "dhcpd.conf", "-lf", tmp / "dhcpd.leases", "-pf", tmp / "pid"]
    return subprocess.run(
        [dhcpd, "-4", "-t", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.realtool
def test_dhcpd_accepts_the_config(compiled: Compiled, tmp_path: Path) -> None:
    run = dhcpd_check(text(compiled, "dhcp/dhcpd.conf"), tmp_path)
    assert run.returncode == 0, run.stderr
    assert not re.search(r"warning|error", run.stdout + run.stderr, re.I), run.stderr


@pytest.mark.realtool
def test_dhcpd_rejects_a_broken_config(compiled: Compiled, tmp_path: Path) -> None:
    conf = text(compiled, "dhcp/dhcpd.conf").replace("fixed-address 10.60.2.11;", "fixed-address")
    run = dhcpd_check(conf, tmp_path)
    assert run.returncode != 0
    assert "semicolon expected" in run.stderr


# --- Kea ------------------------------------------------------------------------------------


def kea_check(config: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`kea-dhcp4 -t` in a network namespace of its own, with the interface it listens on."""
    kea, unshare, ip = require_tool("kea-dhcp4"), require_tool("unshare"), require_tool("ip")
    path = tmp / "kea-dhcp4.json"
    path.write_text(config)
    (iface,) = json.loads(config)["Dhcp4"]["interfaces-config"]["interfaces"]
    script = '"$1" link add "$2" type veth peer name cfpeer0 && exec "$3" -t "$4"'
    return subprocess.run(
        [unshare, "--net", "sh", "-c", script, "sh", ip, iface, kea, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KEA_LOCKFILE_DIR": str(tmp), "KEA_PIDFILE_DIR": str(tmp), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.realtool
def test_kea_accepts_the_config(compiled: Compiled, tmp_path: Path) -> None:
    run = kea_check(text(compiled, "dhcp/kea-dhcp4.json"), tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not re.search(r" (WARN|ERROR|FATAL) ", run.stdout + run.stderr), run.stdout


@pytest.mark.realtool
def test_kea_rejects_a_duplicate_mac(compiled: Compiled, tmp_path: Path) -> None:
    config = json.loads(text(compiled, "dhcp/kea-dhcp4.json"))
    subnet = next(s for s in config["Dhcp4"]["subnet4"] if len(s["reservations"]) >= 2)
    first, second = subnet["reservations"][:2]
    second["hw-address"] = first["hw-address"]
    run = kea_check(json.dumps(config), tmp_path)
    assert run.returncode == 1
    assert first["hw-address"] in run.stdout + run.stderr


# --- both servers answer a relayed PXE client as planned --------------------------------------

# A relay agent's DHCPDISCOVER for `mac`, with client architecture `arch` (option 93) unless
# "none"; prints the offer's yiaddr, siaddr and boot file as JSON, or null when none comes.
DISCOVER = r"""
import json, socket, struct, sys
relay, server, mac, arch, wait = sys.argv[1:]
chaddr = bytes.fromhex(mac.replace(":", "")).ljust(16, b"\0")
head = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 1, 0x1234, 0, 0, bytes(4),
                   bytes(4), bytes(4), socket.inet_aton(relay), chaddr, bytes(64), bytes(128))
options = bytes([99, 130, 83, 99, 53, 1, 1])
if arch != "none":
    options += bytes([93, 2]) + int(arch).to_bytes(2, "big")
options += bytes([55, 4, 1, 3, 6, 67, 255])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind((relay, 67))
sock.settimeout(0.5)
for _ in range(int(float(wait) / 0.5)):
    sock.sendto(head + options, (server, 67))
    try:
        data = sock.recv(4096)
    except TimeoutError:
        continue
    file = data[108:236].rstrip(b"\0").decode()
    print(json.dumps([socket.inet_ntoa(data[16:20]), socket.inet_ntoa(data[20:24]), file]))
    break
else:
    print("null")
"""


@contextlib.contextmanager
def relay_lab(iface: str, server: str, router: str, relays: list[str]) -> Iterator[list[list[str]]]:
    """Two network namespaces joined by a veth pair: the DHCP server's, with `iface` at
    `server` (a.b.c.d/len), and a relay agent's, with `router` (the server's gateway) and the
    `relays` gateway addresses. Yields the command prefixes that run a program in each."""
    ip = require_tool("ip")
    names = [f"cf{role}{os.getpid()}x{secrets.token_hex(3)}" for role in ("srv", "rly")]
    try:
        for name in names:
            subprocess.run([ip, "netns", "add", name], check=True, timeout=30)
        srv, rly = ([ip, "-n", name] for name in names)
        prefix = server.split("/")[1]
        veth = [ip, "link", "add", iface, "netns", names[0], "type", "veth"]
        veth += ["peer", "name", "rly0", "netns", names[1]]
        steps = [
            veth,
            [*srv, "link", "set", iface, "up"],
            [*rly, "link", "set", "rly0", "up"],
            [*srv, "addr", "add", server, "dev", iface],
            [*rly, "addr", "add", f"{router}/{prefix}", "dev", "rly0"],
            *([*rly, "addr", "add", f"{a}/32", "dev", "rly0"] for a in relays),
            *([*srv, "route", "add", a, "via", router] for a in relays),
        ]
        for step in steps:
            subprocess.run(step, check=True, timeout=30)
        yield [[ip, "netns", "exec", name] for name in names]
    finally:
        for name in names:
            subprocess.run([ip, "netns", "del", name], timeout=30, capture_output=True)


@pytest.mark.realtool
@pytest.mark.parametrize("server_kind", ["isc", "kea"])
def test_both_servers_offer_the_planned_address_and_boot_file(
    compiled: Compiled, tmp_path: Path, server_kind: str
) -> None:
    plan, prov = compiled.plan, compiled.plan.provisioning
    host = plan.host("gpu001")
    nic, bmc = boot_nic(plan, host), host.bmc
    leaf = next(s for s in plan.switches if s.rack == host.rack)
    served = plan.host(plan.site.services.provisioning).interface(prov.pxe_network)
    assert nic and nic.mac and nic.gateway and bmc.mac and bmc.gateway and leaf.address
    assert served and served.gateway
    if server_kind == "isc":
        # The chosen server runs from the provisioning host's bundle, at its installed path.
        overlay = tmp_path / "bundle" / plan.site.services.provisioning
        bundle.write(tmp_path / "bundle", bundle.bundles(compiled, [overlay.name]))
        (tmp_path / "dhcpd.leases").write_text("")
        files = ["-cf", overlay / "etc/dhcp/dhcpd.conf", "-lf", tmp_path / "dhcpd.leases"]
        files += ["-pf", tmp_path / "pid"]
        command = [require_tool("dhcpd"), "-4", "-f", *map(str, files), served.name]
    else:
        config = json.loads(text(compiled, "dhcp/kea-dhcp4.json"))
        config["Dhcp4"]["lease-database"] = {"type": "memfile", "persist": False}  # not /var/lib
        (tmp_path / "kea.json").write_text(json.dumps(config))
        command = [require_tool("kea-dhcp4"), "-c", str(tmp_path / "kea.json")]
    cases: list[tuple[str, str, str, list[str | None] | None]] = [
        (nic.gateway, nic.mac, "7", [nic.address, served.address, prov.boot_files.uefi]),
        (nic.gateway, nic.mac, "9", [nic.address, served.address, prov.boot_files.uefi]),
        # gpu001's model boots UEFI: asked in BIOS mode, its firmware gets no loader.
        (nic.gateway, nic.mac, "0", [nic.address, None, ""]),
        (nic.gateway, nic.mac, "none", [nic.address, None, ""]),
        (bmc.gateway, bmc.mac, "7", [bmc.address, None, ""]),
        (bmc.gateway, leaf.mac, "7", [leaf.address, None, ""]),
        (nic.gateway, "02:00:00:00:00:01", "7", None),  # unknown: no pool, no offer
    ]
    (tmp_path / "discover.py").write_text(DISCOVER)
    env = {
        "PATH": "/usr/bin:/bin",
        "KEA_LOCKFILE_DIR": str(tmp_path),
        "KEA_PIDFILE_DIR": str(tmp_path),
    }
    with relay_lab(served.name, served.cidr, served.gateway, [nic.gateway, bmc.gateway]) as (
        in_server,
        in_relay,
    ):
        daemon = subprocess.Popen(
            [*in_server, *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        try:
            got = []
            for relay, mac, arch, want in cases:
                wait = "10" if want else "2"  # the first answers also wait for the start-up
                args = [relay, served.address, mac, arch, wait]
                run = subprocess.run(
                    [*in_relay, sys.executable, str(tmp_path / "discover.py"), *args],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=60,
                )
                offer = json.loads(run.stdout)
                if offer and want and want[1] is None:
                    offer[1] = None  # no boot file: the next-server does not matter
                got.append(offer)
        finally:
            daemon.terminate()
            log = daemon.communicate(timeout=30)[0].decode()
    assert got == [want for *_, want in cases], log


# --- kickstart ------------------------------------------------------------------------------


def test_every_kickstart_is_valid_rhel8(compiled: Compiled) -> None:
    files = kickstarts(compiled)
    assert len(files) == sum(boot_nic(compiled.plan, h) is not None for h in compiled.plan.hosts)
    for name, ks in files.items():
        handler = parse_ks(ks)
        host = compiled.plan.host(name)
        (post,) = handler.scripts
        assert post.errorOnFail and post.logfile and post.interp == "/usr/bin/bash", name
        assert post.script.lstrip().startswith("set -euo pipefail"), name
        raids = {r.mountpoint: r for r in handler.raid.raidList}
        assert set(raids) == {"/boot/efi", "/boot", "/"}, name
        assert all(
            r.level == "RAID1" and len(r.members) == len(host.os_disks) for r in raids.values()
        )
        ondisk = {p.mountpoint: p.disk for p in handler.partition.partitions}
        assert ondisk.get("/scratch") == host.scratch_disk, name
        assert handler.rootpw.isCrypted and handler.rootpw.password == PLACEHOLDER_ROOT_HASH


@pytest.mark.parametrize(
    ("find", "replace", "error"),
    [
        ("skipx\n", "skipx\ntimesource --ntp-server=10.0.0.1\n", KickstartError),  # RHEL 9 only
        ("skipx\n", "skipx\ninstall\n", Warning),  # deprecated in RHEL 8
        ("--level=RAID1 --device=md0", "--level=RAID1 --metadata=1.0 --device=md0", KickstartError),
        (".service\n%end\n", ".service\n", KickstartError),  # the last unit, then no %end
    ],
)
def test_pykickstart_rejects_a_broken_kickstart(
    compiled: Compiled, find: str, replace: str, error: type[Exception]
) -> None:
    ks = kickstarts(compiled)["gpu001"]
    assert find in ks
    with pytest.raises(error):
        parse_ks(ks.replace(find, replace, 1))


# --- the property that ties them together ---------------------------------------------------


def reservation_problems(compiled: Compiled, files: dict[str, str]) -> list[str]:
    """Every PXE MAC: one reservation in each DHCP file, one address in all three places, the
    boot file of its host's boot mode (ISC: inside that mode's group; Kea: the mode's class)
    for it and for nothing else."""
    isc_text = files["dhcp/dhcpd.conf"]
    loader: dict[str, str | None] = {}  # a host line -> the filename of its group
    for group in isc_text.split("\ngroup {")[1:]:
        body = group[: group.index("\n}\n")]
        filename = re.search(r'filename "([^"]+)";', body)
        for match in ISC_HOST.finditer(body):
            loader[match[0]] = filename[1] if filename else None
    isc: dict[str, list[tuple[str, str | None]]] = {}
    for match in ISC_HOST.finditer(isc_text):
        isc.setdefault(match[2], []).append((match[3], loader.get(match[0])))
    kea: dict[str, list[tuple[str, str | None]]] = {}
    for subnet in json.loads(files["dhcp/kea-dhcp4.json"])["Dhcp4"]["subnet4"]:
        for r in subnet["reservations"]:
            classes = r.get("client-classes")
            kea.setdefault(r["hw-address"], []).append(
                (r["ip-address"], classes[0] if classes else None)
            )
    boot_files = compiled.plan.provisioning.boot_files
    itself = compiled.plan.site.services.provisioning  # reserved, but boots no loader
    problems, pxe_macs = [], set()
    for host in compiled.plan.hosts:
        nic = boot_nic(compiled.plan, host)
        if nic is None or nic.mac is None:
            continue
        if host.name != itself:
            pxe_macs.add(nic.mac)
        handler = parse_ks(files[f"kickstart/{host.name}.ks"])
        ks = [n.ip for n in handler.network.network if n.device == nic.mac]
        file = getattr(boot_files, host.boot.value) if host.name != itself else None
        mode = host.boot.value if host.name != itself else None
        if (
            len(ks) != 1
            or isc.get(nic.mac) != [(ks[0], file)]
            or kea.get(nic.mac) != [(ks[0], mode)]
        ):
            problems.append(
                f"{host.name} {nic.mac}: ks {ks}, isc {isc.get(nic.mac)}, kea {kea.get(nic.mac)}"
            )
    for mac in sorted({*isc, *kea}):
        if mac not in pxe_macs and any(boot for _, boot in isc.get(mac, []) + kea.get(mac, [])):
            problems.append(f"{mac} gets a boot file but does not PXE")
    return problems


def test_every_pxe_mac_has_one_reservation_matching_its_kickstart(compiled: Compiled) -> None:
    files = {
        p: d.decode() for p, d in compiled.files.items() if p.startswith(("dhcp/", "kickstart/"))
    }
    assert reservation_problems(compiled, files) == []
    # BMCs and switch management ports have reservations too, without a boot file.
    kea = json.loads(files["dhcp/kea-dhcp4.json"])["Dhcp4"]["subnet4"]
    names = {r["hostname"]: r for s in kea for r in s["reservations"]}
    assert "client-classes" not in names["gpu001-bmc"] and "client-classes" not in names["leaf01"]
    assert len(names) == 2 * len(compiled.plan.hosts) + len(compiled.plan.switches)


@pytest.mark.parametrize(
    ("path", "find", "replace"),
    [
        ("dhcp/kea-dhcp4.json", '"ip-address": "10.60.2.11"', '"ip-address": "10.60.2.99"'),
        ("dhcp/dhcpd.conf", "fixed-address 10.60.2.11;", "fixed-address 10.60.2.99;"),
        ("kickstart/gpu001.ks", "--ip=10.60.2.11 ", "--ip=10.60.2.99 "),
        (
            "dhcp/kea-dhcp4.json",
            '"hostname": "gpu001-bmc"',
            '"hostname": "gpu001-bmc", "client-classes": ["uefi"]',
        ),
    ],
)
def test_the_property_catches_a_mismatch(
    compiled: Compiled, path: str, find: str, replace: str
) -> None:
    files = {
        p: d.decode() for p, d in compiled.files.items() if p.startswith(("dhcp/", "kickstart/"))
    }
    assert find in files[path]
    files[path] = files[path].replace(find, replace, 1)
    assert reservation_problems(compiled, files) != []


def menu_path(compiled: Compiled, host: str) -> str:
    nic = boot_nic(compiled.plan, compiled.plan.host(host))
    assert nic is not None and nic.mac is not None
    bootif = "01-" + nic.mac.replace(":", "-")
    return {"bios": f"pxe/pxelinux.cfg/{bootif}", "uefi": f"pxe/grub.cfg-{bootif}"}[
        compiled.plan.host(host).boot.value
    ]


def test_boot_menus_point_at_the_hosts_kickstart(compiled: Compiled) -> None:
    """One menu per host that installs from the provisioning host, for its boot mode; the
    installer's kernel and initrd over HTTP from the mirrored install tree, which the TFTP
    root does not hold."""
    plan, prov = compiled.plan, compiled.plan.provisioning
    server = plan.address(plan.site.services.provisioning, prov.pxe_network)
    menus = [p for p in compiled.files if p.startswith(("pxe/grub.cfg-", "pxe/pxelinux.cfg/"))]
    assert len(menus) == len(kickstarts(compiled)) - 1  # none for the provisioning host
    for host in plan.hosts:
        if boot_nic(plan, host) is None or host.name == plan.site.services.provisioning:
            continue
        path = menu_path(compiled, host.name)
        menu = text(compiled, path)
        url = re.search(r"inst\.ks=http://([0-9.]+)/ks/(\S+)\.ks", menu)
        assert url and url[1] == server and url[2] == host.name, path
        assert f"kickstart/{url[2]}.ks" in compiled.files
        assert f"inst.repo=http://{server}{prov.install_path} " in menu
        assert f" BOOTIF={path.rsplit('grub.cfg-', 1)[-1].rsplit('/', 1)[-1]}\n" in menu
        assert f"  linuxefi (http,{server}){prov.boot_files.kernel} inst.ks=" in menu
        assert f"  initrdefi (http,{server}){prov.boot_files.initrd}\n" in menu
        assert prov.boot_files.kernel.startswith(prov.install_path)  # mirrored there


def reinstall(names: set[str]) -> Compiled:
    """The reference cluster with the nodes `names` marked `reinstall: true`."""
    source = load(REPO / "cluster")
    data = copy.deepcopy(source.data)
    data["racks"] = tuple(
        {
            **rack,
            "nodes": tuple(
                {**n, "reinstall": True} if n["name"] in names else n for n in rack.get("nodes", ())
            ),
        }
        for rack in data["racks"]
    )
    return compile_source(Source(data, source.locations))


def test_menus_boot_local_unless_the_host_is_marked_for_reinstall(compiled: Compiled) -> None:
    """A PXE boot of an installed host (a boot order reset by a firmware update) must not wipe
    it: every menu's default leaves the loader for the local disk; a node marked for reinstall
    in its rack file, and only it, gets the install as the default."""
    assert not [h.name for h in compiled.plan.hosts if h.reinstall]  # the reference marks none
    for path in (p for p in compiled.files if p.startswith("pxe/grub.cfg-")):
        menu = text(compiled, path)
        assert "\nset default=local\n" in menu, path
        # The local entry chains to the installed shim on the disk's ESP (exit only without one).
        assert "\nmenuentry 'Boot " in menu and " --id local {\n" in menu, path
        assert "\n    chainloader ($esp)/EFI/rocky/shimx64.efi\n" in menu, path
        assert " --id install {\n  linuxefi " in menu, path  # still there, not the default
    marked = reinstall({"gpu001", "mon01"})
    for host in compiled.plan.hosts:
        if boot_nic(compiled.plan, host) is None or host.name == "prov01":
            continue
        want = "install" if host.name in {"gpu001", "mon01"} else "local"
        assert f"\nset default={want}\n" in text(marked, menu_path(marked, host.name)), host.name
    # Nothing else changes but the serving host's map (the menus' sha256): the kickstarts,
    # the marked hosts' bundles and DHCP are the same.
    changed = {p for p in compiled.files if compiled.files[p] != marked.files.get(p)}
    menus = {menu_path(compiled, "gpu001"), menu_path(compiled, "mon01")}
    assert changed == {*menus, "deploy/prov01.json", MANIFEST}


@pytest.mark.realtool
def test_grub_script_check_accepts_the_install_default(tmp_path: Path) -> None:
    check = require_tool("grub-script-check")
    marked = reinstall({"gpu001"})
    (tmp_path / "grub.cfg").write_bytes(marked.files[menu_path(marked, "gpu001")])
    done = subprocess.run([check, str(tmp_path / "grub.cfg")], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_the_provisioning_host_has_no_menu_and_no_boot_file(compiled: Compiled) -> None:
    """prov01 serves every install, so it cannot PXE-install from itself: no menu on its TFTP
    root for its MAC, and its DHCP reservation offers no loader (only its address)."""
    plan = compiled.plan
    itself = plan.site.services.provisioning
    nic = boot_nic(plan, plan.host(itself))
    assert nic is not None and nic.mac is not None
    bootif = "01-" + nic.mac.replace(":", "-")
    assert not [p for p in compiled.files if p.startswith("pxe/") and bootif in p]
    isc = text(compiled, "dhcp/dhcpd.conf")
    line = f"host {itself} {{ hardware ethernet {nic.mac}; fixed-address {nic.address};"
    assert line in isc
    for group in isc.split("\ngroup {")[1:]:
        assert line not in group[: group.index("\n}\n")], "inside a boot file's group"
    kea = json.loads(text(compiled, "dhcp/kea-dhcp4.json"))["Dhcp4"]["subnet4"]
    mine = [r for s in kea for r in s["reservations"] if r["hw-address"] == nic.mac]
    assert len(mine) == 1 and "client-classes" not in mine[0]


def test_the_provisioning_host_installs_from_its_bootstrap_not_itself(
    compiled: Compiled,
) -> None:
    """prov01 serves the mirrors and the bundles, so nothing of its install may come from its
    own address: the installer's tree, its repos and the installed system's repos are
    `bootstrap`'s upstream ones, its resolvers `bootstrap`'s, and its bundle is not fetched
    (it is applied after, with the installer the kickstart leaves in /root)."""
    plan = compiled.plan
    itself = plan.site.services.provisioning
    server = plan.address(itself, plan.provisioning.pxe_network)
    boot = plan.provisioning.bootstrap
    ks = kickstarts(compiled)[itself]
    handler = parse_ks(ks)
    assert handler.url.url == boot.install
    assert {r.name: r.baseurl for r in handler.repo.repoList} == {
        name: url for name, url in boot.repos.items() if name != "baseos"
    }
    assert [n.nameserver for n in handler.network.network] == [",".join(boot.nameservers)]
    assert f"http://{server}" not in ks and "/bundle/" not in ks
    assert "\ncat > /root/clusterforge-apply-bundle.py <<'EOF'\n" in ks
    assert f"\nbaseurl={boot.install}\n" in ks  # the installed system's baseos
    # Every other host still installs from the provisioning host and fetches its bundle.
    other = kickstarts(compiled)["mon01"]
    assert parse_ks(other).url.url == f"http://{server}{plan.provisioning.install_path}"
    assert f'curl -fsS --retry 5 -o /root/bundle.json "http://{server}/bundle/mon01.json"' in other


def test_a_provisioning_host_bootstrapped_from_the_dvd(compiled: Compiled) -> None:
    source = load(REPO / "cluster")
    data = copy.deepcopy(source.data)
    upstream = "https://dl.rockylinux.org/vault/rocky/8.9/BaseOS/x86_64/os/"
    data["provisioning"] = {
        **data["provisioning"],
        "bootstrap": {"install": "cdrom", "repos": {"baseos": upstream}},
    }
    dvd = compile_source(Source(data, source.locations))
    ks = kickstarts(dvd)["prov01"]
    handler = parse_ks(ks)
    assert handler.cdrom.seen and not handler.url.seen and not handler.repo.repoList
    assert f"\nbaseurl={upstream}\n" in ks  # after the install, the named upstream
    assert kickstarts(dvd)["gpu001"] == kickstarts(compiled)["gpu001"]


# --- the root password hash -----------------------------------------------------------------


def test_the_hash_from_the_environment_reaches_every_kickstart() -> None:
    done = compile_source(load(REPO / "cluster"), {"CLUSTERFORGE_ROOT_HASH": TEST_HASH + "\n"})
    assert parse_ks(kickstarts(done)["gpu001"]).rootpw.password == TEST_HASH
    for name, ks in kickstarts(done).items():
        assert f"\nrootpw --iscrypted {TEST_HASH}\n" in ks, name
        assert PLACEHOLDER_ROOT_HASH not in ks
    assert any("$CLUSTERFORGE_ROOT_HASH" in n for n in done.notices)


def test_without_a_hash_the_placeholder_is_used_and_said(compiled: Compiled) -> None:
    assert all(PLACEHOLDER_ROOT_HASH in ks for ks in kickstarts(compiled).values())
    assert any("placeholder" in n for n in compiled.notices)


def test_the_hash_from_a_file_outside_the_repository(tmp_path: Path) -> None:
    secret = tmp_path / "secret" / "root.hash"
    secret.parent.mkdir()
    secret.write_text(TEST_HASH + "\n")
    repo = copy_repo(
        tmp_path / "repo", {"provisioning.yaml": ("/etc/clusterforge/root.hash", str(secret))}
    )
    done = compile_source(load(repo / "cluster"), {})  # the variable unset: the file counts
    assert parse_ks(kickstarts(done)["gpu001"]).rootpw.password == TEST_HASH
    assert any(str(secret) in n for n in done.notices)


def test_the_cli_compiles_with_the_hash_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_repo(tmp_path)
    build = tmp_path / "provisioning-build"
    monkeypatch.setenv("CLUSTERFORGE_ROOT_HASH", TEST_HASH)
    # The webhooks and the BMC password are not set here: refused unless allowed.
    assert main(["-C", str(repo), "compile", "--out", str(build)]) == 2
    assert "webhook/ops: set $CLUSTERFORGE_WEBHOOK_OPS" in capsys.readouterr().err
    assert main(["-C", str(repo), "compile", "--out", str(build), "--allow-placeholders"]) == 0
    assert "read from $CLUSTERFORGE_ROOT_HASH" in capsys.readouterr().err
    assert TEST_HASH in (build / "kickstart" / "gpu001.ks").read_text()
    assert main(["-C", str(repo), "compile", "--out", str(build), "--check"]) == 0
    # The repository's own generated/ never takes the secret, even with it set.
    assert main(["-C", str(repo), "compile"]) == 0
    assert "placeholder used" in capsys.readouterr().err
    assert TEST_HASH not in (repo / "generated" / "kickstart" / "gpu001.ks").read_text()
    assert main(["-C", str(repo), "compile", "--out", str(repo / "generated")]) == 2


def test_a_plain_password_is_refused_without_being_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_repo(tmp_path)
    monkeypatch.setenv("CLUSTERFORGE_ROOT_HASH", "hunter2-plain")
    assert main(["-C", str(repo), "compile", "--out", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    line = 1 + (REPO / "cluster/provisioning.yaml").read_text().splitlines().index(
        "  env: CLUSTERFORGE_ROOT_HASH"
    )
    assert f"cluster/provisioning.yaml:{line}:" in err and "invalid-value" in err
    assert "hunter2" not in err
    assert not (tmp_path / "build").exists()
    with pytest.raises(SourceError):
        compile_source(load(REPO / "cluster"), {"CLUSTERFORGE_ROOT_HASH": "$6$short"})


def tracked_hashes(repo: Path) -> set[str]:
    git = require_tool("git")
    listed = subprocess.run(
        [git, "-C", repo, "ls-files", "-z"], capture_output=True, check=True, timeout=60
    ).stdout.decode()
    found: set[str] = set()
    for name in filter(None, listed.split("\0")):
        path = repo / name
        if path.is_file():
            found.update(CRYPT.findall(path.read_bytes().decode(errors="replace")))
    return found


def test_no_hash_but_the_placeholder_is_tracked_in_git() -> None:
    assert tracked_hashes(REPO) <= {PLACEHOLDER_ROOT_HASH}


def test_the_git_scan_finds_a_committed_hash(tmp_path: Path) -> None:
    git = require_tool("git")
    subprocess.run([git, "init", "-q", tmp_path], check=True, timeout=60)
    (tmp_path / "leak.ks").write_text(f"rootpw --iscrypted {TEST_HASH}\n")
    subprocess.run([git, "-C", tmp_path, "add", "leak.ks"], check=True, timeout=60)
    assert tracked_hashes(tmp_path) == {TEST_HASH}


# --- bad input stops before anything is written ---------------------------------------------

R01_GPU002 = '    guid: "0x0c42a103003484e4"\n'


@pytest.mark.parametrize(
    ("name", "find", "replace", "rule"),
    [
        (
            "racks/r01.yaml",
            'eno1: "3c:ec:ef:fb:cb:84"',
            'eno1: "3c:ec:ef:ea:48:9e"',
            "duplicate-mac",
        ),
        (
            "racks/r01.yaml",
            R01_GPU002,
            R01_GPU002 + '    addresses: {mgmt: "10.60.2.11"}\n',
            "duplicate-ip",
        ),
        ("provisioning.yaml", "pxe_network: mgmt ", "pxe_network: storage ", "invalid-value"),
        (
            "provisioning.yaml",
            "  kernel: /rocky/8.9/",
            "  kernel: rocky/8.9/",
            "invalid-value",
        ),
        (
            "provisioning.yaml",
            "    monitoring: https://packagecloud.io/",
            "    monitor: https://packagecloud.io/",
            "unknown-reference",
        ),
        (
            "provisioning.yaml",
            "dhcp_networks: [bmc, mgmt]",
            "dhcp_networks: [bmc, mgmt, ipoib]",
            "invalid-value",
        ),
        (
            "provisioning.yaml",
            "dhcp_networks: [bmc, mgmt]",
            "dhcp_networks: [bmc, mgmt, oob]",
            "unknown-reference",
        ),
        (
            "provisioning.yaml",
            "  file: /etc/clusterforge/root.hash",
            "  file: root.hash",
            "invalid-value",
        ),
        (
            "hardware.yaml",
            "    os_disks:                       # BOSS-S2 is not used: two SATA SSDs on the "
            "chipset, RAID1\n      - /dev/disk/by-path/pci-0000:00:17.0-ata-1\n"
            "      - /dev/disk/by-path/pci-0000:00:17.0-ata-2\n",
            '    os_disks: ["/dev/disk/by-path/pci-0000:00:17.0-ata-1"]\n',
            "invalid-value",
        ),
    ],
)
def test_bad_provisioning_input_is_located_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    find: str,
    replace: str,
    rule: str,
) -> None:
    repo = copy_repo(tmp_path, {name: (find, replace)})
    assert main(["-C", str(repo), "compile"]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^cluster/{name}:{changed_line(repo, name)}:\d+: {rule}: ", err, re.M), err
    assert not (repo / "generated").exists()
