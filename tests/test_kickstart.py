"""The kickstart's %post, run: its commands taken from the generated kickstart and run with
bash, never restated here.

- The accounts block (sshd_config's Include, systemd-sysusers, systemd-tmpfiles) runs on a
  host's bundle laid out as a root file system, with Rocky 8's stock sshd_config
  (tests/stock/rocky8/sshd_config), the `root=/` it starts with pointed at that tree. Then the
  real sshd, in a private mount namespace where that tree's /etc/ssh, account files, forced
  command and home are the host's, on loopback, takes the audit key and runs the forced
  command; without the block, Rocky 8's sshd_config never reads the account's Match block and
  the key is refused.
- The OFED block's module check runs with the real modinfo over a module tree made by the
  real depmod. What stands in: the two mlx5_core.ko files are small ELF objects built here
  (gcc) with only a `.modinfo` section, one where MLNX_OFED's kernel package puts its build
  (extra/mlnx-ofa_kernel/), one where the kernel's own driver lives (kernel/drivers/); dnf
  is a no-op and ofed_info prints the pinned version, as MLNX_OFED's does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from compiler import bundle, generate
from compiler.pipeline import Compiled, compile_repo, compile_source
from tests.conftest import REPO, require_tool
from tests.test_generate import parse_tree

STOCK_SSHD = REPO / "tests/stock/rocky8/sshd_config"
INCLUDE = "Include /etc/ssh/sshd_config.d/*.conf"


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_repo(REPO)


def post(ks: str) -> list[str]:
    """The lines of the kickstart's %post section."""
    lines = ks.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("%post"))
    return lines[start + 1 : lines.index("%end", start)]


def accounts_block(ks: str) -> str:
    """The %post lines that make the bundle's accounts: from `root=/` to the loop's `done`."""
    lines = post(ks)
    start = lines.index("root=/")
    end = lines.index("done", start)
    return "\n".join(lines[start + 1 : end + 1]) + "\n"


def run_accounts_block(ks: str, root: Path) -> None:
    script = f"set -euo pipefail\nroot={root}/\n" + accounts_block(ks)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def host_root(compiled: Compiled, host: str, to: Path) -> Path:
    """`host`'s bundle as a root file system over a stock Rocky 8 /etc/ssh, with this
    machine's system accounts (sshd's privilege separation user among them) in /etc."""
    bundle.write(to, bundle.bundles(compiled, hosts=[host]))
    root = to / host
    (root / "etc/ssh/sshd_config").write_bytes(STOCK_SSHD.read_bytes())
    for name in ("passwd", "group", "shadow", "gshadow"):
        if Path("/etc", name).exists():
            shutil.copy2(Path("/etc", name), root / "etc" / name)
    return root


# --- the accounts -----------------------------------------------------------------------


@pytest.mark.realtool
def test_post_makes_the_bundle_s_accounts_and_their_homes(
    compiled: Compiled, tmp_path: Path
) -> None:
    for tool in ("systemd-sysusers", "systemd-tmpfiles"):
        require_tool(tool)
    host = compiled.plan.site.audit.metrics.host if compiled.plan.site.audit else "mon01"
    root = host_root(compiled, host, tmp_path)
    ks = compiled.files[f"kickstart/{host}.ks"].decode()
    run_accounts_block(ks, root)
    run_accounts_block(ks, root)  # a second run changes nothing
    config = (root / "etc/ssh/sshd_config").read_text().splitlines()
    assert config[0] == INCLUDE and config.count(INCLUDE) == 1
    assert config[1:] == STOCK_SSHD.read_text().splitlines()
    users = {
        f[0]: f for f in (ln.split(":") for ln in (root / "etc/passwd").read_text().splitlines())
    }
    for user in ("clusterforge-audit", "clusterforge-metrics"):
        home = root / users[user][5].lstrip("/")
        assert home.is_dir(), user
        assert (home.stat().st_uid, home.stat().st_gid) == (
            int(users[user][2]),
            int(users[user][3]),
        )
    textfile = root / "var/lib/node_exporter/textfile"
    assert textfile.stat().st_uid == int(users["clusterforge-metrics"][2])
    assert textfile.stat().st_mode & 0o777 == 0o755


