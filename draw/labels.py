"""Printable cable label sheets and pull sheets (PDF), laid out on real label stock.

Pure: the cabling (`contract.labels`) and the scene in, PDF bytes out; `clusterforge labels`
writes them (default `build/labels/`). The label content and work order are
`contract.labels`', whose CSV the compiler writes into `generated/labels/`: the committed CSV
says what to print, these PDFs are how.

Each label shows the cable ID large, this end and the far end (rack, U, device: port), the
medium, length and rate, the TIA-606 identifier (near end first), and a QR code of the ID; a
QR code reads from any direction on a curved wrap label and stays small for any ID length.

Layout is geometry first: `layout` places every label, line and code as boxes on the stock's
grid, `problems` proves nothing crosses a label or page boundary, and only then are the boxes
drawn. Sheets are in work order (by rack, top to bottom, then port); each rack starts a sheet.
PDFs are written in reportlab's invariant mode, so the same cabling gives the same bytes.
"""

from __future__ import annotations

import difflib
import io
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from xml.sax.saxutils import escape

from reportlab.graphics.barcode import qrencoder
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, LETTER
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.pdfbase.pdfmetrics import getAscentDescent, stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    Flowable,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from common.errors import InputError, TargetError
from common.hostlist import compact
from contract.labels import (
    Cable,
    Cabling,
    Label,
    LabelStock,
    end_text,
    labels,
    length_text,
    pull_order,
)
from contract.scene import Scene
from draw.figure import Figure, paint
from draw.racks import rack_figure, row_figure

MM = 72 / 25.4
INCH = 72.0
PRINTER_MARGIN = INCH / 6  # the outer 4.2 mm most laser printers cannot reach
PAD = 1.5 * MM  # kept clear inside each label: sheet feed and die-cut tolerance
GAP = 1.0 * MM  # between the text and the code
LEADING = 1.15
MAX_SCALE = 8.0  # points per line weight: on roomy stock a 16 pt ID and 8 pt lines
QR_MAX = 25 * MM
QUIET_ZONE = 4  # modules of blank margin around a QR code (ISO/IEC 18004)
EPS = 1e-6  # points; float noise, far below a printer dot
REGULAR, BOLD = "Helvetica", "Helvetica-Bold"


class SelectionError(InputError):
    """Raised when a rack or cable ID asked for is not in the plan, or selects no label."""


@dataclass(frozen=True)
class Box:
    """A rectangle in PDF points, origin at the page's bottom left."""

    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def top(self) -> float:
        return self.y + self.h

    def contains(self, other: Box) -> bool:
        return (
            other.x >= self.x - EPS
            and other.y >= self.y - EPS
            and other.right <= self.right + EPS
            and other.top <= self.top + EPS
        )

    def overlaps(self, other: Box) -> bool:
        """Whether the two share area; touching edges (abutting labels) do not count."""
        return (
            min(self.right, other.right) - max(self.x, other.x) > EPS
            and min(self.top, other.top) - max(self.y, other.y) > EPS
        )


@dataclass(frozen=True)
class Stock:
    """A sheet of die-cut labels: page, label size, margins to the first label, and pitch."""

    name: LabelStock
    description: str
    page: tuple[float, float]
    label: tuple[float, float]  # width, height of one die-cut label
    print_height: float  # printable part, from the label's top; below it a clear laminate tail
    margin: tuple[float, float]  # left, top: page edge to the first label
    pitch: tuple[float, float]  # label origin to the next one across, down
    columns: int
    rows: int

    @property
    def printable(self) -> Box:
        """The part of the page a printer reaches."""
        w, h = self.page
        return Box(PRINTER_MARGIN, PRINTER_MARGIN, w - 2 * PRINTER_MARGIN, h - 2 * PRINTER_MARGIN)

    @property
    def per_sheet(self) -> int:
        return self.columns * self.rows

    def cells(self) -> list[Box]:
        """Every label of a sheet in peeling order: left to right, top to bottom."""
        (left, top), (dx, dy), (w, h) = self.margin, self.pitch, self.label
        return [
            Box(left + c * dx, self.page[1] - top - r * dy - h, w, h)
            for r in range(self.rows)
            for c in range(self.columns)
        ]


