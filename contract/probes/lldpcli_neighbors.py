"""Parser for `lldpcli -f json show neighbors`: what lldpd heard on each Ethernet port, so the
far end of every cable (the switch and its port) as the switch itself announces it.

lldpd's `json` format (lldpcli(8); the `json0` format is the regular one) folds an element
that occurs once into an object and one that repeats into a list: `lldp.interface` is an
object keyed by the local interface's name with one neighbour, a list of such one-key objects
with several (a port that hears two chassis is listed twice); the same goes for a chassis's
`capability` and `mgmt-ip`. A chassis is keyed by its system name (`SysName`), or, when the
neighbour sends none, holds its fields directly (`id` first). The port's `id` carries its
subtype as `type`: `ifname` from Cumulus (`swp5`), `mac`, `local` (a number), and the
others of 802.1AB (`ifalias`, `ip`, `unhandled`). With no neighbour at all lldpd prints an
empty `lldp` (`{}`, or `[]` from some builds).

Schema:

    [{"iface": str, "chassis": str | None, "chassis_id": str | None,
      "port_id": str, "port_id_type": str, "port_descr": str | None}]

Example:

    $ lldpcli -f json show neighbors
    {"lldp": {"interface": {"eno1": {"via": "LLDP", "rid": "1", "age": "0 day, 02:11:09",
      "chassis": {"mgmt01": {"id": {"type": "mac", "value": "b8:ce:f6:e6:05:fb"},
        "descr": "Cumulus Linux version 5.9.1 running on Mellanox Technologies Ltd. MSN2201",
        "mgmt-ip": "10.60.1.2", "capability": [{"type": "Bridge", "enabled": true},
        {"type": "Router", "enabled": false}]}},
      "port": {"id": {"type": "ifname", "value": "swp1"}, "descr": "gpu001 eno1",
        "ttl": "120"}}}}}

    [{"iface": "eno1", "chassis": "mgmt01", "chassis_id": "b8:ce:f6:e6:05:fb",
      "port_id": "swp1", "port_id_type": "ifname", "port_descr": "gpu001 eno1"}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import digest
from contract.probes._json import decode
from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "lldpcli_neighbors"
# Not root: EPEL's lldpd (Fedora's lldpd.spec: --with-privsep-group=lldpd, the socket
# /run/lldpd/lldpd.socket) makes its control socket 0770 root:lldpd (lldpd.c chowns it to the
# privsep group), so the audit account is put in that group (`group`, compiler/targets/access.py).
# Debian's (Cumulus's) names the group _lldpd (its postinst's adduser; Debian 12's 1.0.16 makes
# the socket 0770 _lldpd:_lldpd): the `cumulus` service renames it (`groups`, services.yaml).
SPEC = Probe(
    PROBE,
    ("lldpcli", "-f", "json", "show", "neighbors"),
    "host",
    "/usr/sbin/lldpcli",
    group="lldpd",
    max_output=256 * KIB,
)

# 802.1AB's port ID subtypes as lldpd names them.
PORT_ID_TYPES = ("ifname", "mac", "local", "ifalias", "ip", "unhandled")


class Neighbour(TypedDict):
    iface: str
    chassis: str | None
    chassis_id: str | None
    port_id: str
    port_id_type: str
    port_descr: str | None


def parse(text: str) -> list[Neighbour]:
    """Parse `lldpcli -f json show neighbors`, one entry per neighbour heard, in lldpd's order."""
    data = decode(PROBE, text, '{"lldp": {}}')
    if not isinstance(data, dict) or set(data) != {"lldp"}:
        raise ParseError(PROBE, 0, 'expected one object {"lldp": ...}')
    lldp = data["lldp"]
    if lldp in ({}, []):
        return []
    if not isinstance(lldp, dict) or "interface" not in lldp:
        raise ParseError(PROBE, 0, "'lldp' holds no 'interface'")
    return [_neighbour(name, body) for name, body in _keyed(lldp["interface"], "interface")]


