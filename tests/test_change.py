"""`clusterforge plan BASE HEAD`: the rollout of a change, its pre-check and its rollback.

The plan is compiled from two commits of a scratch repository holding this checkout's
cluster/. The playbook is run by real ansible-core over a real sshd on loopback against a
folder standing for the device's `/` (`cf_root`), whose reloads a recorder takes
(`cf_systemctl`): apply, then rollback, must leave every file exactly as before (sha256), and
a device edited by hand since BASE must be refused with nothing changed.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from compiler import ansible, change, gitsource
from compiler.pipeline import Compiled
from contract import snapshot
from tests.conftest import REPO, loopback_sshd, require_tool

Change = Callable[[Path], None]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def _time_source(cluster: Path) -> None:
    """One upstream NTP server replaced: only the time servers' chrony.conf changes."""
    site = cluster / "site.yaml"
    site.write_text(
        site.read_text(encoding="utf-8").replace("ntp2.dc1.example.net", "ntp3.dc1.example.net"),
        encoding="utf-8",
    )


def _switch_port(cluster: Path) -> None:
    """A bad storage switch port: the server's cable moves to a free port of stor01."""
    yaml = YAML()
    path = cluster / "fabric.yaml"
    fabric = yaml.load(path.read_text(encoding="utf-8"))
    fabric["cables"] = [{"device": "stor01", "port": 3, "use_port": 30, "note": "port 3 bad"}]
    with path.open("w", encoding="utf-8") as f:
        yaml.dump(fabric, f)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plan")
    shutil.copytree(REPO / "cluster", root / "cluster")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "cluster")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    git(root, "tag", "base")
    _time_source(root / "cluster")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "time")
    git(root, "tag", "time")
    git(root, "checkout", "-q", "--detach", "base")
    _switch_port(root / "cluster")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "port")
    git(root, "tag", "port")
    return root


def _sides(scratch: Path, head: str) -> tuple[Compiled, Compiled]:
    base, new = (gitsource.compile_revision(scratch, rev).compiled for rev in ("base", head))
    assert base is not None and new is not None
    return base, new


@pytest.fixture(scope="module")
def sides(scratch: Path) -> tuple[Compiled, Compiled]:
    return _sides(scratch, "time")


@pytest.fixture(scope="module")
def port_sides(scratch: Path) -> tuple[Compiled, Compiled]:
    return _sides(scratch, "port")


def test_a_switch_port_moved_is_the_switch_first_then_its_host(
    port_sides: tuple[Compiled, Compiled],
) -> None:
    base, head = port_sides
    plan = change.plan_change(base, head, "b", "h")
    [switch] = [d for d in plan.devices if d.kind == "switch"]
    assert switch.name == "stor01"
    assert [c.path for c in switch.files] == ["/etc/network/interfaces"]
    assert switch.reloads == ("networking.service",)
    assert switch.address is not None
    # The switch goes in a stage of its own, one at a time, before any host.
    first = next(s for s in plan.stages if switch in s.devices)
    assert first.serial == 1 and all(d.kind == "switch" for d in first.devices)
    assert plan.stages.index(first) == 0


def _snapshot_of(compiled: Compiled, device: str) -> dict[str, bytes]:
    """What the device holds when it runs `compiled`: its placed files, as generated."""
    return {f.path: compiled.files[f.source] for f in compiled.deploys[device].files}


def test_a_change_lists_only_the_devices_whose_files_change(
    sides: tuple[Compiled, Compiled],
) -> None:
    base, head = sides
    plan = change.plan_change(base, head, "b", "h")
    time_servers = sorted(h.name for h in base.plan.hosts if h.name in base.plan.site.services.ntp)
    assert [d.name for d in plan.devices] == time_servers
    for d in plan.devices:
        assert [(c.path, c.status) for c in d.files] == [("/etc/chrony.conf", "changed")]
        assert d.reloads == ("chronyd.service",)
        assert d.check == change.Check.UNCHECKED
    # No time server is in the canary ring: the first goes alone, first.
    assert plan.stages[0].name.startswith("canary") and len(plan.stages[0].devices) == 1
    assert plan.stages[0].serial == 1


def test_a_device_whose_snapshot_is_not_base_is_refused_naming_the_drifted_line(
    sides: tuple[Compiled, Compiled],
) -> None:
    base, head = sides
    [first, *_] = change.plan_change(base, head, "b", "h").devices
    clean = _snapshot_of(base, first.name)
    # A time server is the provisioning host, whose served DHCP file its snapshot keeps.
    dhcpd = "/etc/dhcp/dhcpd.conf"
    assert any(f.path == dhcpd and f.snapshot for f in base.deploys[first.name].files)
    edited = dict(clean)
    edited[dhcpd] = clean[dhcpd] + b"host rogue { fixed-address 10.60.2.250; }\n"
    plan = change.plan_change(base, head, "b", "h", {first.name: edited})
    [refused] = plan.refused
    assert refused.name == first.name and refused.check == change.Check.DRIFTED
    assert refused.drift == (f"{dhcpd}: +host rogue {{ fixed-address 10.60.2.250; }}",)
    assert first.name not in {d.name for d in plan.devices}
    assert "host rogue" in change.to_markdown(plan)
    ok = change.plan_change(base, head, "b", "h", {first.name: clean})
    assert {d.name: d.check for d in ok.devices}[first.name] == change.Check.OK
    assert ok.refused == ()