STOCKS: dict[LabelStock, Stock] = {
    s.name: s
    for s in (
        # Laser-printable self-laminating vinyl wrap labels (Brady/Avery style): a white print
        # area on top, a clear tail that wraps over it; the tail takes cables up to ~14 mm.
        Stock(
            name=LabelStock.WRAP_LETTER,
            description="self-laminating wrap, 2.5 x 2 in (print 2.5 x 0.75 in), 15 per letter",
            page=LETTER,
            label=(2.5 * INCH, 2.0 * INCH),
            print_height=0.75 * INCH,
            margin=(0.25 * INCH, 0.5 * INCH),
            pitch=(2.75 * INCH, 2.0 * INCH),
            columns=3,
            rows=5,
        ),
        Stock(
            name=LabelStock.AVERY_5160,
            description="Avery 5160, 2.625 x 1 in, 30 per letter",
            page=LETTER,
            label=(2.625 * INCH, 1.0 * INCH),
            print_height=1.0 * INCH,
            margin=(0.1875 * INCH, 0.5 * INCH),
            pitch=(2.75 * INCH, 1.0 * INCH),
            columns=3,
            rows=10,
        ),
        Stock(
            name=LabelStock.AVERY_L7163,
            description="Avery L7163, 99.1 x 38.1 mm, 14 per A4",
            page=A4,
            label=(99.1 * MM, 38.1 * MM),
            print_height=38.1 * MM,
            margin=(4.65 * MM, 15.15 * MM),
            pitch=(101.6 * MM, 38.1 * MM),
            columns=2,
            rows=7,
        ),
    )
}


@dataclass(frozen=True)
class Text:
    box: Box  # advance width by ascent-to-descent of the font at this size
    text: str
    font: str
    size: float
    baseline: float


@dataclass(frozen=True)
class Code:
    box: Box  # the QR code with its quiet zone
    data: str


Item = Text | Code


@dataclass(frozen=True)
class Cell:
    box: Box  # the die-cut label
    area: Box  # where ink may go: the print area less the padding
    items: tuple[Item, ...]
    label: Label


@dataclass(frozen=True)
class Page:
    stock: Stock
    header: Text | None  # in the top margin, on the liner: site, racks, sheet n of m
    cells: tuple[Cell, ...]


def _text(text: str, font: str, size: float, x: float, baseline: float) -> Text:
    ascent, descent = getAscentDescent(font, size)
    width = float(stringWidth(text, font, size))
    return Text(Box(x, baseline + descent, width, ascent - descent), text, font, size, baseline)


def _fit(runs: Sequence[tuple[str, str]], size: float, width: float) -> float:
    """The largest size up to `size` at which the runs fit `width`."""
    natural = sum(float(stringWidth(t, f, size)) for t, f in runs)
    return min(size, size * width / natural) if natural else size


def _cell(box: Box, area: Box, label: Label) -> Cell:
    cable = label.cable
    qr = min(area.h, 0.4 * area.w, QR_MAX)
    code = Code(Box(area.right - qr, area.y + (area.h - qr) / 2, qr, qr), cable.id)
    width = area.w - qr - GAP
    lines: list[tuple[tuple[tuple[str, str], ...], float]] = [
        (((cable.id, BOLD),), 2.0),
        ((("THIS END ", BOLD), (end_text(label.here), REGULAR)), 1.0),
        ((("FAR END ", BOLD), (end_text(label.there), REGULAR)), 1.0),
        (((f"{cable.medium}   {length_text(cable)}   {cable.rate}", REGULAR),), 0.9),
        (((label.tia, REGULAR),), 0.8),
    ]
    weights = sum(weight for _, weight in lines)
    scale = min(MAX_SCALE, area.h / (LEADING * weights))
    top = area.top - (area.h - LEADING * weights * scale) / 2  # the block centred
    items: list[Item] = []
    for runs, weight in lines:
        slot = LEADING * weight * scale
        size = _fit(runs, weight * scale, width)
        ascent, descent = getAscentDescent(REGULAR, size)
        baseline = top - (slot - (ascent - descent)) / 2 - ascent
        x = area.x
        for text, font in runs:
            items.append(_text(text, font, size, x, baseline))
            x = items[-1].box.right
        top -= slot
    items.append(code)
    return Cell(box, area, tuple(items), label)