def _keyed(value: Any, what: str) -> list[tuple[str, Any]]:
    """An element lldpd keys by name: one object of names, or a list of one-name objects."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict) or not item:
            raise ParseError(PROBE, 0, f"{what}: expected an object keyed by name")
        out += list(item.items())
    return out


def _neighbour(iface: str, body: Any) -> Neighbour:
    if not isinstance(body, dict):
        raise ParseError(PROBE, 0, f"interface {iface!r}: expected an object")
    chassis, chassis_id = _chassis(iface, body.get("chassis"))
    port = body.get("port")
    if not isinstance(port, dict):
        raise ParseError(PROBE, 0, f"interface {iface!r}: no 'port'")
    kind, value = _id(iface, "port", port.get("id"))
    if kind not in PORT_ID_TYPES:
        raise ParseError(PROBE, 0, f"interface {iface!r}: unknown port id type {kind!r}")
    descr = port.get("descr")
    if descr is not None and not isinstance(descr, str):
        raise ParseError(PROBE, 0, f"interface {iface!r}: port 'descr' is not a string")
    return {
        "iface": iface,
        "chassis": chassis,
        "chassis_id": chassis_id,
        "port_id": value,
        "port_id_type": kind,
        "port_descr": descr,
    }


def _chassis(iface: str, chassis: Any) -> tuple[str | None, str | None]:
    """(system name, chassis ID value) of a neighbour's chassis."""
    if not isinstance(chassis, dict) or not chassis:
        raise ParseError(PROBE, 0, f"interface {iface!r}: no 'chassis'")
    if _is_id(chassis.get("id")):  # a chassis without a system name holds its fields
        return None, _id(iface, "chassis", chassis["id"])[1]
    if len(chassis) != 1:
        raise ParseError(PROBE, 0, f"interface {iface!r}: expected one chassis, by name")
    [(name, fields)] = chassis.items()
    if not isinstance(fields, dict):
        raise ParseError(PROBE, 0, f"interface {iface!r}: chassis {name!r} is not an object")
    chassis_id = _id(iface, "chassis", fields["id"])[1] if "id" in fields else None
    return name, chassis_id


def _is_id(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"type", "value"}


def _id(iface: str, what: str, value: Any) -> tuple[str, str]:
    if not _is_id(value) or not all(isinstance(v, str) for v in value.values()):
        raise ParseError(PROBE, 0, f"interface {iface!r}: {what} 'id' is not {{type, value}}")
    return value["type"], value["value"]


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """What each cabled Ethernet port (a host's NIC, a switch's port to another switch)
    hears from its far switch, as Cumulus announces itself (the port's ifname as its ID and
    its description, as lldpd does without an alias)."""
    links = state.get("ethernet") or []
    entries = [
        {
            link["iface"]: {
                "via": "LLDP",
                "rid": str(i),
                "age": "0 day, 02:11:09",
                "chassis": {
                    link["switch"]: {
                        "id": {"type": "mac", "value": _mac(link["switch"])},
                        "descr": "Cumulus Linux version 5.9.1 running on Mellanox "
                        "Technologies Ltd. MSN2201",
                        "capability": [
                            {"type": "Bridge", "enabled": True},
                            {"type": "Router", "enabled": False},
                        ],
                    }
                },
                "port": {
                    "id": {"type": "ifname", "value": link["port"]},
                    "descr": link["port"],
                    "ttl": "120",
                },
            }
        }
        for i, link in enumerate(links, 1)
    ]
    # lldpd's json format: one neighbour is an object, several a list of them.
    interface: Any = entries[0] if len(entries) == 1 else entries
    lldp = {"interface": interface} if entries else {}
    return {PROBE: json.dumps({"lldp": lldp}, indent=2) + "\n"}


def _mac(switch: str) -> str:
    d = digest("lldp", switch)
    return "b8:ce:f6:" + ":".join(d[i : i + 2] for i in (0, 2, 4))
