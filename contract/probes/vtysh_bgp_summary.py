"""Parser for `vtysh -c 'show bgp summary json'`: each BGP session of an FRR switch (a Cumulus
Linux switch's), its state and the prefixes it received, per address family.

FRR's JSON (bgpd/bgp_vty.c, `bgp_show_summary`; as FRR 8.4 prints it, which
tests/test_switches_netns.py runs from the generated frr.conf): one object keyed by address
family (`ipv4Unicast`, `ipv6Unicast`, ...), each with the family's `peers`, an object keyed
by neighbour: an unnumbered session (`neighbor swp49 interface`) is keyed by its interface
and says `"idType": "interface"`. A peer's `state` is its BGP FSM state (`Established`,
`Idle`, `Active`, `Connect`, `OpenSent`, `OpenConfirm`, with ` (Admin)` and the like on a
shut one), `pfxRcd` the prefixes it accepted from the peer, `remoteAs` 0 while the session
has never come up, `hostname` what the peer announced (FRR's hostname capability) once it
has. A router with no BGP instance prints `{}`; a family with no neighbours is left out.

Schema:

    [{"family": str, "peer": str, "hostname": str | None, "remote_as": int,
      "state": str, "prefixes_received": int}]

Example:

    $ vtysh -c 'show bgp summary json'
    {"ipv4Unicast": {"routerId": "10.60.1.240", "as": 4200070001, "peers": {
      "swp49": {"hostname": "stor-spine01", "remoteAs": 4200070000, "pfxRcd": 1,
                "state": "Established", "idType": "interface", ...}}, ...}}

    [{"family": "ipv4Unicast", "peer": "swp49", "hostname": "stor-spine01",
      "remote_as": 4200070000, "state": "Established", "prefixes_received": 1}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._json import decode
from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "vtysh_bgp_summary"
# Root: vtysh talks to the daemons' sockets in /run/frr, which only the frr and frrvty groups
# may open (Debian's frr package, as Cumulus's: /var/run/frr 0775 frr:frr, the vty sockets
# frr:frrvty); sudo grants exactly this command line (compiler/targets/access.py): sudoers(5)
# matches a command's arguments as one string joined by spaces, so `-c show bgp summary json`
# there grants this argv; another split of the same words is at most vtysh's `show`: read-only.
SPEC = Probe(
    PROBE,
    ("vtysh", "-c", "show bgp summary json"),
    "host",
    "/usr/bin/vtysh",
    root=True,
    max_output=256 * KIB,  # a spine's sessions, one per rack switch uplink, ~500 bytes each
)
ESTABLISHED = "Established"


class Session(TypedDict):
    family: str
    peer: str
    hostname: str | None
    remote_as: int
    state: str
    prefixes_received: int


def parse(text: str) -> list[Session]:
    """Parse `show bgp summary json` into one entry per (family, peer), families in FRR's order."""
    data = decode(PROBE, text, "'{}'")
    if not isinstance(data, dict):
        raise ParseError(PROBE, 0, "expected one JSON object keyed by address family")
    out: list[Session] = []
    for family, body in data.items():
        if not isinstance(body, dict) or not isinstance(body.get("peers"), dict):
            raise ParseError(PROBE, 0, f"{family!r}: expected an object with 'peers'")
        for peer, fields in body["peers"].items():
            out.append(_session(family, peer, fields))
    return out


def _session(family: str, peer: str, fields: Any) -> Session:
    if not isinstance(fields, dict):
        raise ParseError(PROBE, 0, f"{family} peer {peer!r}: expected an object")
    state = fields.get("state")
    if not isinstance(state, str) or not state:
        raise ParseError(PROBE, 0, f"{family} peer {peer!r}: no 'state'")
    numbers = {}
    for key in ("remoteAs", "pfxRcd"):
        value = fields.get(key)
        # bool is an int to Python, never to FRR: refused like any other non-number.
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ParseError(PROBE, 0, f"{family} peer {peer!r}: {key!r} is not a count")
        numbers[key] = value
    hostname = fields.get("hostname")
    if hostname is not None and not isinstance(hostname, str):
        raise ParseError(PROBE, 0, f"{family} peer {peer!r}: 'hostname' is not a string")
    return {
        "family": family,
        "peer": peer,
        "hostname": hostname,
        "remote_as": numbers["remoteAs"],
        "state": state,
        "prefixes_received": numbers["pfxRcd"],
    }


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """A switch's planned sessions (`state["bgp"]`, its expected record's) Established with
    one prefix each, but those `now.bgp_down` names, Idle as FRR shows a session that dropped."""
    planned = state.get("bgp")
    if not planned:
        return {}
    peers = {}
    for p in planned:
        up = p["port"] not in now.bgp_down
        peers[p["port"]] = {
            "hostname": p["peer"],
            "remoteAs": p["remote_as"],
            "localAs": state["asn"],
            "pfxRcd": 1 if up else 0,
            "state": ESTABLISHED if up else "Idle",
            "peerState": "OK",
            "idType": "interface",
        }
    summary = {"ipv4Unicast": {"routerId": state["router_id"], "as": state["asn"], "peers": peers}}
    return {PROBE: json.dumps(summary, indent=2) + "\n"}
