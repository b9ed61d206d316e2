"""Parser for `ip -j route show`: the main IPv4 routing table, normalised and sorted.

iproute2 prints one JSON array; an empty table is `[]`, while an empty output or a cut-off
array (ip prints `[` before a failing dump) is an error. Each route keeps the keys below,
taken as ip reports them and omitted when ip omits them: `dst` (`default` stays `default`,
a host route is a bare address), `gateway`, `dev`, `metric`, `protocol` (`kernel`, `static`,
`dhcp`, ...), `scope` (`link`, `host`; absent means global) and `type` (only for
non-unicast routes such as `blackhole`, which have no `dev`). Other keys (`flags`, `prefsrc`,
`pref`) are dropped. Multipath routes (`nexthops`) are refused rather than flattened.

The normalised form is sorted by (`dst`, `metric` with absent as 0, `dev`, `gateway`), so two
hosts with the same routes give equal lists whatever order the kernel dumped them in.

Schema:

    [{"dst": str, "gateway"?: str, "dev"?: str, "metric"?: int, "protocol"?: str,
      "scope"?: str, "type"?: str}]

Example:

    $ ip -j route show
    [{"dst":"default","gateway":"10.60.2.1","dev":"eno1","protocol":"static","metric":100,"flags":[]},
     {"dst":"10.60.2.0/24","dev":"eno1","protocol":"kernel","scope":"link","prefsrc":"10.60.2.11",
      "metric":100,"flags":[]}]

    [{"dst": "10.60.2.0/24", "dev": "eno1", "metric": 100, "protocol": "kernel", "scope": "link"},
     {"dst": "default", "gateway": "10.60.2.1", "dev": "eno1", "metric": 100,
      "protocol": "static"}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, cast

from contract.probes._json import json_objects
from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "ip_route"
SPEC = Probe(PROBE, ("ip", "-j", "route", "show"), "host", "/usr/sbin/ip", max_output=MIB)

_KEYS = ("gateway", "dev", "metric", "protocol", "scope", "type")


class Route(TypedDict):
    dst: str
    gateway: NotRequired[str]
    dev: NotRequired[str]
    metric: NotRequired[int]
    protocol: NotRequired[str]
    scope: NotRequired[str]
    type: NotRequired[str]


def parse(text: str) -> list[Route]:
    """Parse `ip -j route show` into the sorted normalised form."""
    routes = [_route(number, item) for number, item in enumerate(json_objects(PROBE, text), 1)]
    return sorted(
        routes,
        key=lambda r: (r["dst"], r.get("metric", 0), r.get("dev", ""), r.get("gateway", "")),
    )


def _route(number: int, item: dict[str, Any]) -> Route:
    if "nexthops" in item:
        raise ParseError(PROBE, 0, f"route {number} is multipath (nexthops), not supported")
    dst = item.get("dst")
    if not isinstance(dst, str):
        raise ParseError(PROBE, 0, f"route {number} has no 'dst'")
    if "dev" not in item and "type" not in item:
        raise ParseError(PROBE, 0, f"route {number} ({dst}) has neither 'dev' nor 'type'")
    route: dict[str, str | int] = {"dst": dst}
    for key in _KEYS:
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, int if key == "metric" else str):
            raise ParseError(PROBE, 0, f"route {number} ({dst}) has {key} {value!r}")
        route[key] = value
    return cast(Route, route)


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The planned routes as the kernel lists them: static ones by gateway, the rest link's."""
    source = {i["name"]: i["address"].split("/")[0] for i in state["interfaces"]}
    metric = {i["name"]: 100 + n for n, i in enumerate(state["interfaces"])}
    items = []
    for r in state["routes"]:
        item: dict[str, Any] = {"dst": r["dst"]}
        if "gateway" in r:
            item |= {"gateway": r["gateway"], "dev": r["dev"], "protocol": "static"}
        else:
            item |= {"dev": r["dev"], "protocol": "kernel", "scope": "link"}
            item["prefsrc"] = source.get(r["dev"], "")
        item |= {"metric": metric.get(r["dev"], 100), "flags": []}
        items.append(item)
    return {PROBE: json.dumps(items, separators=(",", ":")) + "\n"}
