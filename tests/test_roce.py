"""RoCE on an Ethernet network (networks.yaml `rdma: roce`): a variant of the reference whose
storage network declares it gets PFC, DSCP trust and ECN on every storage hop (Cumulus
`qos_features.conf`, EOS through pyavd) and the matching class on its MLNX_OFED hosts' NICs
(`roce.conf`, set by the NetworkManager dispatcher script, run here by bash against a stand-in
sysfs tree and a stand-in mlnx_qos); an end that disagrees with the other is a located
`roce-mismatch`, and so is a hop the compiler does not configure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from common.errors import SourceError
from compiler import roce
from compiler.load import load
from compiler.pipeline import Compiled, compile_source, roce_disagreements
from compiler.targets import eos
from compiler.targets.roce import SCRIPT
from tests.conftest import ifup_syntax, require_tool

QOS = "etc/cumulus/datapath/qos/qos_features.conf"


def _variant(repo: Path, root: Path, *edits: tuple[str, str, str]) -> Path:
    """A copy of the reference's cluster/ with storage on RoCE and `edits` (file, find,
    replace) made; returns its cluster/."""
    site = root / "cluster"
    shutil.copytree(repo / "cluster", site)
    for name, find, replace in (
        ("networks.yaml", "  switch: storage\n", "  switch: storage\n  rdma: roce\n"),
        *edits,
    ):
        path = site / name
        text = path.read_text()
        assert find in text, (name, find)
        path.write_text(text.replace(find, replace, 1))
    return site


@pytest.fixture(scope="module")
def site(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _variant(repo, tmp_path_factory.mktemp("roce"))


@pytest.fixture(scope="module")
def compiled(site: Path) -> Compiled:
    return compile_source(load(site))


def _text(c: Compiled, path: str) -> str:
    return c.files[path].decode()


def test_the_reference_declares_no_roce(repo: Path) -> None:
    generated = repo / "generated"
    assert not (generated / "roce").exists()
    assert not list(generated.glob(f"switches/*/{QOS}"))


def test_every_storage_hop_pauses_on_the_roce_priority(compiled: Compiled) -> None:
    plan = compiled.plan
    storage = {(c.a.device, int(c.a.port)) for c in plan.cables if c.network == "storage"}
    uplinks = {
        (c.b.device, int(c.b.port))
        for c in plan.cables
        if c.network == "storage" and c.b.port.isdigit()
    }
    ports = {(p.switch, p.port) for p in plan.roce.ports}
    assert storage | uplinks == ports  # host ports, and both ends of every storage uplink
    assert {p.qos.priority for p in plan.roce.ports} == {3}
    ends = roce.cumulus_ends(_text(compiled, f"switches/stor01/{QOS}"), 26)
    assert ends[1] == ends[49] == roce.End("dscp", frozenset({3}), 3, frozenset({3}))
    spine = _text(compiled, f"switches/stor-spine01/{QOS}")
    assert "pfc.roce_pfc.port_set = swp1-swp25,swp64\n" in spine  # racks 1-25, and s01 from the top
    assert "ecn_red.roce_ecn.cos_list = [3]\n" in spine
    # The management network carries no RoCE: its switches keep their QoS as shipped.
    assert not [p for p in compiled.files if p.startswith("switches/mgmt") and p.endswith(QOS)]


def test_the_hosts_get_the_class_their_switch_port_has(compiled: Compiled) -> None:
    conf = _text(compiled, "roce/gpu001/roce.conf")
    assert "INTERFACE=ens2f0\nTRUST=dscp\nPFC=0,0,0,1,0,0,0,0\nPRIORITY=3\nDSCP=26\n" in conf
    assert "CNP_PRIORITY=6\nCNP_DSCP=48\nECN=1\nTOS=104\n" in conf  # 26 << 2
    placed = {f["path"]: f for f in json.loads(_text(compiled, "deploy/gpu001.json"))["files"]}
    assert placed["/etc/clusterforge/roce.conf"]["source"] == "roce/gpu001/roce.conf"
    script = placed["/etc/NetworkManager/dispatcher.d/50-clusterforge-roce"]
    assert (script["mode"], script["owner"]) == ("0755", "root:root")
    # Hosts without MLNX_OFED (services.yaml rdma) send no RoCE: their storage NIC stays as it is.
    plain = [h for h in compiled.plan.hosts if "rdma" not in h.services and h.interface("storage")]
    assert plain
    assert not [h for h in plain if f"roce/{h.name}/roce.conf" in compiled.files]
    assert roce_disagreements(compiled.source, compiled.plan, compiled.files) == []


def test_an_end_set_its_own_way_is_a_located_mismatch(compiled: Compiled, site: Path) -> None:
    lines = (site / "networks.yaml").read_text().splitlines()
    line = lines.index("  rdma: roce") + 1  # the one setting both ends derive from
    files = dict(compiled.files)
    switch = f"switches/stor01/{QOS}"
    files[switch] = files[switch].replace(
        b"pfc.roce_pfc.cos_list = [3]", b"pfc.roce_pfc.cos_list = [4]"
    )
    host = "roce/gpu126/roce.conf"
    files[host] = files[host].replace(b"PFC=0,0,0,1,0,0,0,0", b"PFC=0,0,0,0,1,0,0,0")
    found = [str(d) for d in roce_disagreements(compiled.source, compiled.plan, files)]
    assert found and all(": roce-mismatch: " in d for d in found)
    assert all(d.startswith(f"cluster/networks.yaml:{line}:") for d in found)
    assert any(
        "stor01 port 1 (gpu001): trust dscp, PFC on 4, DSCP -> 3, ECN on 3, where" in d
        for d in found
    )
    assert any("stor01 port 49 (stor-spine01)" in d for d in found)
    assert any("gpu001 ens2f0" in d and "cable R01-ST01" in d for d in found)
    assert any("gpu126 ens2f0 (trust dscp, PFC on 4, DSCP -> 3, ECN on 3)" in d for d in found)
    # ECN off at one end only: that host's congestion notifications never come.
    files["roce/gpu002/roce.conf"] = files["roce/gpu002/roce.conf"].replace(b"ECN=1", b"ECN=0")
    found = [str(d) for d in roce_disagreements(compiled.source, compiled.plan, files)]
    assert any(
        "gpu002 ens2f0 (trust dscp, PFC on 3, DSCP -> 3, no ECN) and stor01" in d for d in found
    )
    # A switch whose file is gone pauses on nothing.
    del files[f"switches/stor-spine02/{QOS}"]
    found = [str(d) for d in roce_disagreements(compiled.source, compiled.plan, files)]
    assert any("stor-spine02 port 1 (stor01): no QoS" in d for d in found)


def test_a_hop_the_compiler_does_not_configure_is_refused(repo: Path, tmp_path: Path) -> None:
    """The spines' model without `os:`: the storage uplinks would end on unconfigured ports."""
    site = _variant(
        repo, tmp_path, ("hardware.yaml", "    height_u: 2\n    os: cumulus\n", "    height_u: 2\n")
    )
    with pytest.raises(SourceError) as caught:
        compile_source(load(site))
    text = str(caught.value)
    assert re.search(
        r"cluster/networks\.yaml:\d+:\d+: roce-mismatch: RoCE on 'storage' crosses 2 switch", text
    )
    assert re.search(r"cluster/racks/n01\.yaml:\d+:\d+: roce-mismatch: stor-spine01: no PFC", text)