def test_volatile_lines_are_masked_and_nothing_else() -> None:
    shown = b"! Command: show running-config\n! device: s1 (DCS-7050, EOS-4.31)\nhostname s1\n"
    later = b"! Command: show running-config\n! device: s1 (DCS-7050, EOS-4.32)\nhostname s1\n"
    assert snapshot.changed({"/c": shown}, {"/c": later}) == {}
    assert snapshot.changed({"/c": shown}, {"/c": later.replace(b"s1\n", b"s2\n")}) != {}


# --- applied by ansible-core over a real sshd ---------------------------------------------


@pytest.fixture
def device_sshd(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A real sshd on loopback letting this test's own user in by key: the change account."""
    keys = tmp_path / "authorized_keys"
    config = (
        f"PermitRootLogin prohibit-password\nAuthorizedKeysFile {keys}\n"
        "Subsystem sftp internal-sftp\n"
    )
    with loopback_sshd(tmp_path, config) as (port, known):
        shutil.copy(tmp_path / "client_key.pub", keys)
        yield {"port": str(port), "key": str(tmp_path / "client_key"), "known": str(known)}


def _playbook(
    folder: Path, name: str, device: str, root: Path, sshd: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    # ansible-core is a Python dependency of the tests: beside this interpreter.
    beside = Path(sys.executable).parent / "ansible-playbook"
    playbook = str(beside) if beside.exists() else require_tool("ansible-playbook")
    recorder = folder / "systemctl"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {folder / "reloads.log"}\n', encoding="utf-8")
    recorder.chmod(0o755)
    extra = {
        "ansible_host": "127.0.0.1",
        "ansible_port": sshd["port"],
        "ansible_user": getpass.getuser(),
        "ansible_become": False,  # the lab's account owns the folder standing for /
        "ansible_ssh_private_key_file": sshd["key"],
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={sshd['known']} "
        "-o StrictHostKeyChecking=yes -o ControlMaster=no",
        "ansible_python_interpreter": "/usr/bin/python3",
        "cf_root": str(root),
        "cf_systemctl": str(recorder),
        "cf_owners": os.geteuid() == 0,
    }
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(folder / ".ansible"),
        "ANSIBLE_LOCAL_TEMP": str(folder / ".ansible" / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(folder / ".ansible" / "remote"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
    }
    return subprocess.run(
        [
            playbook,
            "-i",
            str(folder / ansible.INVENTORY),
            "--limit",
            device,
            "-e",
            json.dumps(extra),
            str(folder / name),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=folder,
    )


def _sums(root: Path) -> dict[str, str]:
    return {
        "/" + p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.realtool
@pytest.mark.parametrize("change_of", ["time", "port"])
def test_the_playbook_applies_then_rolls_back_byte_for_byte(
    tmp_path: Path, scratch: Path, change_of: str, device_sshd: dict[str, str]
) -> None:
    """A time server's change, and a one-switch change (stor01's interfaces, reloaded by
    networking.service): applied, rolled back, every file as before; then refused once
    edited by hand."""
    base, head = _sides(scratch, change_of)
    plan = change.plan_change(base, head, "b", "h")
    device = plan.devices[0].name
    if change_of == "port":
        assert device == "stor01"
    [changed] = [d for d in plan.devices if d.name == device]
    touched = changed.files[0].path
    folder = tmp_path / "plan"
    for path, data in ansible.files(plan, base, head, "clusterforge-change").items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    inventory = YAML(typ="safe").load((folder / ansible.INVENTORY).read_text(encoding="utf-8"))
    assert inventory["all"]["vars"]["ansible_user"] == "clusterforge-change"  # not the audit's
    root = tmp_path / "root"
    for path, data in _snapshot_of(base, device).items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_bytes(data)
    before = _sums(root)

    applied = _playbook(folder, ansible.APPLY, device, root, device_sshd)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    now = {p: hashlib.sha256(d).hexdigest() for p, d in _snapshot_of(head, device).items()}
    assert _sums(root) == {**before, **now}
    reloads = [f"reload-or-restart {u}" for u in changed.reloads]
    assert (folder / "reloads.log").read_text(encoding="utf-8").splitlines() == reloads

    rolled = _playbook(folder, ansible.ROLLBACK, device, root, device_sshd)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert _sums(root) == before
    assert (folder / "reloads.log").read_text(encoding="utf-8").splitlines() == reloads * 2

    # Edited by hand since BASE: the pre-check refuses the device and changes nothing on it.
    edited_file = root / touched.lstrip("/")
    edited_file.write_bytes(edited_file.read_bytes() + b"# emergency fix\n")
    edited = _sums(root)
    refused = _playbook(folder, ansible.APPLY, device, root, device_sshd)
    assert refused.returncode != 0
    assert f"{touched} is not what BASE generated" in refused.stdout
    assert _sums(root) == edited
