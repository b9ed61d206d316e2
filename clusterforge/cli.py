"""The `clusterforge` command: parse arguments, call one library function, print its result.
An error's exit code is its class's (`exit_code`, see common/errors.py), mapped once in
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

The commands themselves are in clusterforge/commands/, and import what they need when they
run, so `compile` does not pay for SSH or git.
"""

from __future__ import annotations

import argparse
import gc
import os
import select
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from clusterforge.commands import Run, audit, batch_ran, build, lab, review
from common.errors import EXIT_BUG, ClusterforgeError

EXIT_PIPE = 128 + 13  # SIGPIPE's: see the docstring


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

    for group in (build, review, audit, lab):
        group.add(command)
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
    if batch_ran():
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
