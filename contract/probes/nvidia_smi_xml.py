"""Parser for `nvidia-smi -q -x`: driver and CUDA versions and the GPUs, from the XML report.

The document starts with `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`. It is
read with `xml.etree`, whose expat parser never fetches an external DTD; entity declarations
are refused because nvidia-smi never writes one. Values nvidia-smi cannot read are `N/A`
(CUDA shows `Not Found` without a CUDA driver); both become null. `attached_gpus` must match
the number of `<gpu>` elements, which catches a cut-off report. PCI bus ids are lower-cased.

Schema:

    {"driver_version": str, "cuda_version": str | None, "attached_gpus": int,
     "gpus": [{"pci_bus_id": str, "product_name": str, "serial": str | None, "uuid": str,
               "vbios_version": str | None}]}

Example:

    $ nvidia-smi -q -x
    <?xml version="1.0" ?>
    <!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
    <nvidia_smi_log>
        <driver_version>535.129.03</driver_version>
        <cuda_version>12.2</cuda_version>
        <attached_gpus>1</attached_gpus>
        <gpu id="00000000:07:00.0">
            <product_name>NVIDIA A100-SXM4-80GB</product_name>
            <serial>1324021045678</serial>
            <uuid>GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61</uuid>
            <vbios_version>92.00.45.00.03</vbios_version>
            <pci><pci_bus_id>00000000:07:00.0</pci_bus_id></pci>
        </gpu>
    </nvidia_smi_log>

    {"driver_version": "535.129.03", "cuda_version": "12.2", "attached_gpus": 1,
     "gpus": [{"pci_bus_id": "00000000:07:00.0", "product_name": "NVIDIA A100-SXM4-80GB",
               "serial": "1324021045678", "uuid": "GPU-3b1e1f5a-6c2d-4b0e-9f1a-2d7c8e4a5b61",
               "vbios_version": "92.00.45.00.03"}]}
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import gpu_ids
from contract.probes.base import ParseError, decimal
from contract.probes.spec import MIB, Now, Probe

PROBE = "nvidia_smi_xml"
# About 40 KB a GPU (nvidia-smi 535 on an H100): 4 MiB holds 16 GPUs with room.
SPEC = Probe(
    PROBE,
    ("nvidia-smi", "-q", "-x"),
    "host",
    "/usr/bin/nvidia-smi",
    max_output=4 * MIB,
)

_ABSENT = frozenset({"N/A", "Not Found"})


class XmlGpu(TypedDict):
    pci_bus_id: str
    product_name: str
    serial: str | None
    uuid: str
    vbios_version: str | None


class NvidiaSmiXml(TypedDict):
    driver_version: str
    cuda_version: str | None
    attached_gpus: int
    gpus: list[XmlGpu]


def parse(text: str) -> NvidiaSmiXml:
    """Parse the `nvidia-smi -q -x` XML report."""
    if not text.strip():
        raise ParseError(PROBE, 0, "empty output: expected an <nvidia_smi_log> document")
    if "<!ENTITY" in text:
        raise ParseError(PROBE, 0, "refusing a document that declares entities")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise ParseError(PROBE, error.position[0], f"not well-formed XML: {error}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(PROBE, 0, f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    attached = decimal(PROBE, 0, _required(root, "attached_gpus"))
    gpus = [_gpu(element) for element in root.findall("gpu")]
    if len(gpus) != attached:
        raise ParseError(
            PROBE, 0, f"attached_gpus says {attached} but the report has {len(gpus)} <gpu>"
        )
    return {
        "driver_version": _required(root, "driver_version"),
        "cuda_version": _optional(root, "cuda_version"),
        "attached_gpus": attached,
        "gpus": gpus,
    }


def _gpu(element: ET.Element) -> XmlGpu:
    return {
        "pci_bus_id": _required(element, "pci/pci_bus_id").lower(),
        "product_name": _required(element, "product_name"),
        "serial": _optional(element, "serial"),
        "uuid": _required(element, "uuid"),
        "vbios_version": _optional(element, "vbios_version"),
    }


def _optional(parent: ET.Element, path: str) -> str | None:
    child = parent.find(path)
    if child is None:
        where = f"<gpu id={parent.get('id')!r}>" if parent.tag == "gpu" else f"<{parent.tag}>"
        raise ParseError(PROBE, 0, f"{where} has no <{path}>")
    value = (child.text or "").strip()
    return None if value in _ABSENT else value


def _required(parent: ET.Element, path: str) -> str:
    value = _optional(parent, path)
    if not value:
        raise ParseError(PROBE, 0, f"<{path}> is empty or N/A")
    return value


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The driver, CUDA and each planned GPU, as nvidia-smi's XML has them."""
    if state["gpus"] is None:
        return {}
    v, g = state["versions"], state["gpus"]
    xml = (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        f"<nvidia_smi_log>\n\t<timestamp>Mon May  4 06:00:00 2026</timestamp>\n"
        f"\t<driver_version>{v['gpu_driver']}</driver_version>\n"
        f"\t<cuda_version>{v['cuda']}</cuda_version>\n"
        f"\t<attached_gpus>{g['count']}</attached_gpus>\n"
    )
    for bus, serial, uuid in gpu_ids(host, g["count"]):
        xml += (
            f'\t<gpu id="{bus}">\n\t\t<product_name>{g["model"]}</product_name>\n'
            f"\t\t<serial>{serial}</serial>\n\t\t<uuid>{uuid}</uuid>\n"
            f"\t\t<vbios_version>{v['vbios']}</vbios_version>\n"
            f"\t\t<pci>\n\t\t\t<pci_bus_id>{bus}</pci_bus_id>\n\t\t</pci>\n\t</gpu>\n"
        )
    return {PROBE: xml + "</nvidia_smi_log>\n"}
