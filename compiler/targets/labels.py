"""`generated/labels/`: what goes on every cable label, as CSV for label-printer software.

Two labels per cable, one at each end. The text is mirrored so the end a label sits on always
comes first, as TIA-606 writes a patch cord: `near/far`. The printable sheets (PDF) are laid
out from the same content by `draw.labels`; this module holds only the content and the
order a technician works in, so the committed CSV and the printed sheets cannot disagree.

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

from collections.abc import Iterable
from typing import NamedTuple

from compiler.plan import Cable, CableEnd, Plan
from compiler.targets.render import to_csv

LABEL_COLUMNS = ("label_id", "end_a", "end_b", "text_a", "text_b", "barcode")


class Label(NamedTuple):
    """The label that sits on one end of a cable."""

    cable: Cable
    here: CableEnd
    there: CableEnd

    @property
    def tia(self) -> str:
        return tia_text(self.here, self.there)


def tia_text(near: CableEnd, far: CableEnd) -> str:
    """A TIA-606 patch-cord identifier, near end first: `H1.A01-U42:P05/H1.A01-U18:mlx5_0-1`."""
    return f"{near.location}/{far.location}"


def port_text(end: CableEnd) -> str:
    """A port as the faceplate names it (P05, P3/1: cage 3, first half); a host port by its
    OS name."""
    return end.face or (f"P{int(end.port):02d}" if end.port.isdigit() else end.port)


def end_text(end: CableEnd) -> str:
    """Where an end is, the way a technician finds it: rack, U, device, port."""
    return f"{end.rack} U{end.u:02d} {end.device}:{port_text(end)}"


def length_text(cable: Cable) -> str:
    return f"{cable.length_m:g} m"


def _port_key(port: str) -> tuple[int, int, str]:
    # Switch ports in numeric order (P2 before P10), host ports after them by name.
    return (0, int(port), "") if port.isdigit() else (1, 0, port)


def work_order(end: CableEnd) -> tuple[str, int, str, tuple[int, int, str]]:
    """The order a technician works a rack in: rack, top to bottom, device, port."""
    return (end.rack, -end.u, end.device, _port_key(end.port))


def labels(cables: Iterable[Cable]) -> list[Label]:
    """Both labels of every cable, in work order of the end each one sits on."""
    out = [Label(c, c.a, c.b) for c in cables] + [Label(c, c.b, c.a) for c in cables]
    return sorted(out, key=lambda lab: (work_order(lab.here), lab.cable.id))


def pull_order(cables: Iterable[Cable]) -> list[Cable]:
    """Cables in work order of their switch end, the end a pull starts from."""
    return sorted(cables, key=lambda c: (work_order(c.a), c.id))


def render(plan: Plan) -> dict[str, str]:
    rows = [
        (c.id, c.a.location, c.b.location, tia_text(c.a, c.b), tia_text(c.b, c.a), c.id)
        for c in sorted(plan.cables, key=lambda c: c.id)
    ]
    return {"labels/labels.csv": to_csv(LABEL_COLUMNS, rows)}
