"""Self-contained HTML pages: the drift audit's `report.html` and the change picture of `diff`.

One file each, nothing fetched: styles and the table-sorting script are inline, the pictures
are inline SVG, and a Content-Security-Policy forbids every network fetch, so the page reads
the same from a CI artifact, a mail attachment or a laptop offline. The data stays the source:
`report.json` and the diff report; these pages only render them (with the compiled scene,
`contract.scene`, for pictures).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from contract.diff import DiffReport, Place
from contract.scene import Mark, Scene
from draw.fabric import fabric_figure
from draw.figure import svg
from draw.racks import row_figure
from draw.scene import marked, merged

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
SEVERITY_RANK = {"critical": 0, "warning": 1}
STYLE = """
body { font-family: Helvetica, Arial, 'Liberation Sans', sans-serif; margin: 1.5em; color: #111; }
h1 { margin-bottom: 0.2em; }
.meta { color: #555; font-size: 0.9em; }
.stats { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.stat { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 1em; min-width: 6em; }
.stat dt { font-size: 0.8em; color: #555; }
.stat dd { margin: 0; font-size: 1.6em; font-weight: bold; }
.stat.bad dd { color: #d62728; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #eee; cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.critical { color: #d62728; font-weight: bold; }
td.warning { color: #b8860b; font-weight: bold; }
.picture { overflow-x: auto; border: 1px solid #ddd; padding: 0.5em; margin-bottom: 1.5em; }
.picture svg { max-width: 100%; height: auto; display: block; }
.todo li { margin-bottom: 0.4em; max-width: 60em; }
.note { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em 1em; }
code { font-size: 0.95em; }
"""
# Sorts a table by the clicked column: cells' data-sort when present, else their text;
# numbers numerically. Clicking again reverses. Runs after the tables: it closes the body.
SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.querySelectorAll("th");
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      var down = th.getAttribute("aria-sort") === "ascending";
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[col];
        return cell.getAttribute("data-sort") || cell.textContent;
      };
      rows.sort(function (a, b) {
        var order = key(a).localeCompare(key(b), "en", { numeric: true });
        return down ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
// report.html#sort=Rack opens sorted by that column: a link can point at a view.
if (location.hash.indexOf("#sort=") === 0) {
  var wanted = decodeURIComponent(location.hash.slice(6));
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    if (th.textContent === wanted) { th.click(); }
  });
}
"""


def _page(title: str, body: Iterable[str]) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def _stats(items: Sequence[tuple[str, str, object, bool]]) -> str:
    """Summary boxes: (id, label, value, bad)."""
    cells = "".join(
        f'<div class="stat{" bad" if bad else ""}"><dt>{escape(label)}</dt>'
        f'<dd id="{key}">{escape(str(value))}</dd></div>'
        for key, label, value, bad in items
    )
    return f'<dl class="stats" id="summary">{cells}</dl>'


def _table(table_id: str, head: Sequence[str], rows: Iterable[Sequence[tuple[str, str]]]) -> str:
    """A sortable table; each cell is (text, sort key or "")."""
    out = [f'<table class="sortable" id="{table_id}"><thead><tr>']
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        cells = []
        for n, (text, key) in enumerate(row):
            sort = f' data-sort="{escape(key)}"' if key else ""
            klass = f' class="{escape(text)}"' if n == 0 and text in SEVERITY_RANK else ""
            cells.append(f"<td{klass}{sort}>{escape(text)}</td>")
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# The pictures are drawn to fit this width (SVG units, 1 px at 100%): a 1400 px window less
# the page's margins. Wider fabrics and floor rows wrap into panels and lines; a narrower
# window scales them down (max-width), so nothing runs off the page.
FIT_WIDTH = 1300.0


def _pictures(facts: Scene) -> list[str]:
    fabric = svg(fabric_figure(facts, fit_width=FIT_WIDTH), standalone=False)
    rows = svg(row_figure(facts, fit_width=FIT_WIDTH), standalone=False)
    return [
        "<h2>Fabric</h2>",
        f'<div class="picture" id="fabric">{fabric}</div>',
        "<h2>Racks</h2>",
        f'<div class="picture" id="racks">{rows}</div>',
    ]


# What to do about a host that could not be collected, by its status: the first step.
STATUS_REMEDIES = {
    "unreachable": "the audit could not log in: check the host is powered and booted (its "
    "BMC: ipmitool chassis status, the serial-over-LAN console); a refused connection is "
    "sshd down or the host reinstalled without the audit account; a host-key reason is a "
    "host-key finding (below); a timeout connecting is the network or a hung kernel",
    "error": "the host answered, but the probes named in its reason gave nothing usable: a "
    "probe that timed out hangs on the host (a wedged nvidia-smi: drain the node, reset the "
    "GPU or reboot); exit 127 is a command not installed; send the probe by hand "
    "(docs/howto.md: ssh HOST -- PROBE) to see what the host says. Its other answers were "
    "judged as usual",
}


def _what_to_do(report: Mapping[str, Any]) -> list[str]:
    """One line per kind of finding present and per status of the hosts not collected."""
    from draw.report.markdown import REMEDIES

    items = []
    for kind in dict.fromkeys(f["kind"] for f in report["findings"]):
        remedy = next((text for k, text in REMEDIES.items() if k.value == kind), None)
        if remedy:
            items.append((kind, remedy))
    statuses = dict.fromkeys(h["status"] for h in report["hosts"])
    items += [(status, STATUS_REMEDIES[status]) for status in statuses if status in STATUS_REMEDIES]
    if not items:
        return []
    lines = "".join(f"<li><b>{escape(k)}</b>: {escape(text)}</li>" for k, text in items)
    return ["<h2>What to do</h2>", f'<ul class="todo" id="what-to-do">{lines}</ul>']


def _value(value: Any) -> str:
    """A finding's expected or observed value as a cell: lists joined, objects as JSON."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(_value, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


# --- the drift audit ----------------------------------------------------------------------


def audit_marks(report: Mapping[str, Any]) -> tuple[dict[str, Mark], dict[str, str]]:
    """Marks and hover notes from report.json: hosts by status, cables by fabric class."""
    marks: dict[str, Mark] = {}
    for host in report["hosts"]:
        if host["status"] != "ok":
            # A status this page does not know yet is at least not fine.
            known = host["status"] in {m.value for m in Mark}
            marks[host["host"]] = Mark(host["status"]) if known else Mark.ERROR
    fabric = report["fabric"]
    classes = {"missing": Mark.MISSING, "miswired": Mark.MISWIRED, "degraded": Mark.DEGRADED}
    for key, mark in classes.items():
        marks |= {cable: mark for cable in fabric.get(key, [])}
    notes: dict[str, list[str]] = {}
    for f in report["findings"]:
        notes.setdefault(f["path"] if f["host"] == "fabric" else f["host"], []).append(f["message"])
    for host in report["hosts"]:
        if host["reason"]:
            notes.setdefault(host["host"], []).append(host["reason"])
    return marks, {k: "\n".join(v) for k, v in notes.items() if k in marks}


def audit_page(report: Mapping[str, Any], facts: Scene | None, note: str | None = None) -> str:
    """report.html: summary, sortable findings, and (with the compiled scene) the pictures."""
    summary = report["summary"]
    status = summary["status"]
    site = facts.site if facts else "the fleet"
    rack_of = {h["host"]: h["rack"] for h in report["hosts"]}
    u_of = {h["host"]: "" if h.get("u") is None else str(h["u"]) for h in report["hosts"]}
    if facts is not None:
        devices = {d.name: d for d in facts.devices}
        rack_of |= {c.id: getattr(devices.get(c.a.device), "rack", "") for c in facts.links}
        # A cable's place is its switch end's: where the technician finds its label first.
        u_of |= {c.id: str(getattr(devices.get(c.a.device), "u", "")) for c in facts.links}
    commit = report["expectations"]["commit"] or "not in git"
    body = [
        f"<h1>Drift audit: {escape(site)}</h1>",
        f'<p class="meta">collected {escape(report["collected_at"])}, judged at '
        f"{escape(report['now'])}; expectations from commit <code>{escape(commit)}</code>, "
        f"exit code {report['exit_code']}</p>",
        _stats(
            [
                ("hosts", "hosts", summary["hosts"], False),
                ("ok", "ok", status["ok"], False),
                ("drift", "drift", status["drift"], status["drift"] > 0),
                ("unreachable", "unreachable", status["unreachable"], status["unreachable"] > 0),
                ("error", "error", status["error"], status["error"] > 0),
                ("findings", "findings", summary["findings"], summary["findings"] > 0),
                ("fabric", "fabric", summary["fabric"], summary["fabric"] != "ok"),
            ]
        ),
    ]
    if note:
        body.append(f'<p class="note">{escape(note)}</p>')
    findings = sorted(
        report["findings"],
        key=lambda f: (
            SEVERITY_RANK.get(f["severity"], 9),
            _rack(f, rack_of),
            f["host"],
            f["path"],
            f["message"],
        ),
    )
    body.append(f"<h2>Findings ({len(findings)})</h2>")
    body.append(
        _table(
            "findings-table",
            ("Severity", "Rack", "U", "Host", "Kind", "Path", "Expected", "Observed", "Message"),
            (
                (
                    (f["severity"], str(SEVERITY_RANK.get(f["severity"], 9))),
                    (_rack(f, rack_of), ""),
                    (_rack(f, u_of), ""),
                    (f["host"], ""),
                    (f["kind"], ""),
                    (f["path"], ""),
                    (_value(f["expected"]), ""),
                    (_value(f["observed"]), ""),
                    (f["message"], ""),
                )
                for f in findings
            ),
        )
    )
    lost = [h for h in report["hosts"] if h["status"] in ("unreachable", "error")]
    if lost:
        body.append(f"<h2>Could not collect ({len(lost)})</h2>")
        body.append(
            _table(
                "lost-table",
                ("Host", "Rack", "U", "Status", "Reason"),
                (
                    (
                        (h["host"], ""),
                        (h["rack"], ""),
                        (u_of.get(h["host"], ""), ""),
                        (h["status"], ""),
                        (h["reason"] or "", ""),
                    )
                    for h in lost
                ),
            )
        )
    body += _what_to_do(report)
    if facts is not None:
        marks, notes = audit_marks(report)
        body += _pictures(marked(facts, marks, notes))
    return _page(f"Drift audit: {site}", body)


def _rack(finding: Mapping[str, Any], rack_of: Mapping[str, str]) -> str:
    return rack_of.get(finding["path"] if finding["host"] == "fabric" else finding["host"], "")


# --- the change picture ---------------------------------------------------------------------


def _where(place: Place) -> str:
    return f"{place.rack} U{place.u}" + (f" slot {place.slot}" if place.slot else "")


def diff_scene(report: DiffReport, base: Scene, head: Scene) -> Scene:
    """HEAD's scene with what the change added, removed (drawn from BASE) and moved marked."""
    marks: dict[str, Mark] = {}
    notes: dict[str, str] = {}
    for devices in (report.nodes, report.switches):
        for p in devices.added:
            marks[p.name] = Mark.ADDED
        for p in devices.removed:
            marks[p.name], notes[p.name] = Mark.REMOVED, f"was at {_where(p.place)}"
        for m in devices.moved:
            marks[m.name] = Mark.MOVED
            notes[m.name] = f"moved from {_where(m.old)} to {_where(m.new)}"
    for c in report.cables.added:
        marks[c.id] = Mark.ADDED
    for c in report.cables.removed:
        marks[c.id] = Mark.REMOVED
    for change in report.cables.changed:
        marks[change.id] = Mark.MOVED if change.repatched else Mark.CHANGED
        notes[change.id] = "; ".join(f"{x.key}: {x.old} -> {x.new}" for x in change.changes)
    gone = [p.name for d in (report.nodes, report.switches) for p in d.removed]
    facts = merged(head, base, gone, [c.id for c in report.cables.removed])
    return marked(facts, marks, notes)


def diff_page(report: DiffReport, base: Scene | None, head: Scene | None) -> str:
    """The change picture: counts, risks, what changed where, and HEAD drawn with it marked.
    Without both scenes (a side does not compile) only the errors are shown."""
    title = f"Change {report.base.ref} -> {report.head.ref}"
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">BASE <code>{escape(report.base.commit)}</code>, HEAD '
        f"<code>{escape(report.head.commit)}</code></p>",
    ]
    if base is None or head is None:
        body.append('<p class="note">A side does not compile; nothing is drawn.</p>')
        for name, rev in (("BASE", report.base), ("HEAD", report.head)):
            body += [f"<p><b>{name}</b>: <code>{escape(str(d))}</code></p>" for d in rev.errors]
        return _page(title, body)
    facts = diff_scene(report, base, head)
    counts = Counter(facts.marks.values())
    body.append(
        _stats(
            [
                ("added", "added", counts[Mark.ADDED], False),
                ("removed", "removed", counts[Mark.REMOVED], counts[Mark.REMOVED] > 0),
                ("moved", "moved or re-patched", counts[Mark.MOVED], counts[Mark.MOVED] > 0),
                ("changed", "changed", counts[Mark.CHANGED], False),
                ("risks", "risks", len(report.risks), bool(report.risks)),
            ]
        )
    )
    if report.risks:
        body.append("<h2>Risks</h2><ul>")
        body += [f"<li><b>{escape(r.kind)}</b>: {escape(r.message)}</li>" for r in report.risks]
        body.append("</ul>")
    rows = sorted(
        ((mark.value, name, facts.notes.get(name, "")) for name, mark in facts.marks.items()),
        key=lambda r: (r[0], r[1]),
    )
    if not facts.marks:
        body.append(
            '<p class="note">Nothing physical changes: no device or cable is added, '
            "removed, moved or re-patched.</p>"
        )
    # Pictures first: a reviewer looks at where the change lands, then reads the list.
    body += _pictures(facts)
    body.append(f"<h2>Changes ({len(rows)})</h2>")
    body.append(
        _table(
            "changes-table",
            ("Change", "Device or cable", "Detail"),
            (((m, ""), (n, ""), (d, "")) for m, n, d in rows),
        )
    )
    return _page(title, body)
