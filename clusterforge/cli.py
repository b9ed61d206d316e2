"""The `clusterforge` command: parse arguments, call one library function, print its result.
An error's exit code is its class's (`exit_code`, see compiler/errors.py), mapped once in
`main`; a command returns a code only for a result (a stale tree, drift, conflicts).

Exit codes:
  0  success (compile wrote or found generated/ up to date; validate found no problem)
  1  a check failed: `compile --check` found generated/ stale
  2  bad input: problems in cluster/, each printed as path:line:col: rule: message
  3  internal error (a bug: please report it with the message)
  4  the output could not be written (a full disk, a read-only folder); generated/ is left
     as it was, or without its MANIFEST.json when a write of changed files was cut short
`accept` has its own: 0 everything planned passed; 1 something failed; 2 nothing failed but
something planned was not tested; 4 no plan to judge by (generated/acceptance/ missing).
`audit` has its own: 0 every host and the fabric as expected; 1 drift; 2 some host or the
fabric could not be collected (unreachable or error; wins over 1); 4 the audit could not run at
all (no generated/expected/, a broken recording, an unusable SSH key, known_hosts or inventory),
so a scheduled run fails loudly instead of reporting a fleet it never looked at.
141 (any command): the reader of its output went away (`clusterforge ... | head`), the status a
shell gives a program SIGPIPE killed; not a bug.

Subcommands import what they need when they run, so `compile` does not pay for SSH or git.
"""

from __future__ import annotations

import argparse
import gc
import os
import select
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from compiler import atomic
from compiler.errors import (
    EXIT_BUG,
    EXIT_CHECK,
    EXIT_INPUT,
    EXIT_OK,
    ClusterforgeError,
    Diagnostic,
    InputError,
    OutputError,
    SourceError,
)
from compiler.kinds import LabelStock

if TYPE_CHECKING:
    from compiler.pipeline import Compiled

EXIT_PIPE = 128 + 13  # SIGPIPE's: see the docstring


class Progress:
    """`what: done/total` redrawn in place on stderr, only when stderr is a terminal and not
    in CI: a log file or a CI console gets no carriage returns, only the final summary."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.shown = self.stream.isatty() and os.environ.get("CI") != "true"

    def __call__(self, done: int, total: int) -> None:
        if self.shown:
            end = "\n" if done == total else ""
            self.stream.write(f"\r{self.what}: {done}/{total}{end}")
            self.stream.flush()


_batch_run = False  # a compiling command ran: see `run`


def _batch() -> None:
    """A compile builds a few hundred thousand objects that live until exit, with no reference
    cycles to speak of; the cyclic collector rescanning them made a 2,000-server compile a
    fifth slower (and grow worse than linearly). A one-shot command does without it."""
    global _batch_run
    _batch_run = True
    gc.disable()
    # pydantic looks for plugins (its experimental observability hooks) by reading the entry
    # points of every installed distribution when it builds the first validator: a few
    # percent of a cold compile, for models no plugin has business with. PYDANTIC_DISABLE_PLUGINS
    # is pydantic's own switch (pydantic#8767); one set by the operator wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _compile(args: argparse.Namespace) -> int:
    _batch()  # before the imports: they build most of what the collector would scan
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
    print(f"{args.out}: bundles of {len(hosts)} host(s), {len(files)} files")
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
    _write_files(target, files, "the new repository")
    print(
        f"{target}/cluster: {len(tree)} files, {args.racks} GPU rack(s) of {args.per_rack} "
        "servers, plus a network and a service rack.\n"
        "The MACs, GUIDs and serials are placeholders (02:...): replace them with your "
        "hardware's, by hand or with `clusterforge import`"
        + ("" if args.audit_key else "; so is the audit's key in site.yaml (init --audit-key)")
        + ". Next:\n"
        f"  cd {args.dir} && git init && clusterforge compile && git add . && git commit"
    )
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from compiler import importer, pipeline, plan
    from compiler.load import load

    source = load(args.repo / "cluster")
    cluster = pipeline.check(source)
    p = plan.build(cluster)
    try:
        if args.csv is not None:
            text = args.csv.read_text(encoding="utf-8-sig")
            facts, conflicts = importer.from_csv(text, args.csv.name, p)
        elif args.leases is not None:
            text = args.leases.read_text(encoding="utf-8")
            facts, conflicts = importer.from_leases(text, args.leases.name, p), []
        elif args.ibnetdiscover is not None:
            from audits import discovered

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
    _batch()  # before the imports: they build most of what the collector would scan
    from compiler import pipeline, plan
    from compiler.load import load

    cluster = pipeline.check(load(args.repo / "cluster"))
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


def _labels(args: argparse.Namespace) -> int:
    from draw import labels

    only = [i.strip().upper() for arg in args.only for i in arg.split(",") if i.strip()]
    files = labels.sheets_for_repo(
        args.repo,
        args.stock and LabelStock(args.stock),
        args.rack,
        only,
        Progress("label sheets, racks done"),
    )
    out = args.out or args.repo / "build" / "labels"
    # Each PDF replaced whole, so a printer spooling the old one never reads half.
    _write_files(out, files, "the label sheets")
    print(f"{out}: {len(files)} PDF(s) written: {', '.join(files)}")
    return EXIT_OK


def _write_files(out: Path, files: Mapping[str, str] | Mapping[str, bytes], what: str) -> None:
    """Write each file under `out` whole (a reader never sees half of one); raises
    OutputError, the set-up's like any output that cannot be written."""
    try:
        for name, data in files.items():
            atomic.replace(out / name, data)
    except OSError as exc:
        raise OutputError(f"cannot write {what}: {exc}") from None


