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
from typing import TypedDict

from audits.parsers.base import ParseError, single_line

PROBE = "uname_r"

_RELEASE = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+._~][0-9A-Za-z._+~-]*)?")


class UnameR(TypedDict):
    kernel_release: str


def parse(text: str) -> UnameR:
    """Parse `uname -r` output."""
    number, line = single_line(PROBE, text, "the kernel release")
    if _RELEASE.fullmatch(line) is None:
        raise ParseError(PROBE, number, f"not a kernel release: {line!r}")
    return {"kernel_release": line}
