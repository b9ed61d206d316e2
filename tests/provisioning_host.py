"""The provisioning host brought up from its bundle: its real daemons, as their own users.

`bundle_host` runs `clusterforge bundle --host <prov>` on a repository; `lay_out` copies that
overlay into a root directory with the modes and owners of the host's map JSON (as `%post` or
rsync applies them), then runs the real `systemd-tmpfiles --create --root` on the bundle's
tmpfiles.d files, which is how the TFTP root gets its loaders on a host. Rocky's `apache`
user and group do not exist on Debian: they become Debian's `www-data`, and `lay_out` says so.

`provisioning_host` brings the host up in two network namespaces made here:

- ``srv``: the provisioning host, its management NIC (the planned name and address) on a veth,
  its default route through its rack's gateway;
- ``rack``: the routed fabric between the provisioning host and a client rack. The generated
  dhcpd.conf declares every rack's subnet and expects the rack's leaf switch to relay (the
  reference cluster has no flat PXE network), so the honest arrangement is a relay, not the
  provisioning host moved onto the client's subnet: this namespace holds the provisioning rack's
  gateway on the veth, the client rack's gateway on a bridge, a tap on that bridge for a VM,
  forwards between them, and runs ISC's `dhcrelay` (what a leaf's `ip helper-address` does),
  which stamps the client gateway as giaddr so dhcpd picks the client's subnet.

In a mount namespace of each daemon the laid-out `/etc/dhcp`, `/var/lib/tftpboot` and
`/var/www/html` are bind-mounted at their real paths, and the daemons run as on the host:
dhcpd as `dhcpd` (`-user dhcpd -group dhcpd`, as Rocky's dhcpd.service does; Debian's build
has the options, Rocky's dhcp-server package makes the account and tests/install-tools does
here), `in.tftpd -L -u tftp -s` with verbose logging (to syslog: a socket this module reads
stands in for /dev/log; each transfer's process drops to tftp), and Apache in the foreground
(`-DFOREGROUND`: a root parent holding port 80 and workers as www-data, as `-k start` runs)
from a copy of Debian's stock /etc/apache2 (User www-data, DocumentRoot /var/www/html) with
the host's generated `/etc/httpd/conf.d/*.conf` added to it. The start checks that dhcpd and
Apache's workers run as those users. Everything is stopped and removed on exit: the processes
by their own process groups, the namespaces by name; the mount namespaces go with their
processes.
"""

from __future__ import annotations

import contextlib
import grp
import ipaddress
import json
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO, require_tool

# Rocky 8's httpd runs as apache:apache; Debian's apache2 as www-data:www-data.
ROCKY_TO_DEBIAN = {"apache": "www-data"}
MOUNTED = ("/etc/dhcp", "/var/lib/tftpboot", "/var/www/html")
LOCAL = ipaddress.ip_network("127.0.0.0/8")


# The secrets a site's build provides (bundle refuses placeholders for what hosts install):
# test values, so the served kickstarts carry a real-shaped hash, as a site's do.
# The hash is made here, not written down: no crypt(3) hash is ever committed.
SECRETS = {
    "CLUSTERFORGE_ROOT_HASH": "openssl passwd -6 -salt chaintest not-a-real-password",
    "CLUSTERFORGE_WEBHOOK_OPS": "https://chat.invalid/hooks/ops",
    "CLUSTERFORGE_WEBHOOK_ONCALL": "https://chat.invalid/hooks/oncall",
    "CLUSTERFORGE_WEBHOOK_GPU": "https://chat.invalid/hooks/gpu",
    "CLUSTERFORGE_IPMI_PASSWORD": "chain-test-bmc-password",
    "CLUSTERFORGE_SNMP_COMMUNITY": "chain-test-snmp-community",
}


