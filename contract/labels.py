"""What a cable label shows and the order a technician works in: the cable records the plan
derives (`Cable`, `CableEnd`), the two labels of every cable, and the label stock a site
prints on. The compiler's labels target writes the content as `generated/labels/labels.csv`
and hands the same records to `draw.labels`, which lays them out as PDFs: the committed CSV
and the printed sheets cannot disagree.

Two labels per cable, one at each end. The text is mirrored so the end a label sits on always
comes first, as TIA-606 writes a patch cord: `near/far`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from common.stock import LabelStock as LabelStock


class CableEnd(NamedTuple):  # two per cable: a frozen dataclass's __init__ was 1/10 of the plan
    device: str
    port: str  # "5" on a switch, "eno1"/"bmc"/"mlx5_0/1" on a host
    rack: str
    u: int
    location: str  # TIA-606 style: room.rackgrid-Uxx:port, e.g. H1.A01-U42:P05
    face: str = ""  # the port as the faceplate names it: P05, P3/1 (cage 3, half 1), mlx5_0/1


class Cable(NamedTuple):
    id: str
    network: str  # ipoib (InfiniBand), mgmt, bmc, storage
    a: CableEnd  # the switch end: the ID and the label's first line come from it
    b: CableEnd
    medium: str  # DAC, AOC, Cat6A
    length_m: float
    rate: str  # 4xHDR, 25G, 1G
    installed: bool
    note: str = ""
    # A split cable (one OSFP to two QSFP56) is one assembly with one leg per link: the legs
    # share this name, the switch and cage of the split end (SPINE01-P03); "" for others.
    assembly: str = ""
    # Cabled and labelled, its switch port disabled by design until a link is moved onto it.
    spare: bool = False

    @property
    def lifecycle(self) -> str:
        """planned (not installed yet), spare (installed, port down by design) or installed."""
        return "planned" if not self.installed else "spare" if self.spare else "installed"


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


class RailLeaf(NamedTuple):
    """A rail-optimised fabric's leaf: its name, its scalable unit's and its rail (from 0)."""

    name: str
    unit: str
    rail: int


class Cabling(NamedTuple):
    """What the label sheets and pull sheets are made of: the site, the stock its labels
    are printed on by default, every cable of the plan and, on a rail-optimised fabric, its
    rail leaves in unit and rail order (a technician cables a unit rail by rail)."""

    site: str
    stock: LabelStock
    cables: tuple[Cable, ...]
    rail_leaves: tuple[RailLeaf, ...] = ()
