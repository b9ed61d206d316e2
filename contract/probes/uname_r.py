"""Parser for `uname -r`: the running kernel release.

Output is one line such as `4.18.0-513.24.1.el8_9.x86_64` (Rocky 8) or `6.1.0-18-amd64`.

Schema:

    {"kernel_release": str}

Example:

    $ uname -r
    4.18.0-513.24.1.el8_9.x86_64

    {"kernel_release": "4.18.0-513.24.1.el8_9.x86_64"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError, single_line
from contract.probes.spec import KIB, Now, Probe

PROBE = "uname_r"
SPEC = Probe(PROBE, ("uname", "-r"), "host", "/usr/bin/uname", max_output=4 * KIB)

_RELEASE = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+._~][0-9A-Za-z._+~-]*)?")


class UnameR(TypedDict):
    kernel_release: str


def parse(text: str) -> UnameR:
    """Parse `uname -r` output."""
    number, line = single_line(PROBE, text, "the kernel release")
    if _RELEASE.fullmatch(line) is None:
        raise ParseError(PROBE, number, f"not a kernel release: {line!r}")
    return {"kernel_release": line}


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The running kernel: the pinned one."""
    return {PROBE: f"{state['versions']['kernel']}\n"}
