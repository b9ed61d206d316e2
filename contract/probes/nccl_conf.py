"""Parser for `cat -- /etc/nccl.conf`: the NCCL settings the host's jobs start with.

NCCL reads `VARIABLE=value` lines from /etc/nccl.conf (and ~/.nccl.conf) before the
environment; `#` starts a comment line, blank lines are skipped. A line that is neither, or a
variable set twice (which one wins depends on the NCCL version), is an error. An empty file is
valid and sets nothing.

Schema:

    {"settings": {variable: value}}

Example:

    $ cat -- /etc/nccl.conf
    # /etc/nccl.conf on gpu hosts.
    NCCL_IB_HCA==mlx5_0:1
    NCCL_SOCKET_IFNAME==eno1

    {"settings": {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eno1"}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "nccl_conf"
SPEC = Probe(
    PROBE,
    ("cat", "--", "/etc/nccl.conf"),
    "host",
    "/usr/bin/cat",
    max_output=64 * KIB,
)

_LINE = re.compile(r"(?P<key>NCCL_[A-Z0-9_]+)\s*=(?P<value>.*)")


class NcclConf(TypedDict):
    settings: dict[str, str]


def parse(text: str) -> NcclConf:
    """Parse the text of /etc/nccl.conf."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise ParseError(PROBE, number, f"expected NCCL_VARIABLE=value, got {line!r}")
        if match["key"] in settings:
            raise ParseError(PROBE, number, f"{match['key']} is set twice")
        settings[match["key"]] = match["value"].strip()
    return {"settings": settings}


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """/etc/nccl.conf as planned, on a GPUDirect host."""
    if "gpudirect" not in state:
        return {}
    nccl = state["gpudirect"]["nccl"]
    return {PROBE: "# /etc/nccl.conf\n" + "".join(f"{k}={v}\n" for k, v in nccl.items())}
