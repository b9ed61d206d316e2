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
from typing import TypedDict

from audits.parsers.base import ParseError, single_line

PROBE = "ofed_info"

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
