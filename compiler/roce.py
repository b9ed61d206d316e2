"""Plan step: RoCE's lossless class on a network that declares `rdma: roce`, both ends of
every link from the network's one `roce:` block.

A RoCE network's traffic is lossless only if every hop agrees: the host NIC trusts DSCP and
pauses (PFC) on the RoCE priority, and so does each switch port it crosses, the rack switch's
host port and both ends of every uplink to the spines. A hop that disagrees (PFC on priority 3
at one end, on 4 or none at the other) drops RoCE frames under load while every ping passes.
So nothing here is set per switch or per host: `RocePlan` gives each NIC and each port the same
`RoceQos`, and `verify` reads the rendered ends back (Cumulus `qos_features.conf`, the EOS
`startup-config`, the hosts' `roce.conf`) and reports any link whose two ends differ.

Which hops: the access ports of the network's hosts, and the routed uplinks between switches
that carry it (a rack switch with a host port or an SVI on it, and the spines it uplinks to):
those uplinks carry the network's routed traffic between racks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from compiler.model import Network, Roce, SwitchOs

if TYPE_CHECKING:
    from compiler.ethernet import Ethernet
    from compiler.plan import Cable, Host

RDMA_SERVICE = "rdma"  # services.yaml: MLNX_OFED's user space, which has mlnx_qos
HOST_CONF = "roce/{host}/roce.conf"  # the host end, read by the dispatcher script
HOST_SCRIPT = "roce/clusterforge-roce"
QOS_FEATURES = "etc/cumulus/datapath/qos/qos_features.conf"


class RoceQos(NamedTuple):
    """What one end of a RoCE link is set to: DSCP trusted, PFC on `priority`."""

    network: str
    priority: int
    dscp: int
    cnp_priority: int
    cnp_dscp: int
    ecn: bool

    @property
    def tos(self) -> int:
        """RDMA-CM's ToS byte: the DSCP in its upper six bits (the ECN bits the NIC sets)."""
        return self.dscp << 2

    @property
    def pfc(self) -> str:
        """mlnx_qos's --pfc: one flag per priority 0-7, on for `priority` alone."""
        return ",".join("1" if p == self.priority else "0" for p in range(8))


class RoceNic(NamedTuple):
    host: str
    interface: str
    qos: RoceQos


class RocePort(NamedTuple):
    switch: str
    port: int
    peer: str  # the far end: a host or a switch, as the port's description names it
    qos: RoceQos


class RocePlan(NamedTuple):
    nics: tuple[RoceNic, ...] = ()
    ports: tuple[RocePort, ...] = ()

    def of_switch(self, name: str) -> tuple[RocePort, ...]:
        return tuple(p for p in self.ports if p.switch == name)

    def of_host(self, name: str) -> tuple[RoceNic, ...]:
        return tuple(n for n in self.nics if n.host == name)


def qos_of(name: str, net: Network) -> RoceQos | None:
    """The network's RoCE class (NVIDIA's defaults where `roce:` is left out); None: no RoCE."""
    if net.rdma != "roce":
        return None
    r = net.roce or Roce()
    return RoceQos(name, r.priority, r.dscp, r.cnp_priority, r.cnp_dscp, r.ecn)


def build(networks: Mapping[str, Network], hosts: Iterable[Host], eth: Ethernet) -> RocePlan:
    """Every RoCE NIC (a host that runs MLNX_OFED, on a RoCE network) and every switch port on
    a RoCE network's path, each with its network's class."""
    classes = {n: q for n, net in sorted(networks.items()) if (q := qos_of(n, net))}
    if not classes:
        return RocePlan()
    nics = [
        RoceNic(h.name, i.name, classes[i.network])
        for h in hosts
        if RDMA_SERVICE in h.services
        for i in h.interfaces
        if i.network in classes
    ]
    carries: dict[str, RoceQos] = {}
    for sw in eth.switches:
        for p in sw.access:
            if p.network in classes:
                carries.setdefault(sw.name, classes[p.network])
        for v in sw.svis:
            if v.network in classes:
                carries.setdefault(sw.name, classes[v.network])
    for sw in eth.switches:  # the spines a carrying rack switch uplinks to carry it too
        for p in sw.routed:
            if sw.name in carries and p.peer:
                carries.setdefault(p.peer, carries[sw.name])
    ports = []
    for sw in eth.switches:
        for p in sw.ports:
            if p.vlan is not None and p.network in classes:
                ports.append(RocePort(sw.name, p.port, _peer(p.description), classes[p.network]))
            elif p.vlan is None and sw.name in carries and (p.peer or "") in carries:
                ports.append(RocePort(sw.name, p.port, p.peer or "", carries[sw.name]))
    return RocePlan(tuple(sorted(nics)), tuple(sorted(ports, key=lambda p: (p.switch, p.port))))


