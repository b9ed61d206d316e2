"""Compact host lists the way Slurm and operators write them: gpu[001-005,007],login[01-02]."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

_SPLIT = re.compile(r"^(.*?)(\d+)$")


def compact(names: Iterable[str]) -> str:
    """`gpu001,gpu002,gpu003,gpu005` -> `gpu[001-003,005]`; names keep their digit width."""
    return ",".join(groups(names))


def groups(names: Iterable[str]) -> list[str]:
    """The comma-separated parts of `compact`, for callers that show only the first few."""
    numbered: dict[tuple[str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    for name in sorted(set(names)):
        match = _SPLIT.match(name)
        if match:
            prefix, digits = match.groups()
            numbered[(prefix, len(digits))].append(int(digits))
        else:
            plain.append(name)
    parts = list(plain)
    for (prefix, width), numbers in sorted(numbered.items()):
        ranges: list[str] = []
        numbers.sort()
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(
                f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}"
            )
            if n is not None:
                start = prev = n
        only = len(ranges) == 1 and "-" not in ranges[0]
        parts.append(f"{prefix}{ranges[0]}" if only else f"{prefix}[{','.join(ranges)}]")
    return sorted(parts)


def expand(text: str) -> list[str]:
    """The inverse of `compact`, for tests and for reading operator input."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text):
        match = re.fullmatch(r"(.*)\[(.*)\]", part)
        if not match:
            out.append(part)
            continue
        prefix, body = match.groups()
        for item in body.split(","):
            lo, _, hi = item.partition("-")
            width = len(lo)
            out += [f"{prefix}{n:0{width}d}" for n in range(int(lo), int(hi or lo) + 1)]
    return out