def bundle_host(repo: Path, host: str, out: Path, extra: Sequence[str] = ()) -> None:
    """`clusterforge bundle -C repo --host host --out out`, the CLI a site runs, with its
    secrets given as a site's build gives them."""
    command = [sys.executable, "-c", "from clusterforge.cli import run; run()"]
    command += ["bundle", "-C", str(repo), "--host", host, "--out", str(out), *extra]
    env = {**os.environ, **SECRETS}
    root_hash = shlex.split(SECRETS["CLUSTERFORGE_ROOT_HASH"])
    made = subprocess.run(root_hash, capture_output=True, text=True, timeout=30, check=True)
    env["CLUSTERFORGE_ROOT_HASH"] = made.stdout.strip()
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=repo, env=env)
    assert run.returncode == 0, f"clusterforge bundle failed:\n{run.stdout}\n{run.stderr}"


def _ids(owner: str) -> tuple[int, int, list[str]]:
    """uid and gid for a map's `user:group`: Rocky's apache as Debian's www-data; an account
    this machine lacks (named, prometheus: no daemon here reads those files) stays root."""
    ids, notes = [], []
    for name, lookup in zip(owner.split(":"), (pwd.getpwnam, grp.getgrnam), strict=True):
        mapped = ROCKY_TO_DEBIAN.get(name, name)
        if mapped != name:
            notes.append(f"{name} -> {mapped} (Debian)")
        try:
            entry = lookup(mapped)
        except KeyError:
            notes.append(f"{name}: no such account here, root kept")
            ids.append(0)
            continue
        ids.append(entry.pw_uid if isinstance(entry, pwd.struct_passwd) else entry.gr_gid)
    return ids[0], ids[1], notes


def lay_out(
    bundle_dir: Path, host: str, root: Path, installed: dict[str, bytes] | None = None
) -> list[str]:
    """Lay `bundle_dir/<host>/` into `root` with its map's modes and owners; `installed` are
    files packages put on the host (path -> bytes) before the bundle's tmpfiles.d run.
    Returns what was said about the users mapped, one line each."""
    shutil.copytree(bundle_dir / host, root, symlinks=True, dirs_exist_ok=True)
    manifest = json.loads((bundle_dir / f"{host}.json").read_text())
    notes: dict[str, int] = {}
    for entry in manifest["files"]:
        dest = root / entry["path"].lstrip("/")
        uid, gid, said = _ids(entry["owner"])
        os.chown(dest, uid, gid)
        os.chmod(dest, int(entry["mode"], 8))
        for note in said:
            key = f"owner {entry['owner']}: {note}"
            notes[key] = notes.get(key, 0) + 1
    for path, data in (installed or {}).items():
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        dest.chmod(0o644)
    tmpfiles = sorted((root / "etc/tmpfiles.d").glob("*.conf"))
    if tmpfiles:
        # `systemd-tmpfiles --root` reads the accounts from ROOT/etc: there Rocky's apache
        # has the uid and gid of Debian's www-data, so its folders are the web server's.
        passwd, group = ["root:x:0:0:root:/root:/bin/bash"], ["root:x:0:"]
        for rocky, debian in ROCKY_TO_DEBIAN.items():
            user = pwd.getpwnam(debian)
            passwd.append(f"{rocky}:x:{user.pw_uid}:{user.pw_gid}::/var/www:/sbin/nologin")
            group.append(f"{rocky}:x:{user.pw_gid}:")
            notes[f"tmpfiles.d: {rocky} is {debian}'s uid and gid"] = len(tmpfiles)
        for name, lines in (("passwd", passwd), ("group", group)):
            assert not (root / "etc" / name).exists(), f"the bundle has /etc/{name}"
            (root / "etc" / name).write_text("\n".join(lines) + "\n")
        tool = require_tool("systemd-tmpfiles")
        # Named by their paths on this machine: systemd-tmpfiles does not look for them under
        # --root, only the paths inside them.
        command = [tool, "--create", f"--root={root}", *map(str, tmpfiles)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"systemd-tmpfiles failed:\n{run.stderr}"
    for path in MOUNTED:
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return [f"{note} ({count} files)" for note, count in sorted(notes.items())]


class _Syslog:
    """A /dev/log stand-in: a datagram socket whose messages go to a file, so in.tftpd's
    syslog lines (every file requested) reach the test."""

    def __init__(self, sock_path: Path, log: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(sock_path))
        sock_path.chmod(0o666)
        self.sock.settimeout(0.2)
        self.log, self.stop = log, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.log.open("a") as out:
            while not self.stop.is_set():
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                out.write(data.decode(errors="replace").rstrip("\0\n") + "\n")
                out.flush()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@dataclass
class Lab:
    """What a test reaches of the running provisioning host."""

    root: Path
    address: str  # the provisioning host's management address
    logs: Path
    rack: list[str]  # a command prefix that runs a program in the rack namespace
    srv: list[str]
    tap: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str) -> str:
        path = self.logs / name
        return path.read_text(errors="replace") if path.exists() else ""

    def tails(self, lines: int = 40) -> str:
        """The last lines of every log, for a failure message."""
        out = []
        for path in sorted(self.logs.rglob("*")):
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path.relative_to(self.logs)} (last {lines} lines)")
                out.extend(tail)
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                out.append(f"--- {name} exited with {proc.returncode}")
        return "\n".join(out)