def test_a_links_override_off_the_path_is_refused(repo: Path, tmp_path: Path) -> None:
    """A host's storage NIC patched to a management switch port: no PFC there."""
    site = _variant(
        repo,
        tmp_path,
        (
            "racks/r03.yaml",
            "    slot: 2\n",
            "    slot: 2\n    links: {storage: {switch: mgmt03, port: 40}}\n",
        ),
    )
    with pytest.raises(SourceError) as caught:
        compile_source(load(site))
    assert re.search(
        r"cluster/racks/r03\.yaml:\d+:\d+: roce-mismatch: 'gpu012' is cabled to 'mgmt03', off RoCE",
        str(caught.value),
    )


def test_eos_switches_get_the_same_class_through_pyavd(repo: Path, tmp_path: Path) -> None:
    site = _variant(repo, tmp_path)
    (site / "hardware.yaml").write_text(
        (site / "hardware.yaml").read_text().replace("os: cumulus", "os: eos")
    )
    c = compile_source(load(site))
    plan = c.plan
    for name in ("stor01", "stor-spine01"):
        assert eos.refusals(eos.structured_config(plan, plan.ethernet.switch(name))) == []
    text = _text(c, "switches/stor01/startup-config")
    assert re.search(
        r"^interface Ethernet1\n(   .*\n)*   qos trust dscp\n   priority-flow-control on\n"
        r"   priority-flow-control priority 3 no-drop\n",
        text,
        re.M,
    )
    assert "qos map dscp 26 to traffic-class 3\n" in text
    assert (
        "random-detect ecn minimum-threshold 150000 bytes maximum-threshold 1500000 bytes" in text
    )
    assert roce_disagreements(c.source, plan, c.files) == []
    files = dict(c.files)
    files["switches/stor01/startup-config"] = text.replace(
        "priority-flow-control priority 3 no-drop", "priority-flow-control priority 3 drop", 1
    ).encode()
    found = [str(d) for d in roce_disagreements(c.source, plan, files)]
    assert any("stor01 port 1 (gpu001): no PFC, where" in d for d in found)


