"""The acceptance run's fabric test: which server pairs run `ib_write_bw`, in which rounds, and
which cables each pair's traffic crosses.

A pair's path is the plan's routing, not a guess: OpenSM's ftree engine (the plan's routing
engine, with static LIDs from the plan) routes to every compute node in turn, leaf by leaf in
its indexing order, each leaf's nodes in port order and then as many stand-ins ("dummy CAs")
as the fullest leaf has nodes, so every leaf routes the same number of targets. Each target
climbs from its leaf to the roots along the least-loaded up-port group (ties to the lower
index), and every switch it meets routes it down that way; every other switch below those
learns the route up to the first switch that has it. Port loads are counters, so the choice is
round robin, and the path between a client on leaf A and a server d (the t-th target of its
leaf B, t = its rank there) follows:

- d's spine: the pod's spine t mod S (S spines a pod, in plane order), over B's link
  (t // S) mod L of that spine's L; its place among that spine's targets m = (B's place in its
  pod) * n + t // S, where n is the targets of a leaf through one spine (dummies counted);
- three-tier, from another pod: d's core is its plane's core m mod C, over the spine's link
  (m // C) mod Lc (C cores a plane, Lc links a spine and core);
- A's way up: to its pod's spine of d's plane, over the link counted by every target of that
  plane before d and not on A (each moved that group's load on by one), so link
  (B's place among all leaves * n + t // S - (n when A comes before B)) mod L; from another
  pod, that spine reaches d's core over the link counted by the targets before d that
  crossed that core from a pod other than A's.

A client's writes therefore cross: its own cable, A's uplink, (three-tier: the spine's link
to the core, the core's link down to d's spine,) B's uplink from d's spine, and d's cable.
`tests/test_accept.py`, `tests/test_rails.py` and `tests/test_fabric.py` check the rule
against the forwarding tables OpenSM really computes on ibsim, two- and three-tier.

A consequence the plan reports rather than hides: an uplink to a spine whose index no server
rank reaches (7 spines, at most 5 servers per leaf), or a core link no spine's targets count up
to, carries no host traffic under ftree, so no host pair can test it; it is listed as idle,
with that reason.

Rounds: no host in two pairs of one round (each runs one server or one client). In round r,
leaf i (in name order) meets leaf i XOR 2^r, rank k against rank k + r (a server's own cable
meets a different spine each round, so a bad one is told from the uplinks), so most servers
run at once and load every spine their ranks reach (ECMP imbalance shows as slow pairs), and a
new leaf only adds pairs; a cable those rounds leave uncovered gets a pair of its own, packed
into extra rounds.

Telling cables apart: one bad cable fails every pair that crosses it, so two cables crossed by
the same pairs cannot be told apart by any result. Where the rounds leave such a set, pairs
that cross some of its cables and not the others are added (extra rounds), until every cable
some pair crosses has pairs of its own, or no route splits the set (a leaf with one server:
its cable and its uplink carry the same traffic); `inseparable` lists what is left.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import count, islice, pairwise
from typing import NamedTuple, cast


class Server(NamedTuple):
    """A compute node as the test sees it: its name, its leaf, its rank there, its cable."""

    leaf: str
    rank: int  # 0-based, among the leaf's compute nodes in leaf-port order
    name: str
    cable: str  # the ID of its cable to the leaf


class Pair(NamedTuple):
    client: str
    server: str
    # The client's cable, its leaf's uplink, (between pods: that spine's link to the core,
    # the core's link down to the server's spine,) the server leaf's uplink, the server's.
    cables: tuple[str, ...]


class FabricTest(NamedTuple):
    rounds: tuple[tuple[Pair, ...], ...]
    idle: tuple[str, ...]  # uplinks and core links no host-to-host route crosses (sorted IDs)
    # Sets of cables (sorted IDs) that every pair crosses all or none of: no route tells
    # them apart, so a failure among them is reported as one of them.
    inseparable: tuple[tuple[str, ...], ...] = ()


Uplinks = Mapping[tuple[str, str, int], str]  # (lower switch, upper switch, link j) -> cable ID


class Reach(NamedTuple):
    """What the routes to a server from every other pod share."""

    core: str  # its core in its plane
    earlier: int  # that core's targets before it from a pod after the server's
    through: tuple[int, ...]  # [p]: that core's targets of the pods before pod p
    up: str | None  # the server's spine's link to that core


# The spine a client leaf climbs to, and the cables from it down to the server's leaf.
Descent = tuple[str, tuple[str | None, ...]] | None
_UNSEEN = object()  # not yet in a cache whose values may be None


@dataclass(frozen=True)
class Tree:
    """The fat tree as ftree indexes it: every leaf it routes from, by pod and place (pods
    and places in its indexing order); a two-tier fabric is one pod (0) and no cores."""

    leaves: Mapping[str, tuple[int, int]]  # leaf -> (pod, place in the pod)
    spines: Mapping[int, tuple[str, ...]]  # pod -> its spines, in plane order
    links: int  # per leaf and spine
    up: Uplinks  # installed
    per_leaf: int  # the targets ftree routes from each leaf: the most compute nodes on one
    cores: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # plane -> its cores
    core_links: int = 1  # per spine and core
    core_up: Uplinks = field(default_factory=dict)  # installed: (spine, core, link) -> cable

    @classmethod
    def two_tier(
        cls, servers: Iterable[Server], spines: Sequence[str], links: int, up: Uplinks
    ) -> Tree:
        """One pod of every spine, its leaves in name order."""
        hosts = list(servers)
        names = sorted({h.leaf for h in hosts} | {key[0] for key in up})
        per_leaf = max((h.rank + 1 for h in hosts), default=0)
        leaves = {leaf: (0, i) for i, leaf in enumerate(names)}
        return cls(leaves, {0: tuple(spines)}, links, up, per_leaf)

    def testing(self, up: Uplinks) -> Tree:
        """The same routes, with only these uplinks to test (one rail's leaves')."""
        return Tree(self.leaves, self.spines, self.links, up, self.per_leaf, self.cores,
                    self.core_links, self.core_up)  # fmt: skip

    @cached_property
    def _sizes(self) -> dict[int, int]:
        sizes: dict[int, int] = defaultdict(int)
        for pod, _ in self.leaves.values():
            sizes[pod] += 1
        return dict(sizes)

    @cached_property
    def _first(self) -> dict[int, int]:
        """Each pod's first place among every leaf."""
        out, total = {}, 0
        for pod in sorted(self._sizes):
            out[pod], total = total, total + self._sizes[pod]
        return out

    @cached_property
    def plane(self) -> dict[str, tuple[int, int]]:
        """spine -> (pod, plane)."""
        return {s: (pod, i) for pod, spines in self.spines.items() for i, s in enumerate(spines)}

    @cached_property
    def _throughs(self) -> dict[tuple[int, int, int], tuple[int, ...]]:
        return {}

    def _through(self, n: int, core: int, cores: int) -> tuple[int, ...]:
        """[p]: the targets of the pods before pod p that a spine sends through its plane's
        core number `core` (of `cores`), at `n` targets a leaf."""
        key = (n, core, cores)
        if key not in self._throughs:
            out = [0]
            for pod in sorted(self._sizes):
                out.append(out[-1] + (self._sizes[pod] * n - core + cores - 1) // cores)
            self._throughs[key] = tuple(out)
        return self._throughs[key]

    def place(self, leaf: str) -> int:
        """A leaf's place among every leaf, in ftree's order."""
        return self._where[leaf][1]

    @cached_property
    def _where(self) -> dict[str, tuple[int, int]]:
        """leaf -> (its pod, its place among every leaf): `route`'s two lookups in one."""
        return {leaf: (pod, self._first[pod] + i) for leaf, (pod, i) in self.leaves.items()}

    @cached_property
    def _targets(self) -> dict[Server, tuple[int, int, int]]:
        return {}

    def target(self, server: Server) -> tuple[int, int, int]:
        """(plane, k, n): the spine `server` is reached through, its round on its leaf
        (rank // S), and the targets of a leaf through one spine of that plane."""
        found = self._targets.get(server)
        if found is None:
            found = self._targets[server] = self._target(server)
        return found

    def _target(self, server: Server) -> tuple[int, int, int]:
        spines = len(self.spines[self.leaves[server.leaf][0]])
        plane = server.rank % spines
        return plane, server.rank // spines, (self.per_leaf - plane + spines - 1) // spines

    def climb(self, before: bool, server: Server) -> int:
        """The link a leaf climbs to `server`'s spine plane over: every target of that plane
        before it moved that group's load on by one, but the leaf's own (`before`: the leaf
        comes before the server's)."""
        _, k, n = self.target(server)
        return (self.place(server.leaf) * n + k - (n if before else 0)) % self.links

    @cached_property
    def _descents(self) -> dict[tuple[Server, int], Descent]:
        return {}

    @cached_property
    def _reaches(self) -> dict[Server, Reach | None]:
        return {}

    def descent(self, server: Server, pod: int) -> Descent:
        """From a leaf of `pod`: the spine it climbs to for `server`, and the cables from that
        spine down to the server's leaf (None where one is not installed); None when no path
        the rule describes joins them. Every client leaf of a pod shares it."""
        key = (server, pod)
        found = self._descents.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._descents[key] = self._descent(server, pod)
        return found  # type: ignore[return-value]  # _UNSEEN is never stored

    def _descent(self, server: Server, pod: int) -> Descent:
        home, _ = self.leaves[server.leaf]
        plane, k, _ = self.target(server)
        spine = self.spines[home][plane]
        down = self.up.get((server.leaf, spine, k % self.links))
        if pod == home:
            return spine, (down,)
        far = self.reach(server)
        theirs = self.spines.get(pod, ())
        if far is None or plane >= len(theirs):
            return None
        # The core's link down to that pod's spine: one step for every earlier target
        # through that core from a pod other than `pod`, in pod order.
        earlier = far.earlier - (far.through[pod + 1] - far.through[pod]) * (pod < home)
        mine = theirs[plane]
        return mine, (self.core_up.get((mine, far.core, earlier % self.core_links)), far.up, down)

    def reach(self, server: Server) -> Reach | None:
        """What every route to `server` from another pod shares (None on a plane without
        cores); `descent` adds what depends on the pod."""
        found = self._reaches.get(server, _UNSEEN)
        if found is _UNSEEN:
            found = self._reaches[server] = self._reach(server)
        return found  # type: ignore[return-value]  # _UNSEEN is never stored

    def _reach(self, server: Server) -> Reach | None:
        home, i = self.leaves[server.leaf]
        plane, k, n = self.target(server)
        cores = self.cores.get(plane, ())
        if not cores:
            return None
        m = i * n + k  # the server's place among its spine's targets
        c = m % len(cores)
        through = self._through(n, c, len(cores))
        spine = self.spines[home][plane]
        up = self.core_up.get((spine, cores[c], (m // len(cores)) % self.core_links))
        return Reach(cores[c], m // len(cores) + through[home], through, up)

    def route(self, client: Server, server: Server) -> Pair | None:
        """The pair and the cables its writes cross; None on one leaf, or when a cable on
        the way is not installed."""
        if client.leaf == server.leaf:
            return None
        # The descent's cache read here: a pair plan routes every pair of its rounds here
        # (115,000 at 4,096 eight-rail servers).
        pod, mine = self._where[client.leaf]
        key = (server, pod)
        found = self._descents[key] if key in self._descents else self.descent(server, pod)
        if found is None:
            return None
        spine, below = found
        before = mine < self._where[server.leaf][1]
        first = self.up.get((client.leaf, spine, self.climb(before, server)))
        if first is None or None in below:
            return None
        installed = cast(tuple[str, ...], below)  # none of them None, as just seen
        return Pair(client.name, server.name, (client.cable, first, *installed, server.cable))


def plan_rounds(servers: Iterable[Server], tree: Tree) -> FabricTest:
    """Rounds of disjoint pairs covering every uplink and core link some host route
    crosses."""
    hosts = sorted(servers)
    if not any(tree.spines.values()):
        return FabricTest((), ())
    leaves = sorted({h.leaf for h in hosts})
    on: dict[str, list[Server]] = defaultdict(list)
    for h in hosts:
        on[h.leaf].append(h)
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
                pair = tree.route(x, y) if x.rank % 2 == 0 else None
                pair = pair or tree.route(y, x)
                if pair is not None:
                    pairs.append(pair)
        if pairs:
            rounds.append(tuple(pairs))
    over = _crossing(hosts, tree)
    routable = _routable(hosts, tree)
    covered = {c for pairs in rounds for p in pairs for c in p.cables}
    rounds += _cover(sorted(routable - covered), over, covered)
    split, inseparable = _split(rounds, over)
    rounds += split
    tested = set(tree.up.values()) | set(tree.core_up.values())
    return FabricTest(tuple(rounds), tuple(sorted(tested - routable)), inseparable)


def _classes(crossing: Mapping[str, frozenset[int]]) -> list[list[str]]:
    """Cables crossed by exactly the same pairs, in sets of two or more (sorted)."""
    by_pairs: dict[frozenset[int], list[str]] = defaultdict(list)
    for cable, pairs in crossing.items():
        by_pairs[pairs].append(cable)
    return sorted(sorted(cs) for cs in by_pairs.values() if len(cs) > 1)


def _split(
    rounds: Sequence[tuple[Pair, ...]], crossing: Callable[[str], Iterator[Pair]]
) -> tuple[list[tuple[Pair, ...]], tuple[tuple[str, ...], ...]]:
    """Rounds of pairs that split every set of cables `rounds` cross only together, and the
    sets no route splits. A pair only refines the sets (cables told apart stay apart), so
    each added pair makes progress; the search runs only over the few sets there are."""
    added = _Rounds()
    stuck: set[tuple[str, str]] = set()  # (a, b) no route tells apart
    # Each cable some pair crosses -> the pairs that cross it, each pair by its number (a
    # set of numbers hashes many times faster than one of pairs).
    number: dict[Pair, int] = {}
    sets: dict[str, set[int]] = defaultdict(set)
    for pairs in rounds:
        for p in pairs:
            i = number.setdefault(p, len(number))
            for c in p.cables:
                sets[c].add(i)
    # A pair adds itself to its cables' sets alike, so sets only ever split: an added pair
    # splits each class it crosses into its cables and the rest, and leaves the others as
    # they are. Only those are made anew (the classes, sorted, as `_classes` gives them):
    # remade whole for each added pair, they cost a one-HCA fabric of 4,096 servers, whose
    # rounds leave hundreds of classes, more than the rest of its pair plan.
    classes = _classes({c: frozenset(ps) for c, ps in sets.items()})
    class_of = {c: cs for cs in classes for c in cs}  # a cable -> its class (the same list)
    crossed = set(sets)  # the cables some pair crosses
    while True:
        todo = next(
            ((a, b) for cs in classes for a, b in pairwise(cs) if (a, b) not in stuck), None
        )
        if todo is None:
            break
        a, b = todo
        splitting = (p for c in (a, b) for p in crossing(c) if (a in p.cables) != (b in p.cables))
        # The first of a few that fits a round so far, so the added pairs share rounds
        # rather than each taking one of its own.
        found = _first_of_few(splitting, added.busy)
        if found is None:
            stuck.add((a, b))
            continue
        added.add(found)
        over = set(found.cables)
        # Its cables no pair crossed before (a host's cable, from a client no round used)
        # are crossed by it alone: a class of their own, to be split in turn.
        fresh = sorted(over - crossed)
        crossed |= over
        split = {id(cs): cs for c in found.cables if (cs := class_of.get(c)) is not None}
        for cs in split.values():
            del classes[bisect_left(classes, cs)]
            for part in ([c for c in cs if c in over], [c for c in cs if c not in over]):
                if len(part) > 1:
                    insort(classes, part)
                    class_of.update(dict.fromkeys(part, part))
                else:
                    for c in part:  # told apart from every other cable now
                        del class_of[c]
        if len(fresh) > 1:
            insort(classes, fresh)
            class_of.update(dict.fromkeys(fresh, fresh))
    return added.rounds(), tuple(tuple(cs) for cs in classes)


def _crossing(hosts: list[Server], tree: Tree) -> Callable[[str], Iterator[Pair]]:
    """cable -> every route over it, diagonal by diagonal (`_diagonal`): first those that
    climb over it, then those that come down over it. Only the servers whose path from the
    cable's leaf or pod (or down from its spine) leads over it can be the far end of such a
    route, so only those are tried."""
    by_plane: dict[int, list[Server]] = defaultdict(list)
    on_leaf: dict[str, list[Server]] = defaultdict(list)
    in_pod: dict[int, list[Server]] = defaultdict(list)
    # Down from the server's own spine (its leaf's uplink; from another pod, the spine's
    # link to the core too), every client pod's path is one: cable -> servers below it.
    below: dict[str, list[Server]] = defaultdict(list)
    through: dict[tuple[int, str], list[Server]] = defaultdict(list)  # (plane, core) -> servers
    pods = sorted({pod for pod, _ in tree.leaves.values()})
    with_plane: dict[int, set[int]] = defaultdict(set)  # plane -> the pods with a spine there
    for pod in pods:
        for plane in range(len(tree.spines.get(pod, ()))):
            with_plane[plane].add(pod)
    for h in hosts:
        plane = tree.target(h)[0]
        by_plane[plane].append(h)
        home = tree.leaves[h.leaf][0]
        on_leaf[h.leaf].append(h)
        in_pod[home].append(h)
        found = tree.descent(h, home)
        assert found is not None, "a server is reached from its own pod"
        (down,) = found[1]
        far = tree.reach(h)
        if far is not None:
            through[(plane, far.core)].append(h)
        foreign = far is not None and bool(with_plane[plane] - {home})
        for c in (far.up, down) if far is not None and foreign else (down,):
            if c is not None:
                below[c].append(h)
    # The core's link down to a client pod's spine is that pod's own: the servers climbing
    # over one are found among those of its spine's plane and its core alone, when it is
    # first asked for (a sweep of every server for each pod grew with pods times servers).
    climbing: dict[str, list[Server]] = {}

    def up_from(cable: str) -> list[Server]:
        if cable not in climbing:
            spine, name, _ = core[cable]
            pod, plane = tree.plane[spine]
            climbing[cable] = [
                h
                for h in through.get((plane, name), ())
                if tree.leaves[h.leaf][0] != pod
                and (d := tree.descent(h, pod)) is not None
                and d[1][0] == cable
            ]
        return climbing[cable]

    uplink = {cable: key for key, cable in tree.up.items()}
    core = {cable: key for key, cable in tree.core_up.items()}
    host = {h.cable: h for h in hosts}

    def pairs(cable: str) -> Iterator[tuple[Server, Server]]:
        if cable in uplink:
            leaf, spine, _ = uplink[cable]
            plane = tree.plane[spine][1]
            # From the cable's leaf to any server of its spine's plane; from elsewhere, to the
            # servers below it.
            yield from _diagonal(on_leaf.get(leaf, []), lambda c: by_plane[plane])
            yield from _diagonal(hosts, lambda c: below[cable] if c.leaf != leaf else ())
        elif cable in core:
            pod = tree.plane[core[cable][0]][0]
            up, down = up_from(cable), below.get(cable, [])
            # From the spine's pod, up over it; from another pod, down over it. The climbing
            # routes first: what the rounds leave together is mostly a core link and the one
            # leaf uplink all its descending routes share, which the climbing ones from the
            # pod's other leaves split (at 2,048 x 8, the 270th route walked, not the 1,300th).
            yield from _diagonal(in_pod.get(pod, []), lambda c: up)
            yield from _diagonal(hosts, lambda c: down if tree.leaves[c.leaf][0] != pod else ())
        elif cable in host:
            h = host[cable]
            for other in hosts:
                yield from ((h, other), (other, h))

    # Each route worked out once: a set of cables no route tells apart is walked cable by
    # cable over the same routes (every route over one crosses the others).
    routes: dict[tuple[Server, Server], Pair | None] = {}

    def crossing(cable: str) -> Iterator[Pair]:
        for ends in pairs(cable):
            p = routes[ends] if ends in routes else routes.setdefault(ends, tree.route(*ends))
            if p is not None and cable in p.cables:
                yield p

    return crossing


def _diagonal(
    clients: Sequence[Server], servers_of: Callable[[Server], Sequence[Server]]
) -> Iterator[tuple[Server, Server]]:
    """Every (client, server) of `clients` with the servers each may write to, diagonal by
    diagonal: the i-th client's j-th pair is its server i + j, so the first pairs have each a
    client and a server of their own. Client by client, the first few routes over a cable
    were all one host's, and the pairs that split the cables the rounds cross together each
    took a round of their own (240 rounds of one pair at 2,048 one-HCA servers). Lazy: the
    caller mostly takes the first few."""
    for j in count():
        more = False
        for i, client in enumerate(clients):
            servers = servers_of(client)
            if j < len(servers):
                more = True
                yield client, servers[(i + j) % len(servers)]
        if not more:
            return


def _routable(hosts: list[Server], tree: Tree) -> set[str]:
    """Uplinks and core links some pair's route crosses. A route from a leaf of pod P to a
    server depends on the leaf only through its uplink's link, which takes one of two values
    (the leaf before the server's, or after): so a server's cables below the spine are
    routable when some leaf of P with servers has the uplink either value needs, and a
    leaf's uplink when some server's route from it passes the same test."""
    out: set[str] = set()
    with_hosts = {h.leaf for h in hosts}
    pods = sorted({tree.leaves[leaf][0] for leaf in with_hosts})
    # (spine, link) -> the places of the leaves with servers whose uplink that is
    places: dict[tuple[str, int], list[int]] = defaultdict(list)
    for leaf, spine, j in tree.up:
        if leaf in with_hosts:
            places[(spine, j)].append(tree.place(leaf))
    for ps in places.values():
        ps.sort()
    # (leaf's spine) -> (server's place, link from a leaf after it, from one before it)
    reach: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    # From another pod, the route climbs to that pod's spine of the server's plane: a pod
    # before the server's holds only leaves before it (places go pod by pod), one after it
    # only leaves after. Servers alike in plane, core, count and climbing links share every
    # such pod's core link (`Reach`), so they are taken together, each pod once for all.
    alike: dict[tuple[int, str, int, tuple[int, ...], int, int], list[tuple[int, str, str]]]
    alike = defaultdict(list)
    for d in hosts:
        g = tree.place(d.leaf)
        after, before = tree.climb(False, d), tree.climb(True, d)
        home = tree.leaves[d.leaf][0]
        found = tree.descent(d, home)
        assert found is not None, "a server is reached from its own pod"
        spine, (down,) = found
        if down is None:
            continue
        lower, upper = places.get((spine, before), ()), places.get((spine, after), ())
        # A leaf of the pod before the server's with the uplink `before` needs, or one
        # after it with the one `after` needs (the pod's: the spine is the pod's).
        if (lower and lower[0] < g) or (upper and upper[-1] > g):
            out.add(down)
            reach[spine].append((g, after, before))
        far = tree.reach(d)
        if far is not None and far.up is not None:
            # The count matters only modulo the links, the pod's own targets taken off.
            count = far.earlier % tree.core_links
            key = (tree.target(d)[0], far.core, count, far.through, after, before)
            alike[key].append((home, far.up, down))
    # Pods' spines' links to cores from servers of earlier pods (a leaf there climbs over
    # `after`) and of later ones (over `before`), as bit masks.
    early: dict[str, int] = defaultdict(int)
    late: dict[str, int] = defaultdict(int)
    for (plane, core, earlier, through, after, before), members in alike.items():
        first, last = min(h for h, _, _ in members), max(h for h, _, _ in members)
        # [i]: pods[i]'s spine of the plane, reached from a server of an earlier pod (hi)
        # or a later one (lo), the core link installed and a leaf with servers below it
        hi, lo = [False] * len(pods), [False] * len(pods)
        for i, pod in enumerate(pods):
            mine = tree.spines.get(pod, ())[plane : plane + 1]
            if not mine:
                continue
            for j, link, climbed, mask, witness in (
                (earlier, after, hi, early, pod > first),
                (earlier - (through[pod + 1] - through[pod]), before, lo, late, pod < last),
            ):
                cable = tree.core_up.get((mine[0], core, j % tree.core_links))
                if cable is not None and places.get((mine[0], link)):
                    climbed[i] = True
                    if witness:
                        out.add(cable)
                        mask[mine[0]] |= 1 << link
        for home, up, down in members:
            i = pods.index(home)
            if any(hi[i + 1 :]) or any(lo[:i]):
                out.update((up, down))
    # A leaf after a server climbs over `after`, one before it over `before`: the links
    # of the servers before each place, and of those after it, as bit masks.
    masks: dict[str, tuple[list[int], list[int], list[int]]] = {}
    for spine, targets in reach.items():
        targets.sort()
        prefix, suffix = [0], [0]
        for _, after, _ in targets:
            prefix.append(prefix[-1] | 1 << after)
        for _, _, before in reversed(targets):
            suffix.append(suffix[-1] | 1 << before)
        masks[spine] = ([t for t, _, _ in targets], prefix, suffix[::-1])
    for (leaf, spine, j), cable in tree.up.items():
        if leaf not in with_hosts:
            continue
        g = tree.place(leaf)
        places_of, prefix, suffix = masks.get(spine, ([], [0], [0]))
        links = prefix[bisect_left(places_of, g)] | suffix[bisect_right(places_of, g)]
        links |= early.get(spine, 0) | late.get(spine, 0)
        if links >> j & 1:
            out.add(cable)
    return out


def _cover(
    cables: list[str], crossing: Callable[[str], Iterator[Pair]], covered: set[str]
) -> list[tuple[Pair, ...]]:
    """A pair over each of `cables` no round covers, in rounds of their own: of the first few
    routes over a cable, the first that fits a round so far (no host twice), so the pairs
    share rounds rather than all starting from the first hosts."""
    rounds = _Rounds()
    for cable in cables:
        if cable in covered:
            continue  # an earlier pair of these crosses it too: it runs once
        pair = _first_of_few(crossing(cable), rounds.busy)
        if pair is None:
            continue
        rounds.add(pair)
        covered = covered | set(pair.cables)
    return rounds.rounds()


def _first_of_few(pairs: Iterable[Pair], busy: list[set[str]], few: int = 32) -> Pair | None:
    """The first of the first `few` pairs whose hosts one of the `busy` sets holds neither
    of, else the first; None when there is none. The pairs are routes worked out one by one:
    only as many as it takes are."""
    first = None
    for p in islice(pairs, few):
        if not busy or any(used.isdisjoint((p.client, p.server)) for used in busy):
            return p  # with no round yet, the first opens one
        first = first or p
    return first


@dataclass
class _Rounds:
    """Pairs into rounds as they come, first fit: no host twice in a round."""

    pairs: list[list[Pair]] = field(default_factory=list)
    busy: list[set[str]] = field(default_factory=list)  # each round's hosts

    def add(self, pair: Pair) -> None:
        ends = (pair.client, pair.server)
        i = next((i for i, used in enumerate(self.busy) if used.isdisjoint(ends)), None)
        if i is None:
            self.pairs.append([pair])
            self.busy.append(set(ends))
        else:
            self.pairs[i].append(pair)
            self.busy[i].update(ends)

    def rounds(self) -> list[tuple[Pair, ...]]:
        return [tuple(r) for r in self.pairs]
