"""The diff as a pull-request comment (Markdown): what a reviewer reads first.

Pure: a `contract.diff.DiffReport` in, Markdown out (moved here from `compiler/diff.py`: all
drawing for people lives in `draw/`). The pull-request workflow finds its comment by `MARKER`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from common import hostlist
from contract.diff import AddressChange, Devices, DiffReport, Revision, Risk
from contract.labels import CableEnd

MARKER = "<!-- clusterforge-diff -->"  # the PR workflow finds its comment by this line
MARKDOWN_LIMIT = 60_000  # GitHub rejects comments over 65,536 characters


def _shown(value: object) -> str:
    return "(none)" if value is None else str(value)


def to_markdown(report: DiffReport, limit: int = MARKDOWN_LIMIT) -> str:
    """The report as a pull-request comment: marker line, summary and risks first, details
    folded; lists are cut ("and N more") until the text fits in `limit` characters."""
    for cap in (50, 20, 5, 0):
        text = _Markdown(report, cap).render()
        if len(text) <= limit:
            return text
    note = "\n\n… cut to fit a comment: the JSON report has everything.\n"
    return text[: limit - len(note)] + note


class _Md(str):
    """Markdown this module wrote itself (a label, a count, a heading): shown as it is."""

    __slots__ = ()


def _prose(value: object) -> str:
    """Our own sentences (a risk's message), which may quote a value: they must not break
    the line or open HTML."""
    return (
        str(value)
        .replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\n", " ")
    )


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _code(value: object, cell: bool = True) -> str:
    """Text from the pull request or the cluster (a cable's note, a name, a branch, a file's
    line) as a code span: inside one, GitHub renders no image, link, autolink, @mention,
    emphasis or HTML. The fence is one backtick longer than any run inside (CommonMark,
    code spans); a pipe is escaped, which a GFM table takes out of the span again (GFM spec,
    tables: `\\|` inside a code span in a cell; elsewhere it would show) when `cell`; controls
    are shown escaped, on one line."""
    text = _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode(), str(value))
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    # A space each side when the text starts or ends with a backtick (or is all spaces, which
    # CommonMark would otherwise read as one space): the renderer strips one from each side.
    pad = " " if text[:1] == "`" or text[-1:] == "`" or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(value: object) -> str:
    """A table cell or list item: a number or our own Markdown as it is, text as code."""
    if value is None or value == "":
        return "—"
    if isinstance(value, (_Md, int, float)):
        return str(value)
    return _code(value)


def _named(rev: Revision) -> str:
    short = rev.commit[:12]
    named = _code(rev.ref, cell=False)
    return f"`{short}`" if rev.ref in (rev.commit, short) else f"{named} (`{short}`)"


class _Markdown:
    def __init__(self, report: DiffReport, cap: int) -> None:
        self.r = report
        self.cap = cap
        self.out: list[str] = []

    def render(self) -> str:
        r = self.r
        self.out = [MARKER, f"### clusterforge diff: {_named(r.base)} → {_named(r.head)}", ""]
        for name, rev in (("BASE", r.base), ("HEAD", r.head)):
            if not rev.compiles:
                self._failed(name, rev)
        for risk in r.risks:
            self._risk(risk)
        if r.compiles:
            if not r.risks:
                self.out += ["No risk flags.", ""]
            if r.changed and r.renumbered_nothing:
                self.out += ["No existing address or LID renumbered.", ""]
            self._summary()
            self._details()
            self._label_commands()
        return "\n".join(self.out).rstrip("\n") + "\n"

    def _more(self, total: int) -> list[str]:
        return [f"… and {total - self.cap} more", ""] if total > self.cap else []

    def _failed(self, name: str, rev: Revision) -> None:
        lines = [str(d) for d in rev.errors]
        shown = "\n".join(lines[: self.cap])
        fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", shown))])
        self.out += [f"⛔ **{name} does not compile**: {len(lines)} problem(s)", ""]
        if shown:
            self.out += [f"{fence}text", shown, fence, ""]
        self.out += self._more(len(lines))

    def _risk(self, risk: Risk) -> None:
        self.out.append(f"⚠️ **{risk.kind.value}**: {_prose(risk.message)}")
        self.out += [f"  - {_code(item, cell=False)}" for item in risk.items[: self.cap]]
        if len(risk.items) > self.cap:
            self.out.append(f"  - … and {len(risk.items) - self.cap} more")
        self.out.append("")

    def _summary(self) -> None:
        r = self.r
        if not r.changed:
            self.out += ["No changes: both revisions compile to the same generated/ tree.", ""]
            return
        firmware_hosts = {h for ring in r.firmware.rings for c in ring.changes for h in c.hosts}
        counts = [
            ("nodes added", len(r.nodes.added)),
            ("nodes removed", len(r.nodes.removed)),
            ("nodes moved", len(r.nodes.moved)),
            ("switches added", len(r.switches.added)),
            ("switches removed", len(r.switches.removed)),
            ("switches moved", len(r.switches.moved)),
            ("nodes renamed", len(r.nodes.renamed)),
            ("switches renamed", len(r.switches.renamed)),
            ("hardware identity changes", len(r.identity.devices)),
            ("role changes", len(r.identity.roles)),
            (
                "root GUIDs changed",
                len(r.identity.root_guids.removed + r.identity.root_guids.added),
            ),
            ("LIDs changed", len(r.identity.lids)),
            ("addresses added", sum(a.old is None for a in r.addresses)),
            ("addresses removed", sum(a.new is None for a in r.addresses)),
            ("addresses changed", sum(bool(a.old and a.new) for a in r.addresses)),
            ("cables added", len(r.cables.added)),
            ("cables removed", len(r.cables.removed)),
            ("cables re-patched", sum(c.repatched for c in r.cables.changed)),
            ("cables otherwise changed", sum(not c.repatched for c in r.cables.changed)),
            ("labels to reprint", len(r.labels_to_reprint)),
            ("new labels to print", len(r.cables.added)),
            ("firmware baseline changes", len(r.firmware.baselines) + len(r.firmware.software)),
            ("hosts with new versions", len(firmware_hosts)),
            ("switches with new firmware", sum(len(c.hosts) for c in r.firmware.switches)),
            ("fabric settings changed", len(r.fabric.settings)),
            ("subnet manager changes", len(r.fabric.subnet_managers)),
            ("hosts with route changes", len(r.routes)),
            ("parts to order", sum(max(0, p.new - p.old) for p in r.parts)),
            ("parts to return", sum(max(0, p.old - p.new) for p in r.parts)),
            ("upgrade windows opened", sum(x.status == "added" for x in r.rollouts)),
            ("upgrade windows closed", sum(x.status == "removed" for x in r.rollouts)),
        ]
        rows: list[tuple[object, object]] = [(_Md(what), n) for what, n in counts if n]
        if r.touched:
            t = r.touched
            rows += [
                (_Md("hosts touched"), _Md(f"{t.hosts} of {t.hosts_total}")),
                (_Md("cables touched"), _Md(f"{t.cables} of {t.cables_total}")),
            ]
        self._table(("change", "count"), rows, whole=True)
        self.out += ["**Blast radius** (generated/, by artifact family):", ""]
        self._table(
            ("family", "files +", "files -", "files ~", "lines +", "lines -"),
            [
                (
                    f.family,
                    f.files_added,
                    f.files_removed,
                    f.files_changed,
                    f.lines_added,
                    f.lines_removed,
                )
                for f in r.artifacts
            ],
            whole=True,
        )

    def _table(
        self, header: Sequence[str], rows: Sequence[Sequence[object]], whole: bool = False
    ) -> None:
        """A table of `rows`, cut at the cap unless `whole` (the summary's short tables)."""
        shown = rows if whole else rows[: self.cap]
        self.out += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        self.out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in shown]
        self.out.append("")
        if not whole:
            self.out += self._more(len(rows))

    def _fold(self, title: str, count: int, body: Callable[[], None]) -> None:
        if not count:
            return
        self.out += ["<details>", f"<summary>{title}</summary>", ""]
        body()
        self.out += ["</details>", ""]

    def _details(self) -> None:
        r = self.r
        for what, devices in (("Nodes", r.nodes), ("Switches", r.switches)):
            self._fold(
                f"{what}: {len(devices.added)} added, {len(devices.removed)} removed, "
                f"{len(devices.moved)} moved, {len(devices.renamed)} renamed",
                len(devices.added)
                + len(devices.removed)
                + len(devices.moved)
                + len(devices.renamed),
                partial(self._devices, devices),
            )
        i = r.identity
        self._fold(
            f"Hardware identity: {len({x.device for x in i.devices})} device(s) changed, "
            f"{len(i.roles)} role change(s), "
            f"root GUIDs {'changed' if i.root_guids.removed or i.root_guids.added else 'kept'}, "
            f"LIDs {i.lids_kept} kept, {len(i.lids)} changed",
            len(i.devices)
            + len(i.roles)
            + len(i.root_guids.removed + i.root_guids.added)
            + len(i.lids),
            self._identity,
        )
        self._fold(
            f"Addresses: {_address_counts(r.addresses)}",
            len(r.addresses),
            self._addresses,
        )
        c = r.cables
        self._fold(
            f"Cables: {len(c.added)} added, {len(c.removed)} removed, {len(c.changed)} changed "
            f"({sum(x.repatched for x in c.changed)} re-patched)",
            len(c.added) + len(c.removed) + len(c.changed),
            self._cables,
        )
        self._fold(
            f"Labels: {len(r.labels_to_reprint)} to reprint, {len(c.added)} new",
            len(r.labels_to_reprint) + len(c.added),
            self._labels,
        )
        fw = r.firmware
        self._fold(
            "Firmware and versions",
            len(fw.software)
            + len(fw.baselines)
            + len(fw.rings)
            + len(fw.switches)
            + len(r.rollouts),
            self._firmware,
        )
        ordered = sum(max(0, p.new - p.old) for p in r.parts)
        returned = sum(max(0, p.old - p.new) for p in r.parts)
        self._fold(
            f"Parts: {ordered} to order, {returned} to return",
            len(r.parts),
            self._parts,
        )
        f = r.fabric
        self._fold(
            "Fabric and subnet managers",
            len(f.settings) + len(f.subnet_managers) + len(f.opensm_options) + len(f.lids),
            self._fabric,
        )
        self._fold(
            f"Routes: {len(r.routes)} host(s)",
            len(r.routes),
            lambda: self._table(
                ("host", "removed", "added"),
                [(x.host, "; ".join(x.removed), "; ".join(x.added)) for x in r.routes],
            ),
        )
        self._fold(
            f"Generated files: {sum(len(f.files) for f in r.artifacts)} changed",
            len(r.artifacts),
            self._files,
        )

    def _addresses(self) -> None:
        by_network: dict[str, list[AddressChange]] = defaultdict(list)
        for a in self.r.addresses:
            by_network[a.network].append(a)
        self._table(
            ("network", "added", "removed", "changed"),
            [
                (
                    net,
                    sum(a.old is None for a in changes),
                    sum(a.new is None for a in changes),
                    sum(bool(a.old and a.new) for a in changes),
                )
                for net, changes in sorted(by_network.items())
            ],
            whole=True,
        )
        self._table(
            ("device", "network", "old", "new"),
            [(a.device, a.network, a.old, a.new) for a in self.r.addresses],
        )

    def _identity(self) -> None:
        i = self.r.identity
        if i.devices:
            self.out += [
                "Serials, MACs and GUIDs, old → new (update the BMC and DHCP "
                "records, the switch inventory and anything keyed by them):",
                "",
            ]
            self._table(
                ("device", "what", "old", "new"),
                [(x.device, x.key, x.old, x.new) for x in i.devices],
            )
        if i.roles:
            self._table(
                ("device", "role was", "role now"), [(x.device, x.old, x.new) for x in i.roles]
            )
        roots = i.root_guids
        if roots.removed or roots.added:
            self.out += ["OpenSM root GUIDs (`opensm/root_guids`):", ""]
            self._table(
                ("change", "GUID"),
                [("removed", g) for g in roots.removed] + [("added", g) for g in roots.added],
            )
        self.out += [f"LIDs: {i.lids_kept} kept, {len(i.lids)} changed.", ""]
        if i.lids:
            self._table(
                ("device", "port", "old LID", "new LID"),
                [(x.device, x.port, x.old, x.new) for x in i.lids],
            )

    def _parts(self) -> None:
        self._table(
            ("medium", "rate", "length (m)", "count was", "count now", "order", "return"),
            [
                (
                    p.medium,
                    p.rate,
                    p.length_m,
                    p.old,
                    p.new,
                    max(0, p.new - p.old) or "",
                    max(0, p.old - p.new) or "",
                )
                for p in self.r.parts
            ],
        )

    def _label_commands(self) -> None:
        if self.r.label_commands:
            self.out += ["**Print the labels of this change** (both ends of every cable):", ""]
            self.out += ["```sh", *self.r.label_commands, "```", ""]

    def _devices(self, d: Devices) -> None:
        rows: list[tuple[object, ...]] = [
            (_Md(change), p.name, p.place.rack, p.place.slot, p.place.u)
            for change, placed in (("added", d.added), ("removed", d.removed))
            for p in placed
        ]
        rows += [
            (
                _Md("moved"),
                m.name,
                _arrow(m.old.rack, m.new.rack),
                _arrow(m.old.slot, m.new.slot),
                _arrow(m.old.u, m.new.u),
            )
            for m in d.moved
        ]
        rows += [
            (_Md("renamed"), _arrow(x.old, x.new), x.place.rack, x.place.slot, x.place.u)
            for x in d.renamed
        ]
        self._table(("change", "name", "rack", "slot", "U"), rows)

    def _cables(self) -> None:
        c = self.r.cables
        rows: list[tuple[object, ...]] = [
            (_Md("added"), x.id, _end(x.a), _end(x.b), "") for x in c.added
        ]
        rows += [(_Md("removed"), x.id, _end(x.a), _end(x.b), "") for x in c.removed]
        rows += [
            (
                _Md("re-patched" if x.repatched else "changed"),
                x.id,
                _arrow(_end(x.old.a), _end(x.new.a)),
                _arrow(_end(x.old.b), _end(x.new.b)),
                "; ".join(
                    f"{ch.key}: {_shown(ch.old)} → {_shown(ch.new)}"
                    for ch in x.changes
                    if not ch.key.startswith(("a.", "b."))
                ),
            )
            for x in c.changed
        ]
        self._table(("change", "cable", "A end", "B end", "also"), rows)

    def _labels(self) -> None:
        r = self.r
        for what, ids in (
            ("Reprint", r.labels_to_reprint),
            ("Print (new cables)", tuple(x.id for x in r.cables.added)),
        ):
            if ids:
                shown = ", ".join(_code(i, cell=False) for i in ids[: self.cap])
                more = f" … and {len(ids) - self.cap} more" if len(ids) > self.cap else ""
                self.out += [f"**{what}** ({len(ids)}): {shown}{more}", ""]

    def _firmware(self) -> None:
        fw = self.r.firmware
        rows: list[tuple[object, ...]] = [
            (_Md("software (fleet)"), c.key, c.old, c.new) for c in fw.software
        ]
        rows += [(m.model, m.key, m.old, m.new) for m in fw.baselines]
        if rows:
            self.out += ["Baselines:", ""]
            self._table(("model", "key", "old", "new"), rows)
        few = min(8, self.cap)
        ring_rows: list[tuple[object, ...]] = [
            (
                ring.ring,
                c.key,
                c.old,
                c.new,
                _Md(f"{len(c.hosts)} of {ring.hosts}"),
                _names(c.hosts, few),
            )
            for ring in fw.rings
            for c in ring.changes
        ]
        ring_rows += [
            (_Md("(switches)"), c.key, c.old, c.new, len(c.hosts), _names(c.hosts, few))
            for c in fw.switches
        ]
        if ring_rows:
            self.out += ["Versions by rollout ring:", ""]
            self._table(("ring", "key", "old", "new", "hosts", "which"), ring_rows)
        if self.r.rollouts:
            self.out += [
                "Upgrade windows (until then, a ring's nodes may still run the previous "
                "version without counting as drift):",
                "",
            ]
            self._table(
                ("window", "rings", "may still run", "until"),
                [
                    (
                        "opened" if x.status == "added" else "closed",
                        ", ".join(x.rings),
                        ", ".join(f"{k} {v}" for k, v in x.previous.items()),
                        x.until,
                    )
                    for x in self.r.rollouts
                ],
                whole=True,
            )

    def _fabric(self) -> None:
        f = self.r.fabric
        rows: list[tuple[object, ...]] = [(_Md("setting"), c.key, c.old, c.new) for c in f.settings]
        rows += [(_Md("SM priority"), c.key, c.old, c.new) for c in f.subnet_managers]
        rows += [(o.file, o.key, o.old, o.new) for o in f.opensm_options]
        rows += [(_Md(f"{_code(x.file)} LID"), x.guid, x.old, x.new) for x in f.lids]
        self._table(("what", "key", "old", "new"), rows)

    def _files(self) -> None:
        for family in self.r.artifacts:
            self.out += [f"{_code(family.family, cell=False)}:", ""]
            self._table(
                ("file", "status", "lines"),
                [
                    (
                        f.path,
                        _Md(f.status),
                        _Md(
                            "not text"
                            if f.lines_added is None
                            else f"+{f.lines_added} -{f.lines_removed}"
                        ),
                    )
                    for f in family.files
                ],
            )


def _address_counts(changes: Sequence[AddressChange]) -> str:
    added = sum(c.old is None for c in changes)
    removed = sum(c.new is None for c in changes)
    return f"{added} added, {removed} removed, {len(changes) - added - removed} changed"


def _arrow(old: object, new: object) -> str:
    return _shown(old) if old == new else f"{_shown(old)} → {_shown(new)}"


def _end(e: CableEnd) -> str:
    return f"{e.device}:{e.port} ({e.location})"


def _names(names: Sequence[str], cap: int) -> str:
    """Host ranges compacted (gpu[002-065,067-124]), the first `cap` of them shown."""
    parts = hostlist.groups(names)
    more = f", … and {len(parts) - cap} more" if len(parts) > cap else ""
    return ", ".join(parts[:cap]) + more
