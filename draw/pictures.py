"""`clusterforge draw`: a scene's pictures as SVG files.

`racks/<rack>.svg` (one elevation per rack), `racks.svg` (the row view, every rack in floor
order) and `fabric.svg` (the InfiniBand map). Pure: a scene in, {file name: text} out.
"""

from __future__ import annotations

from contract.scene import Scene
from draw.fabric import fabric_figure
from draw.figure import svg
from draw.racks import rack_figure, row_figure


def pictures(facts: Scene) -> dict[str, str]:
    """Every picture of the scene, by file name."""
    files = {f"racks/{r.name}.svg": svg(rack_figure(facts, r)) for r in facts.racks}
    files["racks.svg"] = svg(row_figure(facts))
    files["fabric.svg"] = svg(fabric_figure(facts))
    return dict(sorted(files.items()))
