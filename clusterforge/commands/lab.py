"""The `lab` command: the compiled cluster played on loopback for the audit."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from clusterforge.commands import Command
from common.errors import EXIT_CHECK, EXIT_OK, Diagnostic, SourceError


def add(command: Command) -> None:
    """Declare this module's commands."""
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
    from common.hostlist import expand

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
