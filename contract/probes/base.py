"""What every probe parser shares: its error, and the readers of one line and of a number.

A parser raises `ParseError` for output it does not understand (garbled, truncated, empty when
content is required) instead of returning a partial or guessed value. The collector knows the
host; it calls `at_host` to locate the error before reporting it.
"""

from __future__ import annotations

import re

from common.errors import ClusterforgeError

_DECIMAL = re.compile(r"[0-9]+")


class ParseError(ClusterforgeError):
    """Raised when a probe's output cannot be parsed; names the probe, the line and the host.

    `line` is 1-based in the command output, 0 when no single line is at fault (empty output,
    a count that does not add up).
    """

    def __init__(self, probe: str, line: int, message: str, host: str | None = None) -> None:
        super().__init__(probe, line, message, host)
        self.probe = probe
        self.line = line
        self.message = message
        self.host = host

    def at_host(self, host: str) -> ParseError:
        """Return a copy of this error located at `host`."""
        return ParseError(self.probe, self.line, self.message, host)

    def __str__(self) -> str:
        where = f"{self.probe}:{self.line}" if self.line else self.probe
        if self.host is not None:
            where = f"{self.host}: {where}"
        return f"{where}: {self.message}"


def single_line(probe: str, text: str, expected: str) -> tuple[int, str]:
    """Return the one non-blank line of `text` and its number; `expected` names it in errors."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ParseError(probe, 0, f"empty output: expected {expected}")
    if len(lines) > 1:
        raise ParseError(probe, lines[1][0], f"expected one line, got {len(lines)}")
    return lines[0]


def decimal(probe: str, line: int, value: str) -> int:
    """Return `value` as a non-negative integer written in ASCII digits, else raise."""
    if _DECIMAL.fullmatch(value) is None:
        raise ParseError(probe, line, f"expected a decimal number, got {value!r}")
    return int(value)
