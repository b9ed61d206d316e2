"""Parser for the volatile ECC error counters of nvidia-smi: one line per GPU.

Command:

    nvidia-smi --query-gpu=index,ecc.errors.corrected.volatile.total,\
    ecc.errors.uncorrected.volatile.total --format=csv,noheader

Counters are since the last driver load. `[N/A]` (ECC disabled or unsupported) becomes null;
another bracketed value such as `[Unknown Error]` is an error. `No devices were found` gives
`[]`.

Schema:

    [{"index": int, "corrected": int | None, "uncorrected": int | None}]

Example:

    0, 0, 0
    1, 12, 0

    [{"index": 0, "corrected": 0, "uncorrected": 0},
     {"index": 1, "corrected": 12, "uncorrected": 0}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._nvidia import csv_rows
from contract.probes.spec import KIB, Now, Probe

PROBE = "nvidia_smi_ecc"
_ECC_QUERY = "index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"
SPEC = Probe(
    PROBE,
    ("nvidia-smi", f"--query-gpu={_ECC_QUERY}", "--format=csv,noheader"),
    "host",
    "/usr/bin/nvidia-smi",
    max_output=64 * KIB,
)


class EccCounters(TypedDict):
    index: int
    corrected: int | None
    uncorrected: int | None


def parse(text: str) -> list[EccCounters]:
    """Parse the volatile ECC counter CSV, one entry per GPU in output order."""
    return [
        {
            "index": row.integer(0),
            "corrected": row.optional_integer(1),
            "uncorrected": row.optional_integer(2),
        }
        for row in csv_rows(PROBE, text, 3)
    ]


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Each GPU's volatile ECC counts: none, but what `now.ecc` says."""
    if state["gpus"] is None:
        return {}
    counts = (now.ecc.get(i, (0, 0)) for i in range(state["gpus"]["count"]))
    return {PROBE: "".join(f"{i}, {c}, {u}\n" for i, (c, u) in enumerate(counts))}
