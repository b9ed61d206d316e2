"""One geometry, two back-ends: a figure of boxes, lines, dots and text, written as SVG or
painted on a reportlab canvas (the PDFs' front pages).

Layouts (`draw.racks`, `draw.fabric`) build a `Figure` once; `svg` and `paint` only translate
it. Coordinates are points with the origin at the top left, y growing downwards, as in SVG;
`paint` flips them for PDF. Text is measured with reportlab's Helvetica metrics, so a label
fits its box in both back-ends the same way. Numbers are written rounded to 0.01, so the same
figure gives the same bytes on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from reportlab.lib.colors import HexColor
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas

FONT, BOLD = "Helvetica", "Helvetica-Bold"
# Browsers without Helvetica fall back to metric-compatible Arial/Liberation Sans.
FAMILY = "Helvetica, Arial, 'Liberation Sans', sans-serif"


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str = "none"
    stroke: str = "none"
    width: float = 1.0
    dash: bool = False


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    stroke: str = "#000000"
    width: float = 1.0
    dash: bool = False


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    r: float
    fill: str = "#000000"
    stroke: str = "none"
    width: float = 1.0


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # the baseline
    text: str
    size: float
    fill: str = "#000000"
    anchor: str = "start"  # start, middle or end, as SVG's text-anchor
    bold: bool = False


@dataclass(frozen=True)
class Group:
    """Shapes that belong to one thing: `title` is its hover text in SVG (a device's model
    and cables, a cable's ID and ends); `attrs` name it for pages and tests (data-device,
    data-cable, data-mark). Moved by (dx, dy)."""

    items: tuple[Shape, ...]
    title: str = ""
    attrs: tuple[tuple[str, str], ...] = ()
    dx: float = 0.0
    dy: float = 0.0


Shape = Rect | Line | Dot | Text | Group


@dataclass(frozen=True)
class Figure:
    w: float
    h: float
    items: tuple[Shape, ...]
    title: str


# Room kept spare when fitting text: a browser without Helvetica or a metric-compatible font
# falls back to a wider sans (DejaVu Sans is about 10% wider).
SLACK = 1.12


def width(text: str, size: float, bold: bool = False) -> float:
    """The advance width of `text` in Helvetica, with the fallback font's SLACK."""
    return float(stringWidth(text, BOLD if bold else FONT, size)) * SLACK


def fit(text: str, size: float, room: float, bold: bool = False) -> float:
    """The largest size up to `size` at which `text` fits `room` points."""
    natural = width(text, size, bold)
    return size if natural <= room or natural == 0 else size * room / natural


def clip(text: str, size: float, room: float, bold: bool = False) -> str:
    """`text` cut with an ellipsis to fit `room` at `size` (for names too long for a box)."""
    if width(text, size, bold) <= room:
        return text
    while text and width(text + "…", size, bold) > room:
        text = text[:-1]
    return text + "…" if text else ""


# --- SVG --------------------------------------------------------------------------------------


def _n(value: float) -> str:
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _paint_attrs(fill: str, stroke: str, width: float, dash: bool) -> str:
    out = f' fill="{fill}"'
    if stroke != "none":
        out += f' stroke="{stroke}" stroke-width="{_n(width)}"'
        if dash:
            out += ' stroke-dasharray="3 2"'
    return out


