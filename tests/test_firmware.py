"""generated/firmware/: per model the baseline, per node its versions and ring, one source.

The manifest must say exactly what generated/expected/ makes the audit check (Host.versions);
a baseline change must show up as one CSV row per node it touches, naming the node's ring;
a pin must carry a reason, and baselines and pins must fit the model, or compile fails located.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from common.errors import SourceError
from compiler.load import parse, read_dir
from compiler.pipeline import Compiled, compile_repo, compile_source

GPU002 = '    guid: "0x0c42a103003484e4"\n'  # the last line of gpu002 in racks/r01.yaml
PROV01 = (
    '    mac: {eno1: "b0:7b:25:1a:a3:9f", ens1f0: "0c:42:a1:03:9e:39", bmc: "b0:7b:25:be:6f:5c"}\n'
)


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


@pytest.fixture(scope="module")
def cluster_files(repo: Path) -> dict[str, bytes]:
    return read_dir(repo / "cluster")


def edited(files: dict[str, bytes], name: str, find: str, add: str) -> dict[str, bytes]:
    """`files` with `add` inserted after `find` (replacing it when `add` starts with '!')."""
    text = files[name].decode()
    assert text.count(find) == 1, f"{find!r} not once in {name}"
    new = add[1:] if add.startswith("!") else find + add
    return {**files, name: text.replace(find, new).encode()}


def diagnostics(files: dict[str, bytes]) -> list[str]:
    with pytest.raises(SourceError) as caught:
        compile_source(parse(files))
    return [str(d) for d in caught.value.diagnostics]


def line_of(files: dict[str, bytes], name: str, text: str) -> int:
    return files[name].decode().splitlines().index(text) + 1


def csv_rows(compiled: Compiled) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(compiled.files["firmware/manifest.csv"].decode())))


def test_manifest_is_the_contract(compiled: Compiled) -> None:
    manifest = YAML(typ="safe").load(compiled.files["firmware/manifest.yaml"].decode())
    assert manifest["rings"] == ["canary", "main"]
    assert set(manifest["nodes"]) == {h.name for h in compiled.plan.hosts}
    rows = csv_rows(compiled)
    by_device: dict[str, dict[str, str]] = {}
    for row in rows:
        by_device.setdefault(row["device"], {})[row["key"]] = row["version"]
    for name, node in manifest["nodes"].items():
        contract = json.loads(compiled.files[f"expected/hosts/{name}.json"])
        assert node["versions"] == contract["versions"], name
        assert node["ring"] == contract["ring"]
        assert by_device[name] == contract["versions"], name
        baseline = manifest["baselines"][node["model"]]
        assert {k: v for k, v in node["versions"].items() if v != baseline[k]} == {}
    assert all(isinstance(v, str) for b in manifest["baselines"].values() for v in b.values())
    assert by_device["leaf01"] == {"firmware": manifest["baselines"]["qm8700"]["firmware"]}
    canary = [r["device"] for r in rows if r["ring"] == "canary"]
    assert rows[: len(canary)] == [r for r in rows if r["ring"] == "canary"]  # rollout order


def test_baseline_change_shows_nodes_and_rings(
    compiled: Compiled, cluster_files: dict[str, bytes]
) -> None:
    files = edited(
        cluster_files, "cluster/firmware.yaml", '    bios: "2.6"\n', '!    bios: "2.7"\n'
    )
    after = compile_source(parse(files))
    before_csv = compiled.files["firmware/manifest.csv"].decode().splitlines()
    after_csv = after.files["firmware/manifest.csv"].decode().splitlines()
    added = [
        line[1:]
        for line in difflib.unified_diff(before_csv, after_csv, lineterm="", n=0)
        if line.startswith("+") and not line.startswith("+++")
    ]
    gpu_hosts = [h for h in compiled.plan.hosts if h.model == "hgx-a100"]
    assert sorted(added) == sorted(f"{h.name},hgx-a100,{h.ring},bios,2.7," for h in gpu_hosts)
    assert {h.ring for h in gpu_hosts} == {"canary", "main"}
    contract = json.loads(after.files["expected/hosts/gpu001.json"])
    assert contract["versions"]["bios"] == "2.7"


def test_pin_with_reason_is_carried(cluster_files: dict[str, bytes]) -> None:
    reason = "BIOS 2.6 hangs on this board's riser (vendor case 4711)"
    pin = f'    pins:\n      bios: {{version: "2.5", reason: "{reason}"}}\n'
    after = compile_source(parse(edited(cluster_files, "cluster/racks/r01.yaml", GPU002, pin)))
    manifest = YAML(typ="safe").load(after.files["firmware/manifest.yaml"].decode())
    assert manifest["nodes"]["gpu002"]["versions"]["bios"] == "2.5"
    assert manifest["nodes"]["gpu002"]["pinned"] == {"bios": reason}
    assert "pinned" not in manifest["nodes"]["gpu003"]
    row = next(r for r in csv_rows(after) if r["device"] == "gpu002" and r["key"] == "bios")
    assert (row["version"], row["pin_reason"]) == ("2.5", reason)
    contract = json.loads(after.files["expected/hosts/gpu002.json"])
    assert contract["versions"]["bios"] == "2.5"
    assert contract["pinned"] == {"bios": reason}


def test_pin_without_reason_is_a_located_error(cluster_files: dict[str, bytes]) -> None:
    name = "cluster/racks/r01.yaml"
    files = edited(cluster_files, name, GPU002, '    pins:\n      bios: {version: "2.5"}\n')
    line = line_of(files, name, '      bios: {version: "2.5"}')
    found = diagnostics(files)
    assert any(d.startswith(f"{name}:{line}:7: missing-field: ") for d in found), found
    assert any("'reason'" in d for d in found), found


def test_pin_of_a_part_the_model_lacks(cluster_files: dict[str, bytes]) -> None:
    """prov01 (svc-eth) has no GPU: a VBIOS pin would make the audit expect one."""
    name = "cluster/racks/s01.yaml"
    pin = '    pins:\n      vbios: {version: "1.0", reason: "does not matter here"}\n'
    files = edited(cluster_files, name, PROV01, pin)
    line = line_of(files, name, '      vbios: {version: "1.0", reason: "does not matter here"}')
    found = diagnostics(files)
    assert [d.split(": ")[:2] for d in found] == [[f"{name}:{line}:7", "unknown-reference"]]


def test_incomplete_and_misfit_baselines(cluster_files: dict[str, bytes]) -> None:
    name = "cluster/firmware.yaml"
    files = edited(cluster_files, name, '    vbios: "92.00.9E.00.03"\n', "!")
    files = edited(files, name, "  svc-eth:\n", '    cuda: "12.2"\n')
    found = diagnostics(files)
    lines = files[name].decode().splitlines()
    hgx = lines.index("  hgx-a100:") + 1
    cuda = lines.index('    cuda: "12.2"', lines.index("  svc-eth:")) + 1
    assert [d.split(": ")[:2] for d in found] == [
        [f"{name}:{hgx}:3", "missing-baseline"],
        [f"{name}:{cuda}:5", "unknown-reference"],
    ], found
