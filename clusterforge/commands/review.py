"""The commands that review a change or show the cluster: `diff`, `labels`, `draw`."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from clusterforge.commands import Command, Progress, batch, write_files
from common import memo
from common.errors import EXIT_CHECK, EXIT_INPUT, EXIT_OK
from common.stock import LabelStock

if TYPE_CHECKING:
    from compiler.plan import Plan


def add(command: Command) -> None:
    """Declare this module's commands."""
    lab = command(
        "labels",
        _labels,
        help="cable label sheets and pull sheets as PDFs, into build/labels/",
    )
    lab.add_argument(
        "--rack", action="append", default=[], metavar="R", help="only this rack (repeatable)"
    )
    lab.add_argument(
        "--stock",
        choices=[s.value for s in LabelStock],
        help="label stock (default: site.yaml labels.stock)",
    )
    lab.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="CABLE-IDS",
        help="reprint just these cables (comma-separated IDs) into reprint.pdf",
    )
    lab.add_argument(
        "--rail",
        type=int,
        action="append",
        default=[],
        metavar="K",
        help="a rail-optimised fabric: each rail K leaf's labels and pull sheet, <leaf>.pdf "
        "and <leaf>-pull.pdf (repeatable; rails count from 0)",
    )
    lab.add_argument(
        "--unit",
        action="append",
        default=[],
        metavar="SU",
        help="the same for every rail leaf of scalable unit SU, or with --rail of its rail K "
        "(repeatable)",
    )
    lab.add_argument(
        "--out", type=Path, metavar="DIR", help="where to write (default: build/labels)"
    )
    dr = command(
        "draw",
        _draw,
        help="draw rack elevations and the fabric map (SVG); generated/ is not touched",
    )
    dr.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: build/draw)")
    d = command(
        "diff",
        _diff,
        help="what a change does: hosts, cables, addresses, labels to print (review)",
    )
    d.add_argument(
        "base",
        nargs="?",
        help="the revision to compare from (commit, branch or tag; default: the default "
        "branch, as git knows it: origin/HEAD, else init.defaultBranch, main or master)",
    )
    d.add_argument("head", nargs="?", default="HEAD", help="the revision to compare to")
    d.add_argument("--markdown", type=Path, metavar="FILE", help="default: print to stdout")
    d.add_argument("--json", type=Path, metavar="FILE", help="the report as JSON (schema 2)")
    d.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="the change picture: HEAD's racks and fabric with what changes marked",
    )
    p = command(
        "plan",
        _change_plan,
        help="the rollout of a change: devices in order, files, reloads, rollback, pre-check; "
        "an Ansible playbook",
    )
    p.add_argument("base", help="the revision the devices run now (commit, branch or tag)")
    p.add_argument("head", nargs="?", default="HEAD", help="the revision to roll out")
    p.add_argument(
        "--snapshots",
        type=Path,
        metavar="DIR",
        help="the last audit's report folder or recording: a device whose snapshot is not "
        "what BASE generated is refused",
    )
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="the plan and playbook (default: build/plan)"
    )
    d.add_argument(
        "--share-limit",
        type=float,
        metavar="PERCENT",
        help="flag a change touching more than this share of hosts or cables (default: 10)",
    )


def _plan(repo: Path) -> Plan:
    """`repo/cluster` loaded, checked and planned; no target runs, so the pictures and a
    reprint neither need nor touch generated/. Raises SourceError for bad input."""
    from compiler.load import load
    from compiler.plan import build
    from compiler.validation import check

    return build(check(load(repo / "cluster")))


def _labels(args: argparse.Namespace) -> int:
    from compiler.targets import labels as content
    from compiler.targets import scene
    from draw import labels

    only = [i.strip().upper() for arg in args.only for i in arg.split(",") if i.strip()]
    plan = _plan(args.repo)
    files = labels.sheets(
        content.cabling(plan),
        scene.scene(plan),
        args.stock and LabelStock(args.stock),
        args.rack,
        only,
        Progress("label sheets, racks done"),
        args.rail,
        args.unit,
    )
    out = args.out or args.repo / "build" / "labels"
    # Each PDF replaced whole, so a printer spooling the old one never reads half.
    write_files(out, files, "the label sheets")
    print(f"{out}: {len(files)} PDF(s) written: {', '.join(files)}")
    return EXIT_OK


