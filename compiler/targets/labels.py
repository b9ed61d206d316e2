"""`generated/labels/`: what goes on every cable label, as CSV for label-printer software.

Two labels per cable, one at each end, mirrored so the end a label sits on comes first
(`contract.labels`, which holds the content and the order a technician works in). The
printable sheets (PDF) are laid out by `draw.labels` from the records `cabling` hands it, so
the committed CSV and the printed sheets cannot disagree.

`labels/labels.csv`, one row per cable, the columns label software merges (FORMATS §8):
  label_id  the cable ID, e.g. R01-IB05
  end_a     TIA-606 location of the switch end, e.g. H1.A01-U42:P05
  end_b     TIA-606 location of the far end, e.g. H1.A01-U18:mlx5_0-1
  text_a    the label at end a: `end_a/end_b`
  text_b    the label at end b: `end_b/end_a`
  barcode   the data to encode (the cable ID), kept apart from the human-readable text

The cable schedule itself (both ends, medium, length, lifecycle) is `fabric/cables.csv`.
"""

from __future__ import annotations

from common import memo
from compiler.plan import Cable, Plan
from compiler.targets.render import to_csv
from contract.labels import Cabling, RailLeaf, tia_text

LABEL_COLUMNS = ("label_id", "end_a", "end_b", "text_a", "text_b", "barcode")


def render(plan: Plan) -> dict[str, str]:
    return {"labels/labels.csv": _csv(plan.cables)}


@memo.by_value  # a diff's two sides share the sheet unless a cable changed
def _csv(cables: tuple[Cable, ...]) -> str:
    rows = [
        (c.id, c.a.location, c.b.location, tia_text(c.a, c.b), tia_text(c.b, c.a), c.id)
        for c in sorted(cables, key=lambda c: c.id)
    ]
    return to_csv(LABEL_COLUMNS, rows)


def cabling(plan: Plan) -> Cabling:
    """The records the printable sheets are laid out from (`draw.labels`)."""
    railed = plan.rails
    leaves = () if railed is None else tuple(
        RailLeaf(leaf, railed.units[unit].name, rail)
        for leaf, (unit, rail) in sorted(railed.leaf.items(), key=lambda kv: kv[1])
    )  # fmt: skip
    return Cabling(plan.site.name, plan.site.labels.stock, plan.cables, leaves)
