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
from typing import TypedDict

from audits.parsers.base import ParseError, decimal

PROBE = "slurmd_c"

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
