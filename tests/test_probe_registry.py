"""The probe registry (`contract/probes/`): one module is a probe for every reader of it.

A throwaway probe, a module made here and never written to disk, is registered through the
registry's builder; the compiler's forced command and sudoers, the audit's collector, command
line and parser dispatch, and the lab's fleet all take it up with no other change. And every
renderer agrees with its parser: what the lab prints for a reference host, the audit reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from audits.collect import ReplayCollector, over_cap
from audits.compare import host_probes
from audits.observe import observe
from audits.ssh import probe_words
from clusterforge.cli import main
from clusterforge.lab.fleet import FABRIC, Fleet, as_switch_record
from common.errors import RegistryError
from compiler import pipeline
from compiler.targets import access
from contract import probes
from contract.probes import Now, ParseError, Probe
from contract.probes.base import decimal, single_line
from contract.probes.spec import KIB
from tests.conftest import REPO, require_tool

NAME = "nproc"
HOST = "gpu001"


def _throwaway(root: bool = False) -> types.ModuleType:
    """A probe module as a file of contract/probes/ would hold it: `nproc`, the CPUs online."""
    module = types.ModuleType(f"contract.probes.{NAME}")

    def parse(text: str) -> dict[str, int]:
        number, line = single_line(NAME, text, "a count of CPUs")
        return {"cpus": decimal(NAME, number, line)}

    def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
        return {NAME: f"{state['slurm']['cpus']}\n"} if "slurm" in state else {}

    module.PROBE = NAME  # type: ignore[attr-defined]
    module.SPEC = Probe(  # type: ignore[attr-defined]
        NAME, ("nproc",), "host", "/usr/bin/nproc", root=root, max_output=4 * KIB
    )
    module.parse = parse  # type: ignore[attr-defined]
    module.render = render  # type: ignore[attr-defined]
    return module


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> pipeline.Compiled:
    return pipeline.compile_repo(REPO)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> probes.Entry:
    """The registry with the throwaway probe in it, as if its module were in the package."""
    registry = probes.build([*probes.discover(), _throwaway()])
    monkeypatch.setattr(probes, "PROBES", registry)
    return registry[NAME]


def test_the_builder_refuses_a_probe_given_twice() -> None:
    with pytest.raises(RegistryError, match=f"'{NAME}' is registered twice"):
        probes.build([_throwaway(), _throwaway()])


def test_the_forced_command_runs_a_registered_probe_and_refuses_it_otherwise(
    compiled: pipeline.Compiled, registered: probes.Entry, tmp_path: Path
) -> None:
    audit = compiled.plan.site.audit
    assert audit is not None
    script = tmp_path / "forced"
    script.write_text(access.forced_command(audit), encoding="utf-8")
    sh = require_tool("sh")
    require_tool("timeout")

    def run(command: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "SSH_ORIGINAL_COMMAND": command}
        return subprocess.run(
            [sh, str(script)], env=env, capture_output=True, text=True, timeout=30, check=False
        )

    ran = run(NAME)
    assert ran.returncode == 0, ran.stderr
    # The real program's output, read by the probe's own parser as the audit reads it.
    assert registered.parse(ran.stdout) == {"cpus": os.cpu_count()}
    refused = run(f"{NAME} --all")
    assert refused.returncode == access.REFUSED and "takes no argument" in refused.stderr
    assert run("nprocs").returncode == access.REFUSED


def test_sudoers_grants_a_registered_root_probe(
    compiled: pipeline.Compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = compiled.plan.site.audit
    assert audit is not None
    assert "/usr/bin/nproc" not in access.sudoers(audit)
    monkeypatch.setattr(probes, "PROBES", probes.build([*probes.discover(), _throwaway(True)]))
    assert '    /usr/bin/nproc "", \\\n' in access.sudoers(audit)


def test_the_audit_collects_and_parses_a_registered_probe(
    registered: probes.Entry, tmp_path: Path
) -> None:
    fleet = Fleet.load(REPO / "generated")
    recording = fleet.record(tmp_path / "recording")
    cpus = fleet.hosts[HOST].state["slurm"]["cpus"]
    # The lab rendered it; the collector reads it back, the observer parses it.
    assert (recording / "hosts" / HOST / f"{NAME}.txt").read_text(encoding="utf-8") == f"{cpus}\n"
    collected = ReplayCollector(recording).collect({HOST: [NAME]}, []).hosts[HOST]
    assert observe(HOST, collected).facts == {NAME: {"cpus": cpus}}
    # The probe's own cap bounds what a recording may hold of it.
    (recording / "hosts" / HOST / f"{NAME}.txt").write_text("1" * (4 * KIB + 1), "utf-8")
    over = ReplayCollector(recording).collect({HOST: [NAME]}, []).hosts[HOST]
    assert over.failed == {NAME: over_cap(4 * KIB)}
    # What the live audit sends for it: the name, checked against the spec.
    assert probe_words(NAME) == [NAME]


def test_a_probe_not_registered_is_none_of_theirs(tmp_path: Path) -> None:
    assert NAME not in probes.PROBES
    assert NAME not in Fleet.load(REPO / "generated").outputs(HOST)
    with pytest.raises(probes.ProbeError, match="not an allowlisted probe"):
        probe_words(NAME)


@pytest.fixture(scope="module")
def eos_generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated/ of the reference with its switch models on EOS (the reference's run
    Cumulus): where an EOS probe's renderer prints."""
    root = tmp_path_factory.mktemp("eos")
    shutil.copytree(REPO / "cluster", root / "cluster")
    hardware = root / "cluster" / "hardware.yaml"
    hardware.write_text(hardware.read_text(encoding="utf-8").replace("os: cumulus", "os: eos"))
    assert main(["-C", str(root), "compile"]) == 0
    return root / "generated"


@pytest.mark.parametrize("name", sorted(n for n, e in probes.PROBES.items() if e.render))
def test_every_renderer_prints_what_its_parser_reads(
    name: str, request: pytest.FixtureRequest
) -> None:
    """On every host of the reference as planned (a fabric probe: on its fabric as cabled;
    an EOS one: on its switches made EOS), the renderer's output parses, under keys that
    name the probe."""
    entry = probes.PROBES[name]
    assert entry.render is not None
    eos = entry.spec.scope == "eos"
    fleet = Fleet.load(request.getfixturevalue("eos_generated") if eos else REPO / "generated")
    if entry.spec.scope == "fabric":
        subjects = [(FABRIC, fleet.fabric_state(), Now())]
    else:
        subjects = [(h, fleet.hosts[h].state, fleet.now(h)) for h in sorted(fleet.hosts)]
        # A switch is asked only its checks' probes (files, units, BGP).
        subjects += [
            (s, state.state, fleet.now(s))
            for s, state in sorted(fleet.ethernet.items())
            if name in host_probes(as_switch_record(state.state))
        ]
    rendered = 0
    for subject, state, now in subjects:
        for key, text in entry.render(subject, state, now).items():
            assert key.split("@", 1)[0] == name
            try:
                result = entry.parse(text)
            except ParseError as exc:
                pytest.fail(f"{subject}: {key}: the renderer's output does not parse: {exc}")
            assert json.loads(json.dumps(result)) == result
            rendered += 1
    # Each renderer prints for some host of the reference: a test it can fail.
    assert rendered > 0
