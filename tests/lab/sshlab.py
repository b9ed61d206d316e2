"""The SSH lab: real OpenSSH `sshd` instances on loopback playing the hosts of a small cluster.

``compile_lab(repo, into)`` compiles the reference cluster cut down to five hosts (two GPU
servers, the provisioning, monitoring and subnet-manager hosts, two spines) into
``into/generated/``. The lab plays the *whole* of that cluster, one sshd per host, so an audit
of it runs exactly as in production: no host filter, no host left out.

``SshLab(workdir, hosts)`` starts, for the ``with`` block, one ``sshd -D -e -f CONFIG`` per
host on its own loopback address (127.0.0.2, 127.0.0.3, ...) and a free high port picked
when it starts, so parallel runs coexist. Each sshd has its own ed25519 host key, accepts
only the lab's client key (public key auth only: no password, no PAM), and answers every
command through ``ForceCommand`` with ``tests/lab/responder.py``, which prints the host's
recorded output for a known command line and exits 127 ("command not found") for any
other. ``serve(fleet, fabric_from)`` (re)writes what every host answers from a
``tests.lab.fleet.Fleet``: its probe outputs, and the fabric scan on ``fabric_from`` only.

Each test writes its own ``known_hosts`` (``write_known_hosts``, with hosts whose key is
left out or replaced by an impostor's) and inventory (``write_inventory``: host ->
``127.0.0.x:port``). ``commands()`` reads the responders' log: every command each host was
asked to run, in order. ``stopped(host)`` takes one sshd down for a ``with`` block.

Readiness is proven by reading the SSH banner from the port, never by sleeping. Every sshd
runs in its own process group and gets SIGKILL if the test process dies (``setpriv
--pdeathsig``); stopping one kills its per-connection children (which leave the group with
setsid) and its group, and waits for it.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from audits.collect import probe_of
from audits.probes import PROBES
from compiler import output, pipeline
from compiler.load import Source, load
from tests.lab.fleet import Fleet
from tests.lab.ibsim import LabError, _require, _with_pdeathsig

RESPONDER = Path(__file__).with_name("responder.py")
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without its privilege separation dir
_RACKS = {"r01": ("gpu001", "gpu002"), "s01": ("prov01", "mon01", "sm01")}
_SPINES = ("spine01", "spine02")
_START_ATTEMPTS = 3  # a picked port can be taken before sshd binds it: pick another


def lab_cluster(repo: Path) -> Source:
    """`repo`'s cluster/ cut down to the lab's five hosts: gpu001 and gpu002 (rack r01), and
    prov01, mon01 and sm01 (rack s01, sm01 the one subnet manager); spines 01 and 02."""
    reference = load(repo / "cluster")
    data: dict[str, Any] = dict(reference.data)
    racks = []
    for rack in data["racks"]:
        if rack["name"] in _RACKS:
            nodes = tuple(n for n in rack["nodes"] if n["name"] in _RACKS[rack["name"]])
            racks.append({**rack, "nodes": nodes})
        elif rack["name"] == "n01":
            spines = tuple(s for s in rack["switches"] if s["name"] in _SPINES)
            racks.append({**rack, "switches": spines})
    firmware = {
        **data["firmware"],
        "rings": ({"name": "canary", "nodes": ("gpu001",)}, {"name": "main"}),
    }
    # Two links to each spine keep the one leaf (three hosts on it) within 1:1.
    fabric = {
        **data["fabric"],
        "links_per_spine": 2,
        "subnet_managers": ({"host": "sm01", "priority": 14},),
    }
    data.update(racks=tuple(racks), firmware=firmware, fabric=fabric)
    return Source(data, reference.locations)


def compile_lab(repo: Path, into: Path) -> Path:
    """Compile the lab cluster into `into/generated/`; returns `into`, to pass as `-C`."""
    output.write(into / "generated", pipeline.compile_source(lab_cluster(repo)).files)
    return into


@dataclass(frozen=True)
class Command:
    """One command a lab host was asked to run (a line of the responders' log)."""

    at_ns: int  # time.monotonic_ns() when the responder started
    host: str
    line: str  # the command line, re-quoted with shlex.join


@dataclass
class _Node:
    name: str
    address: str
    folder: Path  # config, host key, pid file, sshd.log, and `state` (what the host answers)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def state(self) -> Path:
        # Named after the host: the responder logs the folder's name as the host.
        return self.folder / self.name


class SshLab:
    """One real sshd per host on 127.0.0.2, .3, ... for the duration of a ``with`` block."""

    def __init__(self, workdir: Path, hosts: Sequence[str], start_timeout: float = 15.0) -> None:
        if not 0 < len(hosts) < 250:
            raise LabError(
                f"a lab has 1 to 249 hosts (one loopback address each), not {len(hosts)}"
            )
        self.workdir = workdir.resolve()
        self.start_timeout = start_timeout
        self.user = getpass.getuser()
        self.client_key = self.workdir / "client" / "id_ed25519"
        self.log = self.workdir / "commands.log"
        self._impostor = self.workdir / "impostor" / "host_key"
        self._nodes = {
            name: _Node(name, f"127.0.0.{i}", self.workdir / "hosts" / name)
            for i, name in enumerate(hosts, 2)
        }
        self._sshd = _require("sshd")
        self._keygen = _require("ssh-keygen")

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> SshLab:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Make the keys and start every sshd; returns once each one answers."""
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        self._keygen_to(self.client_key, "lab-client")
        self._keygen_to(self._impostor, "impostor")
        try:
            for node in self._nodes.values():
                node.state.mkdir(parents=True)
                (node.state / "answers.json").write_text("{}", encoding="utf-8")
                self._keygen_to(node.folder / "host_key", node.name)
                self._start(node)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill every sshd and whatever it started; safe to call twice."""
        for node in self._nodes.values():
            self._stop(node)

    @contextlib.contextmanager
    def stopped(self, host: str) -> Iterator[None]:
        """`host`'s sshd is down inside the block (connections refused), up again after."""
        node = self._nodes[host]
        self._stop(node)
        try:
            yield
        finally:
            self._start(node)

    # -- what the hosts answer -------------------------------------------------------------

    def serve(
        self,
        fleet: Fleet,
        fabric_from: str | None,
        missing: Mapping[str, Collection[str]] | None = None,
        delay: Mapping[str, float] | None = None,
    ) -> None:
        """Every host answers from `fleet` as it is now, `fabric_from` the fabric scan too;
        `missing` probe keys per host are not installed there (exit 127), and hosts in `delay`
        wait that many seconds before each answer. Forgets the commands logged so far."""
        missing = missing or {}
        delay = delay or {}
        for name, node in self._nodes.items():
            outputs = fleet.outputs(name)
            if name == fabric_from:
                outputs["ibnetdiscover"] = fleet.ibnetdiscover()
                if fleet.switches:
                    outputs["mlxfwmanager"] = fleet.mlxfwmanager()
            answers = {}
            for key, text in sorted(outputs.items()):
                if key in missing.get(name, ()):
                    continue
                (node.state / f"{key}.txt").write_text(text, encoding="utf-8")
                answers[shlex.join(_argv(key, fleet.arguments(name).get(key, ())))] = f"{key}.txt"
            (node.state / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
            pause = node.state / "delay"
            if name in delay:
                pause.write_text(str(delay[name]), encoding="utf-8")
            else:
                pause.unlink(missing_ok=True)
        self.log.unlink(missing_ok=True)

    def commands(self) -> list[Command]:
        """Every command the hosts were asked to run since `serve`, in order."""
        if not self.log.is_file():
            return []
        found = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            at, host, command = line.split(" ", 2)
            found.append(Command(int(at), host, command))
        return sorted(found, key=lambda c: c.at_ns)

    # -- client side files -----------------------------------------------------------------

    def write_inventory(self, path: Path) -> Path:
        """The audit's `--inventory`: every lab host at its loopback address and port."""
        hosts = {n.name: f"{n.address}:{n.port}" for n in self._nodes.values()}
        path.write_text(json.dumps(hosts, indent=2) + "\n", encoding="utf-8")
        return path

    def write_known_hosts(
        self, path: Path, unknown: Collection[str] = (), changed: Collection[str] = ()
    ) -> Path:
        """known_hosts with every host's real key, but none for `unknown` hosts and an
        impostor's key for `changed` ones (as if the host had been reinstalled or replaced)."""
        lines = []
        for node in self._nodes.values():
            if node.name in unknown:
                continue
            key = self._impostor if node.name in changed else node.folder / "host_key"
            public = Path(f"{key}.pub").read_text(encoding="utf-8").split()[:2]
            lines.append(f"[{node.address}]:{node.port} {' '.join(public)}\n")
        path.write_text("".join(lines), encoding="utf-8")
        return path

    # -- sshd ------------------------------------------------------------------------------

    def _keygen_to(self, path: Path, comment: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = [self._keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
        subprocess.run(argv, check=True, capture_output=True, timeout=30)

    def _config(self, node: _Node) -> Path:
        respond = shlex.join(
            [sys.executable, "-I", "-S", str(RESPONDER), str(node.state), str(self.log)]
        )
        lines = [
            f"ListenAddress {node.address}:{node.port}",
            f"HostKey {node.folder / 'host_key'}",
            f"PidFile {node.folder / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.client_key}.pub",
            f"AllowUsers {self.user}",
            f"ForceCommand {respond}",
            "AuthenticationMethods publickey",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            # The keys live in pytest's temporary folders, whatever their modes.
            "StrictModes no",
            "DisableForwarding yes",
            "PermitTTY no",
            "PermitUserRC no",
            "PrintMotd no",
            # Nothing may linger: an idle or half-open client is dropped within seconds.
            "LoginGraceTime 10",
            "ClientAliveInterval 5",
            "ClientAliveCountMax 2",
            "MaxStartups 100",
            "LogLevel VERBOSE",
        ]
        path = node.folder / "sshd_config"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def _start(self, node: _Node) -> None:
        for _ in range(_START_ATTEMPTS):
            node.port = _free_port(node.address)
            argv = [self._sshd, "-D", "-e", "-f", str(self._config(node))]
            with open(node.folder / "sshd.log", "ab") as log:
                node.proc = subprocess.Popen(
                    _with_pdeathsig(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, killed as one in _stop
                )
            if self._answers(node):
                return
            self._stop(node)
        tail = (node.folder / "sshd.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise LabError(f"sshd for {node.name} did not start on {node.address}:\n{tail}")

    def _answers(self, node: _Node) -> bool:
        """Whether `node`'s sshd sends its banner; False as soon as it has exited."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if node.proc is None or node.proc.poll() is not None:
                return False
            address = (node.address, node.port)
            with contextlib.suppress(OSError), socket.create_connection(address, timeout=2) as s:
                if s.recv(8).startswith(b"SSH-"):
                    return True
            time.sleep(0.05)  # not bound yet: poll again
        raise LabError(f"sshd for {node.name} sent no banner within {self.start_timeout:g}s")

    def _stop(self, node: _Node) -> None:
        proc, node.proc = node.proc, None
        if proc is None:
            return
        # Connection children call setsid, so the group kill alone would miss them.
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _argv(key: str, arguments: tuple[str, ...] = ()) -> tuple[str, ...]:
    probe = probe_of(key)
    iface = key.split("@", 1)[1] if "@" in key else None
    if probe in PROBES:
        return PROBES[probe].argv_for(iface, arguments)
    raise LabError(f"the fleet renders {key!r}, which no probe runs")


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        port: int = s.getsockname()[1]
        return port


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name may hold spaces and parentheses: the fields follow the last ')'.
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
