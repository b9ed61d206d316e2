"""Parser for `lsmod`: the kernel modules loaded now (what /proc/modules holds, in columns).

Output is the header `Module  Size  Used by`, then one line per module: name, size in bytes,
use count, and the modules using it (comma-separated, with a trailing comma on some
kernels), or `[permanent]`, or `-`. Names are as the kernel prints them, with `_` where
modprobe also accepts `-` (nvidia_peermem for nvidia-peermem). No header is an error (the
command did not run); a module line without size and count is cut off.

Schema:

    [{"module": str, "size": int, "used": int, "by": [str]}]

Example:

    $ lsmod
    Module                  Size  Used by
    nvidia_peermem         16384  0
    nvidia              56479744  2 nvidia_uvm,nvidia_peermem

    [{"module": "nvidia_peermem", "size": 16384, "used": 0, "by": []},
     {"module": "nvidia", "size": 56479744, "used": 2, "by": ["nvidia_uvm", "nvidia_peermem"]}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "lsmod"
# a page
SPEC = Probe(PROBE, ("lsmod",), "host", "/usr/sbin/lsmod", max_output=256 * KIB)

_HEADER = re.compile(r"Module\s+Size\s+Used by")
_MODULE = re.compile(
    r"(?P<name>[A-Za-z0-9_-]+)\s+(?P<size>\d+)\s+(?P<used>-?\d+)(?:\s+(?P<by>.*))?"
)


class Module(TypedDict):
    module: str
    size: int
    used: int
    by: list[str]


def parse(text: str) -> list[Module]:
    """Parse `lsmod` output, modules in output order."""
    lines = [(n, line.rstrip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ParseError(PROBE, 0, "empty output: expected the 'Module Size Used by' header")
    number, first = lines[0]
    if _HEADER.fullmatch(first.strip()) is None:
        raise ParseError(PROBE, number, f"expected the 'Module Size Used by' header, got {first!r}")
    out: list[Module] = []
    for number, line in lines[1:]:
        match = _MODULE.fullmatch(line.strip())
        if match is None:
            raise ParseError(PROBE, number, f"expected 'module size count [users]', got {line!r}")
        users = (match["by"] or "").strip()
        by = [] if users in ("", "-", "[permanent]") else [u for u in users.split(",") if u]
        out.append(
            {
                "module": match["name"],
                "size": int(match["size"]),
                "used": int(match["used"]),
                "by": by,
            }
        )
    return out


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The deploy map's kernel modules loaded, but `now.unloaded`, on a GPUDirect host."""
    if "gpudirect" not in state:
        return {}
    modules = [
        m.replace("-", "_")
        for m in state.get("deploy", {}).get("kernel_modules", ())
        if m not in now.unloaded
    ]
    return {
        PROBE: "Module                  Size  Used by\n"
        + "".join(
            f"{m:<19} {16384 + 4096 * n:>8}  0\n" for n, m in enumerate([*modules, "ib_core"])
        )
    }
