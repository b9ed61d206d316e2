"""Cable label sheets: content, work order, geometry on real stock, barcodes, CLI, CSV target.

The oracles are poppler (`pdftotext`, `pdftoppm`) and zbar (`zbarimg`): text is read back out
of the PDF, pages are rendered to pixels, and the QR codes are decoded from those pixels.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from clusterforge.cli import main
from common.errors import SourceError, TargetError
from compiler.load import load
from compiler.model import LabelStock
from compiler.plan import Plan, build
from compiler.targets import labels as target
from compiler.targets.scene import scene
from compiler.validation import check
from contract import labels as content
from draw import labels as sheets
from tests.conftest import REPO, require_tool

ID = re.compile(r"[A-Z][A-Z0-9]*-[A-Z]{2}[0-9]{2,}")  # any token shaped like a cable ID
SAMPLE_RACKS = ["r01", "n01", "s01"]  # a GPU rack, the spine rack, the service rack


@pytest.fixture(scope="module")
def plan() -> Plan:
    return build(check(load(REPO / "cluster")))


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _text(pdf: bytes, tmp: Path, *, page: int | None = None) -> str:
    path = tmp / "doc.pdf"
    path.write_bytes(pdf)
    pages = ["-f", str(page), "-l", str(page)] if page else []
    return _run(require_tool("pdftotext"), "-layout", *pages, str(path), "-")


def _ids(text: str) -> Counter[str]:
    return Counter(tok for tok in text.split() if ID.fullmatch(tok))


def _render(pdf: bytes, tmp: Path, page: int, dpi: int, fmt: str) -> Path:
    """Page `page` as PNG or grey PGM at `dpi`."""
    (tmp / "doc.pdf").write_bytes(pdf)
    flag = "-png" if fmt == "png" else "-gray"
    out = tmp / f"page{page}-{dpi}"
    _run(require_tool("pdftoppm"), flag, "-r", str(dpi), "-f", str(page), "-l", str(page),
         "-singlefile", str(tmp / "doc.pdf"), str(out))  # fmt: skip
    return out.with_suffix(".png" if fmt == "png" else ".pgm")


def _scan(pdf: bytes, tmp: Path, page: int, box: sheets.Box, page_h: float) -> list[str]:
    """What a scanner reads off one label: the label alone rendered at 150 dpi, then zbarimg."""
    (tmp / "doc.pdf").write_bytes(pdf)
    k = 150 / 72
    crop = [box.x, page_h - box.y - box.h, box.w, box.h]  # pixels, origin top left
    args = [
        a for flag, v in zip("xyWH", crop, strict=True) for a in (f"-{flag}", str(round(v * k)))
    ]
    png = tmp / "label"
    _run(require_tool("pdftoppm"), "-png", "-r", "150", "-f", str(page), "-l", str(page), *args,
         "-singlefile", str(tmp / "doc.pdf"), str(png))  # fmt: skip
    zbar = require_tool("zbarimg")
    found = subprocess.run([zbar, "--raw", "-q", f"{png}.png"], capture_output=True, text=True)
    assert found.returncode in (0, 4), found.stderr  # 4: no code found at all
    return found.stdout.split()


def _pgm(path: Path) -> tuple[int, int, bytes]:
    """Width, height and pixels of a binary PGM (P5, 8 bit) as pdftoppm -gray writes it."""
    data = path.read_bytes()
    fields = data.split(maxsplit=4)
    assert fields[0] == b"P5" and fields[3] == b"255"
    return int(fields[1]), int(fields[2]), fields[4]


def _sample(plan: Plan) -> list[content.Label]:
    return [lab for lab in content.labels(plan.cables) if lab.here.rack in SAMPLE_RACKS]


# --- the document as a whole ----------------------------------------------------------------


@pytest.mark.realtool
def test_every_cable_is_on_two_labels_and_one_pull_row(plan: Plan, tmp_path: Path) -> None:
    stock = sheets.STOCKS[plan.site.labels.stock]
    pages = sheets.layout(content.labels(plan.cables), stock, plan.site.name)
    every = sheets.labels_pdf(pages, "all")
    assert _ids(_text(every, tmp_path)) == {c.id: 2 for c in plan.cables}
    info = _run(require_tool("pdfinfo"), str(tmp_path / "doc.pdf"))
    assert re.search(rf"^Pages:\s+{len(pages)}$", info, re.M)
    pull = sheets.pull_pdf(plan.cables, plan.site.name, stock.page)
    assert _ids(_text(pull, tmp_path)) == {c.id: 1 for c in plan.cables}


@pytest.mark.realtool
def test_a_rack_sheet_holds_the_labels_of_its_ends(plan: Plan, tmp_path: Path) -> None:
    files = sheets.sheets(target.cabling(plan), scene(plan), racks=["r01", "n01"])
    assert sorted(files) == [  # n01's management switch has switch ends: a pull sheet
        "n01-far.pdf", "n01-pull.pdf", "n01.pdf", "r01-far.pdf", "r01-pull.pdf", "r01.pdf"
    ]  # fmt: skip
    for rack in ("r01", "n01"):
        ends = Counter(c.id for c in plan.cables for e in (c.a, c.b) if e.rack == rack)
        assert _ids(_text(files[f"{rack}.pdf"], tmp_path)) == ends
    pulled = {c.id: 1 for c in plan.cables if c.a.rack == "r01"}
    assert _ids(_text(files["r01-pull.pdf"], tmp_path)) == pulled


@pytest.mark.realtool
def test_a_rack_alone_also_gets_the_far_end_labels_of_its_cables(
    plan: Plan, tmp_path: Path
) -> None:
    files = sheets.sheets(target.cabling(plan), scene(plan), racks=["r01"])
    assert sorted(files) == ["r01-far.pdf", "r01-pull.pdf", "r01.pdf"]
    far = {c.id: 1 for c in plan.cables if (c.a.rack == "r01") != (c.b.rack == "r01")}
    assert far, "r01 has uplinks to the spine rack"
    assert _ids(_text(files["r01-far.pdf"], tmp_path)) == far


@pytest.mark.realtool
def test_a_label_names_this_end_the_far_end_medium_and_length(plan: Plan, tmp_path: Path) -> None:
    cable = next(c for c in plan.cables if c.id == "R01-IB05")
    stock = sheets.STOCKS[plan.site.labels.stock]
    pages = sheets.layout(content.labels([cable]), stock, plan.site.name, sheet_per_rack=False)
    (tmp_path / "doc.pdf").write_bytes(sheets.labels_pdf(pages, "one cable"))
    for cell in pages[0].cells:
        # Only the text inside this label's die-cut box (pdftotext: points, origin top left).
        box = [cell.box.x, stock.page[1] - cell.box.y - cell.box.h, cell.box.w, cell.box.h]
        crop = [a for k, v in zip("xyWH", box, strict=True) for a in (f"-{k}", str(round(v)))]
        text = _run(require_tool("pdftotext"), "-r", "72", *crop, str(tmp_path / "doc.pdf"), "-")
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        here, there = cell.label.here, cell.label.there
        assert lines == [
            "R01-IB05",
            f"THIS END {content.end_text(here)}",
            f"FAR END {content.end_text(there)}",
            f"{cable.medium} {cable.length_m:g} m {cable.rate}",
            f"{here.location}/{there.location}",
        ]
    assert {c.label.here.device for c in pages[0].cells} == {"leaf01", "gpu005"}


def test_sheets_follow_the_technician_rack_by_rack_top_to_bottom(plan: Plan) -> None:
    stock = sheets.STOCKS[LabelStock.AVERY_5160]
    pages = sheets.layout(content.labels(plan.cables), stock, plan.site.name)
    order = [cell.label.here for page in pages for cell in page.cells]
    assert order == sorted(order, key=content.work_order)
    assert [e.rack for e in order] == sorted(e.rack for e in order)
    r01 = [(e.u, e.device, e.port) for e in order if e.rack == "r01"]
    assert r01[0][:2] == (42, "leaf01") and [u for u, _, _ in r01] == sorted(
        (u for u, _, _ in r01), reverse=True
    )
    leaf_ports = [int(p) for u, d, p in r01 if d == "leaf01" and p.isdigit()]  # not its mgmt
    assert leaf_ports == sorted(leaf_ports)  # P2 before P10: numeric, not text order
    assert all(len({c.label.here.rack for c in page.cells}) == 1 for page in pages)


# --- geometry -------------------------------------------------------------------------------


def _inside(inner: sheets.Box, outer: sheets.Box) -> bool:
    return (
        inner.x >= outer.x - 1e-6
        and inner.y >= outer.y - 1e-6
        and inner.x + inner.w <= outer.x + outer.w + 1e-6
        and inner.y + inner.h <= outer.y + outer.h + 1e-6
    )


def _apart(a: sheets.Box, b: sheets.Box) -> bool:
    return (
        a.x + a.w <= b.x + 1e-6
        or b.x + b.w <= a.x + 1e-6
        or a.y + a.h <= b.y + 1e-6
        or b.y + b.h <= a.y + 1e-6
    )


def _violations(pages: list[sheets.Page]) -> list[str]:
    """This test's own reading of the stock template, independent of `sheets.problems`."""
    out = []
    for p, page in enumerate(pages):
        s = page.stock
        printable = sheets.Box(
            sheets.PRINTER_MARGIN,
            sheets.PRINTER_MARGIN,
            s.page[0] - 2 * sheets.PRINTER_MARGIN,
            s.page[1] - 2 * sheets.PRINTER_MARGIN,
        )
        cells = [c.box for c in page.cells]
        out += [
            f"{p}: label {i} off the page" for i, b in enumerate(cells) if not _inside(b, printable)
        ]
        out += [
            f"{p}: labels {i} and {j} overlap"
            for i, a in enumerate(cells)
            for j, b in enumerate(cells[i + 1 :], i + 1)
            if not _apart(a, b)
        ]
        for i, cell in enumerate(page.cells):
            out += [f"{p}: {i}: item outside" for it in cell.items if not _inside(it.box, cell.box)]
        if page.header:
            out += [f"{p}: header on a label" for b in cells if not _apart(page.header.box, b)]
    return out


