"""Parser for `ibnetdiscover`: the nodes of the InfiniBand fabric and the links between them.

Format (rdma-core `infiniband-diags/ibnetdiscover.c`, separators are tabs): `#` comments, then
per node a block of `vendid=`, `devid=`, `sysimgguid=`, `switchguid=`/`caguid=`/`rtguid=`
lines, a header such as `Switch<TAB>41 "S-b8cef60300b00001"<TAB><TAB># "MF0;leaf01:MQM8700/U1"
enhanced port 0 lid 3 lmc 0` or `Ca<TAB>1 "H-1070fd0300c00000"<TAB><TAB># "gpu001 mlx5_0"`,
and one line per connected port:

    [1]     "H-1070fd0300c00000"[1](1070fd0300c00001)       # "gpu001 mlx5_0" lid 2 4xHDR
    [1](1070fd0300c00001)   "S-b8cef60300b00001"[1]         # lid 2 lmc 0 "leaf01" lid 3 4xHDR

The node GUID is the 16 hex digits after `S-`/`H-`/`R-`. GUIDs in brackets are the port GUIDs
of CA ports (not zero-padded; padded here): a link keeps them beside its ends as `port_guids`,
null for a switch end, because a host's port GUID is what the cable plan knows reliably (CA
node GUIDs differ between ibsim and hardware). The trailing token is `<width>x<SPEED>`.
Block order depends on where the scan started, so links are unordered pairs of
(node GUID, port) ends, each listed once, and both nodes and links are sorted. Each link is
printed from both of its ends; a link seen from one end only, or naming a node with no block
of its own, means the output was cut off (an error), as does a conflict between the two ends.
The switch-internal SHARP CA (`Mellanox Technologies Aggregation Node`, behind port 41 of a
Quantum switch) and its link are left out: they are not cabling.

Schema:

    {"nodes": [{"type": "switch" | "ca" | "router", "guid": "0x<16 hex>", "nports": int,
                "description": str}],
     "links": [{"ends": [["0x<16 hex>", int], ["0x<16 hex>", int]],
                "port_guids": ["0x<16 hex>" | None, "0x<16 hex>" | None], "width": "4x",
                "speed": "HDR"}]}

Example (the two blocks above, shortened):

    {"nodes": [{"type": "ca", "guid": "0x1070fd0300c00000", "nports": 1,
                "description": "gpu001 mlx5_0"},
               {"type": "switch", "guid": "0xb8cef60300b00001", "nports": 41,
                "description": "MF0;leaf01:MQM8700/U1"}],
     "links": [{"ends": [["0x1070fd0300c00000", 1], ["0xb8cef60300b00001", 1]],
                "port_guids": ["0x1070fd0300c00001", null], "width": "4x", "speed": "HDR"}]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from contract.probes._ids import lid
from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "ibnetdiscover"
# The fabric scans open the umad devices, which only root may. A few hundred bytes a
# port: 64 MiB holds the largest fat tree the model plans (three tiers, 4,096 servers).
SPEC = Probe(
    PROBE,
    ("ibnetdiscover",),
    "fabric",
    "/usr/sbin/ibnetdiscover",
    True,
    max_output=64 * MIB,
)

_AGGREGATION_NODE = "Aggregation Node"
_TYPES: dict[str, Literal["switch", "ca", "router"]] = {
    "Switch": "switch",
    "Ca": "ca",
    "Rt": "router",
}
_ID_LINE = re.compile(r"(?:vendid|devid|sysimgguid|switchguid|caguid|rtguid)=0x[0-9a-f]+.*")
_HEADER = re.compile(
    r'(?P<type>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+"[SHR]-(?P<guid>[0-9a-f]{16})"'
    r'\s+# "(?P<description>.*?)"(?: (?:enhanced|base) port 0 lid \d+ lmc \d+)?'
)
_PORT = re.compile(
    r'\[(?P<port>\d+)\](?:\((?P<pguid>[0-9a-f]+)\))?\s+"[SHR]-(?P<remote>[0-9a-f]{16})"'
    r"\[(?P<rport>\d+)\](?:\s*\((?P<rpguid>[0-9a-f]+)\))?"
    r'\s+# (?:lid \d+ lmc \d+ )?"(?P<rdescription>.*)" lid \d+ '
    r"(?P<width>\d+x)(?P<speed>[A-Z]+\d*)"
)

End = tuple[str, int]


class Node(TypedDict):
    type: Literal["switch", "ca", "router"]
    guid: str
    nports: int
    description: str


class Link(TypedDict):
    ends: list[list[str | int]]
    port_guids: list[str | None]
    width: str
    speed: str


class Fabric(TypedDict):
    nodes: list[Node]
    links: list[Link]


def parse(text: str) -> Fabric:
    """Parse `ibnetdiscover` output into sorted nodes and unordered, de-duplicated links."""
    nodes: dict[str, Node] = {}
    seen: dict[tuple[End, End], tuple[int, str, str]] = {}
    ends: set[End] = set()
    port_guids: dict[End, str] = {}
    current: Node | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or _ID_LINE.fullmatch(line):
            continue
        if header := _HEADER.fullmatch(line):
            current = {
                "type": _TYPES[header["type"]],
                "guid": "0x" + header["guid"],
                "nports": int(header["nports"]),
                "description": header["description"],
            }
            if current["guid"] in nodes:
                raise ParseError(PROBE, number, f"node {current['guid']} has two blocks")
            nodes[current["guid"]] = current
        elif port := _PORT.fullmatch(line):
            if current is None:
                raise ParseError(PROBE, number, "port line before any node header")
            local: End = (current["guid"], int(port["port"]))
            if local[1] > current["nports"] or local in ends:
                raise ParseError(PROBE, number, f"port {local[1]} is out of range or listed twice")
            ends.add(local)
            if not port["rdescription"].endswith(_AGGREGATION_NODE):
                remote: End = ("0x" + port["remote"], int(port["rport"]))
                for end, guid in ((local, port["pguid"]), (remote, port["rpguid"])):
                    if guid is not None:
                        port_guids[end] = "0x" + guid.zfill(16)
                seen[(local, remote)] = (number, port["width"], port["speed"])
        else:
            raise ParseError(PROBE, number, f"expected a node header or a port line, got {line!r}")
    if not nodes:
        raise ParseError(PROBE, 0, "no node found in output")
    cabled = {guid: node for guid, node in nodes.items() if not _is_aggregation(node)}
    links = _links(seen, cabled, port_guids)
    return {"nodes": [cabled[guid] for guid in sorted(cabled)], "links": links}


def _is_aggregation(node: Node) -> bool:
    return node["type"] == "ca" and node["description"].endswith(_AGGREGATION_NODE)


def _links(
    seen: dict[tuple[End, End], tuple[int, str, str]],
    nodes: dict[str, Node],
    port_guids: dict[End, str],
) -> list[Link]:
    """Pair up the two sightings of each link; keep the links between cabled nodes."""
    links: list[tuple[End, End, str, str]] = []
    for (local, remote), (number, width, speed) in seen.items():
        if local[0] not in nodes:
            continue
        where = f"link {local[0]}[{local[1]}]-{remote[0]}[{remote[1]}]"
        if remote[0] not in nodes:
            raise ParseError(PROBE, number, f"{where} names a node with no block (cut off?)")
        back = seen.get((remote, local))
        if back is None:
            raise ParseError(PROBE, number, f"{where} is listed from one end only (cut off?)")
        if back[1:] != (width, speed):
            raise ParseError(PROBE, number, f"the two ends of {where} disagree on width/speed")
        if local < remote:
            links.append((local, remote, width, speed))
    return [
        {
            "ends": [list(a), list(b)],
            "port_guids": [port_guids.get(a), port_guids.get(b)],
            "width": width,
            "speed": speed,
        }
        for a, b, width, speed in sorted(links)
    ]


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The fabric as `state` cables it (its `cables`, each end's node a switch or the HCA of
    `hcas`): a block a node, switches first, a line a cabled port. CA node GUIDs are port GUID
    - 1, as ibsim makes them."""
    owner = state["hcas"]
    nodes: dict[str, dict[str, Any]] = {}  # node GUID -> {desc, kind, ports{port: line}}
    for cable in state["cables"]:
        ends = [_node(cable[side], owner) for side in ("a", "b")]
        for node in ends:
            nodes.setdefault(node["guid"], {**node, "ports": {}})
        lids = {node["guid"]: lid(node["guid"]) for node in ends}
        for this, that in ((ends[0], ends[1]), (ends[1], ends[0])):
            nodes[this["guid"]]["ports"][this["port"]] = _port_line(this, that, lids, cable["rate"])
    blocks = ["#\n# Topology file: generated by clusterforge/lab/fleet.py\n#\n"]
    for guid in sorted(nodes, key=lambda g: (nodes[g]["kind"] != "Switch", g)):
        blocks.append(_block(nodes[guid], lid(guid)))
    return {PROBE: "\n".join(blocks)}


