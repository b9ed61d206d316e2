"""Roles, services and delivery: every generated file reaches the host that reads it, and
the program that reads it runs with it there.

Oracles: OpenSM from the subnet manager's bundle, in a private mount namespace with the
overlay bound over /etc/opensm and /var/cache/opensm (the installed opensm.conf unchanged),
on ibsim; `named-checkconf -z` chrooted into the provisioning host's overlay;
`firewall-offline-cmd` on each role's zone; the kickstart's bundle installer run against a
local HTTP server. (dhcpd from the provisioning overlay answering a relayed PXE client is in
test_provisioning.py.) No unit file is generated, so `systemd-analyze verify` has nothing to
check yet; the units named in services.yaml are the packages' own.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge.lab.ibsim import SimFabric, _run_killable
from compiler import bundle, deploy
from compiler.load import load
from compiler.pipeline import Compiled, compile_source
from compiler.targets.render import _env
from contract import Deploy
from tests.conftest import REPO, require_tool


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_source(load(REPO / "cluster"))


@pytest.fixture(scope="module")
def overlays(compiled: Compiled, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "bundle"
    bundle.write(out, bundle.bundles(compiled))
    return out


def test_every_generated_file_has_a_home_or_is_review_only(compiled: Compiled) -> None:
    placed = {f.source for d in compiled.deploys.values() for f in d.files}
    review = compiled.cluster.services.review_only
    for path in compiled.files:
        if path == "MANIFEST.json":
            continue
        assert path in placed or any(deploy._matches(p, path) for p in review), path
    # And the homes are real: the OpenSM files sit on the two SM hosts and nowhere else.
    holders = {
        h for h, d in compiled.deploys.items() for f in d.files if f.source.startswith("opensm/")
    }
    assert holders == {sm.host for sm in compiled.plan.fabric.subnet_managers}


def test_the_deploy_map_is_what_the_bundle_holds(compiled: Compiled, overlays: Path) -> None:
    for host, expected in compiled.deploys.items():
        written = Deploy.from_json(json.loads((overlays / f"{host}.json").read_text()))
        assert written == expected
        on_disk = {
            "/" + p.relative_to(overlays / host).as_posix()
            for p in (overlays / host).rglob("*")
            if p.is_file() and not p.is_relative_to(overlays / host / "var/www/html/bundle")
        }
        assert on_disk == {f.path for f in expected.files}, host
        for f in expected.files:
            installed = overlays / host / f.path.lstrip("/")
            assert installed.stat().st_mode & 0o777 == int(f.mode, 8), f.path
            assert installed.read_bytes() == compiled.files[f.source]


def test_the_subnet_managers_install_and_enable_opensm(compiled: Compiled) -> None:
    for sm in compiled.plan.fabric.subnet_managers:
        ks = compiled.files[f"kickstart/{sm.host}.ks"].decode()
        install = next(
            line for line in ks.splitlines() if line.startswith('dnf -y install "chrony')
        )
        assert '"opensm"' in install.split()
        enable = next(line for line in ks.splitlines() if line.startswith("systemctl enable"))
        assert "opensmd.service" in enable.split()
        paths = {f.path for f in compiled.deploys[sm.host].files}
        assert {"/etc/opensm/opensm.conf", "/etc/opensm/partitions.conf"} <= paths
        assert "/var/cache/opensm/guid2lid" in paths
    gpu = compiled.files["kickstart/gpu001.ks"].decode()
    assert "opensm" not in gpu


def test_the_driver_is_built_for_the_pinned_kernel_after_ofed(compiled: Compiled) -> None:
    """%post order: pinned kernel, OFED (proven), the driver, DKMS for the pinned kernel, then
    every kernel module checked for that kernel before the first boot."""
    post = compiled.files["kickstart/gpu001.ks"].decode().split("%post", 1)[1].splitlines()

    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(post) if line.startswith(prefix))

    kernel = at('dnf -y install "kernel-${KERNEL}" "kernel-devel-${KERNEL}"')
    ofed = at("dnf -y install mlnx-ofed-all")
    stream = at('dnf -y module enable "nvidia-driver:535-dkms"')
    driver = at('dnf -y install "chrony"')
    dkms = at('if command -v dkms >/dev/null; then dkms autoinstall -k "${KERNEL}"')
    modules = at("for module in nvidia nvidia-peermem; do")
    bundle_at = at("curl -fsS --retry 5 -o /root/bundle.json")
    assert kernel < ofed < stream < driver < dkms < modules < bundle_at
    assert 'modinfo -k "${KERNEL}" "$module"' in post[modules + 1]
    assert '"kmod-nvidia-latest-dkms-535.183.06"' in post[driver]


def test_keyfiles_are_the_one_network_configuration(compiled: Compiled) -> None:
    assert not [p for p in compiled.files if "/route-" in p]
    ks = compiled.files["kickstart/gpu001.ks"].decode()
    assert ks.count("\nnetwork ") == 1 and "network --device=3c:ec:ef:ea:48:9e" in ks
    assert "find /etc/sysconfig/network-scripts -name 'ifcfg-*'" in ks
    host = compiled.plan.host("gpu001")
    for iface in host.interfaces:
        keyfile = compiled.files[f"routes/gpu001/{iface.name}.nmconnection"].decode()
        assert "interface-name=" not in keyfile
        if iface.mac:
            assert f"mac-address={iface.mac}\n" in keyfile
        else:  # IPoIB: matched by the port GUID in its last 8 bytes
            guid = host.ib_ports[0].guid.removeprefix("0x")
            mac = next(line for line in keyfile.splitlines() if line.startswith("mac-address="))
            assert mac.replace(":", "").endswith(guid)
    zones = {
        iface.network: next(
            line.split("=")[1]
            for line in compiled.files[f"routes/gpu001/{iface.name}.nmconnection"]
            .decode()
            .splitlines()
            if line.startswith("zone=")
        )
        for iface in host.interfaces
    }
    assert zones == {"mgmt": "mgmt", "storage": "trusted", "ipoib": "trusted"}


# --- the real programs --------------------------------------------------------------------


@pytest.mark.realtool
def test_firewalld_accepts_each_role_zone_with_exactly_its_ports(
    compiled: Compiled, tmp_path: Path
) -> None:
    tool = require_tool("firewall-offline-cmd")
    catalogue = compiled.cluster.services
    roles = sorted({h.role for h in compiled.plan.hosts})
    for role in roles:
        config = tmp_path / role.value
        (config / "zones").mkdir(parents=True)
        (config / "zones" / "mgmt.xml").write_bytes(
            compiled.files[f"firewall/{role.value}/mgmt.xml"]
        )
        (config / "firewalld.conf").write_text("DefaultZone=public\n")
        run = subprocess.run(
            [tool, "--system-config", str(config), "--check-config"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        listed = subprocess.run(
            [tool, "--system-config", str(config), "--zone=mgmt", "--list-ports"],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout.split()  # fmt: skip
        # The union of the role's services' ports, read from services.yaml itself.
        union = {p for name in catalogue.roles[role] for p in catalogue.services[name].ports}
        assert set(listed) == union, role
        assert len(listed) == len(union)
    # The oracle rejects a broken zone, so its acceptance means something.
    broken = tmp_path / "broken"
    (broken / "zones").mkdir(parents=True)
    (broken / "firewalld.conf").write_text("DefaultZone=public\n")
    (broken / "zones" / "mgmt.xml").write_text(
        compiled.files["firewall/gpu/mgmt.xml"].decode().replace('port="9100"', 'port="99999"')
    )
    run = subprocess.run(
        [tool, "--system-config", str(broken), "--check-config"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0


@pytest.mark.realtool
def test_named_loads_every_zone_from_the_provisioning_overlay(
    compiled: Compiled, overlays: Path
) -> None:
    tool = require_tool("named-checkconf")
    root = overlays / compiled.plan.site.services.provisioning
    run = subprocess.run(
        [tool, "-z", "-t", str(root), "/etc/named.conf"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    zones = [p for p in compiled.files if p.startswith("dns/db.")]
    loaded = [line for line in run.stdout.splitlines() if line.startswith("zone ")]
    assert len(loaded) == len(zones) and all(": loaded serial " in line for line in loaded)


@pytest.mark.realtool
def test_opensm_runs_from_the_subnet_managers_bundle(
    compiled: Compiled, overlays: Path, tmp_path: Path
) -> None:
    for tool in ("ibsim", "opensm", "ibnetdiscover", "unshare", "mount"):
        require_tool(tool)
    master = max(compiled.plan.fabric.subnet_managers, key=lambda sm: sm.priority).host
    overlay = overlays / master
    logs = tmp_path / "log"
    logs.mkdir()
    topology = tmp_path / "topology.net"
    topology.write_bytes(compiled.files["fabric/topology.net"])
    # The mount points must exist; on a machine without OpenSM's package they may not.
    for where in ("/etc/opensm", "/var/cache/opensm"):
        Path(where).mkdir(parents=True, exist_ok=True)
    script = (
        f"mount --bind {overlay}/etc/opensm /etc/opensm && "
        f"mount --bind {overlay}/var/cache/opensm /var/cache/opensm && "
        f"mount --bind {logs} /var/log && "
        "exec opensm -F /etc/opensm/opensm.conf -o"
    )
    with SimFabric(topology, tmp_path / "sim") as sim:
        proc = _run_killable(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
            env=sim.env(f"{master} mlx5_0"),
            cwd=tmp_path,
            timeout=180,
            merge_stderr=True,
        )
        log = (logs / "opensm.log").read_text(errors="replace")
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert "Entering MASTER state" in log, log[-2000:]
        assert "ftree tables configured on all switches" in log
        assert " ERR " not in log, [line for line in log.splitlines() if " ERR " in line][:5]
        # The static LIDs of /var/cache/opensm/guid2lid were taken.
        ports = sim.run(["ibnetdiscover", "-p"]).stdout.splitlines()
        seen = {f[3]: int(f[1]) for f in (line.split() for line in ports) if f[:1] == ["CA"]}
        planned = {p.guid: p.lid for h in compiled.plan.hosts for p in h.ib_ports}
        assert seen and {g: seen[g] for g in seen if g in planned} == {
            g: planned[g] for g in seen if g in planned
        }


# --- the kickstart's bundle installer -------------------------------------------------------


@pytest.fixture
def served(overlays: Path) -> Iterator[str]:
    """The bundles over HTTP on loopback, as the provisioning host serves them."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(overlays))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined,assignment]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _installer(tmp_path: Path) -> Path:
    script = tmp_path / "apply-bundle.py"
    script.write_text(_env().get_template("apply-bundle.py.j2").render())
    return script


def test_the_kickstart_installs_the_hosts_bundle(
    compiled: Compiled, overlays: Path, served: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        why = "installs files owned by root: run the tests as root"
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)
    root = tmp_path / "root"
    run = subprocess.run(
        [sys.executable, str(_installer(tmp_path)), str(root), f"{served}/gpu001",
         str(overlays / "gpu001.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    for f in compiled.deploys["gpu001"].files:
        installed = root / f.path.lstrip("/")
        assert installed.read_bytes() == compiled.files[f.source]
        assert installed.stat().st_mode & 0o777 == int(f.mode, 8)

    # A file that is not generated/'s bytes is refused, and nothing of it is installed.
    tampered = overlays / "gpu001/etc/chrony.conf"
    original = tampered.read_bytes()
    try:
        tampered.write_bytes(original + b"server 192.0.2.1\n")
        again = subprocess.run(
            [sys.executable, str(_installer(tmp_path)), str(tmp_path / "root2"),
             f"{served}/gpu001", str(overlays / "gpu001.json")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        tampered.write_bytes(original)
    assert again.returncode != 0
    assert "/etc/chrony.conf: not the bytes of generated/chrony/gpu001.conf" in again.stderr
    assert not (tmp_path / "root2/etc/chrony.conf").exists()
