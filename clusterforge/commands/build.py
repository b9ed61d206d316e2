"""The commands that build: `init`, `import`, `compile`, `bundle`, `validate`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clusterforge.commands import Command, batch, write_files
from common.errors import EXIT_CHECK, EXIT_INPUT, EXIT_OK, InputError

if TYPE_CHECKING:
    from compiler.pipeline import Compiled


def add(command: Command) -> None:
    """Declare this module's commands."""
    i = command(
        "init",
        _init,
        help="write a small valid cluster/ into DIR to start your own from",
    )
    i.add_argument("dir", type=Path, metavar="DIR", help="the new repository (created if need be)")
    i.add_argument("--racks", type=int, default=1, metavar="N", help="GPU racks (default: 1)")
    i.add_argument(
        "--per-rack", type=int, default=4, metavar="M", help="GPU servers per rack (default: 4)"
    )
    i.add_argument("--name", default="site", help="the site's name (default: site)")
    i.add_argument(
        "--rails",
        type=int,
        metavar="K",
        help="K HCAs a server, one per rail, on a rail-optimised fabric of scalable units "
        "of 32 servers (8 racks of 4); --racks and --per-rack do not apply",
    )
    i.add_argument(
        "--units",
        type=int,
        default=1,
        metavar="U",
        help="with --rails: scalable units, a power of two (default: 1); two-tier while a "
        "spine holds every leaf (8 units of 8 rails), three-tier beyond",
    )
    i.add_argument(
        "--audit-key",
        type=Path,
        metavar="FILE.pub",
        help="the drift audit's public key for site.yaml (default: a placeholder to replace)",
    )
    im = command(
        "import",
        _import,
        help="fill serials, MACs and GUIDs into the rack files from a racking sheet (CSV) "
        "or a drift report",
    )
    given = im.add_mutually_exclusive_group(required=True)
    given.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="columns rack, u, serial, guid and one per NIC (eno1, bmc, ...); see docs/import.md",
    )
    given.add_argument(
        "--leases",
        type=Path,
        metavar="FILE",
        help="ISC dhcpd.leases of the DHCP server the hosts use today: their MACs by address",
    )
    given.add_argument(
        "--ibnetdiscover",
        type=Path,
        metavar="FILE",
        help="the output of `ibnetdiscover`: switch and HCA GUIDs by planned port",
    )
    given.add_argument(
        "--audit",
        type=Path,
        metavar="REPORT",
        help="a drift audit's report.json (or its folder): the MACs and HCA GUIDs it saw "
        "instead of the planned ones, i.e. replaced parts",
    )
    im.add_argument("--dry-run", action="store_true", help="report, change nothing")
    c = command("compile", _compile, help="turn cluster/ into generated/ (commit the two together)")
    c.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if generated/ is stale"
    )
    c.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="build into DIR instead, with the root password hash from the environment or "
        "the file provisioning.yaml names (for the provisioning server; never commit it)",
    )
    c.add_argument("--allow-placeholders", action="store_true", help=_ALLOW_HELP)
    b = command(
        "bundle",
        _bundle,
        help="each host's and switch's files as an overlay DIR/<name>/ plus DIR/<name>.json",
    )
    b.add_argument("--out", type=Path, required=True, metavar="DIR")
    b.add_argument("--host", action="append", default=[], metavar="H", help="only host or switch H")
    b.add_argument(
        "--role", action="append", default=[], metavar="R", help="only role R (a switch's: its OS)"
    )
    b.add_argument("--allow-placeholders", action="store_true", help=_ALLOW_HELP)
    command("validate", _validate, help="check cluster/ for mistakes; write nothing")


def _compile(args: argparse.Namespace) -> int:
    batch()  # before the imports: they build most of what the collector would scan
    from compiler import output, pipeline

    # Secrets (the root password hash) are read only for a build outside the repository:
    # generated/ is committed, so it always carries the placeholder.
    generated = args.repo / "generated"
    if args.out is not None and args.out.resolve() == generated:
        raise InputError("--out names generated/, which git tracks")
    compiled = pipeline.compile_repo(args.repo, os.environ if args.out else None)
    generated = args.out or generated
    name = args.out or "generated/"
    if args.out and not args.check:
        _refuse_placeholders(compiled, args.allow_placeholders)
    if args.check:
        # A check answers one question; notices about how to build belong to a build.
        difference = output.compare(generated, compiled.files)
        if difference:
            print(f"{name} is stale ({difference.summary()}); run `clusterforge compile`:",
                  file=sys.stderr)  # fmt: skip
            for line in difference.lines():
                print(f"  {line}", file=sys.stderr)
            return EXIT_CHECK
        print(f"{name} is up to date ({len(compiled.files)} files)")
        return EXIT_OK
    changed = output.write(generated, compiled.files)
    # Said once, when the tree is written, not on every compile that finds it current.
    if changed:
        for notice in compiled.notices:
            print(f"clusterforge: {notice}", file=sys.stderr)
        print(f"{name}: {changed.summary()} of {len(compiled.files)}")
    else:
        print(f"{name}: up to date ({len(compiled.files)} files, none changed)")
    return EXIT_OK


class PlaceholderError(InputError):
    """Raised when installable output would carry a placeholder secret: a host installed
    from it would have no root login, no alert webhooks, no BMC readings."""

    def __init__(self, placeholders: Sequence[str]) -> None:
        super().__init__("refusing installable output with placeholder secrets")
        self.placeholders = placeholders

    def lines(self) -> list[str]:
        return [
            f"clusterforge: {self}:",
            *(f"  {line}" for line in self.placeholders),
            "clusterforge: provide each (a variable or a file outside the repository), or pass "
            "--allow-placeholders for output that will not be installed",
        ]


