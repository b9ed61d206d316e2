"""Stand-ins, built from Debian's packages, for the Rocky binaries a PXE install runs.

No Rocky binary can be had here, so each link of the chain that is a Rocky package's file is
played by a Debian one on the same path (the caller puts them where Rocky's packages put them,
and the provisioning host's own tmpfiles.d delivers them onto the TFTP root):

- Rocky's shim (shim-x64 `shimx64.efi`): Debian's signed shim, `/usr/lib/shim/shimx64.efi.signed`
  (shim-signed). Secure Boot is off in the VM, so shim loads `grubx64.efi` from the folder it
  was loaded from, as Rocky's does.
- Rocky's GRUB (grub2-efi-x64 `grubx64.efi`): a GRUB EFI image made here with `grub-mkimage
  -O x86_64-efi` from grub-efi-amd64-bin, with the network modules (efinet, tftp, http) and an
  empty prefix, so that on a network boot `$prefix` is the TFTP folder it was loaded from and
  `normal` searches `grub.cfg-01-<mac>` there first, which is what Rocky's netboot GRUB does;
  Debian's GRUB 2.06 has `linuxefi`/`initrdefi` (its linuxefi module), so the menu's commands run
  as they are.
- Rocky's PXELINUX (syslinux-tftpboot): Debian's `pxelinux.0`/`lpxelinux.0` (pxelinux) and
  `ldlinux.c32` (syslinux-common), the same upstream Syslinux 6.
- Rocky's installer kernel and initrd (`images/pxeboot/vmlinuz`, `initrd.img`): Debian's kernel
  from its linux-image package (fetched as a file by tests/install-tools, unpacked here), and a
  busybox-static initramfs whose /init does what anaconda does with the network before it
  installs: brings up the NIC (virtio-net, its modules from the same package) by DHCP, prints
  /proc/cmdline, fetches the `inst.ks=` kickstart, then the bundle map and every file in it
  from the URLs the kickstart's %post uses, checks each sha256 against the map, prints one
  result line per file on the serial port, and powers off.
- The installed host's disk: for UEFI an ESP (a folder QEMU shows as a FAT disk) whose
  `EFI/rocky/shimx64.efi` (where anaconda installs Rocky's shim; `EFI/BOOT/BOOTX64.EFI` too)
  is a GRUB image that only prints `cf-local-disk booted`; for BIOS a disk whose MBR code
  prints the same on the serial port. Reaching it proves that the PXE menu booted the disk:
  GRUB by chaining to the installed shim, PXELINUX by handing back to the BIOS.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, require_tool

KERNEL_CACHE = REPO / "tests" / "tools" / "kernel"
LOCAL_DISK = "cf-local-disk booted"

# The stand-in installer's /init (busybox sh). Lines it prints that start with `cf-` are the
# test's evidence; everything else is the kernel's and busybox's own output.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# The menu's command line has no console=: the results go to the serial port directly.
exec >/dev/ttyS0 2>&1
echo "cf-boot cmdline=$(cat /proc/cmdline)"
done_() { echo "cf-done $*"; sync; poweroff -f; }
for m in /modules/*.ko; do insmod "$m" || done_ "error=insmod-$m"; done
ip link set lo up
ip link set eth0 up
udhcpc -i eth0 -n -q -f -t 30 -T 2 -s /udhcpc.script || done_ "error=dhcp"
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | head -n 1; }
ks=$(arg inst.ks)
[ -n "$ks" ] || done_ "error=no-inst.ks"
fetch() {  # fetch URL FILE (no -T: bookworm's static busybox wget crashes with it)
  if wget -q -O "$2" "$1"; then
    echo "cf-fetch url=$1 sha256=$(sha256sum "$2" | cut -d' ' -f1)"
  else
    echo "cf-fetch url=$1 failed"; return 1
  fi
}
fetch "$ks" /ks.cfg || done_ "error=kickstart"
# What the kickstart's %post fetches: `curl ... -o /root/bundle.json "MAP"`, then the
# installer script is given "BASE" (each file is BASE + its path).
map=$(sed -n 's|^curl .*-o /root/bundle.json "\([^"]*\)".*|\1|p' /ks.cfg | head -n 1)
base=$(sed -n 's|^/usr/libexec/platform-python - / "\([^"]*\)" .*|\1|p' /ks.cfg | head -n 1)
[ -n "$map" ] && [ -n "$base" ] || done_ "error=no-bundle-in-kickstart"
fetch "$map" /bundle.json || done_ "error=map"
# The map is JSON written with sorted keys, one key a line: each entry's "path" comes before
# its "sha256" (null for a file the map does not pin).
awk -F'"' '$2 == "path" {p = $4} $2 == "sha256" {print p, ($4 == "" ? "null" : $4)}' \
  /bundle.json >/files
n=0; bad=0
while read -r path want; do
  n=$((n + 1))
  if wget -q -O /file "$base$path"; then
    got=$(sha256sum /file | cut -d' ' -f1)
    if [ "$want" = null ] || [ "$got" = "$want" ]; then r=ok; else r=bad; bad=$((bad + 1)); fi
  else
    got=none; r=failed; bad=$((bad + 1))
  fi
  echo "cf-file path=$path want=$want got=$got result=$r"
done </files
done_ "files=$n bad=$bad"
"""

UDHCPC = r"""#!/bin/sh
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -n "$router" ] && ip route add default via "${router%% *}" dev "$interface"
    echo "cf-dhcp ip=$ip mask=$mask router=$router server=$serverid"
    ;;
esac
"""

