"""Parser for `iblinkinfo -l`: every port of the fabric on one line, with the link it carries.

Format (rdma-core `infiniband-diags/iblinkinfo.c`, line mode): the port GUID, the node
description right-aligned in 30 columns and quoted, the LID, the port number, then the link
`==( 4X        53.125 Gbps Active/  LinkUp)==>` (width, per-lane speed, state, physical
state), then the remote end: port GUID, LID, port, quoted description and a `( ... )` hint.
A down port shows `==(                Down/ Polling)==>             [  ] "" ( )`; an up port
whose peer was not read shows `"Port not available"`; both have no remote (null). Per-lane
speeds are 2.5/5.0/10.0 (SDR/DDR/QDR), 14.0625 (FDR), 25.78125 (EDR), 53.125 (HDR) and
106.25 (NDR) Gbps; FDR10 prints `10.0 Gbps (FDR10)`. The hint lists what the link could
run at when it trained below both ends' capability: `(Could be 53.125 Gbps)`, both
`(Could be 12X Could be 53.125 Gbps)`, or `( )` when at full rate; it is split into a list.

A switch shows one port GUID on all its ports. Ports are sorted by (GUID, port). Every link
is printed from both ends; one seen from one end only means cut-off output (an error). Ports
of the switch-internal SHARP CA (`Mellanox Technologies Aggregation Node`) and the switch
ports facing it are left out: they are not cabling.

Schema:

    [{"guid": "0x<16 hex>", "name": str, "lid": int, "port": int,
      "width": "4X" | None, "lane_gbps": float | None, "fdr10": bool,
      "state": str, "physical_state": str,
      "remote": {"guid": "0x<16 hex>", "lid": int, "port": int, "name": str} | None,
      "could_be": [str]}]

Example:

    $ iblinkinfo -l        (one line per port; wrapped here)
    0x1070fd0300c00001 "                 gpu001 mlx5_0"      2    1[  ]
        ==( 4X        53.125 Gbps Active/  LinkUp)==>
        0xb8cef60300b00001      3    1[  ] "MF0;leaf01:MQM8700/U1" ( )

    [{"guid": "0x1070fd0300c00001", "name": "gpu001 mlx5_0", "lid": 2, "port": 1,
      "width": "4X", "lane_gbps": 53.125, "fdr10": false, "state": "Active",
      "physical_state": "LinkUp",
      "remote": {"guid": "0xb8cef60300b00001", "lid": 3, "port": 1,
                 "name": "MF0;leaf01:MQM8700/U1"},
      "could_be": []}]
"""

from __future__ import annotations

import re
from typing import TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import MIB, Probe

PROBE = "iblinkinfo"
SPEC = Probe(
    PROBE,
    ("iblinkinfo", "-l"),
    "fabric",
    "/usr/sbin/iblinkinfo",
    True,
    max_output=64 * MIB,
)

_AGGREGATION_NODE = "Aggregation Node"
_LINE = re.compile(
    r'(?P<guid>0x[0-9a-f]{16}) "(?P<name>.*)"\s+(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\] '
    r"==\((?P<link>.*?)\)==>\s+(?P<remote>.*)"
)
_LINK = re.compile(
    r"\s*(?:(?P<width>\d+X)\s+(?P<speed>\d+\.\d+) Gbps(?P<fdr10> \(FDR10\))?\s+)?"
    r"(?P<state>\w+)/\s*(?P<physical>\w+)"
)
_REMOTE = re.compile(
    r'(?P<guid>0x[0-9a-f]{16})\s+(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\] "(?P<name>.*?)" '
    r"\((?P<hint>.*)\)"
)
_NO_REMOTE = re.compile(r'\[\s*\] "" \( \)|"Port not available"')


class Remote(TypedDict):
    guid: str
    lid: int
    port: int
    name: str


class PortLink(TypedDict):
    guid: str
    name: str
    lid: int
    port: int
    width: str | None
    lane_gbps: float | None
    fdr10: bool
    state: str
    physical_state: str
    remote: Remote | None
    could_be: list[str]


def parse(text: str) -> list[PortLink]:
    """Parse `iblinkinfo -l` output, one entry per port, sorted by (GUID, port)."""
    ports: dict[tuple[str, int], tuple[int, PortLink]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        entry = _port(number, raw.strip())
        remote = entry["remote"]
        if entry["name"].endswith(_AGGREGATION_NODE) or (
            remote is not None and remote["name"].endswith(_AGGREGATION_NODE)
        ):
            continue
        if (entry["guid"], entry["port"]) in ports:
            raise ParseError(PROBE, number, f"port {entry['guid']}[{entry['port']}] listed twice")
        ports[(entry["guid"], entry["port"])] = (number, entry)
    if not ports:
        raise ParseError(PROBE, 0, "empty output: expected a line per port")
    for number, entry in ports.values():
        remote = entry["remote"]
        if remote is None:
            continue
        back = ports.get((remote["guid"], remote["port"]))
        back_remote = back[1]["remote"] if back is not None else None
        if back_remote is None or (back_remote["guid"], back_remote["port"]) != (
            entry["guid"],
            entry["port"],
        ):
            raise ParseError(
                PROBE,
                number,
                f"link {entry['guid']}[{entry['port']}]-{remote['guid']}[{remote['port']}]"
                " is listed from one end only (cut off?)",
            )
    return [ports[key][1] for key in sorted(ports)]


def _port(number: int, line: str) -> PortLink:
    match = _LINE.fullmatch(line)
    link = _LINK.fullmatch(match["link"]) if match else None
    if match is None or link is None:
        raise ParseError(PROBE, number, f"not an 'iblinkinfo -l' port line: {line!r}")
    remote: Remote | None = None
    could_be: list[str] = []
    if found := _REMOTE.fullmatch(match["remote"]):
        remote = {
            "guid": found["guid"],
            "lid": int(found["lid"]),
            "port": int(found["port"]),
            "name": found["name"],
        }
        could_be = [hint.strip() for hint in found["hint"].split("Could be") if hint.strip()]
    elif _NO_REMOTE.fullmatch(match["remote"]) is None:
        raise ParseError(PROBE, number, f"unreadable remote end: {match['remote']!r}")
    return {
        "guid": match["guid"],
        "name": match["name"].strip(),
        "lid": int(match["lid"]),
        "port": int(match["port"]),
        "width": link["width"],
        "lane_gbps": float(link["speed"]) if link["speed"] else None,
        "fdr10": link["fdr10"] is not None,
        "state": link["state"],
        "physical_state": link["physical"],
        "remote": remote,
        "could_be": could_be,
    }
