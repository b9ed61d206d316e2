"""Parser for `dcgmi diag -r LEVEL -j`: NVIDIA DCGM's diagnostic, the burn-in of admission.

DCGM rather than gpu-burn: it ships with the DCGM the GPU servers run anyway (dcgm-exporter),
level 3 adds to gpu-burn's kind of load (Targeted Stress, Targeted Power, Memory Bandwidth)
the checks admission wants (PCIe, NVLink, memory, Xid during the run), and `-j` prints JSON,
so a result never depends on scraping a table.

Output (DCGM 3.x): `{"DCGM GPU Diagnostic": {"test_categories": [{"category": str, "tests":
[{"name": str, "results": [{"gpu_ids"?: "N", "status": "Pass|Fail|Skip|Warn", "warnings"?:
[{"warning": str, "error_id": int, ...}] or str, "info"?: ...}]}]}]}, "version": str, ...}`.
Non-JSON (cut off, or `Error: unable to connect to host engine`) or a JSON without the
categories is an error.

Schema (one entry per test and GPU; `gpu` null for system-wide tests):

    {"version": str | null,
     "tests": [{"category": str, "test": str, "gpu": int | null, "status": str,
                "messages": [str]}]}

Example:

    $ dcgmi diag -r 3 -j
    {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
      {"name": "GPU Memory", "results": [{"gpu_ids": "0", "status": "Pass"}]}]}]},
     "version": "3.3.5"}

    {"version": "3.3.5", "tests": [{"category": "Hardware", "test": "GPU Memory", "gpu": 0,
      "status": "pass", "messages": []}]}
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from audits.parsers.base import ParseError

PROBE = "dcgmi_diag"


class Test(TypedDict):
    category: str
    test: str
    gpu: int | None
    status: str
    messages: list[str]


class Diag(TypedDict):
    version: str | None
    tests: list[Test]


def _messages(result: dict[str, Any]) -> list[str]:
    warnings = result.get("warnings", [])
    if isinstance(warnings, str):
        return [warnings]
    return [str(w.get("warning", w)) if isinstance(w, dict) else str(w) for w in warnings]


def parse(text: str) -> Diag:
    """Parse `dcgmi diag -j` output."""
    if not text.strip():
        raise ParseError(PROBE, 0, "empty output: the diagnostic did not run")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        first = text.strip().splitlines()[0]
        raise ParseError(PROBE, error.lineno, f"not JSON ({error.msg}): {first[:80]!r}") from None
    diag = data.get("DCGM GPU Diagnostic") if isinstance(data, dict) else None
    categories = diag.get("test_categories") if isinstance(diag, dict) else None
    if not isinstance(categories, list):
        raise ParseError(PROBE, 0, "no 'DCGM GPU Diagnostic' test_categories in the JSON")
    tests: list[Test] = []
    try:
        for category in categories:
            for test in category["tests"]:
                for result in test["results"]:
                    gpu = result.get("gpu_ids", result.get("gpu_id"))
                    tests.append(
                        {
                            "category": str(category["category"]),
                            "test": str(test["name"]),
                            "gpu": None if gpu in (None, "") else int(gpu),
                            "status": str(result["status"]).lower(),
                            "messages": _messages(result),
                        }
                    )
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ParseError(PROBE, 0, f"unexpected shape of a test result: {error!r}") from None
    version = data.get("version")
    return {"version": str(version) if version is not None else None, "tests": tests}