def _binds(root: Path, user: str) -> list[str]:
    home = next(
        ln.split(":")[5]
        for ln in (root / "etc/passwd").read_text().splitlines()
        if ln.startswith(f"{user}:")
    )
    binds = ["etc/ssh", "etc/passwd", "etc/group", "etc/shadow", "usr/local/libexec", home[1:]]
    for where in binds:
        if (root / where).is_dir():
            Path("/", where).mkdir(parents=True, exist_ok=True)  # a mount point only
    return binds


def _in_root(root: Path, binds: list[str]) -> list[str]:
    """The command line that runs "$@" with `root`'s `binds` over this machine's. What goes
    in /etc goes into a copy of this machine's /etc, bound over it whole: a file bound alone
    is unmounted when another process renames a file over it (useradd and userdel replace
    /etc/passwd so, and the lab tests run them beside these), and sshd then read this
    machine's accounts and refused the audit user as invalid."""
    etc = root.with_name(f"{root.name}.etc")
    shutil.rmtree(etc, ignore_errors=True)
    # A lock or backup file useradd drops while this copies is not needed: skipped.
    shutil.copytree("/etc", etc, symlinks=True, copy_function=_copy_if_there)
    for where in (w for w in binds if w.startswith("etc/")):
        mine, theirs = root / where, etc / where.removeprefix("etc/")
        if theirs.is_dir() and not theirs.is_symlink():
            shutil.rmtree(theirs)
        else:
            theirs.unlink(missing_ok=True)
        if mine.is_dir():
            shutil.copytree(mine, theirs, symlinks=True)
        else:
            shutil.copy2(mine, theirs)
    rest = [w for w in binds if not w.startswith("etc/")]
    mounts = " && ".join(f'mount --bind "$1/{w}" "/{w}"' for w in rest)
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount --bind "{etc}" /etc && {mounts} && shift && exec "$@"', "sh",
            str(root)]  # fmt: skip


def _copy_if_there(src: str, dst: str) -> None:
    with suppress(FileNotFoundError):
        shutil.copy2(src, dst)


