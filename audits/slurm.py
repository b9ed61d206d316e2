"""The audit's Slurm checks: a node's CPUs and memory as slurmd sees them against what
slurm.conf tells Slurm (the contract's `slurm`), and the controller's nodes held out of work
(the contract's `slurm_controller`).

- `slurmd` (on every Slurm node, probe `slurmd_c`): CPUs, sockets, cores per socket and
  threads per core must be the plan's; RealMemory at least slurm.conf's (installed memory
  less the headroom). Below either, slurmctld drains the node at registration ("Low socket*
  core*thread count", "Low RealMemory"): a DIMM or a CPU lost, SMT off in the BIOS.
- `slurm_drains` (on the controller, probe `sinfo_r`): every node Slurm holds out of work
  (drained, draining, down, failed) is a finding named by that node, so the report places it
  at the node's rack and U; the message says who held it out, since when, and why. Spares
  drained with the reason "spare" are as planned; a spare not held out was put to work by
  hand, outside the model.
"""

from __future__ import annotations

from audits.sink import Facts, Sink
from contract import Host, Severity

MIB_PER_GIB = 1024
_TOPOLOGY = (
    ("cpus", "CPUs"),
    ("sockets", "sockets"),
    ("cores_per_socket", "cores per socket"),
    ("threads_per_core", "threads per core"),
)


def _gib(mib: int) -> str:
    return f"{mib / MIB_PER_GIB:.1f} GiB"


def node(c: Host, facts: Facts, sink: Sink) -> None:
    want, seen = c.slurm, facts["slurmd_c"]
    if want is None:
        return  # the check applies to hosts that run slurmd only
    planned = want.model_dump()
    for key, words in _TOPOLOGY:
        if seen[key] != planned[key]:
            text = f"slurmd sees {seen[key]} {words}, slurm.conf plans {planned[key]}"
            if seen[key] < planned[key]:
                text += ": Slurm drains the node (Low socket*core*thread count)"
            sink.drift(f"slurm.{key}", planned[key], seen[key], Severity.CRITICAL, text)
    have, real, installed = seen["real_memory_mib"], want.real_memory_mib, want.memory_mib
    if have < real:
        text = (
            f"slurmd sees {_gib(have)}, {_gib(installed - have)} less than the "
            f"{_gib(installed)} installed and below RealMemory={real}: Slurm drains the node "
            "(Low RealMemory)"
        )
        sink.drift("slurm.real_memory_mib", real, have, Severity.CRITICAL, text)


def drains(c: Host, facts: Facts, sink: Sink) -> None:
    ctl = c.slurm_controller
    if ctl is None:
        return  # the check applies to the controller that answers for the nodes only
    planned = ctl.nodes
    held = {h["node"]: h for h in facts["sinfo_r"]}
    for name, h in sorted(held.items()):
        place = planned.get(name)
        if place is not None and place.spare and h["reason"] == ctl.spare_reason:
            continue
        where = f"{place.rack} U{place.u}" if place else "not a planned node"
        responds = "" if h["responding"] else ", not responding"
        text = (
            f"{name} ({where}) is {h['state']}{responds} in Slurm since {h['since']} by "
            f"{h['user']}: {h['reason']}"
        )
        severity = Severity.CRITICAL if h["user"] in ("slurm", "root") else Severity.WARNING
        sink.drift_on(name, f"slurm.state[{name}]", "in service", h["state"], severity, text)
    for name, place in sorted(planned.items()):
        if place.spare and name not in held:
            text = (
                f"spare {name} ({place.rack} U{place.u}) is not drained: put to work by "
                "hand; bring it in through its rack file (role gpu), or drain it again"
            )
            sink.drift_on(name, f"slurm.state[{name}]", "drained: spare", "in service",
                          Severity.WARNING, text)  # fmt: skip