def _run(command: list[str]) -> None:
    run = subprocess.run(command, timeout=30, capture_output=True, text=True)
    assert run.returncode == 0, f"{shlex.join(command)}: {run.stderr}"


def _mounts(root: Path) -> str:
    """A shell prelude for a daemon's mount namespace: the laid-out paths at their real
    places. Where the machine has no such folder (Debian has no /var/lib/tftpboot), a tmpfs
    over its parent, in the namespace only, makes the mount point: the machine is not
    written, and no daemon here reads anything else under that parent."""
    steps = ["set -e"]
    for path in MOUNTED:
        if not Path(path).is_dir():
            parent = shlex.quote(str(Path(path).parent))
            steps += [f"mount -t tmpfs -o mode=0755 cfhost {parent}", f"mkdir -p {path}"]
        steps.append(f"mount --bind {shlex.quote(str(root / path.lstrip('/')))} {path}")
    return "; ".join(steps)


def _apache_conf(root: Path, scratch: Path) -> Path:
    """A copy of Debian's stock /etc/apache2 with the host's generated conf.d added."""
    conf = scratch / "apache2"
    shutil.copytree("/etc/apache2", conf, symlinks=True)
    for i, generated in enumerate(sorted((root / "etc/httpd/conf.d").glob("*.conf"))):
        shutil.copy(generated, conf / "conf-enabled" / f"zz{i}-{generated.name}")
    return conf


