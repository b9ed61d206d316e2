"""Semantic version equality: `23.10-1.1.9.0` equals `23.10-01.1.9.0`, `535.183.06` equals
`535.183.6`, `92.00.9E.00.03` equals `92.00.9e.00.03`.

A version is cut into tokens: runs of digits (compared as integers, so leading zeros do not
count), runs of letters (compared without case: VBIOS and PSIDs mix hex digits and letters),
and every other character on its own (`.`, `-`, `_`, ...; kept, so `23.10-1` and `23.10.1`
stay different). Two versions are equal when their token lists are. Nothing is padded:
`2.6` and `2.6.0` differ, because a vendor who prints three parts means three parts.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[0-9]+|[A-Za-z]+|[^0-9A-Za-z]")


def tokens(version: str) -> tuple[int | str, ...]:
    """The comparison tokens of `version` (surrounding whitespace ignored)."""
    # "0" <= t[0] <= "9", not isdigit(): "²" is a digit to Python but no run of _TOKEN's digits.
    found = _TOKEN.findall(version.strip())
    return tuple(int(t) if "0" <= t[0] <= "9" else t.lower() for t in found)


def same(expected: str, observed: str) -> bool:
    """Whether two version strings name the same version."""
    return tokens(expected) == tokens(observed)


def leading(version: str, parts: int) -> str:
    """The first `parts` dot-separated parts of `version`, for a tool that shows no more
    (`ipmitool mc info` prints a BMC's firmware as major.minor only)."""
    return ".".join(version.split(".")[:parts])
