"""generated/access/: the audit account, checked by the programs that read each file.

`visudo -c` reads the sudoers file, `systemd-sysusers --root` creates the user from the
sysusers file, `sshd -T` loads the authorized_keys options through a test config, and the
forced command runs under `sh` (dash) with `SSH_ORIGINAL_COMMAND` as sshd sets it, its
programs replaced by a recorder, so every refusal is proven to run nothing. The SSH lab
(tests/test_audit_live.py) runs the same files behind a real sshd.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from compiler.probes import PROBES
from compiler.targets.access import PROBE_COMMAND, REFUSED
from tests.conftest import require_tool

ACCESS = Path(__file__).resolve().parent.parent / "generated" / "access"
# Arguments of the probes that take a host's own list, as a deploy map names them.
TAKES = {
    "paths": ("/etc/chrony.conf", "/etc/NetworkManager/system-connections/eno1.nmconnection"),
    "units": ("sshd.service", "tftp.socket", "node_exporter.service"),
}


def test_the_sudoers_file_is_valid_and_grants_exactly_the_root_probes(tmp_path: Path) -> None:
    visudo = require_tool("visudo")
    sudoers = tmp_path / "sudoers"
    sudoers.write_text((ACCESS / "sudoers").read_text(encoding="utf-8"), encoding="utf-8")
    sudoers.chmod(0o440)
    done = subprocess.run([visudo, "-c", "-f", str(sudoers)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    text = sudoers.read_text(encoding="utf-8")
    for probe in PROBES.values():
        assert (probe.program in text) == probe.root, probe.name
    assert '/usr/sbin/ibnetdiscover ""' in text  # no arguments: a bare path would allow any


def test_the_sysusers_file_creates_the_account_with_a_shell(tmp_path: Path) -> None:
    sysusers = require_tool("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    conf = ACCESS / "sysusers.conf"
    done = subprocess.run(
        [sysusers, f"--root={tmp_path}", str(conf)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    entry = next(
        line.split(":")
        for line in (tmp_path / "etc/passwd").read_text(encoding="utf-8").splitlines()
        if line.startswith("clusterforge-audit:")
    )
    # sshd runs the forced command with the login shell: it must be a shell.
    assert entry[5:] == ["/var/lib/clusterforge-audit", "/bin/sh"]


def test_the_authorized_keys_line_restricts_the_key_to_the_forced_command() -> None:
    keygen = require_tool("ssh-keygen")
    line = next(
        ln
        for ln in (ACCESS / "authorized_keys").read_text(encoding="utf-8").splitlines()
        if not ln.startswith("#")
    )
    options, key = line.split(" ", 1)
    assert options == f'restrict,command="{PROBE_COMMAND}"'
    # ssh-keygen reads the key part as sshd will (it prints the fingerprint).
    done = subprocess.run(
        [keygen, "-l", "-f", "/dev/stdin"], input=key, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def forced(tmp_path: Path) -> Path:
    """The forced command with every program a recorder that logs its argv and prints OK."""
    script = (ACCESS / "clusterforge-probe").read_text(encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in sorted({p.program for p in PROBES.values()}):
        shim = bin_dir / program.rsplit("/", 1)[1]
        shim.write_text(f'#!/bin/sh\necho "$0 $*" >> {tmp_path}/ran\necho OK\n', "utf-8")
        shim.chmod(0o755)
        script = script.replace(f"set -- {program}", f"set -- {shim}")
    path = tmp_path / "clusterforge-probe"
    path.write_text(script, encoding="utf-8")
    return path


def _run(forced: Path, command: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"]}
    if command is not None:
        env["SSH_ORIGINAL_COMMAND"] = command
    sh = require_tool("dash")
    return subprocess.run([sh, str(forced)], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_every_probe_runs_by_name_with_exactly_its_command(forced: Path, name: str) -> None:
    probe = PROBES[name]
    iface = "ib0" if probe.per_interface else None
    arguments = TAKES.get(probe.takes or "", ())
    words = [name, *([iface] if iface else []), *arguments]
    done = _run(forced, shlex.join(["--within", "7", *words]))
    assert done.returncode == 0 and done.stdout == "OK\n", done.stderr
    ran = (forced.parent / "ran").read_text(encoding="utf-8").split()
    assert ran[1:] == list(probe.argv_for(iface, arguments)[1:])


@pytest.mark.parametrize(
    "command",
    [
        None,
        "",
        "id",
        "uname -r",
        "uname_r x",
        "ethtool_i",
        "ethtool_i -S",
        "ethtool_i a;id",
        "ethtool_i a/b",
        "ethtool_i *",
        "ethtool_i 0123456789abcdef",
        "--within",
        "--within x uname_r",
        "--within 0 uname_r",
        "--within 10000 uname_r",
        "--within -1 uname_r",
        "ip_addr\tx",
        "sha256sum",
        "sha256sum etc/x",
        "sha256sum /etc/../shadow",
        "sha256sum /etc/.x",
        "sha256sum /etc//x",
        "sha256sum /etc/",
        "sha256sum /-x",
        "sha256sum /etc/$(id)",
        "systemctl_show",
        "systemctl_show sshd",
        "systemctl_show a..b.service",
        "systemctl_show ;id.service",
        "systemctl_show .service",
    ],
)
def test_anything_else_is_refused_and_runs_nothing(forced: Path, command: str | None) -> None:
    done = _run(forced, command)
    assert done.returncode == REFUSED, (command, done.stdout, done.stderr)
    assert done.stderr.startswith("clusterforge-probe: refused:")
    assert not (forced.parent / "ran").exists()


def test_a_probe_runs_no_longer_than_within(forced: Path) -> None:
    (forced.parent / "bin" / "uname").write_text("#!/bin/sh\nexec sleep 60\n", "utf-8")
    done = _run(forced, "--within 1 uname_r")
    assert done.returncode == 124  # timeout(1): the time ran out, the probe was ended


def test_sshd_finds_the_key_in_roots_file_for_the_account_only(tmp_path: Path) -> None:
    sshd = require_tool("sshd")
    keygen = require_tool("ssh-keygen")
    key = tmp_path / "host_key"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "sshd_config"
    config.write_text(f"HostKey {key}\nInclude {ACCESS / 'sshd_config'}\n", encoding="utf-8")

    def effective(user: str) -> list[str]:
        done = subprocess.run(
            [sshd, "-T", "-f", str(config), "-C", f"user={user},host=h,addr=127.0.0.1"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return [
            ln
            for ln in done.stdout.splitlines()
            if ln.startswith(("authorizedkeysfile", "permittty"))
        ]

    assert effective("clusterforge-audit") == [
        "permittty no",
        "authorizedkeysfile /etc/ssh/authorized_keys/%u",
    ]
    assert effective("alice") == [
        "permittty yes",
        "authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2",
    ]
