"""docs/ stays true: the field reference is the model's, and the how-tos' YAML is valid."""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML

from compiler import model, reference
from tests.conftest import REPO


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


class _Yaml:
    """YAML as `compiler.load` gives it to the model: sequences as tuples."""

    def load(self, text: str) -> Any:
        return _tuples(YAML(typ="safe").load(text))


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def test_the_howtos_yaml_snippets_are_what_the_model_takes() -> None:
    text = (REPO / "docs" / "howto.md").read_text(encoding="utf-8")
    yaml = _Yaml()
    cables = yaml.load(text.split("```yaml\n", 1)[1].split("```", 1)[0])["cables"]
    assert [model.CableOverride.model_validate(c).use_port for c in cables] == [33]
    [rollouts] = re.findall(r"`(rollouts: .*?)`", text)
    assert model.Rollout.model_validate(yaml.load(rollouts)["rollouts"][0]).rings == ("main",)
    [pins] = re.findall(r"`(pins: .*?)`", text)
    assert {k: model.Pin.model_validate(v).version for k, v in yaml.load(pins)["pins"].items()} == {
        "bios": "2.5"
    }


def test_the_bootstrap_snippet_is_the_reference_s() -> None:
    """docs/bootstrap.md shows the reference's own bootstrap, in the shape the model takes."""
    text = (REPO / "docs" / "bootstrap.md").read_text(encoding="utf-8")
    snippet = _Yaml().load(text.split("```yaml\n", 1)[1].split("```", 1)[0])["bootstrap"]
    shipped = _Yaml().load((REPO / "cluster" / "provisioning.yaml").read_text())["bootstrap"]
    assert model.Bootstrap.model_validate(snippet) == model.Bootstrap.model_validate(shipped)