@pytest.mark.parametrize("name", list(LabelStock))
def test_every_stock_keeps_ink_inside_labels_and_pages(plan: Plan, name: LabelStock) -> None:
    stock = sheets.STOCKS[name]
    pages = sheets.layout(content.labels(plan.cables), stock, plan.site.name)
    assert _violations(pages) == []
    assert sheets.problems(pages) == []
    assert all(page.header for page in pages)  # every stock leaves room for the caption
    # The template is the sheet the vendor sells: labels fill the page symmetrically.
    cells = stock.cells()
    left, right = cells[0].x, stock.page[0] - max(c.x + c.w for c in cells)
    assert len(cells) == stock.per_sheet and left == pytest.approx(right, abs=0.5)


def test_every_stock_name_has_a_template() -> None:
    assert set(sheets.STOCKS) == set(LabelStock)
    assert all(key == stock.name for key, stock in sheets.STOCKS.items())


def test_an_overlapping_layout_is_caught(plan: Plan) -> None:
    good = sheets.STOCKS[LabelStock.AVERY_5160]
    crowded = replace(good, pitch=(good.pitch[0] - 20, good.pitch[1]))  # labels 20 pt too close
    pages = sheets.layout(_sample(plan), crowded, plan.site.name)
    assert any("overlap" in v for v in _violations(pages))
    assert any("overlaps label" in p for p in sheets.problems(pages))
    with pytest.raises(TargetError, match="overlaps label"):
        sheets.labels_pdf(pages, "crowded")


