"""Stage 5, targets: one module per artifact family; each is pure, plan in, files out.

A target returns `{path relative to generated/: text}`. The registry is explicit: a module
is listed here by name, a duplicate name is an error, a lookup miss lists the known names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from common.errors import TargetError
from compiler.plan import Plan
from compiler.targets import (
    acceptance,
    access,
    alertmanager,
    alerts,
    cumulus,
    dhcp,
    dns,
    eos,
    expected,
    fabric,
    firmware,
    gpudirect,
    grafana,
    hostconf,
    hosts,
    http,
    inventory,
    kickstart,
    labels,
    monitoring,
    opensm,
    pxe,
    routes,
    slurm,
)

Target = Callable[[Plan], dict[str, str]]


class Registry:
    """Targets by name, in the order they were added."""

    def __init__(self) -> None:
        self._targets: dict[str, Target] = {}

    def add(self, name: str, target: Target) -> None:
        if name in self._targets:
            raise TargetError(f"target {name!r} is registered twice")
        self._targets[name] = target

    def get(self, name: str) -> Target:
        try:
            return self._targets[name]
        except KeyError:
            raise TargetError(f"no target {name!r}; known: {', '.join(self._targets)}") from None

    def __iter__(self) -> Iterator[tuple[str, Target]]:
        return iter(self._targets.items())


TARGETS = Registry()
TARGETS.add("hosts", hosts.render)
TARGETS.add("inventory", inventory.render)
TARGETS.add("expected", expected.render)
TARGETS.add("fabric", fabric.render)
TARGETS.add("opensm", opensm.render)
TARGETS.add("routes", routes.render)
TARGETS.add("dns", dns.render)
TARGETS.add("firmware", firmware.render)
TARGETS.add("monitoring", monitoring.render)
TARGETS.add("alerts", alerts.render)
TARGETS.add("alertmanager", alertmanager.render)
TARGETS.add("grafana", grafana.render)
TARGETS.add("dhcp", dhcp.render)
TARGETS.add("pxe", pxe.render)
TARGETS.add("http", http.render)
TARGETS.add("kickstart", kickstart.render)
TARGETS.add("labels", labels.render)
TARGETS.add("access", access.render)
TARGETS.add("hostconf", hostconf.render)
TARGETS.add("gpudirect", gpudirect.render)
TARGETS.add("acceptance", acceptance.render)
TARGETS.add("slurm", slurm.render)
TARGETS.add("cumulus", cumulus.render)
TARGETS.add("eos", eos.render)


def render_all(plan: Plan, registry: Registry = TARGETS) -> dict[str, bytes]:
    """Every target's files; two targets writing one path is a bug, reported as such."""
    files: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for name, target in registry:
        for path, text in target(plan).items():
            if path in files:
                raise TargetError(f"targets {owner[path]!r} and {name!r} both write {path!r}")
            files[path], owner[path] = text.encode(), name
    return dict(sorted(files.items()))
