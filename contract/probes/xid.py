"""Parser for NVIDIA Xid events in the kernel log (`journalctl -k --no-pager`, or `dmesg`).

Only lines naming `NVRM: Xid` are read; every other line, whatever its prefix (a journalctl
`Nov 30 10:11:12 gpu001 kernel: ` or a dmesg `[ 1399.140318] `), is skipped, so a log without
Xid gives `[]`. The driver prints `NVRM: Xid (PCI:<domain:bus:dev>): <code>, <details>`, where
details start with `pid=<n>, ` and `name=<comm>, ` on current drivers (either may be
`<unknown>`, sometimes in quotes: null here) and then the message. Older drivers print the
address without `PCI:` (`NVRM: Xid (0000:03:00): 13, ...`) and the message straight after
the code, and some end the line at `<code>, ` with the details on the next line (the
message is then empty: the Xid and its GPU are what count). A line naming `NVRM: Xid` that
does not have this shape is an error: a half-read Xid must not pass for no Xid.

Schema:

    [{"pci": "dddd:bb:dd", "xid": int, "pid": int | None, "name": str | None, "message": str}]

Example:

    $ journalctl -k --no-pager        (one line; wrapped here)
    Nov 30 10:11:12 gpu001 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python,
    GPU has fallen off the bus.

    [{"pci": "0000:18:00", "xid": 79, "pid": 1234, "name": "python",
      "message": "GPU has fallen off the bus."}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import gpu_ids
from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "xid"
# -k implies -b: Xids of earlier boots were seen by earlier audits. Root: the kernel
# log is not for every user to read. A long boot's log runs to megabytes.
SPEC = Probe(
    PROBE,
    ("journalctl", "-k", "--no-pager"),
    "host",
    "/usr/bin/journalctl",
    True,
    max_output=16 * MIB,
)

_MARK = "NVRM: Xid"
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): "
    r"(?P<xid>\d+),(?: (?:pid=(?P<pid>'?<unknown>'?|\d+), )?"
    r"(?:name=(?P<name>'?<unknown>'?|[^,]+), )?(?P<message>\S.*))?"
)


class Xid(TypedDict):
    pci: str
    xid: int
    pid: int | None
    name: str | None
    message: str


def parse(text: str) -> list[Xid]:
    """Parse a kernel log, returning its Xid events in log order."""
    events: list[Xid] = []
    for number, raw in enumerate(text.splitlines(), 1):
        start = raw.find(_MARK)
        if start < 0:
            continue
        match = _XID.fullmatch(raw[start:].rstrip())
        if match is None:
            raise ParseError(PROBE, number, f"unreadable Xid line: {raw[start:].strip()!r}")
        pid, name = match["pid"], match["name"]
        events.append(
            {
                "pci": match["pci"].lower(),
                "xid": int(match["xid"]),
                "pid": None if pid is None or "<unknown>" in pid else int(pid),
                "name": None if name is None or "<unknown>" in name else name,
                "message": match["message"] or "",
            }
        )
    return events


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The kernel log of the boot: the driver loading, then the Xids of `now.xid`."""
    if state["gpus"] is None:
        return {}
    v = state["versions"]
    ids = gpu_ids(host, state["gpus"]["count"])
    log = (
        f"May 04 05:40:01 {host} kernel: Linux version {v['kernel']} (mockbuild@rockylinux.org)\n"
        f"May 04 05:40:14 {host} kernel: nvidia-nvlink: Nvlink Core is being initialized\n"
        f"May 04 05:40:15 {host} kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  "
        f"{v['gpu_driver']}\n"
    )
    for gpu, code, message in now.xid:
        pci = ids[gpu][0].lower()[4:-2]
        log += (
            f"May 04 05:51:12 {host} kernel: NVRM: Xid (PCI:{pci}): {code}, pid=4821, "
            f"name=python, {message}\n"
        )
    return {PROBE: log}
