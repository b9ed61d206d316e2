"""The cluster generator: every size it offers compiles clean, byte-for-byte the same twice."""

from __future__ import annotations

import pytest

from compiler import generate, pipeline


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
