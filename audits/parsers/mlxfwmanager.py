"""Parser for `mlxfwmanager --query`: the firmware of every NVIDIA (Mellanox) device the fabric
host reaches, its HCAs and, in-band over the InfiniBand fabric, its managed switches.

The switches' ASIC firmware is read from the fabric scan, not over SSH to each switch: the
fabric host already sees every switch in-band, needs no switch credentials, and reads the same
image `show asic-version` would report. In-band devices (`/dev/mst/SW_..._lid-0x0001`) exist
once `mst ib add` has run on that host (at boot, by its unit; the audit itself writes nothing).

Output (MFT 4.x) is a `Device #N:` block per device, `Key:  value` lines, and a `Versions:`
table whose rows are `<image> <current> <available>`; `Base GUID` (hex, no 0x) is the node
GUID. A device without a readable FW row, or a block without a Base GUID, is an error.

Schema:

    [{"device_type": str, "psid": str | None, "device": str, "base_guid": str ("0x" + 16
      hex digits), "firmware": str}]

Example:

    $ mlxfwmanager --query
    Querying Mellanox devices firmware ...

    Device #1:
    ----------

      Device Type:      Quantum
      Part Number:      MQM8700-HS2F_Ax
      Description:      Mellanox Quantum(TM) HDR InfiniBand Switch; 40 QSFP56 ports
      PSID:             MT_0000000063
      PCI Device Name:  /dev/mst/SW_MT54000_leaf01_lid-0x0101
      Base GUID:        b8cef603007ad8a3
      Versions:         Current        Available
         FW             27.2010.6102   N/A

      Status:           No matching image found

    [{"device_type": "Quantum", "psid": "MT_0000000063",
      "device": "/dev/mst/SW_MT54000_leaf01_lid-0x0101", "base_guid": "0xb8cef603007ad8a3",
      "firmware": "27.2010.6102"}]
"""

from __future__ import annotations

import re
from typing import TypedDict

from audits.parsers.base import ParseError

PROBE = "mlxfwmanager"

_DEVICE = re.compile(r"Device #(\d+):")
_FIELD = re.compile(r"\s+([A-Za-z][A-Za-z ]*?):\s*(.*)")
_FW = re.compile(r"\s+FW\s+(\S+)(?:\s+\S+)?\s*")
_GUID = re.compile(r"[0-9a-fA-F]{16}")


class Device(TypedDict):
    device_type: str
    psid: str | None
    device: str
    base_guid: str
    firmware: str


def parse(text: str) -> list[Device]:
    """Parse `mlxfwmanager --query` output."""
    blocks: list[tuple[int, dict[str, str], str | None]] = []  # (line, fields, FW)
    for number, line in enumerate(text.splitlines(), 1):
        if _DEVICE.fullmatch(line.strip()):
            blocks.append((number, {}, None))
            continue
        if not blocks:
            continue
        start, fields, firmware = blocks[-1]
        if (fw := _FW.fullmatch(line)) is not None:
            blocks[-1] = (start, fields, fw.group(1))
        elif (field := _FIELD.fullmatch(line)) is not None:
            fields.setdefault(field.group(1), field.group(2).strip())
    if not blocks:
        raise ParseError(PROBE, 0, "no 'Device #N:' block: not mlxfwmanager --query output")
    out: list[Device] = []
    for start, fields, firmware in blocks:
        guid = fields.get("Base GUID", "")
        if _GUID.fullmatch(guid) is None:
            raise ParseError(PROBE, start, f"device without a Base GUID: {guid!r}")
        if firmware is None or firmware == "N/A":
            raise ParseError(PROBE, start, f"device {guid} without a current FW version")
        out.append(
            {
                "device_type": fields.get("Device Type", ""),
                "psid": fields.get("PSID") or None,
                "device": fields.get("PCI Device Name", ""),
                "base_guid": "0x" + guid.lower(),
                "firmware": firmware,
            }
        )
    return sorted(out, key=lambda d: d["base_guid"])
