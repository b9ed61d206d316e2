"""Parser for `slurmd -C`: the node's CPUs and memory as slurmd itself sees them, in
slurm.conf's own words; what slurmd reports to slurmctld at registration, where a node with
fewer CPUs or less memory than slurm.conf gives it is drained ("Low RealMemory").

Output (Slurm 22.05, as Debian's slurmd prints it) is one `NodeName=` line of key=value
pairs, then `UpTime=D-HH:MM:SS`. `NodeName` is the host's own name (not necessarily the one
slurm.conf uses); `RealMemory` is in MiB. A board count, sockets per board, cores per socket
and threads per core multiply to CPUs; output where they do not is refused as garbled.

Schema:

    {"node": str, "cpus": int, "boards": int, "sockets": int, "cores_per_socket": int,
     "threads_per_core": int, "real_memory_mib": int, "uptime": str | null}

`sockets` is every board's (Boards x SocketsPerBoard), as slurm.conf's `Sockets=` counts.

Example:

    $ slurmd -C      # one line, here folded at the backslash
    NodeName=gpu001 CPUs=256 Boards=1 SocketsPerBoard=2 CoresPerSocket=64 ThreadsPerCore=2 \
    RealMemory=1031876
    UpTime=12-04:31:10

    {"node": "gpu001", "cpus": 256, "boards": 1, "sockets": 2, "cores_per_socket": 64,
     "threads_per_core": 2, "real_memory_mib": 1031876, "uptime": "12-04:31:10"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError, decimal
from contract.probes.spec import KIB, Now, Probe

PROBE = "slurmd_c"
# Slurm: the CPUs and memory slurmd sees on the node; on the controller, every node
# held out of work with its reason, in a fixed format (contract/probes/sinfo_r.py).
SPEC = Probe(PROBE, ("slurmd", "-C"), "host", "/usr/sbin/slurmd", max_output=4 * KIB)

_PAIR = re.compile(r"(\w+)=(\S*)")
_NUMBERS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")


class SlurmdC(TypedDict):
    node: str
    cpus: int
    boards: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    uptime: str | None


def parse(text: str) -> SlurmdC:
    """Parse `slurmd -C` output."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    node = next(((n, line) for n, line in lines if line.startswith("NodeName=")), None)
    if node is None:
        raise ParseError(PROBE, 0, "no 'NodeName=' line: expected slurmd's node line")
    number, line = node
    pairs = dict(_PAIR.findall(line))
    missing = [k for k in ("NodeName", *_NUMBERS) if k not in pairs]
    if missing:
        raise ParseError(PROBE, number, f"the node line lacks {', '.join(missing)}")
    values = {k: decimal(PROBE, number, pairs[k]) for k in _NUMBERS}
    sockets = values["Boards"] * values["SocketsPerBoard"]
    if sockets * values["CoresPerSocket"] * values["ThreadsPerCore"] != values["CPUs"]:
        raise ParseError(PROBE, number, f"CPUs={values['CPUs']} is not boards x sockets x "
                         "cores x threads")  # fmt: skip
    uptime = next((u.removeprefix("UpTime=") for _, u in lines if u.startswith("UpTime=")), None)
    return {
        "node": pairs["NodeName"],
        "cpus": values["CPUs"],
        "boards": values["Boards"],
        "sockets": sockets,
        "cores_per_socket": values["CoresPerSocket"],
        "threads_per_core": values["ThreadsPerCore"],
        "real_memory_mib": values["RealMemory"],
        "uptime": uptime,
    }


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """What slurmd sees of a Slurm node: the planned CPUs, and its memory as seen."""
    if "slurm" not in state:
        return {}
    slurm = state["slurm"]
    memory = _seen_memory(slurm) if now.memory_mib is None else now.memory_mib
    return {
        PROBE: (
            f"NodeName={host} CPUs={slurm['cpus']} Boards=1 SocketsPerBoard={slurm['sockets']} "
            f"CoresPerSocket={slurm['cores_per_socket']} "
            f"ThreadsPerCore={slurm['threads_per_core']} "
            f"RealMemory={memory}\nUpTime=12-04:31:10\n"
        )
    }


def _seen_memory(slurm: Mapping[str, Any]) -> int:
    """What slurmd -C shows of the installed memory: less the kernel's share (a 64th here,
    about what a 1 TiB server shows), never below slurm.conf's RealMemory."""
    installed: int = slurm["memory_mib"]
    return max(int(slurm["real_memory_mib"]), installed - installed // 64)