GRUB_MODULES = [
    "efinet", "net", "tftp", "http", "normal", "linux", "linuxefi", "echo", "configfile",
    "test", "minicmd", "serial", "terminal", "efi_gop", "reboot", "halt", "sleep", "ls", "cat",
    "search", "part_msdos", "part_gpt", "fat", "chain",
]  # fmt: skip

# The NIC's drivers (Debian builds them as modules); what they need comes from each module's
# own `depends` (modinfo), loaded first.
NIC_MODULES = ["virtio_pci", "virtio_net"]


# 16-bit MBR code: DS=0, print the NUL-terminated message at 0x7c16 to COM1, halt.
MBR_CODE = bytes.fromhex("fc31c08ed8be167cbaf803ac84c07403eeebf8f4ebfd")


def kernel_package() -> Path:
    """The Debian kernel package tests/install-tools fetched."""
    found = sorted(KERNEL_CACHE.glob("linux-image-*.deb"))
    if not found:
        why = f"no kernel package in {KERNEL_CACHE} (tests/install-tools fetches it)"
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)
    return found[-1]


def _unpacked(work: Path) -> Path:
    out = work / "linux-image"
    if not out.exists():
        require_tool("dpkg-deb")
        subprocess.run(["dpkg-deb", "-x", str(kernel_package()), str(out)], check=True, timeout=300)
    return out


def kernel(work: Path) -> bytes:
    return next((_unpacked(work) / "boot").glob("vmlinuz-*")).read_bytes()


def _load_order(modules: Path, wanted: list[str]) -> list[Path]:
    """`wanted` and every module they depend on, each after its dependencies."""
    modinfo = require_tool("modinfo")
    order: list[Path] = []

    def visit(name: str) -> None:
        path = next(modules.rglob(f"{name}.ko*"))
        if path in order:
            return
        run = subprocess.run(
            [modinfo, "-F", "depends", str(path)], capture_output=True, text=True, check=True
        )
        for dep in filter(None, run.stdout.strip().split(",")):
            visit(dep)
        if path not in order:
            order.append(path)

    for name in wanted:
        visit(name)
    return order


def initrd(work: Path) -> bytes:
    """A gzip'd newc cpio: static busybox, /init, the udhcpc script and the NIC's modules."""
    tree = work / "initramfs"
    shutil.rmtree(tree, ignore_errors=True)
    for d in ("bin", "proc", "sys", "dev"):
        (tree / d).mkdir(parents=True)
    shutil.copy(require_tool("busybox"), tree / "bin/busybox")
    modules = next(_unpacked(work).glob("lib/modules/*/kernel"))
    (tree / "modules").mkdir()
    for i, path in enumerate(_load_order(modules, NIC_MODULES)):
        data = path.read_bytes()
        if data[:6] == b"\xfd7zXZ\0":
            data = lzma.decompress(data)
        (tree / "modules" / f"{i:02}-{path.name.split('.')[0]}.ko").write_bytes(data)
    for name, text in (("init", INIT), ("udhcpc.script", UDHCPC)):
        (tree / name).write_text(text)
        (tree / name).chmod(0o755)
    require_tool("cpio")
    names = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    run = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet", "--reproducible"],
        input="\n".join(names).encode() + b"\n",
        cwd=tree,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return gzip.compress(run.stdout, mtime=0)


def grub_image(work: Path, name: str, config: str | None = None) -> bytes:
    """`grub-mkimage -O x86_64-efi` with the net modules; an empty prefix (the network boot
    folder), or `config` embedded (the local disk's stand-in)."""
    tool = require_tool("grub-mkimage")
    out = work / name
    command = [tool, "-O", "x86_64-efi", "-o", str(out), "-p", ""]
    if config is not None:
        (work / f"{name}.cfg").write_text(config)
        command += ["-c", str(work / f"{name}.cfg")]
    subprocess.run([*command, *GRUB_MODULES], check=True, timeout=120, capture_output=True)
    return out.read_bytes()


def shim() -> bytes:
    return Path("/usr/lib/shim/shimx64.efi.signed").read_bytes()


def pxelinux(name: str) -> bytes:
    """pxelinux.0, lpxelinux.0 (pxelinux) or ldlinux.c32 (syslinux-common)."""
    where = {
        "pxelinux.0": "/usr/lib/PXELINUX/pxelinux.0",
        "lpxelinux.0": "/usr/lib/PXELINUX/lpxelinux.0",
        "ldlinux.c32": "/usr/lib/syslinux/modules/bios/ldlinux.c32",
    }
    return Path(where[name]).read_bytes()


def local_disk(work: Path, firmware: str) -> Path:
    """The installed host's disk: a folder (UEFI: an ESP QEMU shows as FAT) or an image."""
    if firmware == "uefi":
        esp = work / "esp"
        app = grub_image(work, "local.efi", f"echo {LOCAL_DISK}\nhalt\n")
        for path in ("EFI/rocky/shimx64.efi", "EFI/BOOT/BOOTX64.EFI"):
            (esp / path).parent.mkdir(parents=True, exist_ok=True)
            (esp / path).write_bytes(app)
        return esp
    disk = work / "disk.img"
    mbr = bytearray(512)
    code = MBR_CODE + (LOCAL_DISK + "\r\n").encode() + b"\0"
    mbr[: len(code)] = code
    mbr[510:512] = b"\x55\xaa"
    disk.write_bytes(bytes(mbr) + bytes(1024 * 1024 - 512))
    return disk


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
