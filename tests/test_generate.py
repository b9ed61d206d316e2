"""The cluster generator: every size it offers compiles clean, byte-for-byte the same twice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import SourceError
from compiler import generate, pipeline, validation
from compiler.load import Source, load, parse
from compiler.plan import oversized
from tests.conftest import REPO

_POLICY = ("provisioning.yaml", "services.yaml")
AUDIT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMkD0LRYwYL3yRGeueMOJgv++Palp7O9dNIJ5nt3pjM t"


@pytest.mark.parametrize("servers", [1, 17, 124])
def test_generated_cluster_compiles(servers: int) -> None:
    compiled = pipeline.compile_source(generate.source(servers))
    gpus = [h for h in compiled.plan.hosts if h.role == "gpu"]
    assert len(gpus) == servers
    assert len(compiled.plan.hosts) == servers + len(generate._SERVICE_HOSTS)
    again = pipeline.compile_source(generate.source(servers))
    assert again.files == compiled.files


def test_generator_is_pure_text() -> None:
    tree = generate.generate(40)
    assert tree == generate.generate(40)
    assert sorted(tree)[:3] == ["fabric.yaml", "firmware.yaml", "hardware.yaml"]
    assert {"racks/r001.yaml", "racks/r003.yaml", "racks/s01.yaml"} <= set(tree)


def test_an_audit_key_adds_the_audit_account_and_its_homes() -> None:
    plain = pipeline.compile_source(generate.source(4))
    audited = pipeline.compile_source(parse_tree(generate.generate(4, audit_key=AUDIT_KEY)))
    assert not any(p.startswith("access/") for p in plain.files)
    assert AUDIT_KEY.encode() in audited.files["access/authorized_keys"]
    homes = {p.path for p in audited.deploys["gpu001"].files}
    assert "/usr/local/libexec/clusterforge-probe" in homes
    assert "/etc/ssh/authorized_keys/clusterforge-audit" in homes


@pytest.mark.parametrize("name", _POLICY)
def test_the_policy_files_are_the_reference_site_s_own(name: str) -> None:
    """The package's policy files are links to cluster/'s (one file to edit, none to keep
    equal), and a tree with the audit account takes each whole, byte for byte."""
    shipped = REPO / "compiler" / "policy" / name
    assert shipped.is_symlink() and shipped.resolve() == (REPO / "cluster" / name).resolve()
    reference = (REPO / "cluster" / name).read_text(encoding="utf-8")
    assert generate.generate(4, audit_key=AUDIT_KEY)[name] == reference


def test_without_an_audit_key_services_lose_only_the_account_s_files() -> None:
    """As data, a tree without the audit account has the reference's policy less the base
    and cumulus services' `access/` files (a host's and a Cumulus switch's account); nothing
    else is left out."""
    reference = load(REPO / "cluster").data
    plain = parse_tree(generate.generate(4)).data
    assert plain["provisioning"] == reference["provisioning"]
    services = reference["services"]
    changed = {}
    for name in ("base", "cumulus"):
        service = services["services"][name]
        kept = tuple(f for f in service["files"] if not f["source"].startswith("access/"))
        assert len(service["files"]) - len(kept) == 7
        changed[name] = {**service, "files": kept}
    unaudited = {**services, "services": {**services["services"], **changed}}
    assert plain["services"] == unaudited


# What a wheel is built from: the packages, the metadata pyproject.toml reads, and the two
# files of cluster/ the policy links point at.
_BUILT_FROM = ("pyproject.toml", "README.md", "LICENSE", *(f"cluster/{n}" for n in _POLICY))
_PACKAGES = ("common", "compiler", "audits", "draw", "clusterforge", "contract")


def test_an_installed_package_writes_the_policy_files_itself(tmp_path: Path) -> None:
    """`pip install .`, not editable: the wheel carries the policy files as files (the links
    followed), and `init` run from the installed package writes the reference's bytes. Built
    from a copy of the project, links kept as links, so the build writes nothing here."""
    src, site = tmp_path / "src", tmp_path / "site"
    for rel in _BUILT_FROM:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    for package in _PACKAGES:
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / package, src / package, symlinks=True, ignore=ignore)
    assert (src / "compiler" / "policy" / "services.yaml").is_symlink()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--no-index", "--target", str(site), str(src)], check=True)
    for name in _POLICY:
        shipped = site / "compiler" / "policy" / name
        assert not shipped.is_symlink()
        assert shipped.read_bytes() == (REPO / "cluster" / name).read_bytes()

    # The installed package first on the path (the project's dependencies after it), run
    # from a folder with no project in it.
    run = (
        "import sys, compiler; from clusterforge.cli import main\n"
        "assert compiler.__file__.startswith(sys.argv[1]), compiler.__file__\n"
        "sys.exit(main(['init', sys.argv[2]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = tmp_path / "new"
    done = subprocess.run(
        [sys.executable, "-c", run, str(site), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    for name in _POLICY:
        assert (out / "cluster" / name).read_bytes() == (REPO / "cluster" / name).read_bytes()


def small_three_tier() -> dict[str, str]:
    return generate.generate(32, per_rack=4, racks_per_pod=4, spines=4, cores_per_plane=2)


def test_three_tier_fabric_has_a_core_level() -> None:
    compiled = pipeline.compile_source(parse_tree(small_three_tier()))
    files = {k: v.decode() for k, v in compiled.files.items()}
    roles = [s.role.value for s in compiled.plan.switches]
    assert (roles.count("leaf"), roles.count("spine"), roles.count("core")) == (8, 8, 8)
    # Slurm sees three levels; OpenSM's ftree roots are the cores.
    topo = files["fabric/slurm-topology.conf"]
    assert "SwitchName=spine01 Switches=leaf[001-004]" in topo
    assert "SwitchName=core001 Switches=spine[01,05]" in topo
    assert files["opensm/root_guids"].startswith("# ftree roots: core switch node GUIDs")
    cores = {s.guid for s in compiled.plan.switches if s.role.value == "core"}
    assert set(files["opensm/root_guids"].splitlines()[2:]) == cores
    # Spine uplinks are named by the spine: unique though all spines share a rack.
    up = [c for c in compiled.plan.cables if c.b.device.startswith("core")]
    assert len(up) == 8 * 2 * 10 and len({c.id for c in up}) == len(up)
    assert up[0].id == "SPINE01-21"


def test_three_tier_checks_each_tier() -> None:
    tree = small_three_tier()
    # A core missing from plane 1 halves its spines' uplinks; an uninstalled spine uplink
    # makes that spine's paths to its cores unequal. Other planes are untouched.
    tree["racks/c01.yaml"] = "\n".join(
        line for line in tree["racks/c01.yaml"].splitlines() if "core004" not in line
    )
    tree["fabric.yaml"] = tree["fabric.yaml"].replace(
        "cables: []", "cables: [{device: spine01, port: 21, installed: false}]"
    )
    with pytest.raises(SourceError) as caught:
        pipeline.compile_source(parse_tree(tree))
    text = "\n".join(map(str, caught.value.diagnostics))
    assert "unequal-uplinks: spine 'spine01' links to cores unevenly" in text
    assert "oversubscription: spine 'spine02': 4000 Gb/s to leaves vs 2000 Gb/s to cores" in text
    assert "spine 'spine03'" not in text, "other planes are whole"


def parse_tree(tree: dict[str, str]) -> Source:
    return parse({f"cluster/{path}": text.encode() for path, text in tree.items()})


def test_room_says_how_many_racks_the_plan_still_takes() -> None:
    from compiler.load import load
    from compiler.plan import room
    from tests.conftest import REPO

    reference = room(validation.check(load(REPO / "cluster")))
    # mgmt: 10.60.0.0/16 split at /24 with stride 2 and offset 0 holds rack ids up to 127;
    # a 64-port spine with one link per leaf holds leaf racks 1-64, but the 64-port management
    # spines hold their top two ports for s01 and n01: racks 1-62, 25 of them in use.
    assert (reference.max_rack_id, reference.limited_by) == (127, "network 'mgmt'")
    assert (reference.max_leaf_rack_id, reference.free_leaf_ids) == (62, 37)
    assert reference.leaf_limited_by == "management-spine ports"
    big = room(validation.check(generate.source(4096)))
    assert (big.max_rack_id, big.limited_by) == (703, "static LIDs")
    assert (big.max_leaf_rack_id, big.free_leaf_ids) == (512, 256)


# -- init: what a site would buy ------------------------------------------------------------


def test_as_bought_sizes_the_fabric_racks_and_chassis_as_a_site_buys_them() -> None:
    """5 racks of 8 HGX servers: two HDR spines (QM8700, the leaves' model) carry each leaf's
    9 server ports at 1:1, 5 links each; the network and service racks stand right after the
    GPU racks, so no uplink is long; the 4U chassis are 4U; and nothing is oversized. The
    bench's shape (20 NDR spines) is what the oversize warning is for."""
    compiled = pipeline.compile_source(
        parse_tree(generate.generate(40, per_rack=8, as_bought=True))
    )
    plan = compiled.plan
    spines = [s for s in plan.switches if s.role == "spine"]
    assert [(s.name, s.model) for s in spines] == [("spine01", "qm8700"), ("spine02", "qm8700")]
    assert compiled.cluster.fabric.links_per_spine == 5
    assert compiled.cluster.hardware.servers["hgx-a100"].height_u == 4
    racks = {r.name: (r.row, r.col) for r in compiled.cluster.racks}
    assert racks["n01"] == ("A", 6) and racks["s01"] == ("A", 7)
    uplinks = [c for c in plan.cables if c.b.device.startswith("spine")]
    assert len(uplinks) == 5 * 2 * 5 and max(c.length_m for c in uplinks) <= 10
    assert all(c.medium == "DAC" or c.length_m <= 10 for c in uplinks)
    assert oversized(compiled.cluster) == [] and not any("oversized" in n for n in compiled.notices)
    bench = pipeline.compile_source(generate.source(40, per_rack=8))
    [warning] = oversized(bench.cluster)
    assert warning.startswith("fabric oversized: 20 spines have 1280 ports, the plan cables 100")
    assert f"warning: {warning}" in bench.notices


@pytest.mark.parametrize(("servers", "per_rack"), [(1, 1), (40, 10), (120, 10), (400, 10)])
def test_as_bought_compiles_at_every_size_init_offers(servers: int, per_rack: int) -> None:
    compiled = pipeline.compile_source(
        parse_tree(generate.generate(servers, per_rack=per_rack, as_bought=True))
    )
    assert len([h for h in compiled.plan.hosts if h.role == "gpu"]) == servers
    assert oversized(compiled.cluster) == []


def test_as_bought_refuses_more_4u_servers_than_a_rack_holds() -> None:
    with pytest.raises(ValueError, match="at most 10 4U GPU servers fit a 48U rack"):
        generate.generate(16, per_rack=16, as_bought=True)
