"""docs/ stays true: the field reference is the model's, and every how-to does what it says."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from ruamel.yaml import YAML

from clusterforge.cli import main
from compiler import diff, generate_rails, gitsource, model, reference
from draw import review
from tests.conftest import GIT_ENV, REPO, require_tool


def test_the_field_reference_is_generated_from_the_model() -> None:
    on_disk = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    assert on_disk == reference.markdown(), (
        "docs/reference.md is stale: python -m compiler.reference > docs/reference.md"
    )


def test_the_reference_names_every_key_of_every_model() -> None:
    text = reference.markdown()
    for cls in (model.Node, model.Rack, model.Network, model.Baseline, model.Rollout):
        section = text.split(f"### {cls.__name__}\n", 1)[-1].split("\n### ", 1)[0]
        for key in cls.model_fields:
            assert f"| `{key}` |" in section, f"{cls.__name__}.{key}"


# --- the how-tos, run ------------------------------------------------------------------------
# Each how-to of docs/howto.md is done as the page says, on a scratch git repository holding
# this checkout's cluster/: its YAML blocks (```yaml FILE) are applied to FILE, its command
# blocks (```sh) run, and what the page says the result is, is checked against what the
# compile, the diff and the label sheets really give.

HOWTO = REPO / "docs" / "howto.md"


class Block(NamedTuple):
    lang: str
    target: str  # the file a YAML block edits; "" for commands
    text: str


def _sections() -> dict[str, str]:
    text = HOWTO.read_text(encoding="utf-8")
    return {
        part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] for part in text.split("\n## ")[1:]
    }


def test_the_bootstrap_snippet_is_the_reference_s() -> None:
    """docs/bootstrap.md shows the reference's own bootstrap, as provisioning.yaml has it."""
    text = (REPO / "docs" / "bootstrap.md").read_text(encoding="utf-8")
    snippet = YAML(typ="safe").load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    shipped = YAML(typ="safe").load((REPO / "cluster" / "provisioning.yaml").read_text())
    assert snippet["bootstrap"] == shipped["bootstrap"]


def _blocks(section: str) -> list[Block]:
    found = re.findall(r"^( *)```(\w+)[ \t]*(\S*)\n(.*?)^\1```", section, re.M | re.S)
    return [Block(lang, target, textwrap.dedent(body)) for _, lang, target, body in found]


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _merge(into: Any, change: Any) -> Any:
    if isinstance(into, dict) and isinstance(change, dict):
        return {**into, **{k: _merge(into.get(k), v) for k, v in change.items()}}
    return change


def _apply(root: Path, block: Block) -> None:
    """A YAML block applied as the page means it: a list of entries with `name` changes
    those entries of the file's nodes, value by value; a mapping changes the file's keys."""
    path = root / block.target
    data = YAML(typ="safe").load(path.read_text())
    change = YAML(typ="safe").load(block.text)
    if isinstance(change, list):
        by_name = {n["name"]: n for n in data["nodes"]}
        for entry in change:
            assert entry["name"] in by_name, f"{block.target} has no node {entry['name']!r}"
            by_name[entry["name"]].update(_merge(by_name[entry["name"]], entry))
    else:
        data = _merge(data, change)
    # JSON is YAML 1.2, and it keeps "0x..." GUIDs and versions the strings they are.
    path.write_text(json.dumps(data, indent=1) + "\n")


def _run(root: Path, block: Block, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Run a command block line by line: `clusterforge` through the CLI, `cp` as itself.
    Returns what the clusterforge commands printed."""
    printed = []
    for line in block.text.splitlines():
        argv = shlex.split(line)
        if argv[0] == "clusterforge":
            capsys.readouterr()
            assert main(["-C", str(root), *argv[1:]]) == 0, line
            printed.append(capsys.readouterr().out)
        else:
            assert argv[0] == "cp", f"the how-to runs {argv[0]!r}, which this test does not"
            subprocess.run(argv, cwd=root, check=True)
    return printed


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A repository as an adopter has it: cluster/ and its generated/, on branch master."""
    shutil.copytree(REPO / "cluster", tmp_path / "cluster")
    _git(tmp_path, "init", "-q", "-b", "master")
    assert main(["-C", str(tmp_path), "compile"]) == 0
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    _git(tmp_path, "checkout", "-q", "-b", "change")
    return tmp_path


def _commit(root: Path) -> None:
    assert main(["-C", str(root), "validate"]) == 0
    assert main(["-C", str(root), "compile"]) == 0
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "how-to")