def _header(stock: Stock, text: str) -> Text | None:
    """The sheet's caption in the band above the first row, if the margin leaves room."""
    printable = stock.printable
    first_row = max(c.top for c in stock.cells())
    band = printable.top - first_row
    size = _fit(((text, REGULAR),), min(8.0, band / LEADING), printable.w)
    if size < 5:
        return None
    ascent, descent = getAscentDescent(REGULAR, size)
    return _text(
        text, REGULAR, size, printable.x, first_row + (band - ascent + descent) / 2 - descent
    )


def layout(
    items: Sequence[Label], stock: Stock, site: str, *, sheet_per_rack: bool = True
) -> list[Page]:
    """Place labels on sheets of `stock`, in the given order; each rack starts a new sheet."""
    groups = (
        [list(g) for _, g in itertools.groupby(items, key=lambda lab: lab.here.rack)]
        if sheet_per_rack
        else [list(items)]
    )
    chunks = [g[i : i + stock.per_sheet] for g in groups for i in range(0, len(g), stock.per_sheet)]
    pages = []
    for n, chunk in enumerate(chunks, 1):
        racks = ", ".join(sorted({lab.here.rack for lab in chunk}))
        caption = f"{site}  |  rack {racks}  |  sheet {n} of {len(chunks)}  |  {stock.description}"
        cells = []
        for box, label in zip(stock.cells(), chunk, strict=False):
            bottom = box.top - stock.print_height
            area = Box(box.x + PAD, bottom + PAD, box.w - 2 * PAD, stock.print_height - 2 * PAD)
            cells.append(_cell(box, area, label))
        pages.append(Page(stock, _header(stock, caption), tuple(cells)))
    return pages


def problems(pages: Sequence[Page]) -> list[str]:
    """Every place where ink would cross a label or page boundary, or two things collide."""
    out = []
    for p, page in enumerate(pages, 1):
        printable = page.stock.printable
        if page.header and not printable.contains(page.header.box):
            out.append(f"sheet {p}: the header leaves the printable area")
        for i, cell in enumerate(page.cells):
            where = f"sheet {p}, label {i + 1} ({cell.label.cable.id} at {cell.label.here.device})"
            if not printable.contains(cell.box):
                out.append(f"{where}: the label leaves the printable area")
            if page.header and cell.box.overlaps(page.header.box):
                out.append(f"{where}: the label overlaps the header")
            if not cell.box.contains(cell.area):
                out.append(f"{where}: the print area leaves the label")
            for item in cell.items:
                if not cell.area.contains(item.box):
                    out.append(f"{where}: {_name(item)} crosses the label's print area")
            for a, b in itertools.combinations(cell.items, 2):
                if a.box.overlaps(b.box):
                    out.append(f"{where}: {_name(a)} overlaps {_name(b)}")
            for j, other in enumerate(page.cells[i + 1 :], i + 2):
                if cell.box.overlaps(other.box):
                    out.append(f"{where}: the label overlaps label {j}")
    return out


def _name(item: Item) -> str:
    return f"text {item.text!r}" if isinstance(item, Text) else f"code {item.data!r}"


def _draw_text(canvas: Canvas, item: Text) -> None:
    canvas.setFont(item.font, item.size)
    canvas.drawString(item.box.x, item.baseline, item.text)


@cache
def qr_modules(data: str) -> tuple[tuple[bool, ...], ...]:
    """The QR code of `data` (error correction M, smallest version), dark modules True."""
    qr = qrencoder.QRCode(None, qrencoder.QRErrorCorrectLevel.M)
    qr.addData(data)
    qr.make()
    return tuple(tuple(bool(m) for m in row) for row in qr.modules)


@cache
def _qr_path(data: str) -> str:
    """PDF path operators filling the dark modules, one unit per module, rows downwards."""
    ops = []
    for r, row in enumerate(qr_modules(data)):
        c = 0
        for dark, run in itertools.groupby(row):
            count = len(list(run))
            if dark:
                ops.append(f"{c} {r} {count} 1 re")
            c += count
    return "\n".join(ops) + "\nf"


def _draw_code(canvas: Canvas, item: Code) -> None:
    modules = len(qr_modules(item.data))
    # A 4-module quiet zone on every side, inside the box: scanners need it blank.
    size = item.box.w / (modules + 2 * QUIET_ZONE)
    canvas.saveState()
    canvas.translate(item.box.x + QUIET_ZONE * size, item.box.top - QUIET_ZONE * size)
    canvas.scale(size, -size)
    # Integer module coordinates written directly: reportlab's path API formats every
    # float in Python, which made the codes most of a sheet's rendering time.
    canvas.addLiteral(_qr_path(item.data))
    canvas.restoreState()


