"""Reading shared by the `nvidia-smi --query-gpu ... --format=csv,noheader` parsers.

Cells are separated by `", "`; values may contain single spaces (GPU names) but never that
separator. Unsupported or absent values print as `[N/A]` or `[Not Supported]`; any other
bracketed value (`[Unknown Error]`, `[GPU requires reset]`) means the GPU could not be read,
which is an error, not a missing value. With no GPU at all nvidia-smi prints
`No devices were found`.
"""

from __future__ import annotations

import re

from contract.probes.base import ParseError, decimal

_ABSENT = frozenset({"[N/A]", "[Not Supported]"})
_NO_DEVICES = "No devices were found"
_PCI_BUS_ID = re.compile(r"[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


class Row:
    """One GPU line: its number in the output and its cells, read with located errors."""

    def __init__(self, probe: str, line: int, cells: list[str]) -> None:
        self.probe = probe
        self.line = line
        self.cells = cells

    def optional(self, column: int) -> str | None:
        cell = self.cells[column]
        if cell in _ABSENT:
            return None
        if cell.startswith("[") and cell.endswith("]"):
            raise ParseError(self.probe, self.line, f"nvidia-smi could not read the GPU: {cell}")
        return cell

    def text(self, column: int) -> str:
        value = self.optional(column)
        if not value:
            raise ParseError(self.probe, self.line, f"column {column + 1} is empty or absent")
        return value

    def integer(self, column: int) -> int:
        return decimal(self.probe, self.line, self.text(column))

    def optional_integer(self, column: int) -> int | None:
        return None if self.optional(column) is None else self.integer(column)

    def pci_bus_id(self, column: int) -> str:
        value = self.text(column).lower()
        if _PCI_BUS_ID.fullmatch(value) is None:
            raise ParseError(self.probe, self.line, f"not a PCI bus id: {value!r}")
        return value


def csv_rows(probe: str, text: str, columns: int) -> list[Row]:
    """Split the output into GPU rows of exactly `columns` cells; `[]` when there is no GPU."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ParseError(probe, 0, f"empty output: expected a line per GPU or {_NO_DEVICES!r}")
    if [line for _, line in lines] == [_NO_DEVICES]:
        return []
    rows: list[Row] = []
    for number, line in lines:
        cells = [cell.strip() for cell in line.split(", ")]
        if len(cells) != columns:
            raise ParseError(probe, number, f"expected {columns} comma-separated values: {line!r}")
        rows.append(Row(probe, number, cells))
    return rows
