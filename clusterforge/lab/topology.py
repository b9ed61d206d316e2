"""Cable faults written into the planned fabric, so ibsim plays the fabric as it is cabled.

`stage(net, cables, faults)` takes `generated/fabric/topology.net` and returns it with each
cable fault applied to the port lines of both of the cable's ends: a swap exchanges the far
ends of two cables, an unplug removes the cable, a degraded cable carries the lower rate that
ibsim then trains the link at. Everything else in the file is kept byte for byte.

A fabric planned faster than ibsim can train (NDR: ibsim 0.10's extended speeds stop at HDR's
bit, and it refuses NDR's, "bad extended speed 8 = should be between 0 to 7") plays at HDR in
its place: `stand_in` rewrites the planned rate, and `played_back` turns the scans' text of
that stand-in back into the planned speed, so the audit reads the fabric as planned and only a
cable degraded below the stand-in reads slow.

ibsim names a switch `S-<node GUID>` and a CA `H-<node GUID>`, where a CA's node GUID is its
port 1 GUID - 1 (see `clusterforge.lab.ibsim`); the plan's cable ends carry port GUIDs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from clusterforge.lab.faults import CableDegraded, CableSwapped, CableUnplugged, Fault
from clusterforge.lab.ibsim import LabError

_HEADER = re.compile(r'^(?:Switch|Ca|Hca|Rt)\s+\d+\s+"([^"]+)"(?:\s*#\s*"([^"]*)")?')
_PORT = re.compile(r'^\[(\d+)\]\s+"([^"]+)"\[(\d+)\].*?(\S+)$')

End = tuple[str, int]  # (ibsim node id, port)


def stage(net: str, cables: Mapping[str, Mapping[str, Any]], faults: Iterable[Fault]) -> str:
    """`net` with the cable faults among `faults` applied; `cables` by ID, as in
    expected/fabric.json. Raises LabError when a cable's ends are not in `net`."""
    lines = net.splitlines(keepends=True)
    at: dict[End, int] = {}  # a port's line
    desc: dict[str, str] = {}
    node = None
    for index, line in enumerate(lines):
        if header := _HEADER.match(line):
            node = header[1]
            desc[node] = header[2] or node
        elif (port := _PORT.match(line)) and node is not None:
            at[(node, int(port[1]))] = index

    def end(cable: str, side: str) -> End:
        e = cables[cable][side]
        for node_id in (f"S-{e['guid'][2:]}", f"H-{int(e['guid'], 16) - 1:016x}"):
            if (node_id, e["port"]) in at:
                return node_id, int(e["port"])
        raise LabError(f"cable {cable}: {e['name']} port {e['port']} is not in the fabric")

    def link(here: End, there: End) -> None:
        index = at[here]
        rate = _rate(lines[index])
        lines[index] = f'[{here[1]}]\t"{there[0]}"[{there[1]}]\t# "{desc[there[0]]}" lid 0 {rate}\n'

    for fault in faults:
        if isinstance(fault, CableSwapped):
            one, two = fault.cables
            a1, b1, a2, b2 = end(one, "a"), end(one, "b"), end(two, "a"), end(two, "b")
            for here, there in ((a1, b2), (b2, a1), (a2, b1), (b1, a2)):
                link(here, there)
        elif isinstance(fault, CableUnplugged):
            for side in ("a", "b"):
                lines[at[end(fault.cable, side)]] = ""
        elif isinstance(fault, CableDegraded):
            for side in ("a", "b"):
                index = at[end(fault.cable, side)]
                old = _rate(lines[index])
                lines[index] = lines[index].rstrip("\n").removesuffix(old) + fault.rate + "\n"
    return "".join(lines)


IBSIM_TOP = "HDR"  # the fastest speed ibsim 0.10 trains a link at
# How the scans print a speed: ibnetdiscover's port lines `4xHDR`, iblinkinfo's per-lane rate
# (contract/probes/iblinkinfo.py); HDR's and NDR's texts are the same length, so the scans'
# columns stay aligned.
_SCAN_TEXT = {"HDR": "53.125", "NDR": "106.25"}


def stand_in(net: str) -> tuple[str, str | None]:
    """`net` with a planned speed ibsim cannot train replaced by IBSIM_TOP, and that speed
    (None when ibsim plays the plan as it is). Raises LabError when a link already runs at
    IBSIM_TOP (planned so, or degraded to it): the scans could not tell it from the stand-in."""
    speeds = set(re.findall(r"lid \d+ \d+x([A-Z]+)$", net, flags=re.MULTILINE))
    beyond = sorted(speeds - {"SDR", "DDR", "QDR", "FDR", "EDR", IBSIM_TOP})
    if not beyond:
        return net, None
    if len(beyond) > 1 or beyond[0] not in _SCAN_TEXT or IBSIM_TOP in speeds:
        raise LabError(
            f"ibsim trains links at {IBSIM_TOP} at most, so the lab plays {'/'.join(beyond)} "
            f"links as {IBSIM_TOP}, and cannot also play links at {IBSIM_TOP} apart from them "
            "(degrade a cable to EDR or slower)"
        )
    speed = beyond[0]
    played = re.sub(rf"(lid \d+ \d+x){speed}$", rf"\g<1>{IBSIM_TOP}", net, flags=re.MULTILINE)
    return played, speed


def played_back(speed: str) -> str:
    """A sed script turning the scans' text of IBSIM_TOP into `speed`'s."""
    top, planned = _SCAN_TEXT[IBSIM_TOP].replace(".", r"\."), _SCAN_TEXT[speed]
    return f"s/x{IBSIM_TOP}/x{speed}/g; s/ {top} Gbps/ {planned} Gbps/g"


def only(net: str, hosts: Collection[str], every: Collection[str]) -> str:
    """`net` without the CAs of the hosts in `every` but not in `hosts`, nor the switch
    ports cabled to them: the fabric as if only `hosts` were installed."""
    gone = set(every) - set(hosts)
    blocks = net.split("\n\n")
    dropped = set()
    for block in blocks:
        for line in block.splitlines():
            if (header := _HEADER.match(line)) and (header[2] or "").split(" ")[0] in gone:
                dropped.add(header[1])
    kept = []
    for block in blocks:
        lines = block.split("\n")
        if any((h := _HEADER.match(line)) and h[1] in dropped for line in lines):
            continue
        lines = [x for x in lines if not ((p := _PORT.match(x)) and p[2] in dropped)]
        kept.append("\n".join(lines))
    return "\n\n".join(kept)


def _rate(line: str) -> str:
    match = _PORT.match(line)
    if match is None:  # a cable unplugged and then named by another fault
        raise LabError(f"no cable left at {line.strip()!r} to change")
    return match[4]
