"""The expected-state contract (`contract/`): every committed file is one of its records and
comes back byte for byte, the committed JSON Schemas are a fresh export and hold every
committed file, a file of another schema version is refused where it says so, and the audit
reaches a host by its management interface whatever the site names that network."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from audits import expected
from audits.model import AuditError
from audits.ssh import Target, targets
from contract import SCHEMA, ContractError, Deploy, EthernetSwitch, Fabric, Host, schema
from contract.record import Absent, Record, absent
from tests.conftest import REPO

TREES = [REPO / "generated", *sorted(REPO.glob("examples/*/generated"))]
HOSTS = sorted(p for t in TREES for p in (t / "expected" / "hosts").glob("*.json"))
FABRICS = sorted(p for t in TREES if (p := t / "expected" / "fabric.json").is_file())
DEPLOYS = sorted(p for t in TREES for p in (t / "deploy").glob("*.json"))
# The configured Ethernet switches: each has a deploy map and a record beside the hosts'.
SWITCH_DIRS = sorted(p for t in TREES for p in (t / "switches").glob("*") if p.is_dir())
SWITCHES = sorted(p for t in TREES for p in (t / "expected" / "switches").glob("*.json"))


def _validator(name: str) -> jsonschema.protocols.Validator:
    document = json.loads((schema.FOLDER / f"{name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(document)
    cls.check_schema(document)
    return cls(document, format_checker=cls.FORMAT_CHECKER)


def test_the_committed_trees_are_many_files() -> None:
    # A glob gone wrong would make every test below pass on nothing.
    assert len(HOSTS) > 100 and FABRICS and SWITCH_DIRS
    assert len(DEPLOYS) == len(HOSTS) + len(SWITCH_DIRS) == len(HOSTS) + len(SWITCHES)


@pytest.mark.parametrize(
    ("record", "paths"),
    [(Host, HOSTS), (Fabric, FABRICS), (Deploy, DEPLOYS), (EthernetSwitch, SWITCHES)],
)
def test_every_committed_file_reads_and_writes_back_to_its_bytes(
    record: type[Host] | type[Fabric] | type[Deploy] | type[EthernetSwitch], paths: list[Path]
) -> None:
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert record.from_json(text, path).to_json() == text, path


def test_a_section_that_does_not_apply_is_absent_and_a_null_fact_is_written() -> None:
    contracts = {p.stem: Host.from_json(p.read_text(encoding="utf-8"), p) for p in HOSTS}
    bare = next(
        c
        for c in contracts.values()
        if c.slurm is None and c.gpus is None and c.slurm_controller is None
    )
    written = json.loads(bare.to_json())
    assert written["gpus"] is None
    assert not {"slurm", "gpudirect", "slurm_controller", "accept"} & written.keys()
    connected = next(r for r in written["routes"] if "gateway" not in r)
    assert connected["dst"] != "default"


def test_a_field_defaulting_to_none_must_say_it_is_left_out() -> None:
    # Left as a plain default, the section would be written as null, not left out.
    with pytest.raises(TypeError, match=r"Loose\.note defaults to None: make it an absent"):

        class Loose(Record):
            note: str | None = None

    class Kept(Record):
        note: str | Absent = absent("A note.")
        fact: str | None

    assert Kept(fact=None).as_dict() == {"fact": None}
    assert Kept(note="n", fact="f").as_dict() == {"fact": "f", "note": "n"}


def test_the_committed_schemas_are_a_fresh_export() -> None:
    fresh = schema.export()
    assert sorted(fresh) == ["fabric.schema.json", "host.schema.json", "switch.schema.json"]
    for name, text in fresh.items():
        assert (schema.FOLDER / name).read_text(encoding="utf-8") == text, (
            f"contract/schema/{name} is stale: run `python -m contract.schema`"
        )


def test_the_schemas_hold_every_committed_file() -> None:
    for name, paths in (("host", HOSTS), ("fabric", FABRICS), ("switch", SWITCHES)):
        validator = _validator(name)
        for path in paths:
            validator.validate(json.loads(path.read_text(encoding="utf-8")))


def _mutations(original: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    wrong = copy.deepcopy(original)
    wrong["u"] = str(wrong["u"])
    out.append(("u as a string", wrong))
    wrong = copy.deepcopy(original)
    wrong["interfaces"][0]["mtu"] = "1500"
    out.append(("an MTU as a string", wrong))
    for key in ("host", "schema", "routes"):
        missing = copy.deepcopy(original)
        del missing[key]
        out.append((f"no {key}", missing))
    extra = copy.deepcopy(original)
    extra["bmc"]["password"] = "x"
    out.append(("a key the contract does not have", extra))
    other = copy.deepcopy(original)
    other["schema"] = SCHEMA + 1
    out.append(("another schema version", other))
    return out


@pytest.mark.parametrize("index", range(7))
def test_the_schema_and_the_reader_both_refuse_a_mutated_file(index: int) -> None:
    path = REPO / "generated" / "expected" / "hosts" / "gpu001.json"
    original = json.loads(path.read_text(encoding="utf-8"))
    what, mutated = _mutations(original)[index]
    validator = _validator("host")
    validator.validate(original)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(mutated)
    with pytest.raises(ContractError):
        Host.from_json(json.dumps(mutated, indent=2, sort_keys=True), path)
    assert what


def test_a_file_of_another_schema_version_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "gpu001.json"
    text = (REPO / "generated" / "expected" / "hosts" / "gpu001.json").read_text(encoding="utf-8")
    path.write_text(text.replace(f'"schema": {SCHEMA},', '"schema": 2,'), encoding="utf-8")
    line = 2 + path.read_text(encoding="utf-8").split('\n  "schema"')[0].count("\n")
    with pytest.raises(ContractError) as caught:
        Host.from_json(path.read_text(encoding="utf-8"), path)
    assert str(caught.value) == (
        f"{path}:{line}:3: schema-version: schema 2, this clusterforge reads {SCHEMA}: "
        "compile again"
    )
    assert caught.value.exit_code == 4  # the set-up's to fix, not a bug (no traceback)
    for record in (Fabric, Deploy):
        with pytest.raises(ContractError, match=r"^<json>:1:1: schema-version: schema None"):
            record.from_json("{}")


def test_a_wrong_type_is_located_at_its_top_level_key() -> None:
    path = REPO / "generated" / "expected" / "hosts" / "gpu001.json"
    text = path.read_text(encoding="utf-8")
    bad = re.sub(r'\n  "u": (\d+),', r'\n  "u": "\1",', text)
    assert bad != text
    line = 2 + bad.split('\n  "u"')[0].count("\n")
    with pytest.raises(ContractError, match=rf"^{path}:{line}:3: wrong-shape: u: "):
        Host.from_json(bad, path)


def test_the_audit_refuses_a_tree_of_another_schema_version(tmp_path: Path) -> None:
    """Through the audit's reader, with a manifest that matches (so the version is what is
    refused, not a hand-edited file): a located message, as AuditError (exit 4)."""
    generated = tmp_path / "generated"
    shutil.copytree(REPO / "generated", generated)
    fabric = generated / "expected" / "fabric.json"
    fabric.write_text(
        fabric.read_text(encoding="utf-8").replace('"schema": 1,', '"schema": 7,'), "utf-8"
    )
    manifest = json.loads((generated / "MANIFEST.json").read_text(encoding="utf-8"))
    manifest["files"]["expected/fabric.json"] = hashlib.sha256(fabric.read_bytes()).hexdigest()
    (generated / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(AuditError, match=rf"^{re.escape(str(fabric))}:\d+:3: schema-version: "):
        expected.read(tmp_path)


def test_the_audit_reads_each_host_with_its_deploy_map() -> None:
    found = expected.read(REPO)
    assert found.hosts.keys() == {p.stem for p in HOSTS if p.parents[2] == REPO / "generated"}
    gpu = found.hosts["gpu001"]
    assert gpu.deploy is not None and gpu.deploy.host == "gpu001" and gpu.deploy.files
    assert "deploy" not in json.loads(gpu.to_json())  # its own file, not this one
    # Each Cumulus switch too, by its record; the audit reaches it on its management port.
    assert found.switches.keys() == {p.stem for p in SWITCHES if p.parents[2] == REPO / "generated"}
    stor = found.switches["stor01"]
    assert stor.deploy is not None and "/etc/frr/frr.conf" in {f.path for f in stor.deploy.files}
    assert [(p.port, p.peer) for p in stor.bgp] == [
        ("swp49", "stor-spine01"),
        ("swp50", "stor-spine02"),
    ]
    assert targets(found.machines, {})["stor01"] == Target("10.60.1.240")


def test_the_management_address_is_the_default_routes_whatever_the_network_is_named() -> None:
    """A site that names its management network `oob` still gets audit addresses: the host
    is reached on the interface its default route leaves by."""
    gpu = Host.from_json((REPO / "generated/expected/hosts/gpu001.json").read_text("utf-8"))
    default = next(r for r in gpu.routes if r.dst == "default")
    interfaces = tuple(
        i.model_copy(update={"network": "oob"}) if i.network == "mgmt" else i
        for i in gpu.interfaces
    )
    oob = gpu.model_copy(update={"interfaces": interfaces})
    assert all(i.network != "mgmt" for i in oob.interfaces)
    assert oob.management is not None and oob.management.name == default.dev
    address = oob.management.address.split("/")[0]
    assert targets({"gpu001": oob}, {}) == {"gpu001": Target(address)}
    inventory = {"gpu001": Target("127.0.0.9", 2222)}
    assert targets({"gpu001": oob}, inventory) == inventory  # the inventory wins
    routeless = oob.model_copy(update={"routes": ()})
    assert routeless.management is None and targets({"gpu001": routeless}, {}) == {}
