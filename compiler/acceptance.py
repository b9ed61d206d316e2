"""The acceptance run's fabric test: which server pairs run `ib_write_bw`, in which rounds, and
which cables each pair's traffic crosses.

A pair's path is the plan's routing, not a guess: OpenSM's ftree engine (the plan's routing
engine, with static LIDs from the plan) routes every destination host through one spine. On
each leaf it gives its compute nodes, in leaf-port order, the up-port groups (one per spine,
in spine order) round robin, so the k-th server of a leaf is reached through spine k mod S
(and, with several links per spine, link (k // S) mod L of that group). Traffic from a client
on leaf A to a server d on leaf B therefore crosses: the client's own cable, A's uplink to
spine(d), B's uplink from spine(d), and d's cable. `tests/test_acceptance.py` checks this
rule against the forwarding tables OpenSM really computes for the planned fabric on ibsim.

A consequence the plan reports rather than hides: an uplink to a spine whose index no server
rank reaches (7 spines, at most 5 servers per leaf) carries no host traffic under ftree, so
no host pair can test it; it is listed as idle, with that reason.

Rounds: no host in two pairs of one round (each runs one server or one client); greedily, each
round first takes the pairs that cover the most uplinks not yet covered, then fills with more
cross-leaf pairs among the hosts left, so every round loads the spines at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Server:
    """A compute node as the test sees it: its name, its leaf, its rank there, its cable."""

    leaf: str
    rank: int  # 0-based, among the leaf's compute nodes in leaf-port order
    name: str
    cable: str  # the ID of its cable to the leaf


@dataclass(frozen=True)
class Pair:
    client: str
    server: str
    cables: tuple[str, ...]  # client cable, client leaf's uplink, server leaf's uplink, server's


@dataclass(frozen=True)
class FabricTest:
    rounds: tuple[tuple[Pair, ...], ...]
    idle: tuple[str, ...]  # uplinks no host-to-host route crosses (sorted IDs)


Uplinks = Mapping[tuple[str, str, int], str]  # (leaf, spine, link j) -> cable ID


def route(
    client: Server, server: Server, spines: Sequence[str], links: int, up: Uplinks
) -> Pair | None:
    """The pair and the cables its writes cross (ftree: through the server's spine); None
    when a leaf on the way lacks that uplink (planned, not installed)."""
    spine = spines[server.rank % len(spines)]
    j = (server.rank // len(spines)) % links
    ends = (up.get((client.leaf, spine, j)), up.get((server.leaf, spine, j)))
    if ends[0] is None or ends[1] is None or client.leaf == server.leaf:
        return None
    return Pair(client.name, server.name, (client.cable, ends[0], ends[1], server.cable))


def plan_rounds(
    servers: Iterable[Server], spines: Sequence[str], links: int, up: Uplinks
) -> FabricTest:
    """Rounds of disjoint pairs covering every uplink some host route crosses."""
    hosts = sorted(servers)
    if not spines:
        return FabricTest((), ())
    routed = (route(c, s, spines, links, up) for c in hosts for s in hosts)
    candidates = [p for p in routed if p is not None]
    uplinks = set(up.values())
    uncovered = {cable for p in candidates for cable in p.cables if cable in uplinks}
    idle = tuple(sorted(uplinks - uncovered))
    rounds: list[tuple[Pair, ...]] = []
    while uncovered:
        busy: set[str] = set()
        chosen: list[Pair] = []
        ranked = sorted(candidates, key=lambda p: -len(uncovered.intersection(p.cables)))
        for pair in ranked:
            if pair.client in busy or pair.server in busy:
                continue
            if not uncovered.intersection(pair.cables):
                continue
            chosen.append(pair)
            busy |= {pair.client, pair.server}
            uncovered -= set(pair.cables)
        rounds.append(tuple(chosen + _fill(hosts, busy, spines, links, up)))
    return FabricTest(tuple(rounds), idle)


def _fill(
    hosts: list[Server], busy: set[str], spines: Sequence[str], links: int, up: Uplinks
) -> list[Pair]:
    """More pairs among the idle hosts, each across leaves: load, for ECMP imbalance."""
    free = [h for h in hosts if h.name not in busy]
    out = []
    half = len(free) // 2
    waiting = free[half:]
    for client in free[:half]:
        for server in waiting:
            pair = route(client, server, spines, links, up)
            if pair is not None:
                waiting.remove(server)
                out.append(pair)
                break
    return out