def _refuse_placeholders(compiled: Compiled, allowed: bool) -> None:
    """Raises PlaceholderError unless the output carries no placeholder or it is `allowed`."""
    if compiled.placeholders and not allowed:
        raise PlaceholderError(compiled.placeholders)


def _bundle(args: argparse.Namespace) -> int:
    from compiler import bundle, output, pipeline

    # A bundle installs what generated/ holds in git: never from a half-written tree.
    output.verify(args.repo / "generated")
    compiled = pipeline.compile_repo(args.repo, os.environ)
    _refuse_placeholders(compiled, args.allow_placeholders)
    for notice in compiled.notices:
        print(f"clusterforge: {notice}", file=sys.stderr)
    files = bundle.bundles(compiled, args.host, args.role)
    bundle.write(args.out, files)
    hosts = sorted({path.split("/", 1)[0].removesuffix(".json") for path in files})
    print(f"{args.out}: bundles of {len(hosts)} host(s) and switch(es), {len(files)} files")
    return EXIT_OK


# What an adopted repository ignores: built label sheets, audit reports, virtualenvs.
_GITIGNORE = "/build/\n/.venv/\n__pycache__/\n/.generated.lock\n"


def _init(args: argparse.Namespace) -> int:
    from compiler import generate

    target = args.dir.resolve()
    if (target / "cluster").exists():
        raise InputError(f"{target / 'cluster'} exists; init never overwrites")
    key = generate.PLACEHOLDER_AUDIT_KEY
    if args.audit_key is not None:
        try:
            key = args.audit_key.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"cannot read --audit-key: {exc}") from None
    try:
        if args.rails is not None:
            from compiler.generate_rails import generate_rails

            tree = generate_rails(args.units, name=args.name, rails=args.rails, audit_key=key)
        else:
            tree = generate.generate(
                args.racks * args.per_rack,
                name=args.name,
                per_rack=args.per_rack,
                audit_key=key,
                as_bought=True,
            )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    files = {f"cluster/{path}": text for path, text in sorted(tree.items())}
    if not (target / ".gitignore").exists():
        files[".gitignore"] = _GITIGNORE
    write_files(target, files, "the new repository")
    three = "units_per_pod" in tree.get("fabric.yaml", "")
    shape = (
        f"{args.units} scalable unit(s) of {args.rails}-rail servers, their rail leaves in a "
        + (
            "network rack each with their spine group's share of spines, plus core racks "
            "and a service rack (three-tier)"
            if three
            else "network rack each, plus a spine and a service rack"
        )
        if args.rails is not None
        else f"{args.racks} GPU rack(s) of {args.per_rack} servers, plus a network and a "
        "service rack"
    )
    print(
        f"{target}/cluster: {len(tree)} files, {shape}.\n"
        "The MACs, GUIDs and serials are placeholders (02:...): replace them with your "
        "hardware's, by hand or with `clusterforge import`"
        + ("" if args.audit_key else "; so is the audit's key in site.yaml (init --audit-key)")
        + ". Next:\n"
        f"  cd {args.dir} && git init && clusterforge compile && git add . && git commit"
    )
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from compiler import importer, plan, validation
    from compiler.load import load

    source = load(args.repo / "cluster")
    cluster = validation.check(source)
    p = plan.build(cluster)
    try:
        if args.csv is not None:
            text = args.csv.read_text(encoding="utf-8-sig")
            facts, conflicts = importer.from_csv(text, args.csv.name, p)
        elif args.leases is not None:
            text = args.leases.read_text(encoding="utf-8")
            facts, conflicts = importer.from_leases(text, args.leases.name, p), []
        elif args.ibnetdiscover is not None:
            from compiler import discovered

            text = args.ibnetdiscover.read_text(encoding="utf-8")
            facts, conflicts = discovered.facts(text, args.ibnetdiscover.name, p)
        else:
            report = args.audit / "report.json" if args.audit.is_dir() else args.audit
            facts = importer.from_report(report.read_text(encoding="utf-8"), report.name)
            conflicts = []
    except (OSError, UnicodeDecodeError, ValueError, importer.ImportError_) as exc:
        raise InputError(str(exc)) from None
    changes, conflicts = importer.resolve(cluster, source, p, facts, conflicts)
    for change in changes:
        print(change)
    for conflict in conflicts:
        print(conflict, file=sys.stderr)
    files = [] if args.dry_run else importer.apply(args.repo, changes)
    done = "would change" if args.dry_run else f"changed in {len(files)} rack file(s)"
    print(
        f"{len(changes)} value(s) {done}; {len(conflicts)} conflict(s) left as they were"
        + ("" if args.dry_run or not changes else "; now run `clusterforge compile`")
    )
    return EXIT_INPUT if conflicts else EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    batch()  # before the imports: they build most of what the collector would scan
    from compiler import plan
    from compiler.load import load
    from compiler.validation import check  # not the pipeline: no target is imported

    cluster = check(load(args.repo / "cluster"))
    # Counted from the model and the checked cable rules (a host per node, a cable per
    # wire): a validation has no need of the plan, whose cable list alone costs as much.
    hosts = sum(len(rack.nodes) for rack in cluster.racks)
    switches = sum(len(rack.switches) for rack in cluster.racks)
    print(
        f"cluster/ is valid: {hosts} hosts, {switches} switches, "
        f"{len(plan.wires(cluster))} cables; {plan.room(cluster)}"
    )
    for warning in plan.oversized(cluster):
        print(f"clusterforge: warning: {warning}", file=sys.stderr)
    return EXIT_OK


_ALLOW_HELP = (
    "write it even with a secret (root hash, webhook, BMC password) left as its placeholder: "
    "for review, never for installing"
)
