"""Routes in the form both sides of the contract compare: the plan's, and `ip -j route`'s
normalised to the fields the plan decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class Route(NamedTuple):
    """A route in the normalised form the audit compares: `ip -j route` minus what varies."""

    dst: str
    dev: str
    gateway: str | None = None

    def as_json(self) -> dict[str, str]:
        out = {"dst": self.dst, "dev": self.dev}
        if self.gateway:
            out["gateway"] = self.gateway
        return out

    def order(self) -> tuple[bool, str, str]:
        """Sort key: the default route first, then by destination."""
        return (self.dst != "default", self.dst, self.dev)

    @classmethod
    def from_ip(cls, entry: Mapping[str, Any]) -> Route:
        """One entry of `ip -j route show`, reduced to what the plan decides."""
        dst = str(entry["dst"])
        if dst != "default" and "/" not in dst:
            dst += "/32"  # ip prints host routes bare; the plan writes every prefix
        gateway = entry.get("gateway")
        return cls(dst, str(entry.get("dev", "")), str(gateway) if gateway else None)


def normal_routes(ip_json: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """`ip -j route show` in the form of the expected routes ("routes" in generated/expected/):
    the one normaliser the audit and the tests compare through. Metric, protocol, scope and
    source address vary by how a route was made, so they are dropped; what remains is unique."""
    return [r.as_json() for r in sorted({Route.from_ip(e) for e in ip_json}, key=Route.order)]