def _draw(args: argparse.Namespace) -> int:
    from draw import pictures

    files = pictures.pictures_for_repo(args.repo)
    out = args.out or args.repo / "build" / "draw"
    _write_files(out, files, "the pictures")
    print(f"{out}: {len(files)} SVG file(s) written (racks/, racks.svg, fabric.svg)")
    return EXIT_OK


def _diff(args: argparse.Namespace) -> int:
    _batch()  # before the imports: they build most of what the collector would scan
    from compiler import diff, gitsource
    from draw import review

    share = diff.DEFAULT_SHARE_LIMIT if args.share_limit is None else args.share_limit / 100
    compared = gitsource.diff_revisions(args.repo, args.base, args.head, share)
    report = compared.report
    markdown = review.to_markdown(report)
    outputs = {args.json: diff.to_json(report), args.markdown: markdown}
    if args.html is not None:
        from draw import pages

        plans = [side.compiled.plan if side.compiled else None for side in compared.sides]
        outputs[args.html] = pages.diff_page(report, *plans)
    _write_files(Path(), {str(p): text for p, text in outputs.items() if p}, "the report")
    if args.markdown is None:
        print(markdown, end="")
    for name, rev in (("BASE", report.base), ("HEAD", report.head)):
        for diagnostic in rev.errors:
            print(f"{name} {rev.ref}: {diagnostic}", file=sys.stderr)
    # Changes are the point of a diff, not a failure; only a side that does not compile is.
    return EXIT_OK if report.compiles else EXIT_INPUT


# The options of a live run: meaningless with --replay, so refused there.
_LIVE = (
    "ssh_key",
    "known_hosts",
    "inventory",
    "record",
    "user",
    "concurrency",
    "timeout",
    "probe_timeout",
    "fabric_from",
    "max_output",
    "key_passphrase_env",
    "key_passphrase_file",
    "ssh_agent",
)


def _audit(args: argparse.Namespace) -> int:
    from audits import pipeline as audit
    from audits import ssh
    from audits.model import AuditError
    from draw.report import Renderer

    # The documents come from `draw`, handed in: `audits` never imports it.
    renderer = Renderer(args.repo)
    # Inside the repository but under build/, which git ignores: a report is not source.
    args.out = args.out or args.repo / "build" / "audit-report"
    given = {k: v for k, v in vars(args).items() if v is not None and k != "out"}
    live = [f"--{o.replace('_', '-')}" for o in _LIVE if o in given]
    part = (args.shard, args.hosts)
    if args.merge and args.merge[0] == "history":
        return _history(args.merge)
    if args.merge:
        if args.merge[0] != "merge" or len(args.merge) < 2:
            raise AuditError(
                "usage: clusterforge audit merge DIR... [--out DIR] | audit history REPORT..."
            )
        others = [o for o in (*live, "replay", "shard", "hosts", "now") if o in given]
        if others:
            raise AuditError(
                "audit merge takes report folders, --out, --textfile and --previous only"
            )
        report = audit.merge(
            [Path(d) for d in args.merge[1:]],
            args.out,
            args.textfile,
            args.previous,
            renderer=renderer,
        )
    elif args.replay is not None:
        if live:
            raise AuditError(f"{', '.join(live)}: for live collection, not with --replay")
        report = audit.audit_replay(
            args.repo,
            args.replay,
            args.out,
            args.textfile,
            args.now,
            part,
            args.previous,
            renderer=renderer,
        )
    elif (args.ssh_key is None and not args.ssh_agent) or args.known_hosts is None:
        raise AuditError(
            "live collection needs --ssh-key FILE (or --ssh-agent) and --known-hosts FILE "
            "(an unknown host key is never accepted); or audit a recording with --replay DIR"
        )
    else:
        agent = None
        if args.ssh_agent:
            agent = os.environ.get("SSH_AUTH_SOCK")
            if not agent:
                raise AuditError("--ssh-agent: $SSH_AUTH_SOCK names no agent")
        bounds = {
            k: given[k]
            for k in ("user", "concurrency", "timeout", "probe_timeout", "max_output")
            if k in given
        }
        options = ssh.SshOptions(
            args.ssh_key,
            args.known_hosts,
            passphrase_env=args.key_passphrase_env,
            passphrase_file=args.key_passphrase_file,
            agent=agent,
            **bounds,
        )
        record = args.record or args.out / "recording"
        report = ssh.audit_live(
            args.repo,
            options,
            args.inventory,
            args.fabric_from,
            record,
            args.out,
            args.textfile,
            args.now,
            part,
            Progress("audit, hosts done"),
            args.previous,
            renderer=renderer,
        )
    status = ", ".join(f"{n} {s}" for s, n in report["summary"]["status"].items())
    print(f"{args.out}: {status}; fabric {report['summary']['fabric']}")
    return report["exit_code"]