def _metadata(canvas: Canvas, title: str) -> None:
    canvas.setTitle(title)
    canvas.setAuthor("clusterforge")
    canvas.setCreator("clusterforge labels")


def labels_pdf(pages: Sequence[Page], title: str) -> bytes:
    """The sheets as a PDF; raises TargetError if the layout breaks a boundary (a bug)."""
    found = problems(pages)
    if found:
        raise TargetError(f"label layout for {title!r}: " + "; ".join(found))
    buf = io.BytesIO()
    canvas = Canvas(buf, pagesize=pages[0].stock.page, invariant=1)
    _metadata(canvas, title)
    for page in pages:
        if page.header:
            _draw_text(canvas, page.header)
        for cell in page.cells:
            for item in cell.items:
                if isinstance(item, Text):
                    _draw_text(canvas, item)
                else:
                    _draw_code(canvas, item)
        canvas.showPage()
    canvas.save()
    return buf.getvalue()


PULL_HEADER = ("ID", "From", "To", "Medium", "Length", "Rate", "Status", "Pulled", "Labelled")
# How the room a table has beyond its widest cells is shared out: most to the write-in
# columns (Pulled, Labelled) and the ends, which a technician reads and writes beside.
PULL_WIDTHS = (54, 118, 118, 38, 36, 36, 44, 44, 52)
PULL_PAD = 4.0  # points each side of a cell's text
PULL_SIZES = (8.0, 7.5, 7.0, 6.5, 6.0)  # the table's font, the largest at which every cell fits


def pull_columns(rows: Sequence[Sequence[str]], width: float) -> tuple[list[float], float]:
    """The pull table's column widths and font size: each column at least as wide as its
    widest cell (the ID bold, as it is drawn), at the largest size that fits `width`, the
    room left shared out as PULL_WIDTHS share it. A rail fabric's IDs (SG02-SPINE07-33) and
    ends (n01 U10 sg01-spine01:P17/1) are wider than a rack leaf's; a fixed column let them
    run into the next one."""
    # A text's width grows with its size: each column's widest measured once, at 1 pt.
    widest = [
        max(
            stringWidth(str(cell), BOLD if i == 0 or col == 0 else REGULAR, 1)
            for i, cell in enumerate(column)
        )
        for col, column in enumerate(zip(PULL_HEADER, *rows, strict=False))
    ]
    for size in PULL_SIZES:
        natural = [w * size + 2 * PULL_PAD for w in widest]
        if sum(natural) <= width:
            break
    # At the smallest size a table too wide still gets its columns' shares: it overflows
    # the margin rather than the cells running into each other.
    spare = max(width - sum(natural), 0.0)
    return [
        n + spare * w / sum(PULL_WIDTHS) for n, w in zip(natural, PULL_WIDTHS, strict=True)
    ], size


class _Picture(Flowable):  # type: ignore[misc]  # reportlab is untyped
    """A figure (a rack elevation, the row view) scaled down to fit the frame."""

    def __init__(self, figure: Figure, width: float, height: float) -> None:
        super().__init__()
        self.figure = figure
        self.scale = min(1.0, width / figure.w, height / figure.h)

    def wrap(self, available_width: float, available_height: float) -> tuple[float, float]:
        return self.figure.w * self.scale, self.figure.h * self.scale

    def draw(self) -> None:
        paint(self.canv, self.figure, 0, self.figure.h * self.scale, self.scale)