def test_the_dispatcher_script_sets_the_nic_roce_conf_names(
    compiled: Compiled, tmp_path: Path
) -> None:
    """Real bash and awk run the script as NetworkManager would (interface, action), against a
    sysfs tree of the test's own; `mlnx_qos` is a stand-in that records its arguments (MLNX_OFED
    is not installable here)."""
    bash = require_tool("bash")
    shellcheck = require_tool("shellcheck")
    script = tmp_path / "50-clusterforge-roce"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    subprocess.run([shellcheck, str(script)], check=True)
    conf = tmp_path / "roce.conf"
    conf.write_bytes(compiled.files["roce/gpu001/roce.conf"])
    sysfs = tmp_path / "sys"
    ecn = sysfs / "class/net/ens2f0/ecn"
    for sub in ("roce_np/enable", "roce_rp/enable"):
        (ecn / sub).mkdir(parents=True)
    (sysfs / "class/net/ens2f0/device/infiniband/mlx5_8").mkdir(parents=True)
    (sysfs / "kernel/config/rdma_cm/mlx5_8/ports/1").mkdir(parents=True)  # what configfs makes
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    calls = tmp_path / "calls"
    (bin_ / "mlnx_qos").write_text(f'#!/bin/sh\necho "$*" >>{calls}\n')
    (bin_ / "mlnx_qos").chmod(0o755)
    env = {
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "CLUSTERFORGE_ROCE_CONF": str(conf),
        "CLUSTERFORGE_SYSFS": str(sysfs),
    }
    for args in (["eno1", "up"], ["ens2f0", "down"]):
        subprocess.run([bash, str(script), *args], env=env, check=True)
    assert not calls.exists()  # not a RoCE NIC, or not coming up: nothing touched
    subprocess.run([bash, str(script), "ens2f0", "up"], env=env, check=True)
    assert calls.read_text().splitlines() == [
        "-i ens2f0 --trust dscp --pfc 0,0,0,1,0,0,0,0",
        "-i ens2f0 --dscp2prio set,26,3",
        "-i ens2f0 --dscp2prio set,48,6",
    ]
    assert (sysfs / "kernel/config/rdma_cm/mlx5_8/ports/1/default_roce_tos").read_text() == "104\n"
    assert (ecn / "roce_np/enable/3").read_text() == "1\n"
    assert (ecn / "roce_rp/enable/3").read_text() == "1\n"
    assert (ecn / "roce_np/cnp_dscp").read_text() == "48\n"
    assert (ecn / "roce_np/cnp_802p_prio").read_text() == "6\n"


RAILS = Path(__file__).resolve().parent.parent / "examples" / "rails" / "generated"


@pytest.mark.realtool
def test_the_rails_site_s_storage_switches_read_as_their_os_reads_them(tmp_path: Path) -> None:
    """The shipped HGX site runs storage on RoCE: its committed switch files through ifupdown2
    (`ifup -a -s`) and FRR (`vtysh --dryrun`), and both ends of a RoCE link read back alike."""
    ifup, vtysh = require_tool("ifup"), require_tool("vtysh")
    for name in ("stor001", "stor-s01", "stor-spine01"):
        interfaces = RAILS / "switches" / name / "etc/network/interfaces"
        done = ifup_syntax(ifup, interfaces)
        assert done.returncode == 0 and "warning" not in done.stderr, f"{name}: {done.stderr}"
        frr = RAILS / "switches" / name / "etc/frr/frr.conf"
        done = subprocess.run(
            [vtysh, "--dryrun", "-f", str(frr)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
    ends = roce.cumulus_ends((RAILS / "switches/stor001" / QOS).read_text(), 26)
    assert sorted(ends) == [1, 2, 3, 4, 63, 64]  # its four servers, its two uplinks
    spine = roce.cumulus_ends((RAILS / "switches/stor-spine01" / QOS).read_text(), 26)
    host = roce.host_ends((RAILS / "roce/gpu001/roce.conf").read_text(), {"ens2f0": 26})
    assert (
        ends[1]
        == ends[63]
        == spine[1]
        == host["ens2f0"]
        == roce.End("dscp", frozenset({3}), 3, frozenset({3}))
    )


def test_a_class_without_ecn_is_off_at_both_ends(repo: Path, tmp_path: Path) -> None:
    site = _variant(
        repo, tmp_path, ("networks.yaml", "  rdma: roce\n", "  rdma: roce\n  roce: {ecn: false}\n")
    )
    c = compile_source(load(site))  # the compile reads both ends back: they agree
    assert "ECN=0\n" in _text(c, "roce/gpu001/roce.conf")
    assert "ecn_red.port_group_list = []\n" in _text(c, f"switches/stor01/{QOS}")
    assert roce.cumulus_ends(_text(c, f"switches/stor01/{QOS}"), 26)[1].ecn == frozenset()


def test_a_changed_class_is_a_flow_control_risk_of_the_diff(compiled: Compiled) -> None:
    """Turning RoCE on (or changing its class) reaches every switch and host of the network:
    `diff` flags it so the change is rolled to all of them together."""
    from dataclasses import replace

    from compiler.diff import RiskKind, _flow_control

    plan = compiled.plan
    [risk] = _flow_control(replace(plan, roce=roce.RocePlan()), plan)
    assert risk.kind == RiskKind.FLOW_CONTROL
    assert risk.items == ("storage: (no RoCE) → PFC on 3, DSCP 26, CNP 6/48, ECN",)
    assert _flow_control(plan, plan) == ()
