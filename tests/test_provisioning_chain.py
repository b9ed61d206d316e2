"""The provisioning chain, end to end: a server PXE-boots, installs and gets its bundle.

The provisioning host (prov01) runs from its own bundle (`clusterforge bundle --host prov01`,
laid out with its map's modes and owners) with the real daemons as their own users, in
network namespaces made here (tests/provisioning_host.py): dhcpd from the bundle's
/etc/dhcp behind a relay (the leaf of the client's rack), in.tftpd on the bundle's TFTP root,
Apache from Debian's stock apache2.conf plus the bundle's /etc/httpd/conf.d on its document root.

`test_apache_serves_each_host_its_own_bundle_alone` needs no VM: from gpu001's address every
file of gpu001's served bundle, its map and its kickstart come back 200 with the sha256 the
maps give; from another host's address each is refused (403).

`test_a_server_pxe_boots_installs_and_boots_local` boots a QEMU VM (TCG) with gpu001's planned
PXE MAC on a tap in the client rack's bridge: UEFI under OVMF (OVMF_CODE_4M.fd and a copy of
its VARS), and BIOS under SeaBIOS (QEMU's default) with gpu001's hardware model switched to
BIOS in a temporary copy of cluster/. The install cases mark gpu001 `reinstall: true` in a
temporary copy of cluster/; the local cases use the shipped model, where no host is marked.
From the serial console and the daemons' logs the test proves: the planned address and loader
offered; every file of the chain served (UEFI: shim, GRUB, the host's menu; BIOS: lpxelinux.0,
ldlinux.c32, the host's menu; then the kernel and initrd over HTTP); the kernel booted with
the menu's planned command line (`inst.ks`, `inst.repo`); the kickstart and the host's whole
bundle fetched over HTTP with every sha256 right; and that an installed host's next PXE boot
does not install but boots the disk: PXELINUX's `LOCALBOOT 0` hands back to SeaBIOS, which
boots it; GRUB finds the installed system's shim on the disk's ESP and chains to it (a plain
`exit` would hand back to OVMF, whose boot manager, EDK2's, opens its menu, not the disk).

The VM's NIC is virtio-net: under OVMF without an option ROM, so the firmware's own PXE client
(as on a server) asks for the boot file; under SeaBIOS with QEMU's iPXE ROM as the NIC's PXE
ROM, as a server NIC's is.

What stands in for what (no Rocky binary can be had here; tests/pxe_standins.py builds them):

- Rocky's shim-x64 `/boot/efi/EFI/rocky/shimx64.efi`: Debian's signed shim,
  `/usr/lib/shim/shimx64.efi.signed` (shim-signed), Secure Boot off.
- Rocky's grub2-efi-x64 `/boot/efi/EFI/rocky/grubx64.efi`: a GRUB EFI image built here with
  `grub-mkimage -O x86_64-efi` from grub-efi-amd64-bin, with the net modules (efinet, tftp,
  http, normal, linux, linuxefi, ...) and an empty prefix, so that, as Rocky's netboot GRUB, it
  loads `grub.cfg-01-<mac>` from the TFTP folder it was loaded from. Debian's GRUB 2.06 has
  `linuxefi`/`initrdefi` itself: no aliases are needed.
- Rocky's syslinux-tftpboot `/tftpboot/{pxelinux.0,lpxelinux.0,ldlinux.c32}`: Debian's
  pxelinux (`/usr/lib/PXELINUX/`) and syslinux-common (`ldlinux.c32`).
- Rocky's installer kernel and initrd (`images/pxeboot/vmlinuz`, `initrd.img` in the install
  tree on the HTTP root): Debian's kernel from its linux-image-*-amd64 package (tests/install-tools
  fetches the .deb; `dpkg-deb -x` here), and a busybox-static initramfs whose /init brings up
  the virtio-net NIC (its modules from the same package) by DHCP, prints /proc/cmdline, fetches the
  `inst.ks=` kickstart, the bundle map and every file of it from the URLs the kickstart's
  %post uses, prints one `cf-file` line per file with both sha256s, and powers off.
- The installed host's disk: an ESP whose `EFI/rocky/shimx64.efi` (a GRUB image) only prints
  `cf-local-disk booted` (UEFI), an MBR whose code prints the same (BIOS).
- Rocky's `apache` account: Debian's `www-data` (the laid-out root's owners and the
  ROOT/etc/passwd systemd-tmpfiles reads); Rocky's httpd.conf: Debian's apache2.conf.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from compiler.load import load
from compiler.pipeline import compile_source
from compiler.plan import Plan
from compiler.targets.shared import boot_nic
from tests import pxe_standins as standins
from tests.conftest import REPO, require_tool
from tests.provisioning_host import Lab, bundle_host, lay_out, provisioning_host, repo_copy

pytestmark = pytest.mark.realtool

HOST, OTHER = "gpu001", "gpu002"
# Seconds for one boot: TCG reaches the installer's /init in about a minute on an idle machine,
# several when its 2 cores are shared.
VM_TIMEOUT = 480
REINSTALL = {"racks/r01.yaml": (f"  - name: {HOST}\n", f"  - name: {HOST}\n    reinstall: true\n")}
# gpu001's hardware model, its boot line: the first `boot: uefi` of hardware.yaml, after GPUs.
BIOS = {"hardware.yaml": ("gpus: [4, 5, 6, 7]}\n    boot: uefi\n",
                          "gpus: [4, 5, 6, 7]}\n    boot: bios\n")}  # fmt: skip
# Where Rocky 8's packages install the loaders (shim-x64, grub2-efi-x64, syslinux-tftpboot).
ROCKY_LOADERS = {
    "/boot/efi/EFI/rocky/shimx64.efi": "shim",
    "/boot/efi/EFI/rocky/grubx64.efi": "grub",
    "/tftpboot/pxelinux.0": "pxelinux.0",
    "/tftpboot/lpxelinux.0": "lpxelinux.0",
    "/tftpboot/ldlinux.c32": "ldlinux.c32",
}


@dataclass(frozen=True)
class Site:
    """What the test needs of a compiled model: who is where."""

    prov: str
    iface: str
    cidr: str
    gateway: str
    http_root: str
    pxeboot: str  # the install tree's pxeboot folder below the HTTP root
    install_url: str
    host_address: str
    host_cidr: str
    host_gateway: str
    mac: str
    other_address: str
    loaders: dict[str, str | None]  # the planned boot file per firmware


def site(repo: Path) -> Site:
    plan: Plan = compile_source(load(repo / "cluster")).plan
    prov = plan.provisioning
    server = plan.host(plan.site.services.provisioning)
    served = server.interface(prov.pxe_network)
    nic, other = (boot_nic(plan, plan.host(h)) for h in (HOST, OTHER))
    assert served and served.gateway and nic and nic.mac and nic.gateway and other
    assert other.gateway == nic.gateway, "the other host must be behind the same relay"
    kernel = prov.boot_files.kernel
    return Site(
        prov=server.name,
        iface=served.name,
        cidr=served.cidr,
        gateway=served.gateway,
        http_root=prov.http_root.rstrip("/"),
        pxeboot=kernel.rsplit("/", 1)[0],
        install_url=f"http://{served.address}{prov.install_path}",
        host_address=nic.address,
        host_cidr=f"{nic.gateway}/{nic.prefix}",
        host_gateway=nic.gateway,
        mac=nic.mac,
        other_address=other.address,
        loaders={"uefi": prov.boot_files.uefi, "bios": prov.boot_files.bios},
    )


def lay_out_prov(repo: Path, s: Site, tmp: Path, installed: dict[str, bytes] | None = None) -> Path:
    bundle_host(repo, s.prov, tmp / "bundle")
    notes = lay_out(tmp / "bundle", s.prov, tmp / "root", installed)
    print("laid out with:", *notes, sep="\n  ")
    return tmp / "bundle" / s.prov


# --- Apache: each host's bundle to that host alone -------------------------------------------

# Run in the rack namespace: GET each path from a source address; prints [[status, sha256]].
GET = r"""
import hashlib, http.client, json, sys
server, source, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
out = []
for path in paths:
    c = http.client.HTTPConnection(server, 80, timeout=30, source_address=(source, 0))
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    out.append([r.status, hashlib.sha256(body).hexdigest()])
    c.close()
