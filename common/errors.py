"""The one error root of clusterforge, and the located diagnostics every stage reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name nearest `name`, for a typo's "did you mean" (difflib is imported only
    when there is a typo: not on every start)."""
    from difflib import get_close_matches

    return next(iter(get_close_matches(name, sorted(known), n=1)), None)


def quote(value: object, limit: int = 60) -> str:
    """`value` as a message quotes it: its repr, cut to `limit` characters with the length
    said, so a hostile or mistaken value (a whole file read as one key) never floods a
    terminal or a log; the repr escapes line breaks and control characters."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{text[:limit]}...{size}"


class Location(NamedTuple):
    """A place in a source file: 1-based line and column, as editors count them. A named
    tuple (ordered as file, line, column): loading a cluster makes one for every key and item,
    and a frozen dataclass's `__init__` takes five times as long."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem found in `cluster/`: where, which rule, and what is wrong; `consequences`
    are the problems that only follow from it (fixing it fixes them), printed under it. The
    rule is one of `common.rules.Rule`'s, or of the own vocabulary of another input read the
    same way (the lab's faults file)."""

    location: Location
    rule: StrEnum
    message: str
    consequences: tuple[Diagnostic, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.location}: {self.rule}: {self.message}"

    def lines(self, shown: int = 3) -> list[str]:
        """The diagnostic, then up to `shown` of its consequences indented, then a count."""
        out = [str(self)]
        if self.consequences:
            n = len(self.consequences)
            more = "" if n <= shown else f" {n} problems; the first {shown}"
            out.append(f"    which also causes{more}:")
            out += [f"      {c}" for c in self.consequences[:shown]]
            if n > shown:
                out.append(f"      ... and {n - shown} more, gone once this one is fixed")
        return out


# The process's exit codes (docs/exit-codes.md). Each error class carries its own as
# `exit_code`, so the command line maps an error to its code in one place.
EXIT_OK, EXIT_CHECK, EXIT_INPUT, EXIT_BUG, EXIT_SETUP = 0, 1, 2, 3, 4


class ClusterforgeError(Exception):
    """Root of every error clusterforge raises on purpose (bad input, a failed stage). One
    that names no other exit code is a bug's: a stage that should not have failed."""

    exit_code = EXIT_BUG

    def lines(self) -> list[str]:
        """What the command line prints of it on stderr."""
        bug = "internal error: " if self.exit_code == EXIT_BUG else ""
        return [f"clusterforge: {bug}{self}"]


class InputError(ClusterforgeError):
    """Raised for bad input outside `cluster/`: an option's value, a file named on the
    command line, a selection that selects nothing."""

    exit_code = EXIT_INPUT


class SetupError(ClusterforgeError):
    """Raised when a command cannot run at all in this set-up (a file it needs missing,
    unreadable or not what a compile wrote): the operator's to fix, not a bug."""

    exit_code = EXIT_SETUP


class SourceError(ClusterforgeError):
    """Raised when `cluster/` cannot be compiled; carries every diagnostic found, sorted."""

    exit_code = EXIT_INPUT

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(diagnostics)
        super().__init__("\n".join(line for d in self.diagnostics for line in d.lines()))

    @property
    def count(self) -> int:
        """Problems found, the folded consequences included."""
        return sum(1 + len(d.consequences) for d in self.diagnostics)

    def lines(self) -> list[str]:
        follow = self.count - len(self.diagnostics)
        also = f" (and {follow} that follow from them)" if follow else ""
        return [
            *(line for d in self.diagnostics for line in d.lines()),
            f"{len(self.diagnostics)} problem(s) in cluster/{also}; generated/ untouched",
        ]


class TargetError(ClusterforgeError):
    """Raised when a target cannot render (a template bug, never bad input)."""


class OutputError(SetupError):
    """Raised when output (`generated/`, a build folder, a report) cannot be written, or
    `generated/` read back: a full disk, a read-only or missing folder."""


class RegistryError(ClusterforgeError):
    """Raised when a registry gets a name twice, or is asked for a name it does not hold."""