def test_a_layout_off_the_printable_area_is_caught(plan: Plan) -> None:
    good = sheets.STOCKS[LabelStock.WRAP_LETTER]
    shifted = replace(good, margin=(2.0, good.margin[1]))  # first column at the paper's edge
    pages = sheets.layout(_sample(plan), shifted, plan.site.name)
    assert any("off the page" in v for v in _violations(pages))
    assert any("leaves the printable area" in p for p in sheets.problems(pages))


def test_an_item_crossing_its_label_is_caught(plan: Plan) -> None:
    stock = sheets.STOCKS[LabelStock.AVERY_L7163]
    page = sheets.layout(_sample(plan), stock, plan.site.name)[0]
    cell = page.cells[0]
    code = cell.items[-1]
    moved = replace(code, box=replace(code.box, x=cell.box.x + cell.box.w - code.box.w / 2))
    broken = replace(page, cells=(replace(cell, items=(*cell.items[:-1], moved)), *page.cells[1:]))
    assert any("item outside" in v for v in _violations([broken]))
    assert any("crosses the label's print area" in p for p in sheets.problems([broken]))


@pytest.mark.realtool
@pytest.mark.parametrize("name", list(LabelStock))
def test_no_ink_lands_outside_a_label(plan: Plan, name: LabelStock, tmp_path: Path) -> None:
    """The drawn page, not the layout's own boxes: every dark pixel is on a label or caption."""
    stock = sheets.STOCKS[name]
    pages = sheets.layout(_sample(plan), stock, plan.site.name)
    page = pages[0]
    width, height, pixels = _pgm(_render(sheets.labels_pdf(pages, "ink"), tmp_path, 1, 72, "pgm"))
    allowed = [c.area for c in page.cells] + ([page.header.box] if page.header else [])
    slack = 1.5  # pixels of anti-aliasing at 72 dpi (1 px = 1 pt)

    def on_label(x: int, y: int) -> bool:
        px, py = x + 0.5, stock.page[1] - y - 0.5  # PDF points, origin bottom left
        return any(
            b.x - slack <= px <= b.x + b.w + slack and b.y - slack <= py <= b.y + b.h + slack
            for b in allowed
        )

    stray = [
        (x, y)
        for y in range(height)
        for x in range(width)
        if pixels[y * width + x] < 128 and not on_label(x, y)
    ]
    assert stray == []
    assert sum(1 for v in pixels if v < 128) > 1000  # the page is not blank


