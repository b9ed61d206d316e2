"""The one error root of clusterforge, and the located diagnostics every stage reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Location:
    """A place in a source file: 1-based line and column, as editors count them."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem found in `cluster/`: where, which rule, and what is wrong."""

    location: Location
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.rule}: {self.message}"


class ClusterforgeError(Exception):
    """Root of every error clusterforge raises on purpose (bad input, a failed stage)."""


class SourceError(ClusterforgeError):
    """Raised when `cluster/` cannot be compiled; carries every diagnostic found, sorted."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class TargetError(ClusterforgeError):
    """Raised when a target cannot render (a template bug, never bad input)."""


class OutputError(ClusterforgeError):
    """Raised when `generated/` cannot be written or read back."""


class RegistryError(ClusterforgeError):
    """Raised when a registry gets a name twice, or is asked for a name it does not hold."""
