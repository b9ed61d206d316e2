"""Parser for the GPU inventory query of nvidia-smi: one line per GPU.

Command:

    nvidia-smi --query-gpu=index,name,serial,uuid,vbios_version,driver_version,pci.bus_id \
    --format=csv,noheader

Cells are separated by `", "`. `[N/A]` (a GeForce has no serial) becomes null; another
bracketed value such as `[Unknown Error]` is an error. A driver/library mismatch or a missing
driver prints a sentence instead of rows, which is an error. `No devices were found` gives
`[]`. PCI bus ids are lower-cased so they compare equal to the XML and Xid forms.

Schema:

    [{"index": int, "name": str, "serial": str | None, "uuid": "GPU-...",
      "vbios_version": str, "driver_version": str, "pci_bus_id": "0000000x:bb:dd.f"}]

Example:

    (one line per GPU; wrapped here)
    0, NVIDIA A100-SXM4-80GB, 1324021045678, GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61,
    92.00.45.00.03, 535.129.03, 00000000:07:00.0

    [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "serial": "1324021045678",
      "uuid": "GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61", "vbios_version": "92.00.45.00.03",
      "driver_version": "535.129.03", "pci_bus_id": "00000000:07:00.0"}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import gpu_ids
from contract.probes._nvidia import csv_rows
from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "nvidia_smi_gpus"
_GPU_QUERY = "index,name,serial,uuid,vbios_version,driver_version,pci.bus_id"
SPEC = Probe(
    PROBE,
    ("nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv,noheader"),
    "host",
    "/usr/bin/nvidia-smi",
    max_output=64 * KIB,
)


class Gpu(TypedDict):
    index: int
    name: str
    serial: str | None
    uuid: str
    vbios_version: str
    driver_version: str
    pci_bus_id: str


def parse(text: str) -> list[Gpu]:
    """Parse the `--query-gpu` CSV inventory, one entry per GPU in output order."""
    gpus: list[Gpu] = []
    for row in csv_rows(PROBE, text, 7):
        uuid = row.text(3)
        if not uuid.startswith("GPU-"):
            raise ParseError(PROBE, row.line, f"not a GPU UUID: {uuid!r}")
        gpus.append(
            {
                "index": row.integer(0),
                "name": row.text(1),
                "serial": row.optional(2),
                "uuid": uuid,
                "vbios_version": row.text(4),
                "driver_version": row.text(5),
                "pci_bus_id": row.pci_bus_id(6),
            }
        )
    return gpus


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """A line a planned GPU, its serial, UUID and bus ID derived from the host's name."""
    if state["gpus"] is None:
        return {}
    v, g = state["versions"], state["gpus"]
    return {
        PROBE: "".join(
            f"{i}, {g['model']}, {serial}, {uuid}, {v['vbios']}, {v['gpu_driver']}, {bus}\n"
            for i, (bus, serial, uuid) in enumerate(gpu_ids(host, g["count"]))
        )
    }