def pull_pdf(
    cables: Sequence[Cable],
    site: str,
    pagesize: tuple[float, float],
    front: Figure | None = None,
    subject: str | None = None,
) -> bytes:
    """The cable schedule, one table per rack of the switch end, each rack on a new page;
    `front`, when given, is drawn on a first page of its own (the technician's rack view);
    `subject` heads each table in place of its rack (a rail leaf's sheet)."""
    buf = io.BytesIO()
    margin = 0.5 * INCH
    doc = SimpleDocTemplate(
        buf,
        pagesize=pagesize,
        leftMargin=margin,
        rightMargin=margin,
        topMargin=margin,
        bottomMargin=margin,
        invariant=1,
        title=f"{site} cable pull sheet",
        author="clusterforge",
        creator="clusterforge labels",
    )
    title_style = getSampleStyleSheet()["Heading2"]
    story: list[object] = []
    if front is not None:
        heading = Paragraph(escape(front.title), title_style)
        room = doc.height - 2 * title_style.leading - 12
        story += [heading, Spacer(0, 6), _Picture(front, doc.width, room), PageBreak()]
    ordered = pull_order(cables)
    every = [
        (
            c.id,
            end_text(c.a),
            end_text(c.b),
            c.medium,
            length_text(c),
            c.rate,
            "PLANNED" if not c.installed else "SPARE" if c.spare else "installed",
            "",
            "",
        )
        for c in ordered
    ]
    widths, size = pull_columns(every, doc.width)  # one layout for every rack's table
    by_rack = itertools.groupby(zip(ordered, every, strict=True), key=lambda pair: pair[0].a.rack)
    for rack, group in by_rack:
        rows = [row for _, row in group]
        table = Table([PULL_HEADER, *rows], colWidths=widths, repeatRows=1)
        table.setStyle(
            TableStyle(
                [
                    ("FONT", (0, 0), (-1, 0), BOLD, size),
                    ("FONT", (0, 1), (-1, -1), REGULAR, size),
                    ("FONT", (0, 1), (0, -1), BOLD, size),
                    ("LEFTPADDING", (0, 0), (-1, -1), PULL_PAD),
                    ("RIGHTPADDING", (0, 0), (-1, -1), PULL_PAD),
                    ("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                    ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
                    ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.whitesmoke]),
                    ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
                ]
            )
        )
        heading = f"{site} | {subject or 'rack ' + rack} | cable pull sheet | {len(rows)} cables"
        story += [Paragraph(escape(heading), title_style), Spacer(0, 4), table, PageBreak()]

    def footer(canvas: Canvas, doc: SimpleDocTemplate) -> None:
        canvas.setFont(REGULAR, 7)
        canvas.drawString(margin, margin / 2, f"{site} cable pull sheet, page {doc.page}")

    doc.build(story[:-1], onFirstPage=footer, onLaterPages=footer)
    return buf.getvalue()


