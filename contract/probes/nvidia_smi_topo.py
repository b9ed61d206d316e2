"""Parser for `nvidia-smi topo -m`: the PCIe/NVLink path between every GPU and every HCA.

Output is a matrix: a header row of device names (`GPU0`.. then the HCAs, as `mlx5_0` on
older drivers or `NIC0` with a `NIC Legend:` below mapping `NIC0: mlx5_0` on newer ones), then
`CPU Affinity`, `NUMA Affinity` (and `GPU NUMA ID` on newer drivers); one row per device with
`X` for itself, `NV#` for # bonded NVLinks, or a PCIe path type: PIX (one switch), PXB (several
switches, no host bridge), PHB (through a host bridge), NODE (between host bridges of one NUMA
node), SYS (across sockets; drivers before about 384 call it SOC, read here as SYS, the one
path it names). Header cells may carry terminal underline codes (ESC[4m), which
are dropped. A row whose cells do not match the header, an unknown path type, or no GPU row
is an error.

Schema (rows of GPUs only; HCAs named as the kernel names them):

    {"hcas": [str], "gpus": [{"index": int, "paths": {device: str}}]}

Example:

    $ nvidia-smi topo -m
            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV12    PXB     0-31            0               N/A
    GPU1    NV12     X      PXB     0-31            0               N/A
    NIC0    PXB     PXB      X

    Legend: ...
    NIC Legend:

      NIC0: mlx5_0

    {"hcas": ["mlx5_0"],
     "gpus": [{"index": 0, "paths": {"GPU1": "NV12", "mlx5_0": "PXB"}},
              {"index": 1, "paths": {"GPU0": "NV12", "mlx5_0": "PXB"}}]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "nvidia_smi_topo"
# GPUDirect: the PCIe paths between GPUs and HCAs, the modules loaded, NCCL's config
# (0644, like /proc/modules: no root needed).
SPEC = Probe(
    PROBE,
    ("nvidia-smi", "topo", "-m"),
    "host",
    "/usr/bin/nvidia-smi",
    max_output=64 * KIB,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEVICE = re.compile(r"GPU\d+|NIC\d+|mlx\d+_\d+")
_CELL = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC")
_RENAMED = {"SOC": "SYS"}  # older drivers' name of the cross-socket path
_NIC_NAME = re.compile(r"(NIC\d+):\s*(\S+)")


class GpuPaths(TypedDict):
    index: int
    paths: dict[str, str]


class Topology(TypedDict):
    hcas: list[str]
    gpus: list[GpuPaths]


def parse(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` output."""
    lines = [(n, _ANSI.sub("", raw)) for n, raw in enumerate(text.splitlines(), 1)]
    header = next(((n, line) for n, line in lines if line.strip()), None)
    if header is None:
        raise ParseError(PROBE, 0, "empty output: expected the topology matrix")
    number, line = header
    columns = line.split()
    devices = [c for c in columns if _DEVICE.fullmatch(c)]
    if not devices or columns[: len(devices)] != devices:
        raise ParseError(PROBE, number, f"expected a header of device names, got {line.strip()!r}")
    names = {n: m for _, text_ in lines for n, m in _NIC_NAME.findall(text_)}
    rows: dict[str, dict[str, str]] = {}
    for number, line in lines:
        cells = line.split()
        if number <= header[0] or not cells:
            continue
        if cells[0] not in devices:
            break  # the legend
        values = cells[1 : 1 + len(devices)]
        bad = [v for v in values if _CELL.fullmatch(v) is None]
        if len(values) < len(devices) or bad:
            raise ParseError(PROBE, number, f"row {cells[0]}: expected {len(devices)} path "
                             f"types, got {' '.join(values)!r}")  # fmt: skip
        rows[cells[0]] = {d: _RENAMED.get(v, v) for d, v in zip(devices, values, strict=True)}
    hcas = [names.get(d, d) for d in devices if not d.startswith("GPU")]
    gpus: list[GpuPaths] = []
    for device in devices:
        if not device.startswith("GPU"):
            continue
        if device not in rows:
            raise ParseError(PROBE, 0, f"no row for {device} (cut off?)")
        paths = {names.get(d, d): v for d, v in rows[device].items() if d != device}
        gpus.append({"index": int(device[3:]), "paths": paths})
    if not gpus:
        raise ParseError(PROBE, header[0], "no GPU in the matrix")
    return {"hcas": hcas, "gpus": gpus}


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The planned PCIe paths between GPUs and HCAs, but those `now.paths` moves: a GPU's
    path to its own HCA (the affinity's), one column of eight on a server of eight rails."""
    if "gpudirect" not in state:
        return {}
    count = state["gpus"]["count"]
    near = {a["gpu"]: (a["hca"], a["path"]) for a in state["gpudirect"]["affinity"]}
    hcas = sorted({hca for hca, _ in near.values()}) or [p["device"] for p in state["ib_ports"]]
    links = state["gpus"]["nvlinks_per_gpu"]
    head = (
        "\t"
        + "\t".join([*(f"GPU{i}" for i in range(count)), *hcas])
        + "\tCPU Affinity\tNUMA Affinity\n"
    )
    rows = []
    for i in range(count):
        cells = [" X " if j == i else f"NV{links}" for j in range(count)]
        for hca in hcas:
            own, path = near.get(i, (hca, "SYS"))
            cells.append(now.paths.get(i, path) if own == hca else "SYS")
        numa = 0 if i < count // 2 else 1
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{numa * 32}-{numa * 32 + 31}\t{numa}\n")
    legend = "\nLegend:\n\n  X    = Self\n  PXB  = Connection traversing multiple PCIe bridges\n"
    return {PROBE: head + "".join(rows) + legend}
