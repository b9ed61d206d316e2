"""The layers as DESIGN.md draws them, checked on the source: the compiler and the audit meet
only in `contract/` (what generated/ holds and the probes the audit may run) and `common/` (the
leaf every layer shares); the audit, the lab and draw import nothing else of the compiler; the
leaf imports nothing of clusterforge. (That a target imports no other target is
tests/test_compile.py's; that the plan holds no raw model, tests/test_plan.py's.)"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "contract", "compiler", "audits", "draw", "clusterforge")
# What each layer may import of clusterforge's own packages (the CLI, clusterforge/ less its
# lab, is the orchestration layer: it may import every one).
ALLOWED = {
    "common": {"common"},
    "contract": {"common", "contract"},
    "audits": {"common", "contract", "audits"},
    "draw": {"common", "contract", "audits", "draw"},
    "clusterforge/lab": {"common", "contract", "audits", "clusterforge"},
}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module `path` imports, with its line, at any depth (an import inside a function
    crosses a layer as much as one at the top). The code base imports absolutely only."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}:{node.lineno}: a relative import"
            # `from compiler import plan` imports compiler.plan: name the submodule too.
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_what_lies_below_it(layer: str) -> None:
    allowed = ALLOWED[layer]
    crossings = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in _sources(layer)
        for line, name in _imports(path)
        if name.split(".")[0] in PACKAGES and name.split(".")[0] not in allowed
    ]
    assert _sources(layer), f"no source found under {layer}/"
    assert not crossings, "\n".join(crossings)
