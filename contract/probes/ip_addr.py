"""Parser for `ip -j addr show`: every interface with its MAC, state, MTU and addresses.

iproute2 prints one JSON array, one object per interface in ifindex order (kept). `mac` is
the link-layer `address` (20 bytes on IPoIB, absent on a tunnel: null). `state` is the
kernel's operstate (`UP`, `DOWN`, `UNKNOWN` on loopback). Addresses are `local/prefixlen`,
IPv4 and IPv6 in separate lists in the order ip lists them; link-local IPv6 addresses are
kept. Empty `{}` entries, which some iproute2 versions print in `addr_info`, are skipped.

Schema:

    [{"name": str, "mac": str | None, "state": str, "mtu": int,
      "ipv4": ["a.b.c.d/len"], "ipv6": ["x::y/len"]}]

Example:

    $ ip -j addr show
    [{"ifindex":2,"ifname":"eno1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,
      "operstate":"UP","address":"3c:ec:ef:6a:10:2e","addr_info":[{"family":"inet",
      "local":"10.60.2.11","prefixlen":24}]}]

    [{"name": "eno1", "mac": "3c:ec:ef:6a:10:2e", "state": "UP", "mtu": 1500,
      "ipv4": ["10.60.2.11/24"], "ipv6": []}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._json import json_objects
from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "ip_addr"
SPEC = Probe(PROBE, ("ip", "-j", "addr", "show"), "host", "/usr/sbin/ip", max_output=MIB)

_FAMILIES = {"inet": "ipv4", "inet6": "ipv6"}


class Interface(TypedDict):
    name: str
    mac: str | None
    state: str
    mtu: int
    ipv4: list[str]
    ipv6: list[str]


def parse(text: str) -> list[Interface]:
    """Parse `ip -j addr show`, one entry per interface."""
    interfaces = [_interface(item) for item in json_objects(PROBE, text)]
    if not interfaces:
        raise ParseError(PROBE, 0, "no interface at all (not even lo)")
    return interfaces


def _interface(item: dict[str, Any]) -> Interface:
    name = item.get("ifname")
    if not isinstance(name, str):
        raise ParseError(PROBE, 0, f"interface without 'ifname': {item!r:.80}")
    mtu, state, mac = item.get("mtu"), item.get("operstate"), item.get("address")
    if not isinstance(mtu, int) or not isinstance(state, str):
        raise ParseError(PROBE, 0, f"interface {name!r} lacks 'mtu' or 'operstate'")
    if mac is not None and not isinstance(mac, str):
        raise ParseError(PROBE, 0, f"interface {name!r} has address {mac!r}")
    addresses: dict[str, list[str]] = {"ipv4": [], "ipv6": []}
    addr_info = item.get("addr_info", [])
    if not isinstance(addr_info, list):
        raise ParseError(PROBE, 0, f"interface {name!r} has addr_info {addr_info!r:.80}")
    for entry in addr_info:
        if entry == {}:
            continue
        if not isinstance(entry, dict) or not _is_address(entry):
            raise ParseError(PROBE, 0, f"interface {name!r} has an unreadable address {entry!r}")
        family, local, prefix = entry["family"], entry["local"], entry["prefixlen"]
        addresses[_FAMILIES[family]].append(f"{local}/{prefix}")
    return {
        "name": name,
        "mac": mac,
        "state": state,
        "mtu": mtu,
        "ipv4": addresses["ipv4"],
        "ipv6": addresses["ipv6"],
    }


def _is_address(entry: dict[str, Any]) -> bool:
    family = entry.get("family")
    return (
        isinstance(family, str)
        and family in _FAMILIES
        and isinstance(entry.get("local"), str)
        and isinstance(entry.get("prefixlen"), int)
    )


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Loopback, then every planned interface up with its address."""
    lo = {
        "ifindex": 1,
        "ifname": "lo",
        "flags": ["LOOPBACK", "UP", "LOWER_UP"],
        "mtu": 65536,
        "operstate": "UNKNOWN",
        "link_type": "loopback",
        "address": "00:00:00:00:00:00",
        "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host"}],
    }
    items = [lo]
    for index, iface in enumerate(state["interfaces"], 2):
        local, prefix = iface["address"].split("/")
        ib = iface["mac"] is None
        items.append(
            {
                "ifindex": index,
                "ifname": iface["name"],
                "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                "mtu": iface["mtu"],
                "operstate": "UP",
                "link_type": "infiniband" if ib else "ether",
                "address": _ipoib_hwaddr(state) if ib else iface["mac"],
                "addr_info": [
                    {"family": "inet", "local": local, "prefixlen": int(prefix), "scope": "global"}
                ],
            }
        )
    return {PROBE: json.dumps(items, separators=(",", ":")) + "\n"}


def _ipoib_hwaddr(state: Mapping[str, Any]) -> str:
    guid = state["ib_ports"][0]["port_guid"][2:] if state["ib_ports"] else "0" * 16
    raw = "00000029fe800000000000" + guid[:16]
    return ":".join(raw[i : i + 2] for i in range(0, 40, 2))