def _diff(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[diff.DiffReport, str]:
    """`clusterforge diff`, BASE left to the default branch as the page says, and the same
    report from the library to read its facts."""
    capsys.readouterr()
    assert main(["-C", str(root), "diff"]) == 0
    markdown = capsys.readouterr().out
    report = gitsource.diff_revisions(root, gitsource.default_branch(root), "HEAD").report
    assert review.to_markdown(report) == markdown
    return report, markdown


def test_howto_add_a_rack(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _sections()["Add a rack"]
    copy, labels = _blocks(text)
    _run(site, copy, capsys)
    name = re.search(r"`name: (\w+)`", text)
    rack_id = re.search(r"`id: (\d+)`", text)
    assert name and rack_id
    new = site / "cluster" / "racks" / f"{name[1]}.yaml"
    rack = YAML(typ="safe").load(new.read_text())
    # Step 2, as a technician fills it in: a free place on the floor, new names, new hardware.
    rack.update(name=name[1], id=int(rack_id[1]), row="C", col=1)
    tag = iter(range(1, 1000))
    for sw in rack["switches"]:
        sw.update(
            name=re.sub(r"\d+$", f"{int(rack_id[1]):02d}", sw["name"]),
            serial=f"MT26NEW{next(tag):03d}X",
            mac=f"02:cf:26:00:00:{next(tag):02x}",
        )
        if "guid" in sw:
            sw["guid"] = f"0x02cf260000{next(tag):06x}"
    for i, node in enumerate(rack["nodes"]):
        node.update(name=f"gpu9{i:02d}", serial=f"S26NEW{i:04d}")
        node["mac"] = {port: f"02:cf:26:01:{i:02x}:{next(tag):02x}" for port in node["mac"]}
        if "guid" in node:
            node["guid"] = f"0x02cf260100{next(tag):06x}"
    new.write_text(json.dumps(rack, indent=1) + "\n")
    _commit(site)
    report, markdown = _diff(site, capsys)
    # "must say **...**": the words the page promises are the diff's own.
    promised = re.search(r"must say\s+\*\*(.+?)\*\*", text, re.S)
    assert promised and " ".join(promised[1].split()) in markdown
    assert report.renumbered_nothing and report.risks == ()
    assert {a.device for a in report.addresses} >= {n["name"] for n in rack["nodes"]}
    assert sum(p.new - p.old for p in report.parts) > 0  # the cables to order
    # "the command the diff ends with" is the page's, and it writes the sheets it names.
    assert markdown.rstrip().endswith(f"{labels.text.strip()}\n```")
    [printed] = _run(site, labels, capsys)
    sheets = re.findall(r"`(\S+\.pdf)`", text)
    assert sheets and all(sheet in printed for sheet in sheets), printed
    assert all((site / "build" / "labels" / sheet).stat().st_size > 0 for sheet in sheets)


def test_howto_replace_a_node_or_an_hca(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _sections()["Replace a node or an HCA"]
    [block] = _blocks(text)
    _apply(site, block)
    _commit(site)
    report, markdown = _diff(site, capsys)
    [entry] = YAML(typ="safe").load(block.text)
    said = r"\*\*Hardware identity\*\*\s+section\s+lists\s+each\s+value\s+old\s+→\s+new\s+\((.*?)\)"
    keys = re.search(said, text, re.S)
    assert keys, "the page no longer says which values the identity section lists"
    named = re.findall(r"`([^`]+)`", keys[1])
    changed = {c.key: c.new for c in report.identity.devices if c.device == entry["name"]}
    assert sorted(changed) == sorted(named)
    # MACs typed as the vendor prints them arrive normalised.
    macs = {k: v for k, v in changed.items() if k.startswith("mac ")}
    normal = re.compile(r"([0-9a-f]{2}:){5}[0-9a-f]{2}")
    assert macs and all(normal.fullmatch(str(m)) for m in macs.values())
    assert changed["serial"] == entry["serial"]
    assert report.identity.lids == () and report.identity.lids_kept > 0
    assert report.renumbered_nothing
    assert [r.kind for r in report.risks] == [diff.RiskKind.KICKSTART_CHANGED]
    assert "kickstart-changed" in text
    assert "Hardware identity" in markdown


def test_howto_re_patch_a_cable(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _sections()["Re-patch a cable"]
    edit, labels = _blocks(text)
    _apply(site, edit)
    _commit(site)
    report, markdown = _diff(site, capsys)
    said = re.search(r"the diff lists (.*?) as\s+re-patched", text, re.S)
    assert said
    ids = tuple(re.findall(r"`([A-Z0-9-]+)`", said[1]))
    assert report.cables.added == report.cables.removed == ()
    assert tuple(c.id for c in report.cables.changed) == ids
    assert all(c.repatched for c in report.cables.changed)
    assert report.labels_to_reprint == ids
    assert report.label_commands == (labels.text.strip(),)
    assert f"cables re-patched | {len(ids)}" in markdown
    _run(site, labels, capsys)
    assert (site / "build" / "labels" / "reprint.pdf").stat().st_size > 0


def test_howto_roll_a_version_out_by_ring(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _sections()["Roll an OFED or firmware version out by ring"]
    rollout, pin = _blocks(text)
    _apply(site, rollout)
    _commit(site)
    report, markdown = _diff(site, capsys)
    change = YAML(typ="safe").load(rollout.text)
    [window] = change["rollouts"]
    assert report.rollouts == (
        diff.RolloutChange("added", tuple(window["rings"]), window["previous"], window["until"]),
    )
    # The window's `previous` is what the site ran before: the page matches cluster/.
    base = YAML(typ="safe").load((REPO / "cluster" / "firmware.yaml").read_text())
    assert {k: base["software"][k] for k in window["previous"]} == window["previous"]
    assert [c.new for c in report.firmware.software] == list(change["software"].values())
    assert diff.RiskKind.LARGE_CHANGE not in [r.kind for r in report.risks]
    assert window["until"] in markdown
    _apply(site, pin)
    _commit(site)
    [entry] = YAML(typ="safe").load(pin.text)
    expected = json.loads(
        (site / "generated" / "expected" / "hosts" / f"{entry['name']}.json").read_text()
    )
    for key, held in entry["pins"].items():
        assert expected["versions"][key] == held["version"]
        assert key in expected["pinned"]


def test_howto_the_audit_account(site: Path, tmp_path: Path) -> None:
    text = _sections()["The read-only audit account"]
    forced = re.search(r'command="([^"]+)"', text)
    assert forced
    keys = (site / "generated" / "access" / "authorized_keys").read_text()
    assert f'command="{forced[1]}"' in keys
    deploy = json.loads((site / "generated" / "deploy" / "gpu001.json").read_text())
    assert forced[1] in json.dumps(deploy)
    # Sending a probe by hand: the line is one ssh takes (ssh -G parses it, connects nowhere),
    # and what reaches the forced command is a probe it runs, not one it refuses.
    [block] = [b for b in _blocks(text) if b.lang == "sh"]
    argv = shlex.split(block.text.strip())
    ssh = require_tool("ssh")
    assert subprocess.run([ssh, "-G", *argv[1:]], capture_output=True).returncode == 0
    without = [a for a in argv[1:] if a != "--"]
    assert subprocess.run([ssh, "-G", *without], capture_output=True).returncode != 0
    user = YAML(typ="safe").load((REPO / "cluster" / "site.yaml").read_text())["audit"]["user"]
    assert argv[argv.index("--") - 1].startswith(f"{user}@")
    command = " ".join(argv[argv.index("--") + 1 :])
    done = subprocess.run(
        ["sh", str(site / "generated" / "access" / "gpu" / "clusterforge-probe")],
        env={"SSH_ORIGINAL_COMMAND": command, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 126 and "refused" not in done.stderr, done.stderr
    refused = subprocess.run(
        ["sh", str(site / "generated" / "access" / "gpu" / "clusterforge-probe")],
        env={"SSH_ORIGINAL_COMMAND": "rm -rf /", "PATH": os.environ["PATH"]},
        capture_output=True,
    )
    assert refused.returncode == 126


def test_howto_add_a_scalable_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a one-unit site whose eight spines were sized for two (`init --rails 8 --units 2`'s
    spines, four links a leaf each): the page's steps add su2, and nothing is renumbered."""
    one, two = generate_rails.generate_rails(1), generate_rails.generate_rails(2)
    base = one | {"racks/n00.yaml": two["racks/n00.yaml"]}
    base["fabric.yaml"] = one["fabric.yaml"].replace("links_per_spine: 8", "links_per_spine: 4")
    # The service rack where the two-unit site has it, out of the new unit's row.
    base["racks/s01.yaml"] = one["racks/s01.yaml"].replace("row: B", "row: C")
    for path, text in base.items():
        (tmp_path / "cluster" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cluster" / path).write_text(text)
    _git(tmp_path, "init", "-q", "-b", "master")
    assert main(["-C", str(tmp_path), "compile"]) == 0
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    _git(tmp_path, "checkout", "-q", "-b", "change")
    text = _sections()["Add a scalable unit"]
    check, copy, units, labels = _blocks(text)
    [printed] = _run(tmp_path, check, capsys)
    promised = re.search(r"must print\s+\*\*(.+?)\*\*", text, re.S)
    assert promised and promised[1] in printed, printed
    _run(tmp_path, copy, capsys)
    copies = [line.split()[-1].removeprefix("cluster/") for line in copy.text.splitlines()]
    # Step 3, as a technician fills the copies in: the two-unit generator's su2, new names,
    # places and identities in the real formats.
    assert sorted(copies) == sorted(p for p in two if p not in one)
    for path in copies:
        assert (tmp_path / "cluster" / path).exists()
        (tmp_path / "cluster" / path).write_text(two[path])
    _apply(tmp_path, units)
    _commit(tmp_path)
    report, markdown = _diff(tmp_path, capsys)
    promised = re.search(r"must say\s+\*\*(.+?)\*\*", text, re.S)
    assert promised and " ".join(promised[1].split()) in markdown
    assert report.renumbered_nothing
    cable = re.search(r"`(SU2-LEAF\d-\d\d)`: leaf (\S+), port (\d+)", text)
    assert cable
    fabric = json.loads((tmp_path / "generated" / "expected" / "fabric.json").read_text())
    [found] = [c for c in fabric["cables"] if c["id"] == cable[1]]
    assert (found["a"]["name"], found["a"]["port"]) == (cable[2], int(cable[3]))
    assert sum(p.new - p.old for p in report.parts) > 0
    # Step 6: a leaf's two sheets for each of the unit's rails, as the page names them.
    _run(tmp_path, labels, capsys)
    named = re.search(r"writes \*\*(su2-leaf)0\.pdf to \1(\d)\.pdf\*\*", text)
    assert named and named[2] == "7"
    leaves = [f"su2-leaf{k}" for k in range(8)]
    written = sorted(p.name for p in (tmp_path / "build" / "labels").iterdir())
    assert written == sorted(f"{leaf}{end}" for leaf in leaves for end in (".pdf", "-pull.pdf"))


# --- docs/adoption.md: the pin installs as written -------------------------------------------


def test_adoption_the_documented_pin_installs_the_tagged_release(tmp_path: Path) -> None:
    """The install line of docs/adoption.md, its mirror a clone of this checkout tagged as a
    release is (`v` + pyproject's version), installed into a fresh venv with pip, offline
    (--no-index --no-deps --no-build-isolation): pip takes the line, and installs that tag."""
    text = (REPO / "docs" / "adoption.md").read_text(encoding="utf-8")
    start = text.split("## Start", 1)[1]
    [line] = [ln for ln in _blocks(start)[0].text.splitlines() if "pip install" in ln]
    [requirement] = re.findall(r"'([^']+)'", line)
    found = re.fullmatch(
        r"clusterforge @ git\+https://YOUR-MIRROR/clusterforge@(v[\d.]+)", requirement
    )
    assert found, requirement
    tag = found[1]
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version and tag == f"v{version[1]}"
    # The form the page gives for a mirror on disk, with this checkout as the mirror.
    assert "git+file://localhost/" in text
    mirror = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", str(REPO), str(mirror)], env=GIT_ENV, check=True)
    # The checkout's own release tag may already be there: the mirror's release is its HEAD.
    _git(mirror, "tag", "-f", tag)
    local = requirement.replace("https://YOUR-MIRROR/clusterforge", f"file://localhost{mirror}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    # The build backend pyproject.toml asks for, which --no-build-isolation takes from the
    # venv: the venv's own is older than it needs.
    backend = re.search(
        r'requires = \["(setuptools[^"]*)"\]', (REPO / "pyproject.toml").read_text()
    )
    assert backend
    subprocess.run([*pip, "install", backend[1]], check=True)
    done = subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", "--no-build-isolation", local],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The three-slash form is what pip refuses, as the page says.
    refused = subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", "--dry-run",
         local.replace("file://localhost/", "file:///")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert refused.returncode != 0 and "Invalid requirement" in refused.stderr
    # Read in the venv's own terms, from a folder where no other clusterforge lies about.
    script = (
        "import importlib.metadata as m, json; d = m.distribution('clusterforge'); "
        "print(d.version); print(json.loads(d.read_text('direct_url.json'))['vcs_info']"
        "['commit_id'])"
    )
    shown = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == [version[1], _git(mirror, "rev-parse", f"{tag}^{{commit}}")]