def _suggest(word: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def sheets(
    cabling: Cabling,
    facts: Scene,
    stock: LabelStock | None = None,
    racks: Sequence[str] = (),
    only: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    rails: Sequence[int] = (),
    units: Sequence[str] = (),
) -> dict[str, bytes]:
    """The PDFs to print, by file name; raises SelectionError for a rack, ID, rail or unit
    not planned.

    Everything: `<rack>.pdf` (the labels on that rack's ends) and `<rack>-pull.pdf` (cables
    whose switch end is in it) per rack, plus `all.pdf` and `pull.pdf`. With `racks`, only
    those racks' files, identical to the full run's, and `<rack>-far.pdf`: the labels of its
    cables' ends in racks not asked for. With `only` (cable IDs), `reprint.pdf`:
    just those cables' labels (within `racks`, if given) packed onto as few sheets as fit.
    With `rails` or `units` (a rail-optimised fabric), per rail leaf of those rails in those
    units (every one where either is not given): `<leaf>.pdf`, both labels of every cable
    whose switch end is the leaf (its servers' rail cables and its uplinks), and
    `<leaf>-pull.pdf`, their pull sheet.
    """
    chosen = STOCKS[stock or cabling.stock]
    site = cabling.site
    if rails or units:
        if racks or only:
            raise SelectionError("a rail or unit selects a leaf's sheets: not with a rack or IDs")
        return _rail_sheets(cabling, facts, chosen, rails, units)
    known = [r.name for r in facts.racks]
    problems = [
        f"no rack {r!r}{_suggest(r, known)}; the racks are {compact(known)}"
        for r in sorted(set(racks) - set(known))
    ]
    ids = [c.id for c in cabling.cables]
    problems += [f"no cable {i!r}{_suggest(i, ids)}" for i in sorted(set(only) - set(ids))]
    if problems:
        raise SelectionError("; ".join(problems))
    cables = [c for c in cabling.cables if not only or c.id in only]
    chosen_labels = [lab for lab in labels(cables) if not racks or lab.here.rack in racks]
    if not chosen_labels:
        raise SelectionError("no label has an end in the racks asked for")

    def pdf(items: Sequence[Label], title: str, sheet_per_rack: bool = True) -> bytes:
        return _labels_file(items, chosen, site, title, sheet_per_rack)

    if only:
        return {"reprint.pdf": pdf(chosen_labels, "reprint", sheet_per_rack=False)}
    files = {}
    by_rack = [(r, list(g)) for r, g in itertools.groupby(chosen_labels, lambda lab: lab.here.rack)]
    for done, (rack, group) in enumerate(by_rack, 1):
        files[f"{rack}.pdf"] = pdf(group, f"rack {rack}")
        if progress is not None:
            progress(done, len(by_rack))
    pulled = sorted({c.a.rack for c in cables if not racks or c.a.rack in racks})
    # Label sheets go onto label stock, page by page, so the elevations go on the pull
    # sheets' front page, which is printed on plain paper.
    spots = {r.name: r for r in facts.racks}
    for rack in pulled:
        files[f"{rack}-pull.pdf"] = pull_pdf(
            [c for c in cables if c.a.rack == rack],
            site,
            chosen.page,
            rack_figure(facts, spots[rack]),
        )
    # A rack's cables have ends elsewhere (its uplinks on the spines): the technician pulling
    # them needs those labels too, which the full run puts on the far rack's sheet.
    everything = labels(cables)
    for rack in sorted(set(racks)):
        far = [lab for lab in everything if lab.there.rack == rack and lab.here.rack not in racks]
        if far:
            files[f"{rack}-far.pdf"] = pdf(far, f"far ends of rack {rack}'s cables")
    if not racks:
        files["all.pdf"] = pdf(chosen_labels, "all racks")
        files["pull.pdf"] = pull_pdf(cables, site, chosen.page, row_figure(facts))
    return dict(sorted(files.items()))


def _labels_file(
    items: Sequence[Label], stock: Stock, site: str, title: str, sheet_per_rack: bool = True
) -> bytes:
    """A PDF of label sheets for `items`, titled for the printer's queue."""
    pages = layout(items, stock, site, sheet_per_rack=sheet_per_rack)
    return labels_pdf(pages, f"{site} cable labels: {title} ({stock.name})")


def _rail_sheets(
    cabling: Cabling, facts: Scene, chosen: Stock, rails: Sequence[int], units: Sequence[str]
) -> dict[str, bytes]:
    """`sheets` for the rail leaves of `rails` in `units`: a leaf's labels and pull sheet."""
    leaves = cabling.rail_leaves
    if not leaves:
        raise SelectionError("this site has no rails (its leaves are rack leaves): use --rack")
    numbers = sorted({leaf.rail for leaf in leaves})
    names = list(dict.fromkeys(leaf.unit for leaf in leaves))
    problems = [
        f"no rail {r}; the rails are {numbers[0]} to {numbers[-1]}"
        for r in sorted(set(rails) - set(numbers))
    ]
    problems += [
        f"no unit {u!r}{_suggest(u, names)}; the units are {', '.join(names)}"
        for u in sorted(set(units) - set(names))
    ]
    if problems:
        raise SelectionError("; ".join(problems))
    chosen_leaves = {
        leaf.name: leaf
        for leaf in leaves
        if (not rails or leaf.rail in rails) and (not units or leaf.unit in units)
    }
    on: dict[str, list[Cable]] = {}  # leaf -> the cables whose switch end it is
    for c in cabling.cables:
        if c.a.device in chosen_leaves:
            on.setdefault(c.a.device, []).append(c)
    spots = {r.name: r for r in facts.racks}
    files = {}
    # A leaf racked before its unit's servers has nothing to pull yet: no files.
    for name, cables in on.items():
        leaf = chosen_leaves[name]
        title = f"rail {leaf.rail} of {leaf.unit}, leaf {name}"
        files[f"{name}.pdf"] = _labels_file(labels(cables), chosen, cabling.site, title)
        figure = rack_figure(facts, spots[cables[0].a.rack])
        files[f"{name}-pull.pdf"] = pull_pdf(cables, cabling.site, chosen.page, figure, title)
    if not files:
        raise SelectionError("no cable has its switch end on the leaves asked for")
    return dict(sorted(files.items()))