def _peer(description: str) -> str:
    return description.split(" ", 1)[0]


def port_set(ports: Iterable[int], prefix: str = "swp") -> str:
    """Cumulus's port set: runs of consecutive ports as ranges, `swp1-swp4,swp6`."""
    numbers = sorted(set(ports))
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return ",".join(f"{prefix}{a}" if a == b else f"{prefix}{a}-{prefix}{b}" for a, b in runs)


# --- reading the rendered ends back -----------------------------------------------------------


class End(NamedTuple):
    """One end as its rendered file sets it: trust, PFC priorities, DSCP -> priority, the
    priorities whose queue marks ECN."""

    trust: str | None
    pfc: frozenset[int]
    dscp_priority: int | None  # the priority the network's DSCP lands on
    ecn: frozenset[int] = frozenset()


_RANGE = re.compile(r"swp(\d+)(?:-swp(\d+))?")


def _expand(ports: str) -> set[int]:
    out: set[int] = set()
    for part in ports.replace(" ", "").split(","):
        m = _RANGE.fullmatch(part)
        if m:
            a, b = int(m[1]), int(m[2] or m[1])
            out |= set(range(a, b + 1))
    return out


def _ints(text: str) -> set[int]:
    return {int(x) for x in re.findall(r"\d+", text)}


