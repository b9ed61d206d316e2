"""GUIDs of a live fabric, by planned port: `clusterforge import --ibnetdiscover FILE`.

A new fabric's switches and HCAs have GUIDs nobody typed yet; `ibnetdiscover` sees them all,
but only as GUIDs and ports. The cable plan says what sits at the far end of every planned
port, so starting from the devices whose planned GUID the scan shows (the anchors: e.g. the
spines, typed from their labels), each planned cable names the GUID at its far end: a switch's
node GUID, or an HCA's port GUID. Newly named switches become anchors in turn, until the scan
is walked. What the plan does not explain is a conflict, never a guess: a link on a port no
cable is planned for, a switch on another port than planned, or an HCA that names another
planned host (its node description starts with the host name): miswires. The scan is read
by the audit's own parser of it (`contract/probes/ibnetdiscover.py`), so import and audit read
a fabric alike.
"""

from __future__ import annotations

from collections import deque

from compiler.importer import Conflict, Fact, ImportError_
from compiler.model import Medium
from compiler.plan import Plan
from contract.probes import ParseError, ibnetdiscover

Port = tuple[str, int]  # (node GUID, port number)


def facts(text: str, name: str, plan: Plan) -> tuple[list[Fact], list[Conflict]]:
    """The GUIDs `ibnetdiscover` output `text` shows at planned ports, as facts."""
    try:
        scan = ibnetdiscover.parse(text)
    except ParseError as exc:
        raise ImportError_(f"{name}: {exc}") from None
    seen: dict[Port, tuple[Port, str | None]] = {}  # an end -> the far end and its port GUID
    for link in scan["links"]:
        (a, b), (guid_a, guid_b) = link["ends"], link["port_guids"]
        end_a, end_b = (str(a[0]), int(a[1])), (str(b[0]), int(b[1]))
        seen[end_a] = (end_b, guid_b)
        seen[end_b] = (end_a, guid_a)
    ib = plan.networks
    planned: dict[tuple[str, int], tuple[str, str]] = {}  # (switch, port) -> (device, port)
    for c in plan.cables:
        if ib[c.network].medium != Medium.INFINIBAND:
            continue
        planned[(c.a.device, int(c.a.port))] = (c.b.device, c.b.port)
        if c.b.port.isdigit():
            planned[(c.b.device, int(c.b.port))] = (c.a.device, c.a.port)
    switches = {s.name: s.guid for s in plan.switches if s.guid}
    hosts = {h.name for h in plan.hosts}
    described = {node["guid"]: node["description"] for node in scan["nodes"]}
    node_guids = {node for node, _ in seen}
    anchors = {sw: guid for sw, guid in switches.items() if guid in node_guids}
    if not anchors:
        raise ImportError_(
            f"{name}: no planned switch GUID appears in the scan; put the real GUID of one "
            "switch (e.g. a spine's, from its label) into its rack file and import again"
        )
    found: list[Fact] = []
    conflicts: list[Conflict] = []
    queue = deque(sorted(anchors.items()))
    walked: set[str] = set()
    while queue:
        switch, guid = queue.popleft()
        if switch in walked:
            continue
        walked.add(switch)
        ports = sorted(p for (node, p) in seen if node == guid)
        for port in ports:
            (far, far_port), port_guid = seen[(guid, port)]
            origin = f"{name}: {switch} port {port}"
            want = planned.get((switch, port))
            if want is None:
                message = f"a link to {far} on a port no cable is planned for"
                conflicts.append(Conflict(origin, message))
                continue
            device, want_port = want
            if device in switches:
                if str(far_port) != want_port:
                    message = f"{device} is on its port {far_port}, planned {want_port}"
                    conflicts.append(Conflict(origin, message))
                    continue
                found.append(Fact(device, ("guid",), far, origin))
                queue.append((device, far))
            elif port_guid is not None:
                # An HCA names its host ("gpu012 mlx5_0"): another planned host's there is a
                # miswire, and taking its GUID would swap two hosts' identities.
                said = (described.get(far) or "").split(" ", 1)[0]
                if said != device and said in hosts:
                    message = f"{said}'s HCA is where {device}'s is planned (a miswire?)"
                    conflicts.append(Conflict(origin, message))
                    continue
                # Named by its HCA (mlx5_3 of mlx5_3/1): the importer files it under `guid`
                # on a host of one HCA, under `guids` on a server of several.
                hca = want_port.split("/", 1)[0]
                found.append(Fact(device, ("guids", hca), port_guid, origin))
    return found, conflicts
