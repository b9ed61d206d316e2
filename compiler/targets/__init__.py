"""Stage 5, targets: one module per artifact family; each is pure, plan in, files out.

A target returns `{path relative to generated/: text}`. The registry is explicit: a module
is listed here by name, and `common.registry.Registry` refuses a duplicate name and names
the closest known one on a lookup miss.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from common import memo
from common.errors import TargetError
from common.registry import Registry
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
    roce,
    routes,
    scene,
    slurm,
)

Target = Callable[[Plan], dict[str, str]]

TARGETS: Registry[Target] = Registry(
    "target",
    [
        ("hosts", hosts.render),
        ("inventory", inventory.render),
        ("expected", expected.render),
        ("fabric", fabric.render),
        ("opensm", opensm.render),
        ("routes", routes.render),
        ("dns", dns.render),
        ("firmware", firmware.render),
        ("monitoring", monitoring.render),
        ("alerts", alerts.render),
        ("alertmanager", alertmanager.render),
        ("grafana", grafana.render),
        ("dhcp", dhcp.render),
        ("pxe", pxe.render),
        ("http", http.render),
        ("kickstart", kickstart.render),
        ("labels", labels.render),
        ("access", access.render),
        ("hostconf", hostconf.render),
        ("gpudirect", gpudirect.render),
        ("acceptance", acceptance.render),
        ("slurm", slurm.render),
        ("scene", scene.render),
        ("cumulus", cumulus.render),
        ("eos", eos.render),
        ("roce", roce.render),
    ],
)


def render_all(plan: Plan, registry: Mapping[str, Target] = TARGETS) -> dict[str, bytes]:
    """Every target's files; two targets writing one path is a bug, reported as such."""
    files: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for name, target in registry.items():
        for path, text in target(plan).items():
            if path in files:
                raise TargetError(f"targets {owner[path]!r} and {name!r} both write {path!r}")
            files[path], owner[path] = _encoded(text), name
    return dict(sorted(files.items()))


@memo.by_object  # a text a marked target gives both sides of a diff: its bytes made once
def _encoded(text: str) -> bytes:
    return text.encode()