def effective(root: Path, audit_user: str, user: str) -> dict[str, str]:
    """`sshd -T` for a connection of `user`: what sshd makes of root's config."""
    done = subprocess.run(
        [*_in_root(root, _binds(root, audit_user)), require_tool("sshd"), "-T",
         "-C", f"user={user},host=h,addr=127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


@contextmanager
def sshd_on(root: Path, user: str, log: Path) -> Iterator[int]:
    """The real sshd with `root`'s /etc/ssh (its sshd_config as is), account files, forced
    command and `user`'s home in place of this machine's, in a private mount namespace, on a
    loopback port; only the port, the address and the pid file are given on its command line."""
    sshd = require_tool("sshd")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sshd, "-D", "-E", str(log), "-o", f"ListenAddress=127.0.0.1:{port}",
            "-o", "PidFile=none"]  # fmt: skip
    proc = subprocess.Popen([*_in_root(root, _binds(root, user)), *argv])
    try:
        until = time.monotonic() + 20
        while True:
            assert proc.poll() is None, log.read_text() if log.exists() else "sshd stopped"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < until, "sshd did not listen"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _ssh(key: Path, port: int, user: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("ssh"), "-F", "/dev/null", "-i", str(key), "-p", str(port),
         "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", f"{user}@127.0.0.1", command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip


@pytest.mark.realtool
@pytest.mark.parametrize("with_post", [True, False], ids=["with-post", "stock"])
def test_the_audit_key_logs_in_on_a_stock_rocky8_host(tmp_path: Path, with_post: bool) -> None:
    for tool in ("ssh-keygen", "unshare", "mount", "systemd-sysusers", "systemd-tmpfiles"):
        require_tool(tool)
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = key.with_suffix(".pub").read_text().split()
    tree = generate.generate(4, audit_key=f"{public[0]} {public[1]} audit")
    compiled = compile_source(parse_tree(tree))
    access = compiled.plan.site.audit
    assert access is not None
    root = host_root(compiled, "gpu001", tmp_path / "bundle")
    subprocess.run(["ssh-keygen", "-A", "-f", str(root)], check=True, capture_output=True)
    ks = compiled.files["kickstart/gpu001.ks"].decode()
    if with_post:
        run_accounts_block(ks, root)
    else:
        # As far as an account goes, a host without the block: the account exists, its
        # home too, and sshd_config is Rocky 8's own.
        script = accounts_block(ks).replace("grep -qxF", ": grep -qxF")
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\nroot={root}/\n{script}"], check=False
        )
        assert done.returncode == 0
        assert INCLUDE not in (root / "etc/ssh/sshd_config").read_text()
    os.chmod(root, 0o755)
    with sshd_on(root, access.user, tmp_path / "sshd.log") as port:
        done = _ssh(key, port, access.user, "uname_r")
    log = (tmp_path / "sshd.log").read_text()
    if with_post:
        assert done.returncode == 0, done.stderr + log
        assert done.stdout.strip() == os.uname().release  # the forced command ran uname -r
        refused = None
        # The drop-in's Match block ends with its file: everyone else keeps the stock file's
        # settings that follow the Include.
        audit, other = (
            effective(root, access.user, access.user),
            effective(root, access.user, "root"),
        )
        assert audit["authorizedkeysfile"] == "/etc/ssh/authorized_keys/%u"
        assert audit["permittty"] == "no"
        assert other["authorizedkeysfile"] == ".ssh/authorized_keys"
        assert (other["permittty"], other["x11forwarding"]) == ("yes", "yes")
        assert other["permitrootlogin"] == "yes"  # sshd's own default: prohibit-password
    else:
        refused = done
        assert done.returncode == 255 and "Permission denied (publickey" in done.stderr, log
    assert refused is None or "uname" not in refused.stdout


# --- MLNX_OFED ------------------------------------------------------------------------------


def _module(path: Path, name: str, version: str, tmp: Path) -> None:
    """A stand-in kernel module: an ELF object whose .modinfo section is all modinfo reads."""
    source = tmp / "modinfo.c"
    source.write_text(
        f'__attribute__((section(".modinfo"), used)) static const char info[] = '
        f'"name={name}\\0version={version}\\0license=Dual BSD/GPL";\n'
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([require_tool("gcc"), "-c", "-o", str(path), str(source)], check=True)


def ofed_block(ks: str) -> str:
    lines = post(ks)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# 3. MLNX_OFED"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("# 4. "))
    return "\n".join(lines[start:end]) + "\n"


@pytest.mark.realtool
@pytest.mark.parametrize("build", ["ofed", "inbox"])
def test_the_ofed_check_takes_only_mlnx_ofed_s_mlx5_core(
    compiled: Compiled, tmp_path: Path, build: str
) -> None:
    for tool in ("modinfo", "depmod", "unshare", "mount"):
        require_tool(tool)
    host = compiled.plan.host("gpu001")
    kernel, ofed = host.versions["kernel"], host.versions["ofed"]
    modules = tmp_path / "lib/modules"
    where = {
        "ofed": "extra/mlnx-ofa_kernel/drivers/net/ethernet/mellanox/mlx5/core",
        "inbox": "kernel/drivers/net/ethernet/mellanox/mlx5/core",
    }[build]
    _module(modules / kernel / where / "mlx5_core.ko", "mlx5_core", ofed, tmp_path)
    subprocess.run(
        [require_tool("depmod"), "-b", str(tmp_path), kernel], check=True, capture_output=True
    )
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    (stand_ins / "dnf").write_text("#!/bin/sh\nexit 0\n")
    (stand_ins / "ofed_info").write_text(f"#!/bin/sh\necho 'MLNX_OFED_LINUX-{ofed}:'\n")
    for tool in stand_ins.iterdir():
        tool.chmod(0o755)
    ks = compiled.files["kickstart/gpu001.ks"].decode()
    script = f'set -euo pipefail\nKERNEL="{kernel}"\nOFED="{ofed}"\n' + ofed_block(ks)
    Path("/lib/modules").mkdir(exist_ok=True)  # a mount point only
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" /lib/modules && shift && exec bash -c "$1"', "sh", str(modules),
         script],
        capture_output=True,
        text=True,
        env={"PATH": f"{stand_ins}:/usr/sbin:/usr/bin:/sbin:/bin"},
        check=False,
    )  # fmt: skip
    if build == "ofed":
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1 and "not MLNX_OFED's" in done.stderr, done.stderr


def test_ofed_only_where_the_model_has_an_hca(compiled: Compiled) -> None:
    for host in compiled.plan.hosts:
        ks = compiled.files.get(f"kickstart/{host.name}.ks")
        if ks is None:
            continue
        text = ks.decode()
        assert ("mlnx-ofed-all" in text) == bool(host.ib_ports), host.name
        assert ("ofed" in host.versions) == bool(host.ib_ports), host.name
        if not host.ib_ports:
            assert "rdma" not in host.services and "openibd.service" not in text