# --- barcodes -------------------------------------------------------------------------------


@pytest.mark.realtool
@pytest.mark.parametrize("name", list(LabelStock))
def test_each_labels_qr_code_scans_as_its_cable_id(
    plan: Plan, name: LabelStock, tmp_path: Path
) -> None:
    stock = sheets.STOCKS[name]
    pages = sheets.layout(_sample(plan), stock, plan.site.name)
    pdf = sheets.labels_pdf(pages, "scan")
    # A sheet's first labels (InfiniBand), and the last sheet's (the service rack's Ethernet).
    for number, cells in ((1, pages[0].cells[:8]), (len(pages), pages[-1].cells[-4:])):
        for cell in cells:
            assert _scan(pdf, tmp_path, number, cell.box, stock.page[1]) == [cell.label.cable.id]


@pytest.mark.realtool
def test_a_code_with_the_wrong_id_does_not_pass_for_the_label(plan: Plan, tmp_path: Path) -> None:
    stock = sheets.STOCKS[LabelStock.WRAP_LETTER]
    page = sheets.layout(_sample(plan), stock, plan.site.name)[0]
    cell, other = page.cells[0], page.cells[1]
    code = cell.items[-1]
    assert isinstance(code, sheets.Code) and code.data == cell.label.cable.id
    wrong = other.label.cable.id
    tampered = replace(cell, items=(*cell.items[:-1], replace(code, data=wrong)))
    pdf = sheets.labels_pdf([replace(page, cells=(tampered, *page.cells[1:]))], "tampered")
    assert _scan(pdf, tmp_path, 1, cell.box, stock.page[1]) == [wrong] != [cell.label.cable.id]
    assert _scan(pdf, tmp_path, 1, other.box, stock.page[1]) == [wrong]  # its neighbour intact


# --- determinism ----------------------------------------------------------------------------

_HASH_SCRIPT = """
import contextlib, hashlib, io, sys
from pathlib import Path
from clusterforge.cli import main
out = Path(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["-C", sys.argv[1], "labels", "--rack", "s01", "--out", str(out)]) == 0
for path in sorted(out.iterdir()):
    print(path.name, hashlib.sha256(path.read_bytes()).hexdigest())
"""


def test_sheets_are_byte_identical_across_runs_and_hash_seeds(plan: Plan, tmp_path: Path) -> None:
    def digests() -> dict[str, str]:
        files = sheets.sheets(target.cabling(plan), scene(plan), racks=["s01"])
        return {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}

    here = digests()
    assert here == digests()
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", _HASH_SCRIPT, str(REPO), str(tmp_path / seed)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        assert dict(line.split() for line in out.splitlines()) == here


