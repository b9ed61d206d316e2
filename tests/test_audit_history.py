"""The audit's memory (audits/history.py) over hand-made reports: new, still there, resolved,
flapping, forgotten; a host that could not be judged resolves nothing."""

from __future__ import annotations

from typing import Any

import pytest

from audits.history import FLAPS, FORGET, chain, history
from draw.report import markdown, textfile


def report(day: int, findings: list[tuple[str, str]], lost: tuple[str, ...] = ()) -> Any:
    """A report of hosts a and b on day `day` with findings (host, check); `lost` hosts were
    unreachable."""
    hosts = [
        {"host": h, "status": "unreachable" if h in lost else "drift", "checks": []}
        for h in ("a", "b")
    ]
    found = [
        {"host": h, "check": c, "path": f"versions.{c}", "kind": c, "message": f"{c} differs"}
        for h, c in findings
    ]
    return {
        "collected_at": f"2026-05-{day:02d}T06:00:00+00:00",
        "hosts": hosts,
        "fabric": {"status": "ok"},
        "findings": found,
    }


def keys(items: list[Any]) -> list[tuple[str, str]]:
    return [(k["host"], k["check"]) for k in items]


def test_the_first_run_has_no_previous_and_everything_is_new() -> None:
    h = history(None, report(1, [("a", "ofed")]))
    assert h["previous"] is None and keys(h["new"]) == [("a", "ofed")]


def test_one_fixed_and_one_new() -> None:
    first = report(1, [("a", "ofed"), ("b", "bios")])
    second = report(2, [("b", "bios"), ("b", "kernel")])
    h = chain([first, second])
    assert h is not None
    assert keys(h["new"]) == [("b", "kernel")]
    assert keys(h["resolved"]) == [("a", "ofed")]
    assert [(s["key"]["host"], s["since"]) for s in h["still"]] == [("b", first["collected_at"])]


def test_a_finding_on_a_host_that_could_not_be_judged_is_not_resolved() -> None:
    first = report(1, [("a", "ofed")])
    h = chain([first, report(2, [], lost=("a",)), report(3, [("a", "ofed")])])
    assert h is not None
    assert h["new"] == [] and h["resolved"] == []  # still there, since day 1
    assert [s["since"] for s in h["still"]] == [first["collected_at"]]


def test_a_finding_that_keeps_coming_back_is_flapping() -> None:
    runs = [report(d, [("a", "ofed")] if d % 2 else []) for d in range(1, 2 * FLAPS + 2)]
    h = chain(runs)
    assert (
        h is not None
        and keys(h["flapping"]) == [("a", "ofed")]
        and keys(h["new"]) == [("a", "ofed")]
    )


def test_a_finding_gone_long_enough_is_forgotten() -> None:
    runs = [report(1, [("a", "ofed")]), *(report(d, []) for d in range(2, FORGET + 3))]
    h = chain(runs)
    assert h is not None and h["tracked"] == []


@pytest.mark.parametrize("render", [markdown.changes, textfile.render])
def test_renderings_show_the_counts(render: Any) -> None:
    now = report(2, [("b", "kernel")])
    full = now | {
        "history": chain([report(1, [("a", "ofed")]), now]),
        "summary": {"status": {"ok": 0, "drift": 2, "unreachable": 0, "error": 0}},
    }
    text = render(full)
    if render is markdown.changes:
        assert "1 new, 1 resolved, 0 still there, 0 flapping." in text
        assert "- `b versions.kernel`: `kernel differs`" in text
    else:
        assert 'clusterforge_drift_findings_changed{change="new"} 1.0' in text
        assert 'clusterforge_drift_findings_changed{change="resolved"} 1.0' in text


@pytest.mark.parametrize(
    "evil",
    [
        "<img src=x onerror=alert(1)>",
        "[click](https://evil.example)",
        "@octocat please",
        "a | b\n| forged | row |",
        "``` fence",
        "`tick`",
    ],
)
def test_host_text_cannot_add_markdown(evil: str) -> None:
    now = report(2, [("b", "kernel")])
    now["findings"][0]["message"] = evil
    full = now | {"history": chain([report(1, []), now])}
    text = markdown.changes(full)
    line = next(ln for ln in text.splitlines() if ln.startswith("- `b versions.kernel`"))
    _, shown = line.split(": ", 1)
    fence = shown[: len(shown) - len(shown.lstrip("`"))]
    assert shown.endswith(fence) and fence not in shown[len(fence) : -len(fence)]
    assert "\n" not in shown and "|" not in shown.replace("\\|", "")