def _accept(args: argparse.Namespace) -> int:
    from audits.accept import accept
    from draw.report import readiness

    report = accept(args.repo, args.results, args.out, readiness, args.textfile)
    s = report["summary"]
    nodes = ", ".join(f"{n} {status}" for status, n in s["nodes"].items())
    cables = ", ".join(f"{n} {status}" for status, n in s["cables"].items())
    suspects = f"; suspect cables: {', '.join(s['suspects'])}" if s["suspects"] else ""
    print(f"{args.out}: nodes {nodes}; cables {cables}{suspects}")
    code: int = report["exit_code"]
    return code


def _history(words: list[str]) -> int:
    """`audit history REPORT...`: what changed along a chain of reports, oldest first."""
    from audits import history, pipeline
    from audits.model import AuditError
    from draw.report import markdown

    if words[0] != "history" or len(words) < 2:
        raise AuditError("usage: clusterforge audit history REPORT.json... (oldest first)")
    reports: list[Any] = [pipeline.read_previous(Path(w)) for w in words[1:]]
    last = reports[-1] | {"history": history.chain(reports)}
    print(markdown.changes(last) or "One report: nothing to compare it with.")
    return EXIT_OK


class FaultsError(SourceError):
    """A lab's faults file that cannot be read: its problems, located in it."""

    def __init__(self, diagnostics: list[Diagnostic], faults: Path | None) -> None:
        super().__init__(diagnostics)
        self.faults = faults

    def lines(self) -> list[str]:
        return [
            *map(str, self.diagnostics),
            f"{len(self.diagnostics)} problem(s) in {self.faults}; no lab started",
        ]


def _lab(args: argparse.Namespace) -> int:
    from clusterforge.lab import lab
    from clusterforge.lab.ibsim import LabError
    from compiler.hostlist import expand

    try:
        if args.action == "up":
            hosts = None
            if args.hosts is not None:
                try:
                    hosts = expand(args.hosts)
                except ValueError:
                    raise LabError(
                        f"--hosts {args.hosts!r} is not a host list like gpu[001-004]"
                    ) from None
            up = lab.up(args.repo, args.dir, hosts, args.faults)
            down = f", {len(up.down)} down ({', '.join(up.down)})" if up.down else ""
            print(f"lab up in {up.state}: {len(up.hosts)} hosts{down}; audit it with:")
            print(f"  clusterforge {shlex.join(_here(up.audit_args()))}")
            return EXIT_OK
        if args.action == "down":
            removed = lab.down(args.dir)
            print("lab down: " + ("; ".join(removed) if removed else "there was no lab"))
            return EXIT_OK
        found = lab.status(args.dir)
        if found is None:
            print(f"no lab in {args.dir or lab.default_state()}")
            return EXIT_CHECK
        dead = [what for what, alive in found.processes.items() if not alive]
        state = "up" if found.up else f"broken ({', '.join(dead) or 'never came up'} gone)"
        down = f", {len(found.down)} down ({', '.join(found.down)})" if found.down else ""
        print(f"lab {state} in {found.state}: {len(found.hosts)} hosts{down}")
        if found.audit:
            print(f"  clusterforge {shlex.join(_here(found.audit))}")
        return EXIT_OK if found.up else EXIT_CHECK
    except SourceError as exc:  # the faults file
        raise FaultsError(exc.diagnostics, args.faults) from None


