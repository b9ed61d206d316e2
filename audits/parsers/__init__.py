"""The parsers of the acceptance run's logs (`clusterforge accept`): tests the audit never
runs, so no probe of `contract.probes` (which holds the audit's commands and their parsers).

Each module is named after its log, exposes `parse(text) -> JSON-compatible result` and
documents its command, schema and an example in its docstring, as a probe's parser does.
"""

from __future__ import annotations

from audits.parsers import all_reduce_perf, dcgmi_diag, ib_write_bw
from common.registry import Registry
from contract.probes import ParseError, Parser

__all__ = ["RESULTS", "ParseError", "Parser"]

RESULTS: Registry[Parser] = Registry(
    "result parser",
    ((module.PROBE, module.parse) for module in (all_reduce_perf, dcgmi_diag, ib_write_bw)),
)
