"""The acceptance run's fabric test: which server pairs run `ib_write_bw`, in which rounds, and
which cables each pair's traffic crosses.

A pair's path is the plan's routing, not a guess: OpenSM's ftree engine (the plan's routing
engine, with static LIDs from the plan) routes every destination host through one spine. On
each leaf it gives its compute nodes, in leaf-port order, the up-port groups (one per spine,
in spine order) round robin, so the k-th server of a leaf is reached through spine k mod S
(and, with several links per spine, link (k // S) mod L of that group). Traffic from a client
on leaf A to a server d on leaf B therefore crosses: the client's own cable, A's uplink to
spine(d), B's uplink from spine(d), and d's cable. `tests/test_accept.py` checks this
rule against the forwarding tables OpenSM really computes for the planned fabric on ibsim.

A consequence the plan reports rather than hides: an uplink to a spine whose index no server
rank reaches (7 spines, at most 5 servers per leaf) carries no host traffic under ftree, so
no host pair can test it; it is listed as idle, with that reason.

Rounds: no host in two pairs of one round (each runs one server or one client). In round r,
leaf i (in name order) meets leaf i XOR 2^r, rank k against rank k + r (a server's own cable
meets a different spine each round, so a bad one is told from the uplinks), so most servers
run at once
and load every spine their ranks reach (ECMP imbalance shows as slow pairs), and a new leaf
only adds pairs; an uplink those rounds leave uncovered gets a pair of its own, packed into
extra rounds.

Telling cables apart: one bad cable fails every pair that crosses it, so two cables crossed by
the same pairs cannot be told apart by any result. Where the rounds leave such a set, pairs
that cross some of its cables and not the others are added (extra rounds), until every cable
some pair crosses has pairs of its own, or no route splits the set (a leaf with one server:
its cable and its uplink carry the same traffic); `inseparable` lists what is left.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice, pairwise
from typing import NamedTuple


class Server(NamedTuple):
    """A compute node as the test sees it: its name, its leaf, its rank there, its cable."""

    leaf: str
    rank: int  # 0-based, among the leaf's compute nodes in leaf-port order
    name: str
    cable: str  # the ID of its cable to the leaf


class Pair(NamedTuple):
    client: str
    server: str
    cables: tuple[str, ...]  # client cable, client leaf's uplink, server leaf's uplink, server's


class FabricTest(NamedTuple):
    rounds: tuple[tuple[Pair, ...], ...]
    idle: tuple[str, ...]  # uplinks no host-to-host route crosses (sorted IDs)
    # Sets of cables (sorted IDs) that every pair crosses all or none of: no route tells
    # them apart, so a failure among them is reported as one of them.
    inseparable: tuple[tuple[str, ...], ...] = ()


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
    leaves = sorted({h.leaf for h in hosts})
    on: dict[str, list[Server]] = {leaf: [h for h in hosts if h.leaf == leaf] for leaf in leaves}
    rounds: list[tuple[Pair, ...]] = []
    # Leaf i meets leaf i XOR 2^r in round r, its server of rank k the other's of rank k + r
    # (the even ranks of the lower leaf write, the odd ones are written to): both leaves'
    # uplinks to the spines their ranks reach carry traffic, and a new leaf only adds pairs.
    for bit in range(max(1, (len(leaves) - 1).bit_length())):
        pairs = []
        for i, a in enumerate(leaves):
            j = i ^ (1 << bit)
            if j <= i or j >= len(leaves):
                continue
            m = min(len(on[a]), len(on[leaves[j]]))
            for k, x in enumerate(on[a][:m]):
                # Shifted by the round, so a server's own cable meets a different spine in
                # each round and a bad one is told apart from the uplink it used.
                y = on[leaves[j]][(k + bit) % m]
                pair = route(x, y, spines, links, up) if x.rank % 2 == 0 else None
                pair = pair or route(y, x, spines, links, up)
                if pair is not None:
                    pairs.append(pair)
        if pairs:
            rounds.append(tuple(pairs))
    by_slot: dict[tuple[str, int], list[Server]] = defaultdict(list)  # in host order
    for h in hosts:
        by_slot[_slot(h, spines, links)].append(h)
    routable = _routable(hosts, by_slot, up)
    covered = {c for pairs in rounds for p in pairs for c in p.cables}
    uplink = {cable: key for key, cable in up.items()}
    extra = [
        p
        for c in sorted(routable - covered)
        if (p := _crossing(uplink[c], hosts, by_slot, spines, links, up))
    ]
    # Two uncovered uplinks may find the same pair: it runs once (one log per pair).
    rounds += _pack([p for p in dict.fromkeys(extra) if not covered.issuperset(p.cables)])
    split, inseparable = _split(rounds, hosts, by_slot, spines, links, up)
    rounds += _pack(split)
    return FabricTest(tuple(rounds), tuple(sorted(set(up.values()) - routable)), inseparable)


def signatures(rounds: Iterable[Iterable[Pair]]) -> dict[str, frozenset[Pair]]:
    """Each cable some pair crosses -> the pairs that cross it."""
    found: dict[str, set[Pair]] = defaultdict(set)
    for pairs in rounds:
        for p in pairs:
            for c in p.cables:
                found[c].add(p)
    return {c: frozenset(ps) for c, ps in found.items()}


def _classes(crossing: Mapping[str, frozenset[Pair]]) -> list[list[str]]:
    """Cables crossed by exactly the same pairs, in sets of two or more (sorted)."""
    by_pairs: dict[frozenset[Pair], list[str]] = defaultdict(list)
    for cable, pairs in crossing.items():
        by_pairs[pairs].append(cable)
    return sorted(sorted(cs) for cs in by_pairs.values() if len(cs) > 1)


def _split(
    rounds: Sequence[tuple[Pair, ...]],
    hosts: list[Server],
    by_slot: Slots,
    spines: Sequence[str],
    links: int,
    up: Uplinks,
) -> tuple[list[Pair], tuple[tuple[str, ...], ...]]:
    """Pairs that split every set of cables the rounds cross only together, and the sets no
    route splits. A pair only refines the sets (cables told apart stay apart), so each added
    pair makes progress; the search runs only over the few sets there are."""
    uplink = {cable: key for key, cable in up.items()}
    host = {h.cable: h for h in hosts}

    def crossing(cable: str) -> Iterable[Pair]:
        """Every route over `cable`, in host order."""
        if cable in uplink:
            leaf, spine, j = uplink[cable]
            for client in hosts:
                for server in by_slot.get((spine, j), ()):
                    if leaf not in (client.leaf, server.leaf):
                        continue
                    if (p := route(client, server, spines, links, up)) is not None:
                        yield p
        elif cable in host:
            h = host[cable]
            for other in hosts:
                for client, server in ((h, other), (other, h)):
                    if (p := route(client, server, spines, links, up)) is not None:
                        yield p

    added: list[Pair] = []
    stuck: set[tuple[str, str]] = set()  # (a, b) no route tells apart
    busy: set[str] = set()  # the hosts of the added pairs
    crossed = signatures(rounds)
    while True:
        todo = [(a, b) for cs in _classes(crossed) for a, b in pairwise(cs) if (a, b) not in stuck]
        if not todo:
            break
        a, b = todo[0]
        splitting = (p for c in (a, b) for p in crossing(c) if (a in p.cables) != (b in p.cables))
        # The first of a few that uses no host another added pair does, so the added
        # pairs share rounds rather than each taking one of its own.
        few = list(islice(splitting, 32))
        found = next((p for p in few if not {p.client, p.server} & busy), few[0] if few else None)
        if found is None:
            stuck.add((a, b))
            continue
        added.append(found)
        busy |= {found.client, found.server}
        # The pair joins the sets of its own cables, the rest stand: not every pair's
        # signature made anew for each pair added, which grew with the square of the pairs.
        for c in found.cables:
            crossed[c] = crossed.get(c, frozenset()) | {found}
    return added, tuple(tuple(cs) for cs in _classes(crossed))


def _slot(server: Server, spines: Sequence[str], links: int) -> tuple[str, int]:
    """The (spine, link) ftree reaches `server` through."""
    return spines[server.rank % len(spines)], (server.rank // len(spines)) % links


Slots = Mapping[tuple[str, int], Sequence[Server]]  # (spine, link) -> servers reached by it


def _routable(hosts: list[Server], by_slot: Slots, up: Uplinks) -> set[str]:
    """Uplinks some pair's route crosses: (L, spine, j) when a server d reached through it
    sits on another leaf that has the same uplink and L has a server to write from, or d is
    on L and another leaf with that uplink has a server to write to it."""
    out = set()
    leaves_with = {h.leaf for h in hosts}
    for (leaf, spine, j), cable in up.items():
        targets = by_slot.get((spine, j), ())
        elsewhere = [d for d in targets if d.leaf != leaf and (d.leaf, spine, j) in up]
        writes_out = bool(elsewhere) and leaf in leaves_with
        written_to = any(d.leaf == leaf for d in targets) and any(
            other != leaf and (other, spine, j) in up for other in leaves_with
        )
        if writes_out or written_to:
            out.add(cable)
    return out


def _crossing(
    uplink: tuple[str, str, int],
    hosts: list[Server],
    by_slot: Slots,
    spines: Sequence[str],
    links: int,
    up: Uplinks,
) -> Pair | None:
    """The first pair (in host order) whose route crosses `uplink` (leaf, spine, link): only
    a server reached through (spine, link) can be the far end of such a route, so only those
    are tried, and the answer is the one a scan of every pair would find first."""
    leaf, spine, j = uplink
    for client in hosts:
        for server in by_slot.get((spine, j), ()):
            if leaf not in (client.leaf, server.leaf):
                continue
            pair = route(client, server, spines, links, up)
            if pair is not None:
                return pair
    return None


def _pack(pairs: list[Pair]) -> list[tuple[Pair, ...]]:
    """Pairs into rounds, first fit, no host twice in a round."""
    rounds: list[list[Pair]] = []
    busy: list[set[str]] = []
    for pair in pairs:
        for chosen, used in zip(rounds, busy, strict=True):
            if pair.client not in used and pair.server not in used:
                chosen.append(pair)
                used |= {pair.client, pair.server}
                break
        else:
            rounds.append([pair])
            busy.append({pair.client, pair.server})
    return [tuple(r) for r in rounds]