print(json.dumps(out))
"""


def _get(lab: Lab, source: str, paths: list[str], tmp: Path) -> list[list[object]]:
    (tmp / "get.py").write_text(GET)
    command = [*lab.rack, sys.executable, str(tmp / "get.py"), lab.address, source, *paths]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{run.stderr}\n{lab.tails()}"
    return json.loads(run.stdout)


def _pinned(root: Path, entry: dict[str, str]) -> str:
    """A map entry's sha256; one the map leaves null (a file holding a secret, which the
    compile does not pin) is that of its copy under `root`, as `clusterforge bundle` wrote it."""
    if entry["sha256"]:
        return entry["sha256"]
    return hashlib.sha256((root / entry["path"].lstrip("/")).read_bytes()).hexdigest()


def test_apache_serves_each_host_its_own_bundle_alone(tmp_path: Path) -> None:
    s = site(REPO)
    overlay = lay_out_prov(REPO, s, tmp_path)
    served = overlay / s.http_root.lstrip("/")
    prov_map = json.loads((tmp_path / "bundle" / f"{s.prov}.json").read_text())
    pinned = {e["path"]: _pinned(overlay, e) for e in prov_map["files"]}
    host_map = json.loads((served / f"bundle/{HOST}.json").read_text())
    want = {f"/ks/{HOST}.ks": pinned[f"{s.http_root}/ks/{HOST}.ks"]}
    want[f"/bundle/{HOST}.json"] = hashlib.sha256(
        (served / f"bundle/{HOST}.json").read_bytes()
    ).hexdigest()
    want |= {
        f"/bundle/{HOST}{e['path']}": _pinned(served / f"bundle/{HOST}", e)
        for e in host_map["files"]
    }
    assert len(want) > 10, "gpu001's bundle lists too few files to prove anything"
    paths = sorted(want)
    with provisioning_host(
        tmp_path / "root",
        tmp_path / "scratch",
        iface=s.iface,
        cidr=s.cidr,
        gateway=s.gateway,
        clients=[s.host_cidr],
        client_addresses=[s.host_address, s.other_address],
    ) as lab:
        own = _get(lab, s.host_address, paths, tmp_path)
        other = _get(lab, s.other_address, paths, tmp_path)
        tails = lab.tails()
    wrong = [
        f"{p}: {status} {got[:12]}, want 200 {want[p][:12]}"
        for p, (status, got) in zip(paths, own, strict=True)
        if status != 200 or got != want[p]
    ]
    assert not wrong, f"from {HOST}'s address {s.host_address}:\n" + "\n".join(wrong) + tails
    leaked = [
        f"{p}: {status}" for p, (status, _) in zip(paths, other, strict=True) if status != 403
    ]
    assert not leaked, (
        f"{HOST}'s files from {OTHER}'s address {s.other_address}, want 403:\n"
        + "\n".join(leaked)
        + tails
    )


# --- the VM ------------------------------------------------------------------------------------

# Lines that end a boot: the installer's last line, the disk's, or a loader giving up. EDK2's
# boot manager (OVMF's BdsDxe) treats a boot option that returns success as booted and opens
# its menu (UiApp) instead of the next option (UEFI 2.x 3.1.1 allows either): a GRUB that
# handed back with a plain `exit` ends there, and the test fails.
FIRMWARE_MENU = re.compile(r'BdsDxe: starting Boot\w+ "UiApp"')
FINISHED = re.compile(rf"cf-done .*|{standins.LOCAL_DISK}|{FIRMWARE_MENU.pattern}")
STUCK = re.compile(
    r"Press any key to exit|you need to load the kernel first|Kernel panic|PXE-E\w+"
    r"|Boot Failed|No bootable device|Could not find kernel image"
)


def _qemu(firmware: str, s: Site, work: Path, disk: Path) -> list[str]:
    command = [require_tool("qemu-system-x86_64"), "-accel", "tcg", "-cpu", "max", "-m", "1024"]
    command += ["-nodefaults", "-display", "none", "-no-reboot"]
    command += ["-serial", f"file:{work / 'console.log'}"]
    command += ["-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no"]
    nic = f"virtio-net-pci,netdev=n0,mac={s.mac},bootindex=1"
    if firmware == "uefi":
        # OVMF's own virtio-net driver and PXE (no iPXE option ROM): the firmware's PXE client,
        # as on a server, which asks for the boot file and prints what it was offered.
        nic += ",romfile="
        code = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
        if not code.exists():
            require_tool("OVMF_CODE_4M.fd (ovmf)")
        shutil.copy("/usr/share/OVMF/OVMF_VARS_4M.fd", work / "vars.fd")
        command += ["-machine", "q35"]
        command += ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code}"]
        command += ["-drive", f"if=pflash,format=raw,unit=1,file={work / 'vars.fd'}"]
        # One PXE attempt, IPv4: IPv6's would only add its own DHCP timeout before the disk.
        command += ["-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n"]
        drive = f"if=none,id=d0,format=raw,readonly=on,file=fat:ro:{disk}"
    else:
        # The NIC's option ROM (QEMU's iPXE build) is the BIOS PXE client, as a server NIC's is.
        # SeaBIOS, QEMU's default; its log (which device it boots) on the debug port.
        command += ["-machine", "pc"]
        command += ["-chardev", f"file,id=dbg,path={work / 'seabios.log'}"]
        command += ["-device", "isa-debugcon,iobase=0x402,chardev=dbg"]
        drive = f"if=none,id=d0,format=raw,file={disk}"
    return [
        *command,
        "-device",
        nic,
        "-drive",
        drive,
        "-device",
        "virtio-blk-pci,drive=d0,bootindex=2",
    ]


def _boot(lab: Lab, command: list[str], work: Path) -> tuple[str, float]:
    """Boot the VM to its end (bounded by VM_TIMEOUT); returns the console and the seconds."""
    console = work / "console.log"
    start = time.monotonic()
    with (work / "qemu.out").open("wb") as out:
        qemu = subprocess.Popen([*lab.rack, *command], stdout=out, stderr=subprocess.STDOUT)
    text, why = "", None
    try:
        while True:
            time.sleep(1)
            text = console.read_text(errors="replace") if console.exists() else ""
            if FINISHED.search(text):
                # The installer powers off, the UEFI disk halts; the BIOS disk and UiApp wait.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    qemu.wait(timeout=20)
                break
            if qemu.poll() is not None:
                why = f"QEMU exited with {qemu.returncode} before the boot ended"
                break
            if (stuck := STUCK.search(text)) is not None:
                time.sleep(3)  # the lines after it
                why = f"the boot stopped: {stuck.group(0)!r}"
                break
            if time.monotonic() - start > VM_TIMEOUT:
                why = f"the boot did not end in {VM_TIMEOUT} s"
                break
    finally:
        if qemu.poll() is None:
            qemu.kill()
        qemu.wait(timeout=30)
    seconds = time.monotonic() - start
    text = console.read_text(errors="replace") if console.exists() else ""
    if why:
        pytest.fail(f"{why}\n{_evidence(lab, work, text)}")
    return text, seconds


def _evidence(lab: Lab, work: Path, console: str) -> str:
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", " ", console)
    lines = [ln.rstrip() for ln in plain.splitlines() if ln.strip()]
    extra = [f"--- qemu: {(work / 'qemu.out').read_text(errors='replace')[-2000:]}"]
    if (work / "seabios.log").exists():
        extra.append("--- SeaBIOS log (last 15 lines)")
        extra += (work / "seabios.log").read_text(errors="replace").splitlines()[-15:]
    return "\n".join(["--- console (last 40 lines)", *lines[-40:], *extra, lab.tails(25)])


def _tftp_served(lab: Lab, client: str) -> list[str]:
    """The files in.tftpd sent `client`, in order: RRQs its process did not answer with NAK."""
    log = lab.log("tftpd.log")
    asked = re.findall(rf"in\.tftpd\[(\d+)\]: RRQ from {re.escape(client)} filename (\S+)", log)
    refused = set(re.findall(r"in\.tftpd\[(\d+)\]: sending NAK", log))
    return [name.lstrip("/") for pid, name in asked if pid not in refused]


def _http_served(lab: Lab, client: str) -> dict[str, set[int]]:
    """{path: the statuses Apache answered `client` with}, from its access log."""
    got: dict[str, set[int]] = {}
    for line in lab.log("apache2/access.log").splitlines():
        m = re.match(rf"{re.escape(client)} \S+ \S+ \[[^]]+\] \"GET (\S+) [^\"]*\" (\d+)", line)
        if m:
            got.setdefault(m.group(1), set()).add(int(m.group(2)))
    return got


def _ok(statuses: set[int] | None) -> bool:
    # GRUB's http module reads a file in ranges: 206 Partial Content is a file served too.
    return bool(statuses) and statuses <= {200, 206}  # type: ignore[operator]


def _menu_entry(tftp_root: Path, firmware: str, mac: str) -> tuple[str, str, str]:
    """The install entry's kernel, initrd and command line, as the host's menu plans them."""
    dashed = "01-" + mac.lower().replace(":", "-")
    if firmware == "uefi":
        menu = (tftp_root / f"grub.cfg-{dashed}").read_text()
        kernel, cmdline = re.search(r"^\s*linuxefi (\S+) ?(.*)$", menu, re.M).groups()  # type: ignore[union-attr]
        initrd = re.search(r"^\s*initrdefi (\S+)", menu, re.M).group(1)  # type: ignore[union-attr]
        return kernel, initrd, cmdline
    menu = (tftp_root / f"pxelinux.cfg/{dashed}").read_text()
    kernel = re.search(r"^\s*KERNEL (\S+)", menu, re.M | re.I).group(1)  # type: ignore[union-attr]
    append = re.search(r"^\s*APPEND (.*)$", menu, re.M | re.I).group(1)  # type: ignore[union-attr]
    initrd = re.search(r"initrd=(\S+)", append).group(1)  # type: ignore[union-attr]
    return kernel, initrd, " ".join(a for a in append.split() if not a.startswith("initrd="))


def _installed(work: Path) -> dict[str, bytes]:
    """The stand-ins on the paths of the Rocky packages they stand in for."""
    made = {
        "shim": standins.shim(),
        "grub": standins.grub_image(work, "grubx64.efi"),
        **{n: standins.pxelinux(n) for n in ("pxelinux.0", "lpxelinux.0", "ldlinux.c32")},
    }
    return {path: made[what] for path, what in ROCKY_LOADERS.items()}


CASES = {
    # id: (firmware, cluster/ edits, installs?)
    "uefi-install": ("uefi", REINSTALL, True),
    "uefi-installed-boots-local": ("uefi", {}, False),
    "bios-install": ("bios", {**REINSTALL, **BIOS}, True),
    "bios-installed-boots-local": ("bios", BIOS, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_server_pxe_boots_installs_and_boots_local(tmp_path: Path, case: str) -> None:
    firmware, edits, installs = CASES[case]
    repo = repo_copy(tmp_path, edits) if edits else REPO
    s = site(repo)
    work = tmp_path / "vm"
    work.mkdir()
    installed = _installed(work)
    http = f"{s.http_root}{s.pxeboot}"
    installed[f"{http}/vmlinuz"] = standins.kernel(work)
    installed[f"{http}/initrd.img"] = standins.initrd(work)
    overlay = lay_out_prov(repo, s, tmp_path, installed)
    tftp_root = tmp_path / "root/var/lib/tftpboot"
    disk = standins.local_disk(work, firmware)
    dashed = "01-" + s.mac.lower().replace(":", "-")
    with provisioning_host(
        tmp_path / "root",
        tmp_path / "scratch",
        iface=s.iface,
        cidr=s.cidr,
        gateway=s.gateway,
        clients=[s.host_cidr],
    ) as lab:
        console, seconds = _boot(lab, _qemu(firmware, s, work, disk), work)
        print(f"{case}: the VM's boot took {seconds:.0f} s")
        evidence = _evidence(lab, work, console)
        tftp, http_got = _tftp_served(lab, s.host_address), _http_served(lab, s.host_address)
        dhcp = lab.log("dhcpd.out")

    # The planned address, to the planned MAC, through the rack's relay; the planned loader.
    ack = f"DHCPACK on {s.host_address} to {s.mac} via {s.host_gateway}"
    assert ack in dhcp, f"no {ack!r}\n{evidence}"
    planned = s.loaders[firmware]
    if firmware == "uefi":
        # shim loads grubx64.efi from its own folder, GRUB its menu by MAC.
        loaders = [planned, "grubx64.efi", f"grub.cfg-{dashed}"]
        offered = f"NBP filename is {planned}"
        assert offered in console, f"OVMF did not print {offered!r}\n{evidence}"
    else:
        loaders = [planned, "ldlinux.c32", f"pxelinux.cfg/{dashed}"]
    missing = [f for f in loaders if f not in tftp]
    assert not missing and tftp[0] == loaders[0], (
        f"TFTP served {tftp}; want {loaders}, the loader first\n{evidence}"
    )
    kernel, initrd, cmdline = _menu_entry(tftp_root, firmware, s.mac)
    # The menus load the kernel and initrd over HTTP from the install tree on the HTTP root.
    kernel_path, initrd_path = (
        re.sub(r"^(\(http,[^)]*\)|http://[^/]+)", "", p) for p in (kernel, initrd)
    )
    if not installs:
        assert standins.LOCAL_DISK in console, f"the disk did not boot\n{evidence}"
        if firmware == "bios":
            assert "Booting from Hard Disk" in (work / "seabios.log").read_text(errors="replace")
        assert "cf-boot" not in console, f"an installed host booted the installer\n{evidence}"
        assert kernel_path not in http_got, f"an installed host fetched the kernel\n{evidence}"
        return

    assert _ok(http_got.get(kernel_path)) and _ok(http_got.get(initrd_path)), (
        f"kernel {kernel_path} or initrd {initrd_path} not served over HTTP: {http_got}\n{evidence}"
    )
    booted = re.search(r"cf-boot cmdline=(.*)", console)
    assert booted, f"the installer's kernel did not run /init\n{evidence}"
    # The loaders add BOOT_IMAGE= (GRUB, PXELINUX) and keep initrd= (PXELINUX): the rest is
    # the menu's line, word for word.
    args = [a for a in booted.group(1).split() if not a.startswith(("BOOT_IMAGE=", "initrd="))]
    assert args == cmdline.split(), f"kernel command line {args}, the menu's {cmdline}\n{evidence}"
    prov_address = s.cidr.split("/")[0]
    assert f"inst.ks=http://{prov_address}/ks/{HOST}.ks" in args, evidence
    assert f"inst.repo={s.install_url}" in args, evidence

    # The kickstart and the whole bundle, each file's bytes those of the map.
    prov_map = json.loads((tmp_path / "bundle" / f"{s.prov}.json").read_text())
    pinned = {e["path"]: _pinned(overlay, e) for e in prov_map["files"]}
    ks = re.search(
        rf"cf-fetch url=http://{re.escape(prov_address)}/ks/{HOST}\.ks sha256=(\w+)", console
    )
    assert ks and ks.group(1) == pinned[f"{s.http_root}/ks/{HOST}.ks"], f"kickstart\n{evidence}"
    served_map = overlay / s.http_root.lstrip("/") / f"bundle/{HOST}.json"
    map_sha = hashlib.sha256(served_map.read_bytes()).hexdigest()
    assert f"/bundle/{HOST}.json sha256={map_sha}" in console, f"bundle map\n{evidence}"
    served = overlay / s.http_root.lstrip("/")
    want = {
        e["path"]: _pinned(served / f"bundle/{HOST}", e)
        for e in json.loads(served_map.read_text())["files"]
    }
    got = dict(re.findall(r"cf-file path=(\S+) want=\S+ got=(\S+) result=", console))
    wrong = [f"{p}: got {got.get(p)}, want {w}" for p, w in want.items() if got.get(p) != w]
    assert not wrong and set(got) == set(want), (
        f"{len(wrong)} of {len(want)} bundle files wrong or missing:\n"
        + "\n".join(wrong)
        + f"\n{evidence}"
    )
    assert f"cf-done files={len(want)} bad=0" in console, evidence
