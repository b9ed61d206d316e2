"""A Slurm site on one machine, for the tests: Debian's munged, slurmctld and slurmd started
from a stock-style `slurm.conf` (Debian's `slurm.conf.simple`, with paths in a temporary
folder) that includes the generated files from the hosts' bundles, as a site's own
`/etc/slurm/slurm.conf` includes them.

Everything runs in a network namespace made for it (loopback only) and in its own mount and
UTS namespaces: /etc/hosts there names the controller 127.0.0.1, the node under test
127.0.0.2 and every other node an address of 127.0.1.0/24 where nothing listens; the
controller's hostname is its host's name (slurmctld refuses to run on a host SlurmctldHost
does not name). slurmd's /dev is a tmpfs holding the usual character devices and stand-ins
for the GPUs: /dev/nvidia0..N (character major 195, what the NVIDIA driver registers), which
gres.conf's `File=` names; slurmd stats them and reports what it found to slurmctld.

munged runs as munge, slurmctld as SlurmUser slurm (it drops root itself), slurmd as root:
as Debian's units run them. The munge key is made for the run and removed with it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import stop

NVIDIA_MAJOR = 195  # the NVIDIA driver's character major (/proc/devices: nvidia-frontend)
_DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
WAIT_S = 30.0


@dataclass
class Site:
    folder: Path
    netns: str
    controller: str
    conf: Path  # the controller's slurm.conf
    munge_socket: Path

    def _in(self, hostname: str, script: str, *args: str) -> list[str]:
        """argv running `script` (sh) in the site's network namespace, in new mount and UTS
        namespaces whose /etc/hosts is the site's and whose hostname is `hostname`."""
        prelude = f"mount --bind {self.folder / 'hosts'} /etc/hosts && hostname {hostname} && "
        return [
            # nsenter, not `ip netns exec`: that remounts /sys, without the host's cgroup
            # mounts slurmd looks for.
            "nsenter", f"--net=/run/netns/{self.netns}",
            "unshare", "--mount", "--uts", "--propagation", "private",
            "sh", "-c", prelude + script, "sh", *args,
        ]  # fmt: skip

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """A Slurm command on the controller (scontrol, sinfo), against its slurm.conf."""
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        return subprocess.run(
            self._in(self.controller, 'exec "$@"', *argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )

    def node(self, name: str) -> dict[str, str]:
        """`scontrol show node NAME` as its key=value pairs (Reason= takes the line's rest)."""
        out = self.run("scontrol", "show", "node", name).stdout
        return parse_scontrol(out)

    def wait(
        self,
        what: str,
        test: Callable[[], bool],
        procs: Sequence[subprocess.Popen[bytes]] = (),
        timeout: float = WAIT_S,
    ) -> None:
        """Until `test()` holds, at most `timeout` seconds, and while every one of `procs`
        runs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if test():
                return
            dead = [p.args for p in procs if p.poll() is not None]
            if dead:
                raise AssertionError(f"{what}: {dead[0]!r} ended; logs:\n{self.logs()}")
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {timeout:.0f} s; logs:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted([*self.folder.glob("*.log"), *self.folder.glob("*.out")])
        )


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show node` output as a flat mapping; `Reason=` holds the rest of its line."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Reason="):
            out["Reason"] = line.removeprefix("Reason=")
            continue
        for match in re.finditer(r"(\w+)=(\S*)", line):
            out.setdefault(match[1], match[2])
    return out


def hosts_file(names: Sequence[str], controller: str, node: str) -> str:
    lines = ["127.0.0.1 localhost", f"127.0.0.1 {controller}", f"127.0.0.2 {node}"]
    others = [n for n in names if n not in (controller, node)]
    lines += [f"127.0.1.{i + 1} {n}" for i, n in enumerate(others[:250])]
    return "\n".join(lines) + "\n"


def slurm_conf(folder: Path, etc: Path, controller: str, munge_socket: Path) -> str:
    """Debian's slurm.conf.simple with the site's paths, and the lines that include the
    generated files (TopologyPlugin reads topology.conf, slurmd gres.conf, beside it)."""
    return f"""\
ClusterName=dc1
SlurmctldHost={controller}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
ReturnToService=2
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmdSpoolDir={folder}/spool
StateSaveLocation={folder}/state
SlurmUser=slurm
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
SlurmctldDebug=info
SlurmctldLogFile={folder}/slurmctld.log
SlurmdDebug=info
SlurmdLogFile={folder}/slurmd.log
GresTypes=gpu
TopologyPlugin=topology/tree
Include {etc}/nodes.conf
Include {etc}/partitions.conf
"""


@contextmanager
def site(bundles: Path, controller: str, node: str, names: Sequence[str]) -> Iterator[Site]:
    """munged and slurmctld running from `controller`'s bundle (under `bundles`); stopped,
    the namespace and the key removed, on the way out."""
    # The daemons' users must reach their files: a folder of its own, 0755, not the
    # tests' 0700 tmp tree.
    folder = Path(tempfile.mkdtemp(prefix="cf-slurm-"))
    folder.chmod(0o755)
    netns = f"cf-slurm-{os.getpid()}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(["ip", "netns", "add", netns], check=True, timeout=30)
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True, timeout=30)
        # Slurm resolves names with AI_ADDRCONFIG, and glibc then offers IPv4 only where some
        # address other than 127.0.0.1 is configured: the node's own loopback address is one.
        ip_add = ["ip", "-n", netns, "addr", "add", "127.0.0.2/8", "dev", "lo"]
        subprocess.run(ip_add, check=True, timeout=30)
        (folder / "hosts").write_text(hosts_file(names, controller, node), encoding="utf-8")
        munge = folder / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, timeout=30)
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
        run = folder / "munge-run"  # munged wants its socket's folder open to all (0755)
        run.mkdir(mode=0o755)
        shutil.chown(run, "munge", "munge")
        sock = run / "munge.socket"
        munged = [
            "runuser", "-u", "munge", "--", "munged", "--foreground", f"--key-file={key}",
            f"--socket={sock}", f"--pid-file={run}/munged.pid",
            f"--log-file={folder}/munged.log", f"--seed-file={munge}/munged.seed",
        ]  # fmt: skip
        (folder / "munged.log").touch()
        shutil.chown(folder / "munged.log", "munge", "munge")
        s = Site(folder, netns, controller, folder / "slurm.conf", sock)
        procs.append(_daemon(s._in(controller, 'exec "$@"', *munged), folder / "munged.out"))
        s.wait("munged's socket", sock.exists, procs)
        # The bundle's /etc/slurm, where its users can read it (the tests' tmp tree is 0700);
        # slurmctld reads topology.conf (and gres.conf) beside slurm.conf.
        etc = folder / controller
        shutil.copytree(bundles / controller / "etc" / "slurm", etc)
        s.conf = etc / "slurm.conf"
        s.conf.write_text(slurm_conf(folder, etc, controller, sock), encoding="utf-8")
        for sub in ("state", "spool"):
            (folder / sub).mkdir()
            shutil.chown(folder / sub, "slurm", "slurm")
        (folder / "slurmctld.log").touch()
        shutil.chown(folder / "slurmctld.log", "slurm", "slurm")
        ctld = ["slurmctld", "-D", "-i", "-f", str(s.conf)]
        procs.append(_daemon(s._in(controller, 'exec "$@"', *ctld), folder / "slurmctld.out"))
        s.wait("slurmctld answering", lambda: s.run("scontrol", "ping").returncode == 0, procs)
        yield s
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
        subprocess.run(["ip", "netns", "del", netns], timeout=30, capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def slurmd(
    s: Site, bundles: Path, node: str, gpus: int, gres: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """slurmd for `node`, from its bundle's files (beside a copy of the controller's
    slurm.conf, as every host has the same one), in a mount namespace whose /dev holds
    `gpus` stand-in GPUs; `gres`, when given, is the gres.conf the node has instead."""
    conf_dir = s.folder / node
    shutil.rmtree(conf_dir, ignore_errors=True)
    shutil.copytree(bundles / node / "etc" / "slurm", conf_dir)
    conf = s.conf.read_text(encoding="utf-8").replace(str(s.conf.parent), str(conf_dir))
    (conf_dir / "slurm.conf").write_text(conf, encoding="utf-8")
    if gres is not None:
        (conf_dir / "gres.conf").write_text(gres, encoding="utf-8")
    devices = " && ".join(
        [
            "mount -t tmpfs -o mode=0755 cf-dev /dev",
            *(f"mknod -m 0666 /dev/{n} c {a} {b}" for n, (a, b) in _DEVICES.items()),
            *(f"mknod -m 0666 /dev/nvidia{i} c {NVIDIA_MAJOR} {i}" for i in range(gpus)),
            f"mknod -m 0666 /dev/nvidiactl c {NVIDIA_MAJOR} 255",
            'exec "$@"',
        ]
    )
    argv = ["slurmd", "-D", "-N", node, "-f", str(conf_dir / "slurm.conf")]
    proc = _daemon(s._in(node, devices, *argv), s.folder / f"slurmd-{node}.out")
    try:
        yield proc
    finally:
        stop(proc)


def _daemon(argv: list[str], out: Path) -> subprocess.Popen[bytes]:
    """A daemon in the foreground, its own output (beside its log file) into `out`."""
    with out.open("wb") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
