"""`clusterforge draw`: the plan's pictures as SVG files.

`racks/<rack>.svg` (one elevation per rack), `racks.svg` (the row view, every rack in floor
order) and `fabric.svg` (the InfiniBand map). Pure: a plan in, {file name: text} out.
"""

from __future__ import annotations

from pathlib import Path

from compiler.load import load
from compiler.pipeline import check
from compiler.plan import Plan, build
from draw.fabric import fabric_figure
from draw.figure import svg
from draw.racks import rack_figure, row_figure
from draw.scene import scene


def pictures(plan: Plan) -> dict[str, str]:
    """Every picture of the plan, by file name."""
    facts = scene(plan)
    files = {f"racks/{r.name}.svg": svg(rack_figure(facts, r)) for r in facts.racks}
    files["racks.svg"] = svg(row_figure(facts))
    files["fabric.svg"] = svg(fabric_figure(facts))
    return dict(sorted(files.items()))


def pictures_for_repo(repo: Path) -> dict[str, str]:
    """`pictures` of `repo/cluster`, loaded, checked and planned; raises SourceError."""
    return pictures(build(check(load(repo / "cluster"))))
