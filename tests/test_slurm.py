"""Slurm from the model: the generated files (compiler/targets/slurm.py) read by Debian's
slurmctld and slurmd 22.05, and the audit's Slurm checks (audits/slurm.py) on a replay.

The controller runs from login01's bundle; `scontrol show node` must report what the plan
says. A slurmd registers for gpu001 with stand-in GPUs; slurmd compares the node's real CPUs
and memory with slurm.conf, so that node runs from a copy of the cluster whose hgx-a100 model
is this machine (its `slurmd -C`, read by the audit's parser): nothing is overridden
(`slurmd -Z` or `config_overrides` would hide the very mismatch Slurm drains for).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from clusterforge.cli import main
from clusterforge.lab.fleet import Fleet
from compiler import pipeline
from compiler.plan import Host
from contract.probes import PROBES, sinfo_r, slurmd_c
from tests import slurm_site
from tests.conftest import REPO, require_tool
from tests.reference import compile_reference
from tests.test_audit import audit

CONTROLLER, NODE = "login01", "gpu001"
GPUS = 8


@pytest.fixture(scope="module")
def plan_hosts(repo: Path) -> dict[str, Host]:
    return {h.name: h for h in pipeline.compile_repo(repo).plan.hosts}


def _bundle(repo: Path, out: Path, *hosts: str) -> Path:
    for host in hosts:
        assert (
            # Placeholder secrets: no host here is installed from these bundles.
            main(
                [
                    "-C",
                    str(repo),
                    "bundle",
                    "--allow-placeholders",
                    "--out",
                    str(out / f"_{host}"),
                    "--host",
                    host,
                ]
            )
            == 0
        )
        shutil.move(out / f"_{host}" / host, out / host)
    return out


def _slurm_names(generated: Path) -> list[str]:
    lines = (generated / "slurm" / "nodes.conf").read_text(encoding="utf-8").splitlines()
    return [
        w.split("=", 1)[1] for line in lines if (w := line.split(" ")[0]).startswith("NodeName=")
    ]


# -- the files ------------------------------------------------------------------------------


def test_a_node_line_is_the_plan_s(repo: Path, plan_hosts: dict[str, Host]) -> None:
    text = (repo / "generated" / "slurm" / "nodes.conf").read_text(encoding="utf-8")
    s = plan_hosts[NODE].slurm
    assert s is not None
    line = next(x for x in text.splitlines() if x.startswith(f"NodeName={NODE} "))
    assert line == (
        f"NodeName={NODE} CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2 "
        f"RealMemory={1024 * 1024 - 32 * 1024} Gres=gpu:a100:8 Features=r01,leaf01,hgx-a100 "
        "Weight=1"
    )
    assert s.cpus == 256 and s.real_memory_mib == 1015808


def test_spares_are_configured_drained_and_out_of_production(
    repo: Path, plan_hosts: dict[str, Host]
) -> None:
    spares = sorted(n for n, h in plan_hosts.items() if h.slurm and h.slurm.spare)
    assert spares == ["gpu125", "gpu126"]
    nodes = (repo / "generated" / "slurm" / "nodes.conf").read_text(encoding="utf-8")
    parts = (repo / "generated" / "slurm" / "partitions.conf").read_text(encoding="utf-8")
    assert "DownNodes=gpu[125-126] State=DRAIN Reason=spare\n" in nodes
    assert "PartitionName=gpu Nodes=gpu[001-124] Default=YES" in parts
    assert "PartitionName=spare Nodes=gpu[125-126] State=INACTIVE\n" in parts
    # The acceptance run counts compute nodes only: its all-node step leaves the spares out.
    hosts = (repo / "generated" / "acceptance" / "nccl" / "nccl-all.hosts").read_text()
    assert len(hosts.split()) == 124 and not set(spares) & set(hosts.split())


def test_gres_conf_lists_files_and_cores_or_autodetects_never_both(
    repo: Path, tmp_path: Path
) -> None:
    gres = (repo / "generated" / "slurm" / "gres.conf").read_text(encoding="utf-8")
    assert "NodeName=gpu[001-126] Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-63\n" in gres
    assert "NodeName=gpu[001-126] Name=gpu Type=a100 File=/dev/nvidia[4-7] Cores=64-127\n" in gres
    assert "AutoDetect" not in gres
    shutil.copytree(repo / "cluster", tmp_path / "cluster")
    hardware = tmp_path / "cluster" / "hardware.yaml"
    text = hardware.read_text(encoding="utf-8")
    hardware.write_text(text.replace("gres_detect: files ", "gres_detect: nvml  ", 1))
    files = pipeline.compile_repo(tmp_path).files
    nvml = files["slurm/gres.conf"].decode()
    assert "NodeName=gpu[001-126] AutoDetect=nvml\n" in nvml
    assert "File=" not in nvml and "Cores=" not in nvml


# -- the audit ------------------------------------------------------------------------------

LOST_GIB, SHORT, DRAINED = 512, "gpu017", "gpu042"
GRES_REASON = "gres/gpu count reported lower than configured (7 < 8)"


def test_the_audit_names_a_node_short_of_memory_and_a_drained_one_at_rack_and_u(
    repo: Path, tmp_path: Path
) -> None:
    reference = compile_reference(repo, tmp_path / "reference")
    fleet = Fleet.load(reference / "generated")
    fleet.lose_memory(SHORT, LOST_GIB)
    fleet.drain(DRAINED, GRES_REASON)
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    report = run.json()
    assert run.code == 1
    found = {(f["host"], f["path"]): f for f in report["findings"]}
    assert set(found) == {
        (SHORT, "slurm.real_memory_mib"),
        (DRAINED, f"slurm.state[{DRAINED}]"),
    }, report["findings"]
    contract = {
        h: json.loads((reference / "generated" / "expected" / "hosts" / f"{h}.json").read_text())
        for h in (SHORT, DRAINED)
    }
    short = found[(SHORT, "slurm.real_memory_mib")]
    assert short["kind"] == "slurm" and short["severity"] == "critical"
    assert short["expected"] == contract[SHORT]["slurm"]["real_memory_mib"]
    assert short["observed"] == (1024 - LOST_GIB) * 1024
    assert (
        f"sees 512.0 GiB, {LOST_GIB}.0 GiB less than the 1024.0 GiB installed" in short["message"]
    )
    drained = found[(DRAINED, f"slurm.state[{DRAINED}]")]
    place = f"{contract[DRAINED]['rack']} U{contract[DRAINED]['u']}"
    assert f"{DRAINED} ({place}) is drained" in drained["message"]
    assert GRES_REASON in drained["message"]
    md = run.text("report.md")
    for host in (SHORT, DRAINED):
        c = contract[host]
        row = next(x for x in md.splitlines() if x.startswith(f"| critical | {host} |"))
        assert f"| {c['rack']} U{c['u']} | slurm |" in row
    assert "- **slurm**: read the reason" in md
    # The controller saw the drain, the node's own slurmd the memory.
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status[SHORT] == status[CONTROLLER] == "drift"
    assert sum(s == "drift" for s in status.values()) == 2


def test_a_spare_put_to_work_by_hand_is_named(repo: Path, tmp_path: Path) -> None:
    reference = compile_reference(repo, tmp_path / "reference")
    fleet = Fleet.load(reference / "generated")
    state = fleet.hosts[CONTROLLER].state["slurm_controller"]
    state["nodes"]["gpu125"]["spare"] = False  # the controller no longer shows it drained
    run = audit(reference, fleet.record(tmp_path / "recording"), tmp_path / "report")
    (f,) = run.json()["findings"]
    assert (f["host"], f["severity"]) == ("gpu125", "warning")
    assert "spare gpu125 (s01 U10) is not drained" in f["message"]


# -- the real daemons -----------------------------------------------------------------------


def _tools() -> None:
    for tool in ("slurmctld", "slurmd", "scontrol", "sinfo", "munged", "mungekey", "nsenter"):
        require_tool(tool)
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("namespaces, mknod and the daemons' users need root")


@pytest.fixture(scope="module")
def reference_bundles(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(repo, tmp_path_factory.mktemp("bundles"), CONTROLLER, NODE)


@pytest.mark.realtool
def test_slurmctld_reads_the_generated_files_as_planned(
    repo: Path, reference_bundles: Path, plan_hosts: dict[str, Host]
) -> None:
    _tools()
    names = [*_slurm_names(repo / "generated"), CONTROLLER]
    host = plan_hosts[NODE]
    s = host.slurm
    assert s is not None
    with slurm_site.site(reference_bundles, CONTROLLER, NODE, names) as site:
        node = site.node(NODE)
        assert node["CPUTot"] == str(s.cpus) == "256"
        assert (node["Sockets"], node["CoresPerSocket"], node["ThreadsPerCore"]) == (
            "2", "64", "2"
        )  # fmt: skip
        assert node["RealMemory"] == str(s.real_memory_mib)
        assert node["Gres"] == f"gpu:a100:{GPUS}"
        assert node["AvailableFeatures"] == "r01,leaf01,hgx-a100"
        assert node["Partitions"] == "gpu" and node["Weight"] == "1"
        spare = site.node("gpu125")
        assert "DRAIN" in spare["State"] and spare["Reason"].startswith("spare ")
        held = slurm_site_reasons(site)
        assert {h["node"]: h["reason"] for h in held} == {"gpu125": "spare", "gpu126": "spare"}
        gpu = site.run("sinfo", "--noheader", "--partition=gpu", "--format=%D").stdout.split()
        assert gpu == ["124"]


@pytest.mark.realtool
def test_slurmctld_reads_the_rail_sites_topology_as_planned(tmp_path: Path) -> None:
    """examples/rails: a scalable unit is one topology switch (its servers sit under eight
    rail leaves), the spines join the units; slurmctld reads the generated files and
    `scontrol show topology` lists each switch with the nodes and switches planned."""
    _tools()
    example = REPO / "examples" / "rails"
    generated = example / "generated"
    bundles = _bundle(example, tmp_path / "bundles", CONTROLLER, NODE)
    planned = {
        f["SwitchName"]: f
        for line in (generated / "fabric" / "slurm-topology.conf").read_text().splitlines()
        if line.startswith("SwitchName=")
        for f in [dict(w.split("=", 1) for w in line.split())]
    }
    assert sorted(planned) == ["spine01", "spine02", "spine03", "spine04", "spine05",
                               "spine06", "spine07", "spine08", "su1", "su2"]  # fmt: skip
    names = [*_slurm_names(generated), CONTROLLER]
    with slurm_site.site(bundles, CONTROLLER, NODE, names) as site:
        out = site.run("scontrol", "show", "topology")
        assert out.returncode == 0, out.stderr + site.logs()
        shown = {
            f["SwitchName"]: f
            for line in out.stdout.splitlines()
            if line.startswith("SwitchName=")
            for f in [dict(re.findall(r"(\w+)=(\S+)", line))]
        }
        assert sorted(shown) == sorted(planned)
        for name, want in planned.items():
            got = shown[name]
            # A unit is a leaf of Slurm's tree (level 0) over its own servers; a spine is
            # level 1 over both units, so over every server.
            assert got["Level"] == ("0" if "Nodes" in want else "1"), got
            if "Nodes" in want:
                assert got["Nodes"] == want["Nodes"]
            else:
                assert got["Switches"] == want["Switches"] == "su[1-2]"
                assert got["Nodes"] == "gpu[001-063]"
        node = site.node("gpu033")
        assert node["AvailableFeatures"] == "r009,su2,hgx-h100"
        gpu = site.run("sinfo", "--noheader", "--format=%D").stdout.split()
        assert sum(map(int, gpu)) >= 63


def slurm_site_reasons(site: slurm_site.Site) -> list[Any]:
    """The audit's probe, as the audit runs it, on the controller, read by its parser."""
    out = site.run(*PROBES["sinfo_r"].spec.argv)
    assert out.returncode == 0, out.stderr
    return list(sinfo_r.parse(out.stdout))