def _here(argv: list[str]) -> list[str]:
    """`argv` without `-C DIR` when DIR is where the user stands."""
    if argv[:1] == ["-C"] and Path(argv[1]) == Path.cwd().resolve():
        return argv[2:]
    return argv


def _instant(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not ISO 8601 with a UTC offset")
    return when


def _shard(text: str) -> tuple[int, int]:
    from audits.shard import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_ABOUT = """\
Compile your cluster's YAML (cluster/) into the configs its services read (generated/), review
what a change does before it merges, print the cable labels, and audit what the machines run."""

_EPILOG = """\
start:
  clusterforge init mysite --racks 2 --per-rack 8
                                       a small valid cluster/ of your own to grow

daily work:
  clusterforge compile                 after editing cluster/; commit generated/ with it
  clusterforge diff                    what your branch changes against the default branch
  clusterforge labels --rack r07       label sheets for the technicians (build/labels/)
  clusterforge bundle --out DIR        each host's files, for the provisioning server
  clusterforge audit --ssh-key K --known-hosts F
                                       what the fleet really runs vs generated/expected/

Run it anywhere inside the repository, or name it with -C DIR (before or after the command).

exit codes: 0 ok; 1 a check failed (stale generated/, drift); 2 bad input, each problem as
file:line:col: rule: message (audit: a host could not be collected); 3 a bug, please report
it; 4 the output could not be written or the command could not run at all (no generated/,
an unusable key). docs/ has the how-tos and the field reference."""


def _version() -> str:
    # Imported here: importlib.metadata brings email, zipfile and csv, a tenth of a cold start.
    from importlib import metadata

    try:
        return metadata.version("clusterforge")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """--version, the version looked up only when asked for (see `_version`)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"clusterforge {_version()}")  # on stdout, as argparse's own version action
        parser.exit()


def _repo_option(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument(
        "-C",
        dest="repo",
        type=Path,
        default=default,
        metavar="DIR",
        help="the repository to work on (default: the one this folder is in)",
    )


Run = Callable[[argparse.Namespace], int]  # a command: its parsed arguments to its exit code

_ALLOW_HELP = (
    "write it even with a secret (root hash, webhook, BMC password) left as its placeholder: "
    "for review, never for installing"
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="clusterforge",
        description=_ABOUT,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    _repo_option(top, None)
    # -C after the subcommand too; SUPPRESS keeps a subcommand from resetting the top's value.
    common = argparse.ArgumentParser(add_help=False)
    _repo_option(common, argparse.SUPPRESS)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Run, help: str) -> argparse.ArgumentParser:
        """A command, with the options every command takes (`common`)."""
        made = sub.add_parser(name, parents=[common], help=help)
        made.set_defaults(run=run)
        return made

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
        help="each host's files as a root-filesystem overlay DIR/<host>/ plus DIR/<host>.json",
    )
    b.add_argument("--out", type=Path, required=True, metavar="DIR")
    b.add_argument("--host", action="append", default=[], metavar="H", help="only host H")
    b.add_argument("--role", action="append", default=[], metavar="R", help="only role R")
    b.add_argument("--allow-placeholders", action="store_true", help=_ALLOW_HELP)
    command("validate", _validate, help="check cluster/ for mistakes; write nothing")
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
    d.add_argument(
        "--share-limit",
        type=float,
        metavar="PERCENT",
        help="flag a change touching more than this share of hosts or cables (default: 10)",
    )
    a = command(
        "audit",
        _audit,
        help="what the machines and the fabric really run, against generated/expected/",
    )
    a.add_argument(
        "merge",
        nargs="*",
        metavar="merge DIR | history REPORT",
        help="`audit merge DIR...`: fold the report folders of shards 1..N into one report; "
        "`audit history R1.json R2.json ...`: what changed along reports, oldest first",
    )
    a.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="audit shard K of N: every Nth rack by name (shard 1 also scans the fabric)",
    )
    a.add_argument("--hosts", metavar="SPEC", help="only these hosts, e.g. gpu[001-010],login01")
    a.add_argument(
        "--replay", type=Path, metavar="DIR", help="audit a recording (audits/collect.py layout)"
    )
    a.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where the report goes (default: build/audit-report/ in the repository, which "
        "git ignores)",
    )
    live = a.add_argument_group("live collection over SSH (without --replay)")
    live.add_argument("--ssh-key", type=Path, metavar="FILE", help="private key to log in with")
    live.add_argument(
        "--known-hosts", type=Path, metavar="FILE", help="the hosts' keys; no other is accepted"
    )
    live.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="JSON host -> address[:port] (default: each host's mgmt address, port 22)",
    )
    live.add_argument(
        "--key-passphrase-env",
        metavar="NAME",
        help="the environment variable holding --ssh-key's passphrase (an encrypted key)",
    )
    live.add_argument(
        "--key-passphrase-file", type=Path, metavar="FILE", help="or the file holding it"
    )
    live.add_argument(
        "--ssh-agent",
        action="store_true",
        default=None,
        help="log in with the keys of the agent at $SSH_AUTH_SOCK (interactive use)",
    )
    live.add_argument(
        "--user",
        metavar="NAME",
        help="login name: the account of generated/access/ (default: clusterforge-audit)",
    )
    live.add_argument(
        "--max-output",
        type=int,
        metavar="BYTES",
        help="bytes kept of one probe's output; more makes the host error (default: 16 MiB)",
    )
    live.add_argument("--concurrency", type=int, metavar="N", help="hosts at once (default: 32)")
    live.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="per host, all probes (default: 120)"
    )
    live.add_argument(
        "--probe-timeout",
        type=float,
        metavar="SECONDS",
        help="per probe, within the host's (default: 60); a probe that hangs fails alone, "
        "the host's other answers are kept",
    )
    live.add_argument(
        "--fabric-from",
        metavar="HOST",
        help="the host to scan the fabric from (default: the first subnet-manager host)",
    )
    live.add_argument(
        "--record", type=Path, metavar="DIR", help="the recording (default: OUT/recording)"
    )
    a.add_argument("--textfile", type=Path, metavar="PATH", help="Prometheus metrics to write")
    a.add_argument(
        "--previous",
        type=Path,
        metavar="REPORT",
        help="the last run's report.json: say what is new, resolved, flapping since",
    )
    a.add_argument(
        "--now",
        type=_instant,
        metavar="ISO-8601",
        help="the clock for rollout windows (default: when the state was collected)",
    )
    acc = command(
        "accept",
        _accept,
        help="judge an acceptance run's logs: per-node and per-cable readiness",
    )
    acc.add_argument("results", type=Path, metavar="RESULTS_DIR", help="the run's logs")
    acc.add_argument("--out", type=Path, default=Path("acceptance-report"), metavar="DIR")
    acc.add_argument("--textfile", type=Path, metavar="PATH", help="Prometheus metrics to write")
    lb = command(
        "lab",
        _lab,
        help="play the compiled cluster on this machine (sshd and ibsim on loopback) to audit",
    )
    lb.add_argument("action", choices=["up", "down", "status"])
    lb.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="the lab's state folder (default: $XDG_RUNTIME_DIR/clusterforge-lab, else "
        "/tmp/clusterforge-lab-UID)",
    )
    lb.add_argument(
        "--hosts",
        metavar="SPEC",
        help="up: only these hosts (gpu[001-004],login01), and the subnet managers",
    )
    lb.add_argument(
        "--faults", type=Path, metavar="FILE", help="up: stage these faults (YAML list)"
    )
    return top


def find_repo(start: Path) -> Path:
    """The repository `start` is in: the nearest folder, `start` or above, holding cluster/.
    `start` itself when there is none, so the error names the folder the operator meant."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "cluster").is_dir():
            return folder
    return start


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.repo = find_repo(args.repo or Path.cwd())
    collecting = gc.isenabled()  # main() also runs inside test sessions: leave gc as found
    try:
        code: int = args.run(args)
    except ClusterforgeError as exc:  # the one place an error becomes an exit code
        print("\n".join(exc.lines()), file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # a bug: exit 3 as documented, never 1 (drift)
        if isinstance(exc, BrokenPipeError) and _reader_gone():
            return EXIT_PIPE  # `| head` had what it wanted; a lab's pipe to ibsim is a bug
        print(f"clusterforge: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_BUG
    finally:
        if collecting:
            gc.enable()
    return code


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError):  # no file behind stdout (a test capturing it)
        return False


def run() -> NoReturn:
    """The process's entry point (the `clusterforge` command, `python -m clusterforge.cli`).
    After a compiling command all that is left is freeing what it built, object by object,
    which the kernel does at once with the process: its output flushed, it exits without the
    interpreter's teardown (a tenth of a cold `compile --check`). Other commands, which may
    have threads, children or log handlers to close, exit the ordinary way. Output a closed
    pipe (`| head`) did not take goes to /dev/null, so no flush at exit complains of it (the
    way the Python docs' note on SIGPIPE does it)."""
    try:
        code = main()
    except SystemExit as done:  # argparse exits by itself: --help, --version, a usage error
        if not isinstance(done.code, int | None):
            raise
        code = done.code or 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = EXIT_PIPE
        if code == EXIT_PIPE:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    if _batch_run:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
