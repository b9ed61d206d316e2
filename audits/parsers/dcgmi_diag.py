"""Parser for `dcgmi diag -r LEVEL -j`: NVIDIA DCGM's diagnostic, the burn-in of admission.

DCGM rather than gpu-burn: it ships with the DCGM the GPU servers run anyway (dcgm-exporter),
level 3 adds to gpu-burn's kind of load (Targeted Stress, Targeted Power, Memory Bandwidth)
the checks admission wants (PCIe, NVLink, memory, Xid during the run), and `-j` prints JSON,
so a result never depends on scraping a table.

Output, by DCGM generation (every shape read; each has a fixture from a real run):
- 3.x: `{"DCGM GPU Diagnostic": {"test_categories": [{"category": str, "tests": [{"name": str,
  "results": [{"gpu_ids"?: "N" | N | "0,1,...", "status": "Pass|Fail|Skip|Warn|PASS",
  "warnings"?: [{"warning": str, ...}] or str, "info"?: ...}]}]}]}, "version": str}`; 3.1
  puts `version` inside the "DCGM GPU Diagnostic" object and can hold `null` in a test list,
  and a result for several GPUs at once ("0,1,2,3,4,5,6,7") is the system's, not one GPU's;
- 4.x: `{"DCGM Diagnostic": {"test_categories": [... {"name": str, "results": [{
  "entity_group": "GPU", "entity_group_id": 1, "entity_id": N, "status": ..., "warnings"?:
  ...}], "test_summary": {...}}]}, "entity_groups": [...], "metadata": {"version": str,
  "Driver Version Detected": str}}`: results per entity, the version under `metadata`.
dcgmi may print a line before the JSON ("Successfully ran diagnostic for group."): anything
before the first line that starts with `{` is skipped. Non-JSON (cut off, or `Error: unable
to connect to host engine`) or a JSON without the categories is an error.

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

from contract.probes.base import ParseError

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


_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, then 3.x


def _messages(result: dict[str, Any]) -> list[str]:
    warnings = result.get("warnings", [])
    if isinstance(warnings, str):
        return [warnings]
    return [str(w.get("warning", w)) if isinstance(w, dict) else str(w) for w in warnings]


def _gpu(result: dict[str, Any]) -> int | None:
    """The one GPU a result is of; None for the system's (no GPU, or several at once)."""
    if "entity_id" in result:  # 4.x: an entity, a GPU or not
        group = result.get("entity_group", "GPU")
        return int(result["entity_id"]) if group == "GPU" else None
    gpu = result.get("gpu_ids", result.get("gpu_id"))
    if gpu is None or gpu == "":
        return None
    if isinstance(gpu, str) and "," in gpu:
        [int(g) for g in gpu.split(",")]  # each must be a GPU index all the same
        return None
    return int(gpu)


def _version(data: dict[str, Any], diag: dict[str, Any]) -> str | None:
    metadata = data.get("metadata")
    for where in (metadata if isinstance(metadata, dict) else {}, diag, data):
        version = where.get("version")
        if version is not None:
            return str(version)
    return None


def parse(text: str) -> Diag:
    """Parse `dcgmi diag -j` output."""
    if not text.strip():
        raise ParseError(PROBE, 0, "empty output: the diagnostic did not run")
    lines = text.splitlines(keepends=True)
    skip = next((n for n, line in enumerate(lines) if line.lstrip().startswith("{")), 0)
    body = "".join(lines[skip:])
    try:
        data = json.loads(body)
    except json.JSONDecodeError as error:
        first = text.strip().splitlines()[0]
        line = error.lineno + skip
        raise ParseError(PROBE, line, f"not JSON ({error.msg}): {first[:80]!r}") from None
    except RecursionError:
        raise ParseError(PROBE, 0, "JSON nested too deep to decode") from None
    root = next((r for r in _ROOTS if isinstance(data, dict) and r in data), None)
    diag = data.get(root) if root is not None else None
    categories = diag.get("test_categories") if isinstance(diag, dict) else None
    if not isinstance(diag, dict) or not isinstance(categories, list):
        raise ParseError(PROBE, 0, "no 'DCGM Diagnostic' test_categories in the JSON")
    tests: list[Test] = []
    try:
        for category in categories:
            for test in category["tests"]:
                if test is None:  # DCGM 3.1 writes a null between tests
                    continue
                for result in test["results"]:
                    tests.append(
                        {
                            "category": str(category["category"]),
                            "test": str(test["name"]),
                            "gpu": _gpu(result),
                            "status": str(result["status"]).lower(),
                            "messages": _messages(result),
                        }
                    )
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ParseError(PROBE, 0, f"unexpected shape of a test result: {error!r}") from None
    return {"version": _version(data, diag), "tests": tests}