def _draw(args: argparse.Namespace) -> int:
    from compiler.targets import scene
    from draw import pictures

    files = pictures.pictures(scene.scene(_plan(args.repo)))
    out = args.out or args.repo / "build" / "draw"
    write_files(out, files, "the pictures")
    print(f"{out}: {len(files)} SVG file(s) written (racks/, racks.svg, fabric.svg)")
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    batch()  # before the imports: they build most of what the collector would scan
    from compiler import diff, gitsource
    from draw import review

    share = diff.DEFAULT_SHARE_LIMIT if args.share_limit is None else args.share_limit / 100
    compared = gitsource.diff_revisions(args.repo, args.base, args.head, share)
    report = compared.report
    markdown = review.to_markdown(report)
    outputs = {args.json: diff.to_json(report), args.markdown: markdown}
    if args.html is not None:
        from compiler.targets import scene
        from draw import pages

        scenes = [
            scene.scene(side.compiled.plan) if side.compiled else None for side in compared.sides
        ]
        outputs[args.html] = pages.diff_page(report, *scenes)
    write_files(Path(), {str(p): text for p, text in outputs.items() if p}, "the report")
    if args.markdown is None:
        print(markdown, end="")
    for name, rev in (("BASE", report.base), ("HEAD", report.head)):
        for diagnostic in rev.errors:
            print(f"{name} {rev.ref}: {diagnostic}", file=sys.stderr)
    # Changes are the point of a diff, not a failure; only a side that does not compile is.
    return EXIT_OK if report.compiles else EXIT_INPUT


def _change_plan(args: argparse.Namespace) -> int:
    batch()
    from compiler import ansible, change, gitsource
    from contract import snapshot

    with memo.shared():  # what the two sides agree on is computed once
        sides = [gitsource.compile_revision(args.repo, rev) for rev in (args.base, args.head)]
    # What each commit shipped: its committed generated/ where it has one (its DNS serials
    # continue the committed ones, which a compile from git alone does not). BASE may be a
    # commit this clusterforge no longer compiles: its committed files still say what runs.
    head = gitsource.as_shipped(args.repo, sides[1])
    base = gitsource.as_shipped(args.repo, sides[0], head)
    for name, side, shipped in zip(("BASE", "HEAD"), sides, (base, head), strict=True):
        if shipped is None:
            for diagnostic in side.errors:
                print(f"{name} {side.ref}: {diagnostic}", file=sys.stderr)
        elif side.errors:
            print(
                f"{name} {side.ref}: does not compile with this clusterforge "
                f"({len(side.errors)} problem(s)): its committed generated/ is used",
                file=sys.stderr,
            )
    if base is None or head is None:
        return EXIT_INPUT
    snapshots = snapshot.read(args.snapshots) if args.snapshots else None
    plan = change.plan_change(base, head, sides[0].commit, sides[1].commit, snapshots)
    markdown = change.to_markdown(plan)
    files = {
        "plan.json": change.to_json(plan).encode(),
        "plan.md": markdown.encode(),
        **ansible.files(plan, base, head, head.plan.site.change.user),
    }
    out = args.out or args.repo / "build" / "plan"
    if (out / "plan.json").is_file():  # an earlier plan's: its device files must not linger
        shutil.rmtree(out / "files", ignore_errors=True)
    write_files(out, files, "the change plan")
    print(markdown, end="")
    print(f"{out}: plan.md, plan.json, {ansible.APPLY}, {ansible.ROLLBACK}, {ansible.INVENTORY}")
    # A refused device is a check that failed: its part of the change waits for a look.
    return EXIT_CHECK if plan.refused else EXIT_OK


# The options of a live run: meaningless with --replay, so refused there.
