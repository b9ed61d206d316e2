"""Shared test fixtures: the repository root, and real programs the tests use as oracles."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
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