def _wait(what: str, ready: object, lab: Lab, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(ready) and ready():
            return
        for name, proc in lab.processes.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited ({proc.returncode}) before {what}\n{lab.tails()}")
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{lab.tails()}")


def _users(pid: int, children: bool = False) -> set[str]:
    """The user names `pid` runs as (effective uid), or those of its children."""
    pids = [pid]
    if children:
        pids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    names = set()
    for p in pids:
        with contextlib.suppress(FileNotFoundError):
            status = Path(f"/proc/{p}/status").read_text()
            uid = int(next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[2])
            names.add(pwd.getpwuid(uid).pw_name)
    return names


def _listening(prefix: list[str], proto: str, port: int) -> bool:
    run = subprocess.run([*prefix, "ss", "-Hln", f"-{proto}"], capture_output=True, text=True)
    return any(line.split()[3].endswith(f":{port}") for line in run.stdout.splitlines())


@contextlib.contextmanager
def provisioning_host(
    root: Path,
    scratch: Path,
    *,
    iface: str,
    cidr: str,
    gateway: str,
    clients: Sequence[str],
    client_addresses: Sequence[str] = (),
) -> Iterator[Lab]:
    """Run the laid-out `root` as the provisioning host at `cidr` (a.b.c.d/len) on `iface`
    behind `gateway`; `clients` are client rack gateways (a.b.c.d/len) on the rack bridge,
    `client_addresses` hosts' own addresses the rack namespace may send from (no VM needed)."""
    ip = require_tool("ip")
    tools = {n: require_tool(n) for n in ("dhcpd", "dhcrelay", "in.tftpd", "apache2", "unshare")}
    for user in ("dhcpd", "tftp", "www-data"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            why = f"no user {user!r} (tests/install-tools makes it)"
            pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)
    address = cidr.split("/")[0]
    assert ipaddress.ip_address(address) not in LOCAL
    tag = f"{os.getpid() % 100000}{secrets.token_hex(2)}"
    names = {"srv": f"cfsrv{tag}", "rack": f"cfrack{tag}"}
    logs = scratch / "logs"
    logs.mkdir(parents=True)
    srv, rack = ([ip, "netns", "exec", names[k]] for k in ("srv", "rack"))
    lab = Lab(root, address, logs, rack, srv, "tap0")
    syslog: _Syslog | None = None
    try:
        for name in names.values():
            _run([ip, "netns", "add", name])
        s, r = ([ip, "-n", names[k]] for k in ("srv", "rack"))
        prefix = cidr.split("/")[1]
        veth = [ip, "link", "add", iface, "netns", names["srv"], "type", "veth"]
        steps = [
            [*veth, "peer", "name", "up0", "netns", names["rack"]],
            [*s, "link", "set", "lo", "up"],
            [*s, "link", "set", iface, "up"],
            [*s, "addr", "add", cidr, "dev", iface],
            [*s, "route", "add", "default", "via", gateway],
            [*r, "link", "set", "lo", "up"],
            [*r, "link", "set", "up0", "up"],
            [*r, "addr", "add", f"{gateway}/{prefix}", "dev", "up0"],
            [*r, "link", "add", "br0", "type", "bridge"],
            [*r, "link", "set", "br0", "up"],
            *([*r, "addr", "add", c, "dev", "br0"] for c in clients),
            [*r, "tuntap", "add", "dev", lab.tap, "mode", "tap"],
            [*r, "link", "set", lab.tap, "master", "br0"],
            [*r, "link", "set", lab.tap, "up"],
            [*rack, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        ]
        # Clients' own addresses, for a test without a VM: local to the rack namespace, so a
        # program there sends from them and the answers come back through the fabric.
        steps += [[*r, "addr", "add", f"{a}/32", "dev", "lo"] for a in client_addresses]
        for step in steps:
            _run(step)

        prelude = _mounts(root)
        syslog = _Syslog(scratch / "devlog", logs / "tftpd.log")
        # in.tftpd logs through syslog(3): in its namespace /dev/log is this module's socket.
        devdir = scratch / "dev"
        devdir.mkdir()
        dev_steps = [
            f"touch {devdir}/{n} && mount --bind /dev/{n} {devdir}/{n}"
            for n in ("null", "zero", "urandom", "random")
        ]
        dev_steps.append(f"ln -s {scratch}/devlog {devdir}/log")
        dev_steps.append(f"mount --rbind {devdir} /dev")
        leases = scratch / "dhcpd"
        leases.mkdir()
        (leases / "dhcpd.leases").write_text("")
        dhcpd_user = pwd.getpwnam("dhcpd")
        os.chown(leases, dhcpd_user.pw_uid, dhcpd_user.pw_gid)
        os.chown(leases / "dhcpd.leases", dhcpd_user.pw_uid, dhcpd_user.pw_gid)
        apache = _apache_conf(root, scratch)
        apache_logs = logs / "apache2"
        apache_logs.mkdir()
        (scratch / "apache-run").mkdir()
        apache_env = {
            "APACHE_RUN_USER": "www-data",
            "APACHE_RUN_GROUP": "www-data",
            "APACHE_PID_FILE": str(scratch / "apache-run/apache2.pid"),
            "APACHE_RUN_DIR": str(scratch / "apache-run"),
            "APACHE_LOCK_DIR": str(scratch / "apache-run"),
            "APACHE_LOG_DIR": str(apache_logs),
            "LANG": "C",
        }
        daemons: list[tuple[str, list[str], str, list[str], dict[str, str]]] = [
            (
                "dhcpd",
                srv,
                prelude,
                [
                    tools["dhcpd"],
                    "-4",
                    "-f",
                    "-d",
                    "-user",
                    "dhcpd",
                    "-group",
                    "dhcpd",
                    "-cf",
                    "/etc/dhcp/dhcpd.conf",
                    "-lf",
                    str(leases / "dhcpd.leases"),
                    "--no-pid",
                    iface,
                ],
                {},
            ),
            (
                "tftpd",
                srv,
                prelude + "; " + "; ".join(dev_steps),
                [
                    tools["in.tftpd"],
                    "-L",
                    "-u",
                    "tftp",
                    "-v",
                    "-v",
                    "-v",
                    "-a",
                    f"{address}:69",
                    "-s",
                    "/var/lib/tftpboot",
                ],
                {},
            ),
            (
                "apache2",
                srv,
                prelude,
                [
                    tools["apache2"],
                    "-d",
                    str(apache),
                    "-f",
                    str(apache / "apache2.conf"),
                    "-DFOREGROUND",
                ],
                apache_env,
            ),
            (
                "dhcrelay",
                rack,
                "true",
                [tools["dhcrelay"], "-4", "-d", "-id", "br0", "-iu", "up0", address],
                {},
            ),
        ]
        for name, where, pre, command, env in daemons:
            shell = [
                tools["unshare"],
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                f'{pre}; exec "$@"',
                "sh",
                *command,
            ]
            out = (logs / f"{name}.out").open("wb")
            lab.processes[name] = subprocess.Popen(
                [*where, *shell],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **env},
            )
            out.close()
        _wait("dhcpd to listen", lambda: _listening(srv, "u", 67), lab)
        _wait("in.tftpd to listen", lambda: _listening(srv, "u", 69), lab)
        _wait("Apache to listen", lambda: _listening(srv, "t", 80), lab)
        _wait("dhcrelay to start", lambda: "Sending on" in lab.log("dhcrelay.out"), lab)
        # Each daemon as its own user: dhcpd itself once it has dropped root; Apache's workers
        # (its parent stays root to hold port 80, as on a host).
        dhcpd = lab.processes["dhcpd"].pid
        _wait("dhcpd to drop root", lambda: _users(dhcpd) == {"dhcpd"}, lab)
        workers = lambda: _users(lab.processes["apache2"].pid, children=True)  # noqa: E731
        _wait("Apache's workers as www-data", lambda: workers() == {"www-data"}, lab)
        yield lab
    finally:
        for proc in lab.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
        for proc in lab.processes.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=15)
        if syslog:
            syslog.close()
        for name in names.values():
            subprocess.run([ip, "netns", "del", name], timeout=30, capture_output=True)


def repo_copy(tmp: Path, edit: dict[str, tuple[str, str]] | None = None) -> Path:
    """A copy of the repository's cluster/ under `tmp`, with each `{file: (old, new)}`
    replaced once, compiled into its own generated/ (what `bundle -C` reads) as a site's
    commit is."""
    repo = tmp / "repo"
    shutil.copytree(REPO / "cluster", repo / "cluster")
    for name, (old, new) in (edit or {}).items():
        path = repo / "cluster" / name
        text = path.read_text()
        assert text.count(old) == 1, f"{name}: {old!r} is not there once"
        path.write_text(text.replace(old, new))
    command = [sys.executable, "-c", "from clusterforge.cli import run; run()"]
    run = subprocess.run(
        [*command, "compile", "-C", str(repo)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, f"clusterforge compile failed:\n{run.stdout}\n{run.stderr}"
    return repo
