"""Parser for `sinfo --list-reasons --Node --noheader --format=%N,%T,%u,%H,%E`: every node
Slurm holds out of work (down, drained, draining, failed) with the reason it was given, who
gave it and when, one node a line.

The fixed format, not `sinfo -R`'s default: that one cuts the reason at 20 characters ("gres/
gpu count repor") and folds nodes into host lists. Fields are comma-separated (a character
no node name, state, user or timestamp holds, and one the probe's words may carry unquoted);
the reason is last and may itself hold commas. State is sinfo's long form (`drained`,
`draining`, `down`, `inval`, `fail`, ...), with a `*` appended when the node does not
respond. No output at all is no node held out: a healthy cluster.

Schema:

    [{"node": str, "state": str, "responding": bool, "user": str, "since": str,
      "reason": str}]

Example:

    $ sinfo --list-reasons --Node --noheader --format=%N,%T,%u,%H,%E
    gpu017,drained,slurm,2026-11-30T17:02:11,gres/gpu count reported lower than configured (7 < 8)
    gpu125,drained,slurm,2026-11-30T09:00:00,spare

    [{"node": "gpu017", "state": "drained", "responding": true, "user": "slurm",
      "since": "2026-11-30T17:02:11",
      "reason": "gres/gpu count reported lower than configured (7 < 8)"},
     {"node": "gpu125", "state": "drained", "responding": true, "user": "slurm",
      "since": "2026-11-30T09:00:00", "reason": "spare"}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "sinfo_r"
SPEC = Probe(
    PROBE,
    ("sinfo", "--list-reasons", "--Node", "--noheader", "--format=%N,%T,%u,%H,%E"),
    "host",
    "/usr/bin/sinfo",
    max_output=MIB,  # a line a held-out node
)

_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_STATE = re.compile(r"[a-z_]+(?:\+[a-z_]+)*[*~#!%$@^-]?")


class Held(TypedDict):
    node: str
    state: str
    responding: bool
    user: str
    since: str
    reason: str


def parse(text: str) -> list[Held]:
    """Parse the node lines, in output order."""
    out: list[Held] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        fields = line.split(",", 4)
        if len(fields) != 5:
            raise ParseError(PROBE, number, f"expected 'node,state,user,time,reason', got {line!r}")
        node, state, user, since, reason = (f.strip() for f in fields)
        if _NODE.fullmatch(node) is None:
            raise ParseError(PROBE, number, f"not a node name: {node!r}")
        if _STATE.fullmatch(state) is None:
            raise ParseError(PROBE, number, f"not a node state: {state!r}")
        out.append(
            {
                "node": node,
                "state": state.rstrip("*~#!%$@^-"),
                "responding": not state.endswith("*"),
                "user": user,
                "since": since,
                "reason": reason,
            }
        )
    return out


_SINCE = "2026-05-04T05:00:00"


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """On the controller, its nodes held out of work: the spares, drained as planned, and
    those `now.held` adds, in the probe's fixed format."""
    if "slurm_controller" not in state:
        return {}
    controller = state["slurm_controller"]
    held = {
        name: ("drained", "slurm", controller["spare_reason"])
        for name, node in controller["nodes"].items()
        if node["spare"]
    } | dict(now.held)
    return {
        PROBE: "".join(
            f"{name},{state_},{user},{_SINCE},{reason}\n"
            for name, (state_, user, reason) in sorted(held.items())
        )
    }
