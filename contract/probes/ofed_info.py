"""Parser for `ofed_info -s`: the installed OFED stack and its version.

Output is one line: the package flavour, a dash, the version, usually a trailing colon.
MLNX_OFED prints `MLNX_OFED_LINUX-23.10-1.1.9.0:`; DOCA-OFED prints
`OFED-internal-24.10-1.1.4:`; some builds omit the colon. Inbox rdma-core has no `ofed_info`,
so empty output is an error, never "no OFED".

Schema:

    {"version": str, "flavour": str}

Example:

    $ ofed_info -s
    MLNX_OFED_LINUX-23.10-1.1.9.0:

    {"version": "23.10-1.1.9.0", "flavour": "MLNX_OFED_LINUX"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError, single_line
from contract.probes.spec import KIB, Now, Probe

PROBE = "ofed_info"
SPEC = Probe(PROBE, ("ofed_info", "-s"), "host", "/usr/bin/ofed_info", max_output=4 * KIB)

_LINE = re.compile(r"(?P<flavour>[A-Za-z][A-Za-z_-]*)-(?P<version>\d+\.\d+-\d+(?:\.\d+)*):?")


class OfedInfo(TypedDict):
    version: str
    flavour: str


def parse(text: str) -> OfedInfo:
    """Parse `ofed_info -s` output."""
    number, line = single_line(PROBE, text, "one line like 'MLNX_OFED_LINUX-23.10-1.1.9.0:'")
    match = _LINE.fullmatch(line)
    if match is None:
        raise ParseError(PROBE, number, f"expected '<flavour>-<version>:', got {line!r}")
    return {"version": match["version"], "flavour": match["flavour"]}


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """MLNX_OFED's version, on a host with an HCA (the only ones that run it)."""
    versions = state["versions"]
    return {PROBE: f"MLNX_OFED_LINUX-{versions['ofed']}:\n"} if "ofed" in versions else {}