@pytest.fixture(scope="module")
def this_machine(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the cluster whose hgx-a100 is this machine, as slurmd -C sees it, compiled
    and bundled (controller and node)."""
    _tools()
    seen = slurmd_c.parse(subprocess.run(["slurmd", "-C"], capture_output=True, text=True,
                                         timeout=30, check=True).stdout)  # fmt: skip
    tmp = tmp_path_factory.mktemp("machine")
    shutil.copytree(repo / "cluster", tmp / "cluster")
    hardware = tmp / "cluster" / "hardware.yaml"
    text = hardware.read_text(encoding="utf-8")
    model = (
        "    cpu_sockets: 2\n    cpu_model: AMD EPYC 7763       # 64 cores, SMT on: 256 CPUs "
        "as slurmd -C counts them\n    cores_per_socket: 64\n    threads_per_core: 2\n"
        "    memory_gib: 1024"
    )
    assert model in text
    text = text.replace(
        model,
        f"    cpu_sockets: {seen['sockets']}\n    cores_per_socket: {seen['cores_per_socket']}\n"
        f"    threads_per_core: {seen['threads_per_core']}\n"
        f"    memory_gib: {seen['real_memory_mib'] // 1024}",
        1,
    )
    last = seen["sockets"] - 1  # the second half of the GPUs on the last socket there is
    text = text.replace(
        "- {socket: 1, gpus: [4, 5, 6, 7]}", f"- {{socket: {last}, gpus: [4, 5, 6, 7]}}"
    )
    hardware.write_text(text, encoding="utf-8")
    slurm = tmp / "cluster" / "slurm.yaml"
    slurm.write_text(slurm.read_text().replace("memory_headroom_gib: 32", "memory_headroom_gib: 1"))
    compile_reference(tmp, tmp)
    return _bundle(tmp, tmp / "bundles", CONTROLLER, NODE)


def _registered(site: slurm_site.Site) -> bool:
    return site.node(NODE).get("SlurmdStartTime", "None") != "None"


@pytest.fixture
def machine_site(this_machine: Path) -> Iterator[slurm_site.Site]:
    names = [*_slurm_names(this_machine.parent / "generated"), CONTROLLER]
    with slurm_site.site(this_machine, CONTROLLER, NODE, names) as site:
        yield site


@pytest.mark.realtool
def test_slurmd_with_its_planned_gpus_registers_and_is_not_drained(
    this_machine: Path, machine_site: slurm_site.Site
) -> None:
    site = machine_site
    with slurmd_for(site, this_machine) as proc:
        site.wait("gpu001 registered", lambda: _registered(site), [proc])
        node = site.node(NODE)
    assert node["State"] == "IDLE", site.logs()
    assert "Reason" not in node
    # The GPUs with their socket: slurmd took every Cores= of gres.conf.
    assert node["Gres"] == f"gpu:a100:{GPUS}(S:0)"
    assert "Invalid GRES" not in (site.folder / "slurmd.log").read_text()


def slurmd_for(
    site: slurm_site.Site, bundles: Path, gres: str | None = None
) -> AbstractContextManager[subprocess.Popen[bytes]]:
    """slurmd for the node under test, with every GPU of the model as a stand-in device."""
    return slurm_site.slurmd(site, bundles, NODE, GPUS, gres)


@pytest.mark.realtool
def test_a_gres_conf_short_of_gpus_drains_the_node_as_sites_see_it(
    this_machine: Path, machine_site: slurm_site.Site
) -> None:
    """The failing twin of the test above: the node's gres.conf without its second socket's
    GPUs, as a hand-written one that missed them."""
    site = machine_site
    gres = (this_machine / NODE / "etc" / "slurm" / "gres.conf").read_text(encoding="utf-8")
    short = "".join(line for line in gres.splitlines(True) if "nvidia[4-7]" not in line)
    assert short != gres
    with slurmd_for(site, this_machine, short) as proc:
        site.wait("gpu001 registered", lambda: _registered(site), [proc])
        node = site.node(NODE)
    assert "DRAIN" in node["State"]
    assert node["Reason"].startswith("gres/gpu count reported lower than configured (4 < 8)")
    held = {h["node"]: h for h in slurm_site_reasons(site)}
    assert held[NODE]["reason"] == "gres/gpu count reported lower than configured (4 < 8)"


@pytest.mark.realtool
def test_cores_the_node_does_not_have_are_refused_by_slurmd(
    this_machine: Path, machine_site: slurm_site.Site
) -> None:
    """gres.conf's Cores= naming cores past the node's: slurmd drops the binding ("Invalid
    GRES data"), and the GPUs lose their socket; the model's check stops it before (a socket
    the model lacks is a located error, tests/bad_input)."""
    site = machine_site
    gres = (this_machine / NODE / "etc" / "slurm" / "gres.conf").read_text(encoding="utf-8")
    wrong = re.sub(r"Cores=\S+", "Cores=4096-4099", gres)
    assert wrong != gres
    with slurmd_for(site, this_machine, wrong) as proc:
        site.wait("gpu001 registered", lambda: _registered(site), [proc])
        node = site.node(NODE)
    assert "Invalid GRES data for gpu, Cores=4096-4099" in (site.folder / "slurmd.log").read_text()
    assert node["Gres"] == f"gpu:a100:{GPUS}"  # no (S:0): the jobs' GPUs lost their cores


# -- the spare how-to -----------------------------------------------------------------------

HOWTO = "## Take a failed node out and bring a spare in"
FAILED, SPARE = "gpu017", "gpu125"
GIT_ENV = {
    "PATH": os.environ["PATH"],
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def _entry(text: str, name: str, old: str, new: str) -> str:
    """`text` with `old` replaced by `new` once, in the rack-file entry of node `name`."""
    start = text.index(f"  - name: {name}\n")
    end = text.find("\n  - name: ", start + 1)
    end = len(text) if end < 0 else end
    entry = text[start:end]
    assert old in entry, (name, old)
    return text[:start] + entry.replace(old, new, 1) + text[end:]


def test_the_spare_howto_is_one_change_whose_diff_is_exactly_the_swap(
    repo: Path, tmp_path: Path
) -> None:
    """docs/howto.md's steps, its YAML as written there, on a scratch repository."""
    section = (repo / "docs" / "howto.md").read_text(encoding="utf-8").split(HOWTO, 1)[1]
    section = section.split("\n## ", 1)[0]
    cables, links = (textwrap.dedent(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S))
    root = tmp_path / "site"
    shutil.copytree(repo / "cluster", root / "cluster")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "cluster")
    _git(root, "commit", "-q", "-m", "base")
    cluster = root / "cluster"
    r04, s01, fabric = (cluster / p for p in ("racks/r04.yaml", "racks/s01.yaml", "fabric.yaml"))
    r04.write_text(_entry(r04.read_text(), FAILED, "role: gpu", "role: spare"))
    text = _entry(s01.read_text(), SPARE, "role: spare", "role: gpu")
    guid = 'guid: "0x0c42a10300fdac4e"'
    s01.write_text(_entry(text, SPARE, guid, f"{guid}\n    {links.strip()}"))
    assert fabric.read_text().count("cables: []\n") == 1
    fabric.write_text(fabric.read_text().replace("cables: []\n", cables))
    _git(root, "commit", "-q", "-am", "gpu017 out, spare gpu125 in")
    out = tmp_path / "diff.json"
    assert main(["-C", str(root), "diff", "main~1", "main", "--json", str(out)]) == 0
    diff = json.loads(out.read_text(encoding="utf-8"))
    # The risks are the swap itself, shown for the reviewer: two roles change, and with them
    # the two hosts' kickstarts (their services' packages and units).
    assert diff["compiles"]
    risks = {r["kind"]: r["items"] for r in diff["risks"]}
    assert sorted(risks) == ["kickstart-changed", "role-changed"]
    assert risks["role-changed"] == ["gpu017: gpu → spare", "gpu125: spare → gpu"]
    assert diff["nodes"] == {"added": [], "removed": [], "moved": [], "renamed": []}
    assert diff["addresses"] == [] and diff["renumbered_nothing"]
    (added,) = diff["cables"]["added"]
    assert (added["id"], added["a"]["device"], added["a"]["port"], added["b"]["device"]) == (
        "R04-IB20", "leaf04", "20", SPARE
    )  # fmt: skip
    (changed,) = diff["cables"]["changed"]
    assert changed["id"] == "R04-IB02" and not changed["repatched"]
    assert sorted((c["key"], c["old"], c["new"]) for c in changed["changes"]) == [
        ("note", "", "gpu017 failed, RMA 4711"),
        ("spare", False, True),
    ]
    assert diff["cables"]["removed"] == []
    assert "clusterforge labels --only R04-IB20" in " ".join(diff["label_commands"])
    files = {f["path"] for a in diff["artifacts"] for f in a["files"]}
    # Every Slurm host holds nodes.conf and partitions.conf; the subnet managers the OpenSM
    # files (the compute nodes' GUIDs, the storage partition's members), the monitoring host
    # the scrape targets (their role labels): their deploy maps carry the new digests.
    deployed = {p for p in files if p.startswith("deploy/")}
    slurm_hosts = {f"deploy/gpu{i:03d}.json" for i in range(1, 127)} | {
        "deploy/login01.json", "deploy/login02.json"
    }  # fmt: skip
    assert deployed == slurm_hosts | {"deploy/sm01.json", "deploy/sm02.json", "deploy/mon01.json"}
    assert files - deployed - {p for p in files if p.startswith("acceptance/")} == {
        *(f"expected/hosts/{h}.json" for h in (FAILED, SPARE, CONTROLLER)),
        *(f"kickstart/{h}.ks" for h in (FAILED, SPARE)),
        "slurm/nodes.conf",
        "slurm/partitions.conf",
        "fabric/slurm-topology.conf",
        "fabric/topology.net",
        "fabric/cables.csv",
        "fabric/bom.csv",
        "labels/labels.csv",
        "expected/fabric.json",
        "inventory.json",
        "draw/scene.json",  # the pictures: the new cable, the roles
        "opensm/cn_guids",
        "opensm/partitions.conf",
        *(f"monitoring/targets/{t}.json" for t in ("dcgm", "icmp", "ipmi", "node")),
    }
    head = pipeline.compile_repo(root).files
    nodes, parts = (head[f"slurm/{n}.conf"].decode() for n in ("nodes", "partitions"))
    assert "DownNodes=gpu[017,126] State=DRAIN Reason=spare\n" in nodes
    assert "PartitionName=gpu Nodes=gpu[001-016,018-125] Default=YES" in parts
    assert "PartitionName=spare Nodes=gpu[017,126] State=INACTIVE\n" in parts
    topology = head["fabric/slurm-topology.conf"].decode()
    assert "SwitchName=leaf04 Nodes=gpu[016,018-020,125]\n" in topology
    # After the swap a fleet as planned audits clean: the failed node's dark port, its cable
    # a spare now, is no finding; the spare brought in is audited as any GPU server.
    compiled = compile_reference(root, tmp_path / "head")
    fleet = Fleet.load(compiled / "generated")
    assert FAILED in fleet.hosts and "R04-IB02" not in fleet.cables
    run = audit(compiled, fleet.record(tmp_path / "recording"), tmp_path / "report")
    assert run.code == 0, run.json()["findings"]
    contract = json.loads(
        (compiled / "generated" / "expected" / "hosts" / f"{FAILED}.json").read_text()
    )
    assert [p["state"] for p in contract["ib_ports"]] == ["Down"]
    assert "R04-IB02" not in run.json()["fabric"]["checked"]


@pytest.mark.realtool
def test_the_lab_stages_lost_memory_and_a_drain_and_the_audit_names_them(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lab twin answers slurmd -C and sinfo over SSH like the replay: the same findings."""
    from clusterforge.lab import lab
    from tests.test_lab import _leftovers, _state, _tools, _up

    _tools()
    faults = tmp_path / "faults.yaml"
    faults.write_text(
        f"- fault: memory-lost\n  hosts: {SHORT}\n  gib: {LOST_GIB}\n"
        f"- fault: slurm-drained\n  hosts: {DRAINED}\n  reason: {GRES_REASON}\n",
        encoding="utf-8",
    )
    state = _state()
    spec = f"{SHORT},{DRAINED},{CONTROLLER}"
    argv = _up(repo, state, capsys, "--hosts", spec, "--faults", str(faults))
    try:
        assert main([*argv, "--out", str(tmp_path / "report")]) == 1
    finally:
        lab.down(state)
    assert _leftovers(state, None) == []
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert {(f["host"], f["path"]) for f in report["findings"]} == {
        (SHORT, "slurm.real_memory_mib"),
        (DRAINED, f"slurm.state[{DRAINED}]"),
    }, report["findings"]
