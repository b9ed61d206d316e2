"""The TFTP root the provisioning host's bundle makes: the PXE loaders delivered by the tftp
service's systemd-tmpfiles file, read by the real `systemd-tmpfiles --create --root=ROOT`.

The loaders themselves are Rocky 8 package files that cannot be had here: each is a stand-in
(a small text file) at the path its Rocky 8 package installs it (compiler/targets/pxe.py
LOADERS), so the test proves the copy, not the binary.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compiler import bundle
from compiler.load import load
from compiler.pipeline import Compiled, compile_source
from compiler.targets.pxe import LOADERS, TFTP_ROOT
from tests.conftest import REPO, require_tool
from tests.test_facts import _bios_services, _variant

TMPFILES_D = "etc/tmpfiles.d/clusterforge-tftpboot.conf"


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_source(load(REPO / "cluster"))


def provisioning_root(compiled: Compiled, tmp: Path) -> Path:
    """The provisioning host's bundle laid out as its root file system, with a stand-in for
    every loader at its package's path."""
    name = compiled.plan.site.services.provisioning
    bundle.write(tmp / "bundle", bundle.bundles(compiled, [name]))
    root = tmp / "bundle" / name
    # The users the root's other tmpfiles lines name (the served folders' group, apache), as
    # systemd-tmpfiles --root resolves them: from the root's own files.
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\napache:x:48:\n")
    # The accounts the bundle declares, made first, as systemd-sysusers.service runs before
    # systemd-tmpfiles-setup.service at boot: the accounts' tmpfiles lines name them.
    sysusers = [require_tool("systemd-sysusers"), f"--root={root}"]
    subprocess.run(sysusers, capture_output=True, text=True, timeout=60, check=True)
    for loader, path in LOADERS.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(f"stand-in for {loader} at {path}\n")
    return root


def tmpfiles(root: Path) -> subprocess.CompletedProcess[str]:
    # No config named: it reads ROOT/etc/tmpfiles.d/*.conf, as the boot-time service does.
    command = [require_tool("systemd-tmpfiles"), "--create", f"--root={root}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def offered(compiled: Compiled) -> set[str]:
    """What the firmware and the loaders ask the TFTP root for, besides the menus: the boot
    file DHCP offers for each boot mode in use, and what that loader loads next."""
    boot_files = compiled.plan.provisioning.boot_files
    itself = compiled.plan.site.services.provisioning
    modes = {h.boot.value for h in compiled.plan.hosts if h.name != itself}
    follows = {"shimx64.efi": "grubx64.efi", "lpxelinux.0": "ldlinux.c32"}
    files = {getattr(boot_files, mode) for mode in modes}
    return files | {follows[f] for f in files}


@pytest.mark.realtool
@pytest.mark.parametrize("variant", ["uefi", "bios"])
def test_systemd_tmpfiles_puts_every_loader_on_the_tftp_root(
    compiled: Compiled, tmp_path: Path, variant: str
) -> None:
    cluster = compiled if variant == "uefi" else _variant(_bios_services)
    root = provisioning_root(cluster, tmp_path)
    assert (root / TMPFILES_D).is_file(), "the tftp service's home for pxe/tftpboot.conf"
    done = tmpfiles(root)
    assert done.returncode == 0, done.stderr
    tftp = root / TFTP_ROOT.lstrip("/")
    want = offered(cluster)
    assert {"shimx64.efi", "grubx64.efi"} <= want  # the GPU servers boot UEFI in both
    assert ("lpxelinux.0" in want) == (variant == "bios")
    for name in sorted(want):
        assert (tftp / name).read_text() == f"stand-in for {name} at {LOADERS[name]}\n", name
    # The menus are there from the bundle itself, beside the loaders.
    assert list(tftp.glob("grub.cfg-01-*"))


@pytest.mark.realtool
def test_a_wrong_package_path_leaves_the_loader_off(compiled: Compiled, tmp_path: Path) -> None:
    """The oracle can say no: systemd-tmpfiles skips a `C` line whose source is missing (and
    still exits 0), so a loader not at its package's path is simply absent from the root,
    which the test above would see."""
    root = provisioning_root(compiled, tmp_path)
    (root / LOADERS["shimx64.efi"].lstrip("/")).unlink()
    done = tmpfiles(root)
    assert done.returncode == 0, done.stderr
    tftp = root / TFTP_ROOT.lstrip("/")
    assert not (tftp / "shimx64.efi").exists() and (tftp / "grubx64.efi").exists()


def test_only_line_types_rocky_8_systemd_knows(compiled: Compiled) -> None:
    """Rocky 8 runs systemd 239: `d` and `C` (no `C+`, which came later)."""
    lines = compiled.files["pxe/tftpboot.conf"].decode().splitlines()
    kinds = {line.split()[0] for line in lines if line and not line.startswith("#")}
    assert kinds == {"d", "C"}
