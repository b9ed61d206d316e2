"""Parser for `nvidia-smi nvlink -s`: the state and speed of every NVLink of every GPU.

Output is a `GPU N: NAME (UUID: GPU-...)` line per GPU, then one indented line per link:
`Link 3: 25 GB/s` (A100, per direction) or `Link 3: <inactive>`. Some versions print the GPU
line without the UUID. A GPU line with no link lines under it, or a link line outside a GPU,
is an error (cut-off output), as is a link number listed twice. A GPU without NVLink is
reported by nvidia-smi in words, which is an error here: this probe only runs on NVLink boxes.

Schema:

    [{"index": int, "name": str, "uuid": str | None,
      "links": [{"link": int, "active": bool, "speed_gb_s": float | None}]}]

Example:

    $ nvidia-smi nvlink -s
    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61)
             Link 0: 25 GB/s
             Link 1: <inactive>

    [{"index": 0, "name": "NVIDIA A100-SXM4-80GB",
      "uuid": "GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61",
      "links": [{"link": 0, "active": true, "speed_gb_s": 25.0},
                {"link": 1, "active": false, "speed_gb_s": null}]}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import gpu_ids
from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "nvidia_smi_nvlink"
# One line a link: 18 NVLinks of 16 GPUs is under 20 KB.
SPEC = Probe(
    PROBE,
    ("nvidia-smi", "nvlink", "-s"),
    "host",
    "/usr/bin/nvidia-smi",
    max_output=256 * KIB,
)

_GPU = re.compile(r"GPU (?P<index>\d+): (?P<name>.+?)(?: \(UUID: (?P<uuid>GPU-[0-9a-f-]+)\))?")
_LINK = re.compile(r"Link (?P<link>\d+): (?:(?P<speed>\d+(?:\.\d+)?) GB/s|<inactive>)")


class Link(TypedDict):
    link: int
    active: bool
    speed_gb_s: float | None


class NvlinkGpu(TypedDict):
    index: int
    name: str
    uuid: str | None
    links: list[Link]


def parse(text: str) -> list[NvlinkGpu]:
    """Parse `nvidia-smi nvlink -s`, one entry per GPU in output order."""
    gpus: list[tuple[int, NvlinkGpu]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if gpu := _GPU.fullmatch(line):
            entry: NvlinkGpu = {
                "index": int(gpu["index"]),
                "name": gpu["name"],
                "uuid": gpu["uuid"],
                "links": [],
            }
            gpus.append((number, entry))
        elif link := _LINK.fullmatch(line):
            if not gpus:
                raise ParseError(PROBE, number, "link line before any 'GPU N:' line")
            links = gpus[-1][1]["links"]
            if any(known["link"] == int(link["link"]) for known in links):
                raise ParseError(PROBE, number, f"link {link['link']} listed twice")
            speed = link["speed"]
            links.append(
                {
                    "link": int(link["link"]),
                    "active": speed is not None,
                    "speed_gb_s": float(speed) if speed is not None else None,
                }
            )
        else:
            raise ParseError(PROBE, number, f"expected 'GPU N: ...' or 'Link N: ...', got {line!r}")
    if not gpus:
        raise ParseError(PROBE, 0, "empty output: expected a 'GPU N: ...' line per GPU")
    for number, entry in gpus:
        if not entry["links"]:
            raise ParseError(PROBE, number, f"GPU {entry['index']} lists no links (cut off?)")
    return [entry for _, entry in gpus]


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Every planned NVLink of every GPU up, but the first `now.inactive_nvlinks` of one."""
    if state["gpus"] is None:
        return {}
    g = state["gpus"]
    nvlink = ""
    for i, (_bus, _serial, uuid) in enumerate(gpu_ids(host, g["count"])):
        nvlink += f"GPU {i}: {g['model']} (UUID: {uuid})\n"
        down = now.inactive_nvlinks.get(i, 0)
        for link in range(g["nvlinks_per_gpu"]):
            nvlink += f"\t Link {link}: {'<inactive>' if link < down else '25 GB/s'}\n"
    return {PROBE: nvlink}
