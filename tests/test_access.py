"""generated/access/: the audit account, checked by the programs that read each file.

`visudo -c` reads each role's sudoers file and `cvtsudoers` says what it grants,
`systemd-sysusers --root` creates the user from the sysusers file, `sshd -T` loads the Match
block and the authorized_keys options through a test config, and the forced command runs under
`sh` (dash) with `SSH_ORIGINAL_COMMAND` as sshd sets it, its programs replaced by a recorder,
so every refusal is proven to run nothing. A real sshd on loopback runs the Match block with a
key that has no `command=` (the ForceCommand backstop) and replays the attacks on the hash
probe; the SSH lab (tests/test_audit_live.py) runs the same files behind a real sshd.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from audits.compare import probe_arguments
from clusterforge.lab.fleet import as_record, as_switch_record
from compiler.targets.access import REFUSED
from contract import EthernetSwitch, Host
from contract.account import FORCED, PROBE_COMMAND, SUDOERS
from contract.probes import PROBES
from tests.conftest import loopback_sshd, require_tool

GENERATED = Path(__file__).resolve().parent.parent / "generated"
ACCESS = GENERATED / "access"
ROLES = sorted(p.parent.name for p in ACCESS.glob(f"*/{FORCED}"))
# The role whose hosts have files of both kinds: hashed, and secret ones only stat'ed.
ROLE = "provisioning"
SUDO = "/usr/bin/sudo"


def _contract(host: str) -> dict[str, object]:
    """A host's expected record, or a switch's (its role is its OS), with its deploy map."""
    folder = (
        "hosts" if (GENERATED / "expected" / "hosts" / f"{host}.json").is_file() else "switches"
    )
    contract = json.loads((GENERATED / "expected" / folder / f"{host}.json").read_text("utf-8"))
    contract["deploy"] = json.loads((GENERATED / "deploy" / f"{host}.json").read_text("utf-8"))
    return contract


def _record(host: str) -> Host | EthernetSwitch:
    contract = _contract(host)
    return as_switch_record(contract) if "os" in contract else as_record(contract)


def _hosts_of(role: str) -> list[str]:
    hosts = [
        p.stem
        for p in (GENERATED / "expected" / "hosts").glob("*.json")
        if json.loads(p.read_text("utf-8"))["role"] == role
    ]
    switches = [
        p.stem
        for p in (GENERATED / "expected" / "switches").glob("*.json")
        if json.loads(p.read_text("utf-8"))["os"] == role
    ]
    return sorted(hosts + switches)


# What the audit sends to the probes that take arguments, for a host of ROLE.
TAKES = probe_arguments(as_record(_contract(_hosts_of(ROLE)[0])))
TAKES["systemctl_show"] = ("sshd.service", "tftp.socket", "node_exporter.service")


@pytest.mark.parametrize("role", ROLES)
def test_the_sudoers_file_is_valid_and_grants_exactly_the_root_probes(
    tmp_path: Path, role: str
) -> None:
    visudo = require_tool("visudo")
    cvtsudoers = require_tool("cvtsudoers")
    sudoers = tmp_path / "sudoers"
    sudoers.write_text((ACCESS / role / SUDOERS).read_text(encoding="utf-8"), encoding="utf-8")
    sudoers.chmod(0o440)
    done = subprocess.run([visudo, "-c", "-f", str(sudoers)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # What sudo itself makes of the file: every command line it grants, word for word.
    parsed = subprocess.run(
        [cvtsudoers, "-f", "json", str(sudoers)], capture_output=True, text=True, check=True
    )
    granted = {
        c["command"] for c in json.loads(parsed.stdout)["Command_Aliases"]["CLUSTERFORGE_PROBES"]
    }
    assert not any("*" in c or "?" in c or "[" in c for c in granted)
    want = set()
    for probe in (e.spec for e in PROBES.values()):
        if not probe.root:
            continue
        if probe.takes is None:
            want.add(
                " ".join((probe.program, *probe.argv[1:]))
                if len(probe.argv) > 1
                else f'{probe.program} ""'
            )
            continue
        for host in _hosts_of(role):
            paths = probe_arguments(_record(host)).get(probe.name)
            if paths:
                want.add(" ".join((probe.program, *probe.argv[1:], "--", *paths)))
    assert granted == want
    assert not any(
        c.startswith("/usr/bin/sha256sum") and "/etc/prometheus/ipmi_remote.yml" in c
        for c in granted
    )


@pytest.mark.parametrize("role", ROLES)
def test_secret_files_are_never_hashed_only_stat_ed(role: str) -> None:
    script = (ACCESS / role / FORCED).read_text(encoding="utf-8")
    hashing = script[script.index("\nsha256sum)") : script.index("\nsystemctl_show)")]
    sudoers = (ACCESS / role / SUDOERS).read_text(encoding="utf-8")
    hashed_lines = sudoers.split("/usr/bin/sha256sum")[1:]
    for host in _hosts_of(role):
        deploy = _contract(host)["deploy"]
        assert isinstance(deploy, dict)
        for f in deploy["files"]:
            if f["sha256"] is None:  # check: exists in services.yaml
                assert f"{f['path']} " not in hashing and f"{f['path']}'" not in hashing
                assert not any(f["path"] in part.split("/usr/bin/stat")[0] for part in hashed_lines)


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


@pytest.mark.parametrize(
    ("conf", "group"), [("sysusers.conf", "lldpd"), ("cumulus/sysusers.conf", "_lldpd")]
)
def test_the_account_joins_lldpds_socket_group_as_its_os_names_it(
    tmp_path: Path, conf: str, group: str
) -> None:
    """EPEL's lldpd makes its socket 0770 root:lldpd, Debian's (a Cumulus switch's) 0770
    _lldpd:_lldpd (its postinst's `adduser --system --group _lldpd`; lldpd 1.0.16 on Debian
    12 shows it): systemd-sysusers puts the account in the one the OS has."""
    sysusers = require_tool("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    done = subprocess.run(
        [sysusers, f"--root={tmp_path}", str(ACCESS / conf)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    groups = {
        line.split(":")[0]: line.split(":")[3].split(",")
        for line in (tmp_path / "etc/group").read_text(encoding="utf-8").splitlines()
    }
    assert "clusterforge-audit" in groups[group]
    other = ({"lldpd", "_lldpd"} - {group}).pop()  # the other OS's name: not made at all
    assert other not in groups


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


def _shimmed(tmp_path: Path, role: str = ROLE) -> Path:
    """The role's forced command with every program, sudo included, a recorder that logs its
    argv and prints OK (sudo's just runs the rest: `sudo -n -- COMMAND...`)."""
    script = (ACCESS / role / FORCED).read_text(encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for program in sorted({e.spec.program for e in PROBES.values() if e.spec.program} | {SUDO}):
        shim = bin_dir / program.rsplit("/", 1)[1]
        body = (
            'shift 2\nexec "$@"\n'
            if program == SUDO
            # One word a line: a probe's argument may hold spaces (vtysh -c 'show ...').
            else f'printf "%s\\n" "$0" "$@" >> {tmp_path}/ran\necho OK\n'
        )
        shim.write_text(f"#!/bin/sh\n{body}", "utf-8")
        shim.chmod(0o755)
        script = script.replace(f"set -- {program}", f"set -- {shim}")
    path = tmp_path / FORCED
    path.write_text(script, encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def forced(tmp_path: Path) -> Path:
    return _shimmed(tmp_path)


def _run(forced: Path, command: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"]}
    if command is not None:
        env["SSH_ORIGINAL_COMMAND"] = command
    sh = require_tool("dash")
    return subprocess.run([sh, str(forced)], env=env, capture_output=True, text=True, timeout=30)


# An EOS CLI command is EOS's to run, never a Linux host's forced command's.
LINUX = sorted(n for n, e in PROBES.items() if e.spec.scope != "eos")


def test_an_eos_cli_command_is_refused_by_the_forced_command(forced: Path) -> None:
    eos = [n for n in PROBES if n not in LINUX]
    assert eos
    for name in eos:
        done = _run(forced, shlex.join(["--within", "7", name]))
        assert done.returncode == REFUSED and "not an allowlisted probe" in done.stderr


@pytest.mark.parametrize("name", LINUX)
def test_every_probe_runs_by_name_with_exactly_its_command(forced: Path, name: str) -> None:
    probe = PROBES[name].spec
    iface = "ib0" if probe.per_interface else None
    arguments = TAKES.get(name, ())
    words = [name, *([iface] if iface else []), *arguments]
    done = _run(forced, shlex.join(["--within", "7", *words]))
    assert done.returncode == 0 and done.stdout == "OK\n", done.stderr
    ran = (forced.parent / "ran").read_text(encoding="utf-8").splitlines()
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
        # Root's secrets, devices and the kernel's files: none is in any deploy map.
        "sha256sum /etc/shadow",
        "sha256sum /etc/ssh/ssh_host_ed25519_key",
        "sha256sum /dev/zero",
        "sha256sum /dev/watchdog",
        "sha256sum /dev/sda",
        "sha256sum /proc/self/environ",
        "sha256sum /proc/kcore",
        "sha256sum /sys/firmware/efi/efivars",
        # A secret-bearing file of the map is stat'ed, never hashed.
        "sha256sum /etc/prometheus/ipmi_remote.yml",
        # A path of the map on its own: only the host's whole list, as the audit sends it.
        "sha256sum /etc/chrony.conf",
        "sha256sum " + " ".join(TAKES["sha256sum"]) + " /etc/shadow",
        "sha256sum /etc/shadow " + " ".join(TAKES["sha256sum"]),
        "file_exists /etc/shadow",
        "file_exists /dev/watchdog",
        "file_exists " + " ".join(TAKES["file_exists"]) + " /root/.ssh/id_ed25519",
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


# What the Match block must give the account, as `sshd -T` prints it; every keyword is one
# OpenSSH 8.0 (Rocky 8) takes in a Match block.
ACCOUNT_SETTINGS = {
    "authorizedkeysfile": "/etc/ssh/authorized_keys/%u",
    "forcecommand": PROBE_COMMAND,
    "authenticationmethods": "publickey",
    "passwordauthentication": "no",
    "kbdinteractiveauthentication": "no",
    "maxauthtries": "2",
    "maxsessions": "4",
    "clientaliveinterval": "15",
    "clientalivecountmax": "4",
    "disableforwarding": "yes",
    "allowagentforwarding": "no",
    "allowtcpforwarding": "no",
    "allowstreamlocalforwarding": "no",
    "x11forwarding": "no",
    "permittunnel": "no",
    "permitlisten": "none",
    "permitopen": "none",
    "permittty": "no",
    "permituserrc": "no",
}


def test_sshd_gives_the_account_its_limits_and_no_one_else(tmp_path: Path) -> None:
    sshd = require_tool("sshd")
    keygen = require_tool("ssh-keygen")
    key = tmp_path / "host_key"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "sshd_config"
    config.write_text(f"HostKey {key}\nInclude {ACCESS / 'sshd_config'}\n", encoding="utf-8")

    def effective(user: str) -> dict[str, str]:
        done = subprocess.run(
            [sshd, "-T", "-f", str(config), "-C", f"user={user},host=h,addr=127.0.0.1"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        pairs = (ln.split(" ", 1) for ln in done.stdout.splitlines() if " " in ln)
        return {k: v for k, v in pairs if k in ACCOUNT_SETTINGS}

    assert effective("clusterforge-audit") == ACCOUNT_SETTINGS
    others = effective("alice")
    assert others["authorizedkeysfile"] == ".ssh/authorized_keys .ssh/authorized_keys2"
    assert others["permittty"] == "yes" and others["maxsessions"] == "10"
    assert "forcecommand" not in others or others["forcecommand"] == "none"


def test_the_limits_file_caps_the_account_s_processes() -> None:
    # pam_limits' format (limits.conf(5)): <domain> <type> <item> <value>.
    lines = [
        ln.split()
        for ln in (ACCESS / "limits.conf").read_text(encoding="utf-8").splitlines()
        if ln and not ln.startswith("#")
    ]
    assert ["clusterforge-audit", "hard", "nproc", "64"] in lines
    assert all(len(words) == 4 and words[1] == "hard" for words in lines)


@pytest.fixture
def account_sshd(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real sshd on loopback running the generated Match block for this test's own user,
    whose key is in the account's authorized_keys file *without* `command=` or `restrict`:
    whatever it sends, the ForceCommand backstop runs the role's forced command (programs
    recorded, not run). Yields a function that sends one command and returns (rc, stderr)."""
    ssh = require_tool("ssh")
    user = getpass.getuser()
    command = _shimmed(tmp_path)
    keys = tmp_path / "authorized_keys"
    match = (
        (ACCESS / "sshd_config")
        .read_text(encoding="utf-8")
        .replace("Match User clusterforge-audit", f"Match User {user}")
        .replace("/etc/ssh/authorized_keys/%u", str(keys))
        .replace(PROBE_COMMAND, f"/bin/sh {command}")
    )
    config = f"PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n{match}"
    with loopback_sshd(tmp_path, config) as (port, known):
        keys.write_text((tmp_path / "client_key.pub").read_text(encoding="utf-8"), encoding="utf-8")
        base = [
            ssh,
            "-F",
            "/dev/null",
            "-p",
            str(port),
            "-i",
            str(tmp_path / "client_key"),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={known}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ControlMaster=no",
        ]

        def send(*args: str) -> tuple[int, str]:
            done = subprocess.run(
                [*base, *args[:-1], "--", f"{user}@127.0.0.1", args[-1]],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            return done.returncode, done.stdout + done.stderr

        yield send


ATTACKS = [
    "sha256sum /etc/shadow",
    "sha256sum /etc/ssh/ssh_host_ed25519_key",
    "sha256sum /etc/prometheus/ipmi_remote.yml",
    "sha256sum /dev/zero",
    "sha256sum /dev/watchdog",
    "sha256sum /proc/self/environ",
    "sha256sum /proc/1/mem",
    "sha256sum /etc/not/in/the/map",
    "sha256sum /etc/chrony.conf",
    "file_exists /etc/shadow",
    "file_exists /dev/watchdog",
    "sh -c id",
    "/usr/bin/sha256sum -- /etc/shadow",
]


@pytest.mark.realtool
def test_a_real_sshd_refuses_every_attack_on_the_hash_probe_whatever_the_key_says(
    account_sshd,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    for attack in ATTACKS:
        rc, said = account_sshd(attack)
        assert rc == REFUSED and "clusterforge-probe: refused:" in said, (attack, rc, said)
    # A subsystem goes to the forced command too: sftp never starts.
    rc, said = account_sshd("-s", "sftp")
    assert rc == REFUSED, said
    assert not (tmp_path / "ran").exists()  # nothing ran, as root or otherwise
    # The host's own list, word for word, is what runs.
    rc, said = account_sshd(shlex.join(["--within", "30", "sha256sum", *TAKES["sha256sum"]]))
    assert rc == 0 and said == "OK\n", said
    ran = (tmp_path / "ran").read_text(encoding="utf-8").splitlines()
    assert ran[1:] == ["--", *TAKES["sha256sum"]]


def test_a_role_s_forced_command_refuses_another_role_s_files(tmp_path: Path) -> None:
    gpu = _shimmed(tmp_path, "gpu")
    done = _run(gpu, shlex.join(["sha256sum", *TAKES["sha256sum"]]))
    assert done.returncode == REFUSED, done.stderr
    done = _run(gpu, shlex.join(["file_exists", *TAKES["file_exists"]]))
    assert done.returncode == REFUSED, done.stderr
    assert not (tmp_path / "ran").exists()
