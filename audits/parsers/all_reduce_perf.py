"""Parser for `all_reduce_perf` (nccl-tests): the bus bandwidth of an all-reduce step.

Output: `#` lines with the parameters, one `#  Rank  N Group  0 Pid  P on HOST device  D
[0x07] NAME` line per rank, the table header, then one row per message size: size, count,
type, redop, root, and for out-of-place then in-place: time (us), algbw, busbw (GB/s) and
`#wrong` (`N/A` without validation); the end says `# Out of bounds values : N OK|FAILED` and
`# Avg bus bandwidth    : X`. No result row (NCCL failed: `Test NCCL failure ...`, `NCCL WARN
...`), a row of the wrong shape, or an empty log is an error naming the line at fault.

Schema (sizes in bytes, bandwidths in GB/s as nccl-tests prints them; `wrong` null for N/A):

    {"ranks": int, "hosts": [str],
     "rows": [{"bytes": int, "busbw": float, "busbw_in_place": float, "wrong": int | null}],
     "avg_busbw": float | null, "out_of_bounds": int | null}

Example:

    $ srun all_reduce_perf -b 8 -e 8G -f 2 -g 1
    #  Rank  0 Group  0 Pid  40321 on     gpu001 device  0 [0x07] NVIDIA A100-SXM4-80GB
    ...
      8589934592    2147483648     float     sum      -1   699520   12.28   23.02      0  ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 11.4185

    {"ranks": 32, "hosts": ["gpu001", ...], "rows": [{"bytes": 8589934592, "busbw": 23.02,
      "busbw_in_place": 23.03, "wrong": 0}, ...], "avg_busbw": 11.4185, "out_of_bounds": 0}
"""

from __future__ import annotations

import re
from typing import TypedDict

from contract.probes.base import ParseError

PROBE = "all_reduce_perf"

_RANK = re.compile(r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+.*")
_NUMBER = r"(\d+(?:\.\d+)?)"
_WRONG = r"(\d+|N/A)"
_ROW = re.compile(
    rf"(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_WRONG}"
    rf"\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_WRONG}"
)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*" + _NUMBER)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_FAILURE = re.compile(r"(NCCL failure|Test failure|NCCL WARN|error)", re.IGNORECASE)


class Row(TypedDict):
    bytes: int
    busbw: float
    busbw_in_place: float
    wrong: int | None


class AllReduce(TypedDict):
    ranks: int
    hosts: list[str]
    rows: list[Row]
    avg_busbw: float | None
    out_of_bounds: int | None


def _wrong(a: str, b: str) -> int | None:
    return None if "N/A" in (a, b) else int(a) + int(b)


def parse(text: str) -> AllReduce:
    """Parse the log of one `all_reduce_perf` run."""
    ranks: dict[int, str] = {}
    rows: list[Row] = []
    avg = oob = None
    failure: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _RANK.fullmatch(line):
            ranks[int(m[1])] = m[2]
        elif m := _AVG.match(line):
            avg = float(m[1])
        elif m := _OOB.match(line):
            oob = int(m[1])
        elif line.startswith("#"):
            continue
        elif m := _ROW.fullmatch(line):
            rows.append(
                {
                    "bytes": int(m[1]),
                    "busbw": float(m[8]),
                    "busbw_in_place": float(m[12]),
                    "wrong": _wrong(m[9], m[13]),
                }
            )
        elif _FAILURE.search(line):
            failure = failure or (number, line)
        elif line[0].isdigit():
            raise ParseError(PROBE, number, f"a result row of the wrong shape: {line!r}")
    if not rows:
        if failure is not None:
            raise ParseError(PROBE, failure[0], f"no result: {failure[1]}")
        raise ParseError(PROBE, 0, "no result row: empty or cut off")
    return {
        "ranks": len(ranks),
        "hosts": sorted(set(ranks.values())),
        "rows": rows,
        "avg_busbw": avg,
        "out_of_bounds": oob,
    }
