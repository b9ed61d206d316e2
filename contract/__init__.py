"""The expected-state contract: what `generated/expected/` and `generated/deploy/` hold, and
the normalisers both sides of it use. The compiler's targets write it, the audit reads it;
this package imports neither, and neither reaches into the other's internals through it.

Per host, `expected/hosts/<host>.json` (schema in `compiler/targets/expected.py`) says what the
machine must look like; `deploy/<host>.json` (`Deploy` below) says which generated files the
host holds, where, with which mode and owner, and which units and kernel modules must run.
Beside them: `probes/`, the audit's commands with their parsers and lab renderers, which the
compiler grants the audit account and the audit runs; `account`, that account's names; and
`manifest`, generated/MANIFEST.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

SCHEMA = 1


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


class Placed(NamedTuple):
    """One generated file at its home on a host: `source` under generated/, `path` on the host.

    `sha256` is of the file as generated; None where the deployed bytes legitimately differ
    from generated/ (files that carry the root password hash, which git never holds), so the
    audit checks only that the file is there. `reload` is the unit to reload-or-restart when
    the file changes."""

    path: str
    source: str
    mode: str
    owner: str
    sha256: str | None
    reload: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "source": self.source,
            "mode": self.mode,
            "owner": self.owner,
            "sha256": self.sha256,
            "reload": self.reload,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Placed:
        return cls(
            str(data["path"]),
            str(data["source"]),
            str(data["mode"]),
            str(data["owner"]),
            None if data.get("sha256") is None else str(data["sha256"]),
            None if data.get("reload") is None else str(data["reload"]),
        )


class Deploy(NamedTuple):
    """`generated/deploy/<host>.json`: everything the host's bundle places and runs."""

    host: str
    files: tuple[Placed, ...]  # sorted by path
    units: tuple[str, ...]  # enabled at boot and active
    kernel_modules: tuple[str, ...]  # loaded (modules-load.d) and built for the pinned kernel

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "host": self.host,
            "files": [f.as_json() for f in self.files],
            "units": list(self.units),
            "kernel_modules": list(self.kernel_modules),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Deploy:
        return cls(
            str(data["host"]),
            tuple(Placed.from_json(f) for f in data.get("files", ())),
            tuple(str(u) for u in data.get("units", ())),
            tuple(str(m) for m in data.get("kernel_modules", ())),
        )