def _node(end: Mapping[str, Any], owner: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """One end of a cable as ibnetdiscover sees its node: a CA behind a host port GUID."""
    if end["guid"] in owner:
        hca = owner[end["guid"]]
        node = f"0x{int(end['guid'], 16) - 1:016x}"
        return {
            "guid": node,
            "port": end["port"],
            "port_guid": end["guid"],
            "kind": "Ca",
            "desc": f"{hca['host']} {hca['device']}",
        }
    return {
        "guid": end["guid"],
        "port": end["port"],
        "port_guid": None,
        "kind": "Switch",
        "desc": f"MF0;{end['name']}:MQM8700/U1",
    }


def _port_line(this: dict[str, Any], that: dict[str, Any], lids: dict[str, int], rate: str) -> str:
    remote = f'"{"H" if that["kind"] == "Ca" else "S"}-{that["guid"][2:]}"[{that["port"]}]'
    if this["kind"] == "Ca":
        local = f"[{this['port']}]({int(this['port_guid'], 16):x}) "
        return (
            f'{local}\t{remote}\t\t# lid {lids[this["guid"]]} lmc 0 "{that["desc"]}" '
            f"lid {lids[that['guid']]} {rate}"
        )
    if that["kind"] == "Ca":
        remote += f"({int(that['port_guid'], 16):x}) "
    return f'[{this["port"]}]\t{remote}\t\t# "{that["desc"]}" lid {lids[that["guid"]]} {rate}'


def _block(node: dict[str, Any], lid_: int) -> str:
    guid = node["guid"]
    if node["kind"] == "Switch":
        nports = max(40, *node["ports"])
        head = (
            f"vendid=0x2c9\ndevid=0xd2f0\nsysimgguid={guid}\nswitchguid={guid}({guid[2:]})\n"
            f'Switch\t{nports} "S-{guid[2:]}"\t\t# "{node["desc"]}" '
            f"enhanced port 0 lid {lid_} lmc 0\n"
        )
    else:
        head = (
            f"vendid=0x2c9\ndevid=0x101b\nsysimgguid={guid}\ncaguid={guid}\n"
            f'Ca\t1 "H-{guid[2:]}"\t\t# "{node["desc"]}"\n'
        )
    return head + "".join(node["ports"][p] + "\n" for p in sorted(node["ports"]))