def cumulus_ends(text: str, dscp: int) -> dict[int, End]:
    """Each port's end as Cumulus's switchd reads qos_features.conf: `key = value` lines (`#`
    comments), the trust for every port, PFC by port group."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    trust = values.get("traffic.packet_priority_source_set", "").strip("[] ") or None
    landing = next(
        (
            int(k.split(".")[1].removeprefix("cos_"))
            for k, v in values.items()
            if re.fullmatch(r"traffic\.cos_\d\.priority_source\.dscp", k) and dscp in _ints(v)
        ),
        None,
    )

    def groups(feature: str, enabled: str) -> dict[int, set[int]]:
        """Port -> the priorities of every `feature` port group with `enabled` true on it."""
        out: dict[int, set[int]] = {}
        for group in values.get(f"{feature}.port_group_list", "").strip("[]").split(","):
            at = f"{feature}.{group.strip()}"
            if not group.strip() or values.get(f"{at}.{enabled}") != "true":
                continue
            for port in _expand(values.get(f"{at}.port_set", "")):
                out.setdefault(port, set()).update(_ints(values.get(f"{at}.cos_list", "")))
        return out

    pfc, ecn = groups("pfc", "tx_enable"), groups("ecn_red", "ecn_enable")
    return {
        port: End(trust, frozenset(pfc.get(port, ())), landing, frozenset(ecn.get(port, ())))
        for port in sorted(pfc.keys() | ecn.keys())
    }


def eos_ends(text: str, dscp: int) -> dict[int, End]:
    """Each EthernetN's end as its startup-config sets it (`qos trust`, `priority-flow-control
    priority N no-drop` under `priority-flow-control on`); the DSCP from `qos map dscp`."""
    landing = next(
        (
            int(m[2])
            for m in re.finditer(r"^qos map dscp ([\d ]+) to traffic-class (\d)$", text, re.M)
            if dscp in _ints(m[1])
        ),
        None,
    )
    out: dict[int, End] = {}
    for m in re.finditer(r"^interface Ethernet(\d+)\n((?:   .*\n)*)", text, re.M):
        body = m[2]
        trust = re.search(r"^   qos trust (\S+)$", body, re.M)
        pfc = {
            int(p)
            for p in re.findall(r"^   priority-flow-control priority (\d) no-drop$", body, re.M)
        }
        if "   priority-flow-control on\n" not in body:
            pfc = set()
        ecn = {
            int(q)
            for q in re.findall(
                r"^   tx-queue (\d)\n(?:      .*\n)*?      random-detect ecn ", body, re.M
            )
        }
        out[int(m[1])] = End(trust[1] if trust else None, frozenset(pfc), landing, frozenset(ecn))
    return out


def host_ends(text: str, dscp: Mapping[str, int]) -> dict[str, End]:
    """Each NIC's end as the host's roce.conf sets it: blocks of shell `KEY=value` lines, one
    a NIC, as the dispatcher script reads them; `dscp` is each NIC's network's marking."""
    out: dict[str, End] = {}
    for block in text.split("\n\n"):
        values = dict(
            line.split("=", 1) for line in block.splitlines() if "=" in line and line[0] != "#"
        )
        if "INTERFACE" not in values:
            continue
        pfc = frozenset(p for p, flag in enumerate(values.get("PFC", "").split(",")) if flag == "1")
        name, prio = values["INTERFACE"], values.get("PRIORITY", "")
        marked = values.get("DSCP") == str(dscp.get(name))
        landing = int(prio) if prio.isdigit() and marked else None
        ecn = (
            frozenset({landing})
            if values.get("ECN") == "1" and landing is not None
            else frozenset()
        )
        out[name] = End(values.get("TRUST"), pfc, landing, ecn)
    return out


def verify(
    plan: RocePlan, eth: Ethernet, cables: Iterable[Cable], files: Mapping[str, bytes]
) -> list[tuple[str, str]]:
    """(network, what differs) for every RoCE link whose two rendered ends disagree with each
    other or with the network's class: a port without PFC on the RoCE priority, another
    trust, the DSCP landing elsewhere, ECN on at one end only."""
    if not plan.ports and not plan.nics:
        return []  # no RoCE network: nothing to read back
    ends: dict[str, dict[int, End]] = {}
    for sw in eth.switches:
        ports = plan.of_switch(sw.name)
        if not ports:
            continue
        dscp = ports[0].qos.dscp
        if sw.os == SwitchOs.CUMULUS:
            text = files.get(f"switches/{sw.name}/{QOS_FEATURES}", b"").decode()
            ends[sw.name] = cumulus_ends(text, dscp)
        else:
            text = files.get(f"switches/{sw.name}/startup-config", b"").decode()
            ends[sw.name] = eos_ends(text, dscp)
    hosts: dict[tuple[str, str], End] = {}
    for name in sorted({n.host for n in plan.nics}):
        text = files.get(HOST_CONF.format(host=name), b"").decode()
        marks = {n.interface: n.qos.dscp for n in plan.of_host(name)}
        hosts |= {(name, iface): end for iface, end in host_ends(text, marks).items()}
    problems: list[tuple[str, str]] = []

    def want(q: RoceQos) -> End:
        ecn = frozenset({q.priority}) if q.ecn else frozenset()
        return End("dscp", frozenset({q.priority}), q.priority, ecn)

    def show(e: End | None) -> str:
        if e is None:
            return "no QoS"
        if not e.pfc:
            return "no PFC"
        prios = ",".join(map(str, sorted(e.pfc)))
        marks = f", ECN on {','.join(map(str, sorted(e.ecn)))}" if e.ecn else ", no ECN"
        return f"trust {e.trust}, PFC on {prios}, DSCP -> {e.dscp_priority}{marks}"

    for p in plan.ports:
        have = ends.get(p.switch, {}).get(p.port)
        if have != want(p.qos):
            problems.append(
                (p.qos.network, f"{p.switch} port {p.port} ({p.peer}): {show(have)}, where "
                 f"the network's class is {show(want(p.qos))}")
            )  # fmt: skip
    nic_of = {(n.host, n.interface): n for n in plan.nics}
    port_of = {(p.switch, p.port): p for p in plan.ports}
    for c in cables:
        for host_at, sw_end in ((c.b, c.a), (c.a, c.b)):
            nic = nic_of.get((host_at.device, host_at.port))
            if nic is None or not sw_end.port.isdigit():
                continue
            port = port_of.get((sw_end.device, int(sw_end.port)))
            have = hosts.get((nic.host, nic.interface))
            sw_have = ends.get(sw_end.device, {}).get(int(sw_end.port))
            if port is None or have != sw_have or have != want(nic.qos):
                problems.append(
                    (nic.qos.network, f"{nic.host} {nic.interface} ({show(have)}) and "
                     f"{sw_end.device} port {sw_end.port} ({show(sw_have)}) disagree on "
                     f"cable {c.id}")
                )  # fmt: skip
    return problems
