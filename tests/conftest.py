"""Shared test fixtures: the repository root, and real programs the tests use as oracles."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# A scratch repository must not pick up the user's git config (signing, hooks, templates).
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def require_tool(name: str) -> str:
    """Return the path of program `name`; fail under CI, skip (saying why) on a laptop."""
    path = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d, name)).exists()), None
    )
    if path:
        return path
    why = f"{name} is not installed (tests/install-tools installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The checkout under test (read it, never write into it)."""
    return REPO


def stop(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    """End a daemon a test started: SIGTERM, then SIGKILL if it has not gone in `timeout`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


@contextlib.contextmanager
def loopback_sshd(folder: Path, config: str, host: str | None = None) -> Iterator[tuple[int, Path]]:
    """A real OpenSSH sshd on a free loopback port, run as this test's user: `folder` gets its
    host key and a client key (`host_key`, `client_key`), its `sshd_config` (listening there,
    no PAM, no pid file, then the lines of `config`) and a `known_hosts` naming it as `host`
    (default `[127.0.0.1]:port`). Yields (port, known_hosts) once it accepts connections; it is
    stopped when the block ends."""
    sshd, keygen = require_tool("sshd"), require_tool("ssh-keygen")
    for name in ("host_key", "client_key"):
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True
        )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    (folder / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1:{port}\nHostKey {folder / 'host_key'}\nPidFile none\n"
        f"UsePAM no\nStrictModes no\nLogLevel ERROR\n{config}",
        encoding="utf-8",
    )
    kind, key = (folder / "host_key.pub").read_text(encoding="utf-8").split()[:2]
    known = folder / "known_hosts"
    known.write_text(f"{host or f'[127.0.0.1]:{port}'} {kind} {key}\n", encoding="utf-8")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(folder / "sshd_config")])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port, known
    finally:
        stop(proc)


def git(repo: Path, *args: str) -> None:
    """Run git in a scratch repository of a test, as an author of its own."""
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def ifup_syntax(ifup: str, interfaces: Path) -> subprocess.CompletedProcess[str]:
    """`ifup -a -s` of one file. ifupdown2 refuses to run beside another of itself on the
    machine (a non-blocking flock of /run/network/.lock, exit 89 "Another instance of this
    program is already running"), so every test that runs it (on any xdist worker, or another
    test run sharing the machine) takes turns on a lock of its own first. It says the same
    when it cannot open that file: /run/network is made at boot by its networking.service
    (`start-networking`: `mkdir -p /run/network`), which a container never starts, so it is
    made here as the host has it; two CI runs failed on its absence."""
    with contextlib.suppress(PermissionError):  # not root: only a booted host has it
        os.makedirs("/run/network", exist_ok=True)
    argv = [ifup, "-a", "-s", "-i", str(interfaces)]
    with open("/tmp/clusterforge-tests-ifupdown2.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