def _svg(shape: Shape, out: list[str]) -> None:
    if isinstance(shape, Rect):
        out.append(
            f'<rect x="{_n(shape.x)}" y="{_n(shape.y)}" width="{_n(shape.w)}" '
            f'height="{_n(shape.h)}"'
            f"{_paint_attrs(shape.fill, shape.stroke, shape.width, shape.dash)}/>"
        )
    elif isinstance(shape, Line):
        out.append(
            f'<line x1="{_n(shape.x1)}" y1="{_n(shape.y1)}" x2="{_n(shape.x2)}" '
            f'y2="{_n(shape.y2)}"{_paint_attrs("none", shape.stroke, shape.width, shape.dash)}/>'
        )
    elif isinstance(shape, Dot):
        out.append(
            f'<circle cx="{_n(shape.x)}" cy="{_n(shape.y)}" r="{_n(shape.r)}"'
            f"{_paint_attrs(shape.fill, shape.stroke, shape.width, False)}/>"
        )
    elif isinstance(shape, Text):
        anchor = "" if shape.anchor == "start" else f' text-anchor="{shape.anchor}"'
        weight = ' font-weight="bold"' if shape.bold else ""
        out.append(
            f'<text x="{_n(shape.x)}" y="{_n(shape.y)}" font-size="{_n(shape.size)}"'
            f'{anchor}{weight} fill="{shape.fill}">{escape(shape.text)}</text>'
        )
    else:
        attrs = "".join(f" {k}={quoteattr(v)}" for k, v in shape.attrs)
        if shape.dx or shape.dy:
            attrs += f' transform="translate({_n(shape.dx)} {_n(shape.dy)})"'
        out.append(f"<g{attrs}>")
        if shape.title:
            out.append(f"<title>{escape(shape.title)}</title>")
        for item in shape.items:
            _svg(item, out)
        out.append("</g>")


def svg(figure: Figure, *, standalone: bool = True) -> str:
    """The figure as SVG text; `standalone` adds the XML declaration (a file, not inline)."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(figure.w)}" '
        f'height="{_n(figure.h)}" viewBox="0 0 {_n(figure.w)} {_n(figure.h)}" '
        f'font-family="{FAMILY}">',
        f"<title>{escape(figure.title)}</title>",
    ]
    for item in figure.items:
        _svg(item, out)
    out.append("</svg>\n")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else "") + "\n".join(out)


# --- reportlab --------------------------------------------------------------------------------


def _stroke(canvas: Canvas, stroke: str, width: float, dash: bool) -> bool:
    if stroke == "none":
        return False
    canvas.setStrokeColor(HexColor(stroke))
    canvas.setLineWidth(width)
    canvas.setDash(3, 2) if dash else canvas.setDash()
    return True


def _paint(canvas: Canvas, shape: Shape) -> None:
    # The canvas is flipped (y down) by `paint`; text is flipped back where it is drawn.
    if isinstance(shape, Rect):
        fill = shape.fill != "none"
        if fill:
            canvas.setFillColor(HexColor(shape.fill))
        stroke = _stroke(canvas, shape.stroke, shape.width, shape.dash)
        canvas.rect(shape.x, shape.y, shape.w, shape.h, stroke=int(stroke), fill=int(fill))
    elif isinstance(shape, Line):
        if _stroke(canvas, shape.stroke, shape.width, shape.dash):
            canvas.line(shape.x1, shape.y1, shape.x2, shape.y2)
    elif isinstance(shape, Dot):
        fill = shape.fill != "none"
        if fill:
            canvas.setFillColor(HexColor(shape.fill))
        stroke = _stroke(canvas, shape.stroke, shape.width, False)
        canvas.circle(shape.x, shape.y, shape.r, stroke=int(stroke), fill=int(fill))
    elif isinstance(shape, Text):
        canvas.saveState()
        canvas.translate(shape.x, shape.y)
        canvas.scale(1, -1)
        canvas.setFillColor(HexColor(shape.fill))
        canvas.setFont(BOLD if shape.bold else FONT, shape.size)
        draw = {
            "start": canvas.drawString,
            "middle": canvas.drawCentredString,
            "end": canvas.drawRightString,
        }[shape.anchor]
        draw(0, 0, shape.text)
        canvas.restoreState()
    else:
        canvas.saveState()
        canvas.translate(shape.dx, shape.dy)
        for item in shape.items:
            _paint(canvas, item)
        canvas.restoreState()


def paint(canvas: Canvas, figure: Figure, x: float, top: float, scale: float) -> None:
    """Paint `figure` with its top left corner at (x, top) in PDF points, scaled by `scale`."""
    canvas.saveState()
    canvas.translate(x, top)
    canvas.scale(scale, -scale)
    for item in figure.items:
        _paint(canvas, item)
    canvas.restoreState()
