"""The Ethernet cabling, checked by cable ID from each audited end: each planned link of the
contract's `ethernet` against what the machine's lldpd hears on that port
(`lldpcli_neighbors`). One check for both kinds of end: a host's NICs, and a Cumulus switch's
ports to other switches (its uplinks, its management-port patch). A cable between two
audited switches is checked from both ends, so a fault on it is named twice, once by each
switch, under the same cable ID; a host's cable only from the host (the switch's record
leaves it out: the host's NIC name is the plan's, one fault there one finding).

The switch announces itself by its system name and the port by its ifname (`swp5` on
Cumulus), which the contract holds as the plan's port in the switch model's `port_name`
format. A planned link ends as one of (the InfiniBand audit's classes and wording,
`audits/fabric.py`, with the same finding shape: kind `cable`, the path the cable's ID, the
expected and observed links as `switch/port - host/iface`):

- fine: a neighbour on the NIC is the planned switch and port;
- miswired: the NIC hears another switch or port, which the finding names;
- missing: the NIC hears nothing;
- swapped: two miswired links, of one host or of two, each hearing the other's planned far
  end: both named as a swapped pair (`name_swaps`, over every host's findings, since the two
  ends may be on two hosts).

A neighbour heard on a NIC the contract does not cable (a port on a test switch, a
hypervisor's bridge) is masked: only the plan's cables are checked, by cable ID.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audits.model import Finding
from audits.sink import Facts, Sink
from contract import EthernetSwitch, Host, Kind, Severity
from contract.probes import lldpcli_neighbors

CHECK = "ethernet"
PROBE = lldpcli_neighbors.PROBE
_SWAPPED = "{one} and {two} look swapped: far ends exchanged"


def check(c: Host | EthernetSwitch, facts: Facts, sink: Sink) -> None:
    heard: dict[str, list[str]] = {}
    for n in facts[PROBE]:
        heard.setdefault(n["iface"], []).append(_far_end(n))
    for link in c.ethernet or ():
        planned = f"{link.switch}/{link.port}"
        here = f"{c.host}/{link.iface}"
        seen = sorted(set(heard.get(link.iface, ())))
        if planned in seen:
            continue
        expected = f"{planned} - {here}"
        if not seen:
            text = f"{link.cable} not seen ({expected})"
            sink.drift(link.cable, expected, None, Severity.CRITICAL, text)
            continue
        got = " - ".join((", ".join(seen), here))
        text = f"{link.cable} is cabled elsewhere: seen as {got}"
        sink.drift(link.cable, expected, got, Severity.CRITICAL, text)


def _far_end(n: Any) -> str:
    """A neighbour as `switch/port`: its system name (else its chassis ID) and its port's
    ifname; a port identified otherwise (a MAC, a local number) by its description if any."""
    name = n["chassis"] or n["chassis_id"] or "?"
    port = n["port_id"] if n["port_id_type"] == "ifname" else n["port_descr"] or n["port_id"]
    return f"{name}/{port}"


def name_swaps(hosts: Sequence[Sequence[Finding]]) -> list[list[Finding]]:
    """Each machine's findings, with every two miswired Ethernet links that each hear the
    other's planned far end (on one machine or two) renamed as a swapped pair, as the fabric
    audit names them; a swapped uplink is named so by the switches at both of its ends."""
    miswired = [
        f
        for findings in hosts
        for f in findings
        if f["check"] == CHECK and f["kind"] == Kind.CABLE.value and f["observed"] is not None
    ]
    by_ends = {(_far(f["expected"]), _far(f["observed"])): f for f in miswired}
    renamed: dict[int, Finding] = {}
    for f in miswired:
        partner = by_ends.get((_far(f["observed"]), _far(f["expected"])))
        if partner is None or partner is f:
            continue
        one, two = sorted((f["path"], partner["path"]))
        renamed[id(f)] = {**f, "message": _SWAPPED.format(one=one, two=two)}
    return [[renamed.get(id(f), f) for f in findings] for findings in hosts]


def _far(link: str) -> str:
    """The switch end of `switch/port - host/iface`."""
    return link.split(" - ", 1)[0]