# --- the CSV target -------------------------------------------------------------------------


def test_labels_csv_has_one_row_per_cable_in_label_software_columns(plan: Plan) -> None:
    (path, text), *rest = target.render(plan).items()
    assert path == "labels/labels.csv" and rest == []
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["label_id", "end_a", "end_b", "text_a", "text_b", "barcode"]
    assert [r["label_id"] for r in rows] == sorted(c.id for c in plan.cables)
    for row in rows:
        assert row["barcode"] == row["label_id"]
        # Near end first on each label, and "/" appears only between the two ends.
        assert row["text_a"].split("/") == [row["end_a"], row["end_b"]]
        assert row["text_b"].split("/") == [row["end_b"], row["end_a"]]


def test_cable_ids_fit_a_wrap_label_and_are_unique(plan: Plan) -> None:
    ids = [c.id for c in plan.cables]
    assert len(ids) == len(set(ids))
    assert max(map(len, ids)) <= 10 and all(ID.fullmatch(i) for i in ids)


# --- configuration and the command ----------------------------------------------------------


def _repo_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "cluster", tmp_path / "repo" / "cluster")
    return tmp_path / "repo"


def test_an_unknown_stock_in_site_yaml_is_a_located_error(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    site = repo / "cluster" / "site.yaml"
    site.write_text(site.read_text().replace("stock: wrap-letter", "stock: avery-9999"))
    with pytest.raises(SourceError) as caught:
        check(load(repo / "cluster"))
    (diagnostic,) = caught.value.diagnostics
    line = (
        site.read_text()
        .splitlines()
        .index(next(x for x in site.read_text().splitlines() if "avery-9999" in x))
    )
    assert diagnostic.location.file.endswith("site.yaml") and diagnostic.location.line == line + 1
    assert diagnostic.rule == "invalid-value"


def test_a_host_cabled_to_a_spine_is_a_located_error(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    rack = repo / "cluster" / "racks" / "s01.yaml"
    rack.write_text(
        rack.read_text().replace("{switch: leaf01, port: 20}", "{switch: spine01, port: 40}")
    )
    with pytest.raises(SourceError) as caught:
        check(load(repo / "cluster"))
    found = [d for d in caught.value.diagnostics if d.rule == "link-to-spine"]
    assert len(found) == 1 and "'sm01'" in found[0].message
    assert found[0].location.file.endswith("s01.yaml")


@pytest.mark.realtool
def test_labels_command_reprints_one_cable_without_touching_generated(tmp_path: Path) -> None:
    repo, out = _repo_copy(tmp_path), tmp_path / "out"
    assert main(["-C", str(repo), "labels", "--only", "r01-ib05", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["reprint.pdf"]
    assert not (repo / "generated").exists()
    assert _ids(_text((out / "reprint.pdf").read_bytes(), tmp_path)) == {"R01-IB05": 2}


@pytest.mark.realtool
def test_labels_command_takes_rack_and_stock(tmp_path: Path) -> None:
    repo = _repo_copy(tmp_path)
    assert main(["-C", str(repo), "labels", "--rack", "s01", "--stock", "avery-l7163"]) == 0
    out = repo / "build" / "labels"
    assert sorted(p.name for p in out.iterdir()) == ["s01-far.pdf", "s01-pull.pdf", "s01.pdf"]
    info = _run(require_tool("pdfinfo"), str(out / "s01.pdf"))
    assert re.search(r"^Page size:\s+595\.\d+ x 841\.\d+ pts \(A4\)", info, re.M)


def test_labels_command_rejects_what_the_plan_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, out = _repo_copy(tmp_path), tmp_path / "out"
    assert main(["-C", str(repo), "labels", "--only", "R01-IB99", "--out", str(out)]) == 2
    assert main(["-C", str(repo), "labels", "--rack", "r99", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no cable 'R01-IB99' (did you mean 'R01-IB" in err
    assert "no rack 'r99' (did you mean 'r19'?); the racks are n01,r[01-25],s01" in err
    assert not out.exists()
