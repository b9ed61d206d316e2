"""The Ethernet switches: their cables and configuration facts in the plan, and the generated
Cumulus files read by the real parsers (ifupdown2's `ifup -a -s`, FRR's `vtysh --dryrun`).
The switches at work, in network namespaces, are `tests/test_switches_netns.py`."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from compiler import bundle
from compiler.load import load
from compiler.model import SwitchOs, SwitchRole
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.targets.shared import BUNDLE_PATH
from tests.conftest import ifup_syntax, require_tool


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def _text(compiled: Compiled, path: str) -> str:
    return compiled.files[path].decode()


def test_every_switch_management_port_is_cabled_once(compiled: Compiled) -> None:
    mgmt = Counter(c.b.device for c in compiled.plan.cables if c.b.port == "mgmt")
    assert set(mgmt) == {s.name for s in compiled.plan.switches}
    assert set(mgmt.values()) == {1}
    leaf = next(c for c in compiled.plan.cables if c.b.device == "leaf01" and c.b.port == "mgmt")
    # U42 on port 6 + 42 of r01's management switch, on the BMC network, at 1G over copper.
    assert (leaf.id, leaf.a.device, leaf.a.port, leaf.network) == (
        "R01-MG48",
        "mgmt01",
        "48",
        "bmc",
    )
    assert (leaf.medium, leaf.rate) == ("Cat6A", "1G")


def test_rack_switches_uplink_to_every_spine_of_their_tier(compiled: Compiled) -> None:
    role = {s.name: s.role for s in compiled.plan.switches}
    ups = [c for c in compiled.plan.cables if role.get(c.b.device) == SwitchRole.STORAGE_SPINE]
    assert {(c.a.device, c.b.device) for c in ups if c.a.rack == "r03"} == {
        ("stor03", "stor-spine01"),
        ("stor03", "stor-spine02"),
    }
    r03 = sorted((c.id, c.a.port, c.b.port, c.rate, c.medium) for c in ups if c.a.rack == "r03")
    assert r03 == [("R03-ST49", "49", "3", "100G", "AOC"), ("R03-ST50", "50", "3", "100G", "AOC")]
    # The service rack s01 (id 100) lands from the spines' last port down.
    assert {c.b.port for c in ups if c.a.rack == "s01"} == {"64"}
    bom = _text(compiled, "fabric/bom.csv")
    assert "AOC,100G," in bom


def test_each_rack_switch_is_its_subnets_gateway(compiled: Compiled) -> None:
    eth = compiled.plan.ethernet
    stor = eth.switch("stor01")
    assert [(v.vlan, v.address, v.mtu) for v in stor.svis] == [(70, "10.70.1.1/24", 9000)]
    mgmt = eth.switch("mgmt01")
    assert [(v.network, v.address) for v in mgmt.svis] == [
        ("bmc", "10.60.1.1/24"),
        ("mgmt", "10.60.2.1/24"),
    ]
    # Every host's gateway is an SVI of its rack's switch.
    svis = {v.address.split("/")[0] for s in eth.switches for v in s.svis}
    gateways = {i.gateway for h in compiled.plan.hosts for i in (*h.interfaces, h.bmc)} - {None}
    assert gateways <= svis


def test_asns_one_per_rack_switch_one_per_spine_tier(compiled: Compiled) -> None:
    eth = compiled.plan.ethernet
    racks = [s for s in eth.switches if s.role in (SwitchRole.STORAGE, SwitchRole.MANAGEMENT)]
    asns = [s.asn for s in racks]
    assert len(set(asns)) == len(asns)
    assert eth.switch("stor01").asn == 4200070001 and eth.switch("stor-s01").asn == 4200070100
    assert {eth.switch(n).asn for n in ("stor-spine01", "stor-spine02")} == {4200070000}
    assert all(s.os == SwitchOs.CUMULUS for s in eth.switches)


def test_port_descriptions_name_the_far_end_and_cable(compiled: Compiled) -> None:
    text = _text(compiled, "switches/stor01/etc/network/interfaces")
    assert (
        "iface swp1\n    alias gpu001 ens2f0 R01-ST01\n    mtu 9216\n    bridge-access 70\n" in text
    )
    assert "iface swp49\n    alias stor-spine01 P01 R01-ST49\n    mtu 9216\n\n" in text
    assert "bridge-vlan-aware yes" in text and "bridge-vids 70\n" in text
    frr = _text(compiled, "switches/stor01/etc/frr/frr.conf")
    assert " neighbor swp49 interface remote-as external\n" in frr
    assert "  network 10.70.1.0/24\n" in frr


# One switch of every role and kind of rack: every file comes from one template, and the real
# parsers take a second or so each.
SAMPLES = ("stor01", "mgmt01", "stor-s01", "mgmt-s01", "mgmt-n01", "stor-spine01", "mgmt-spine02")


def _configs(compiled: Compiled, name: str) -> list[str]:
    return [f"switches/{s}{name}" for s in SAMPLES if f"switches/{s}{name}" in compiled.files]


@pytest.mark.realtool
def test_ifupdown2_parses_every_interfaces_file(compiled: Compiled, tmp_path: Path) -> None:
    ifup = require_tool("ifup")
    files = _configs(compiled, "/etc/network/interfaces")
    assert len(files) == len(SAMPLES)
    for path in files:
        (tmp_path / "interfaces").write_bytes(compiled.files[path])
        # -s: parse and order every interface, changing nothing on this machine.
        done = ifup_syntax(ifup, tmp_path / "interfaces")
        assert done.returncode == 0, f"{path}: {done.stderr}"
        assert "warning" not in done.stderr, f"{path}: {done.stderr}"
    # The oracle refuses a value its modules do not take (it does not check attribute names).
    broken = _text(compiled, files[0]).replace("bridge-vlan-aware yes", "bridge-vlan-aware maybe")
    (tmp_path / "interfaces").write_text(broken)
    done = ifup_syntax(ifup, tmp_path / "interfaces")
    assert done.returncode != 0 and "bridge-vlan-aware" in done.stderr


@pytest.mark.realtool
def test_frr_parses_every_frr_conf(compiled: Compiled, tmp_path: Path) -> None:
    vtysh = require_tool("vtysh")
    files = _configs(compiled, "/etc/frr/frr.conf")
    assert len(files) == len(SAMPLES)
    for path in files:
        (tmp_path / "frr.conf").write_bytes(compiled.files[path])
        done = subprocess.run(
            [vtysh, "--dryrun", "-f", str(tmp_path / "frr.conf")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{path}: {done.stdout}{done.stderr}"
    broken = _text(compiled, files[0]).replace(" interface remote-as", " interfaze remote-as", 1)
    (tmp_path / "frr.conf").write_text(broken)
    done = subprocess.run(
        [vtysh, "--dryrun", "-f", str(tmp_path / "frr.conf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0


# --- their files placed by the deploy map, like a host's --------------------------------------


def test_every_switch_has_a_deploy_map_of_its_generated_files(compiled: Compiled) -> None:
    switches = compiled.plan.ethernet.switches
    assert switches
    for sw in switches:
        deploy = compiled.deploys[sw.name]
        assert compiled.files[f"deploy/{sw.name}.json"].decode() == deploy.to_json()
        mine = {p for p in compiled.files if p.startswith(f"switches/{sw.name}/")}
        placed_here = {f.source for f in deploy.files}
        assert placed_here & {p for p in compiled.files if p.startswith("switches/")} == mine
        # Beside its own files, the drift audit's account, its forced command, sudoers and
        # groups its OS's (Debian's lldpd group is _lldpd).
        assert {p for p in placed_here - mine} == {
            "access/authorized_keys",
            "access/sshd_config",
            "access/cumulus/sysusers.conf",
            "access/tmpfiles.conf",
            "access/limits.conf",
            "access/cumulus/clusterforge-probe",
            "access/cumulus/sudoers",
        }
        for f in deploy.files:
            if f.path == "/etc/snmp/snmpd.conf":  # its bytes carry the community: stat'ed only
                assert f.sha256 is None, f.source
                continue
            assert f.sha256 == hashlib.sha256(compiled.files[f.source]).hexdigest(), f.source
        assert deploy.units == (
            "networking.service",
            "frr.service",
            "lldpd.service",
            "switchd.service",
            "snmpd.service",
            "ssh.service",
        )
    placed = {
        f.path: f for f in compiled.deploys["stor01"].files if f.source.startswith("switches/")
    }
    assert {p: (f.mode, f.owner, f.reload) for p, f in placed.items()} == {
        "/etc/network/interfaces": ("0644", "root:root", "networking.service"),
        "/etc/frr/frr.conf": ("0640", "frr:frr", "frr.service"),
        "/etc/frr/daemons": ("0640", "frr:frr", "frr.service"),
        "/etc/lldpd.d/clusterforge.conf": ("0644", "root:root", "lldpd.service"),
        "/etc/snmp/snmpd.conf": ("0640", "root:snmp", "snmpd.service"),
    }
    # Nothing of a switch is left for review only: the switches' patterns are gone.
    assert not [p for p in compiled.plan.review_only if p.startswith("switches/")]


def test_a_switch_bundle_lays_out_its_files_at_their_homes(
    compiled: Compiled, tmp_path: Path
) -> None:
    files = bundle.bundles(compiled, hosts=["mgmt01"])
    bundle.write(tmp_path, files)
    root = tmp_path / "mgmt01"
    modes = {
        str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode)
        for p in root.rglob("*")
        if p.is_file()
    }
    account = ("usr/", "etc/ssh/", "etc/sudoers.d/", "etc/security/")  # the audit account's
    assert {p: m for p, m in modes.items() if not p.startswith(account)} == {
        "etc/network/interfaces": 0o644,
        "etc/frr/frr.conf": 0o640,
        "etc/frr/daemons": 0o640,
        "etc/lldpd.d/clusterforge.conf": 0o644,
        "etc/snmp/snmpd.conf": 0o640,
    }
    # The audit account's, as on a host: the forced command runs, sudoers is sudo's mode.
    assert modes["usr/local/libexec/clusterforge-probe"] == 0o755
    assert modes["etc/sudoers.d/clusterforge-audit"] == 0o440
    assert (root / "etc/frr/frr.conf").read_bytes() == compiled.files[
        "switches/mgmt01/etc/frr/frr.conf"
    ]
    manifest = json.loads((tmp_path / "mgmt01.json").read_text())
    assert manifest == compiled.deploys["mgmt01"].as_dict()
    # By role, a switch's being its OS: every Cumulus switch and no host.
    chosen = {
        p.split("/")[0].removesuffix(".json") for p in bundle.bundles(compiled, roles=["cumulus"])
    }
    assert chosen == {sw.name for sw in compiled.plan.ethernet.switches}
    with pytest.raises(bundle.SelectionError, match="'nosuch'"):
        bundle.bundles(compiled, hosts=["nosuch"])


def test_the_provisioning_host_serves_no_switch_bundle(compiled: Compiled) -> None:
    prov = compiled.plan.site.services.provisioning
    maps = [p.split(f"{BUNDLE_PATH}/", 1) for p in bundle.bundles(compiled, hosts=[prov])]
    served = {m[1].removesuffix(".json") for m in maps if len(m) == 2 and "/" not in m[1]}
    assert "gpu001" in served
    assert not served & {sw.name for sw in compiled.plan.ethernet.switches}


def test_a_switch_without_routing_deploys_no_frr_files(repo: Path, tmp_path: Path) -> None:
    site = tmp_path / "cluster"
    shutil.copytree(repo / "cluster", site)
    ethernet = site / "ethernet.yaml"
    tier = "  - {switch: management, to: management-spine, asn: 4200060000}\n"
    assert tier in ethernet.read_text()
    ethernet.write_text(ethernet.read_text().replace(tier, ""))
    unrouted = compile_source(load(site))
    mgmt01 = unrouted.plan.ethernet.switch("mgmt01")
    assert mgmt01.asn is None
    own = {f.path for f in unrouted.deploys["mgmt01"].files if f.source.startswith("switches/")}
    assert own == {
        "/etc/network/interfaces",
        "/etc/lldpd.d/clusterforge.conf",
        "/etc/snmp/snmpd.conf",
    }
    assert "/etc/frr/frr.conf" in {f.path for f in unrouted.deploys["stor01"].files}
