"""Parser for `mlxfwmanager --query`: the firmware of every NVIDIA (Mellanox) device the fabric
host reaches, its HCAs and, in-band over the InfiniBand fabric, its managed switches.

The switches' ASIC firmware is read from the fabric scan, not over SSH to each switch: the
fabric host already sees every switch in-band, needs no switch credentials, and reads the same
image `show asic-version` would report. In-band devices (`/dev/mst/SW_..._lid-0x0001`) exist
once `mst ib add` has run on that host (at boot, by its unit; the audit itself writes nothing).

Output (MFT 4.x) is a `Device #N:` block per device, `Key:  value` lines, and a `Versions:`
table whose rows are `<image> <current> <available>`; `Base GUID` (hex, no 0x) is the node
GUID. An Ethernet-only card (a ConnectX in Ethernet mode, a BlueField's, the host's own NIC)
has no GUID: it prints `Base MAC` alone, and older MFT or older cards `Port1 MAC` (and
`Port2 MAC`) instead; such a device is read with `base_guid` null, and matched to no switch.
A device without a readable FW row, or a block with neither a GUID nor a MAC, is an error.

Schema:

    [{"device_type": str, "psid": str | None, "device": str, "base_guid": str ("0x" + 16
      hex digits) | None, "base_mac": str (12 hex digits) | None, "firmware": str}]
    sorted by base_guid (devices without one last), then base_mac

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
      "base_mac": None, "firmware": "27.2010.6102"}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import lid
from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "mlxfwmanager"
# The switches' firmware, in-band from the fabric host (its parser, below);
# MFT reads the in-band devices as root.
SPEC = Probe(
    PROBE,
    ("mlxfwmanager", "--query"),
    "fabric",
    "/usr/bin/mlxfwmanager",
    True,
    max_output=16 * MIB,
)

_DEVICE = re.compile(r"Device #(\d+):")
_FIELD = re.compile(r"\s*([A-Za-z][A-Za-z0-9 ]*?):\s*(.*)")  # indented, or not (some pages)
_FW = re.compile(r"\s+FW\s+(\S+)(?:\s+\S+)?\s*")
_GUID = re.compile(r"[0-9a-fA-F]{16}")
_MAC = re.compile(r"[0-9a-fA-F]{12}")


class Device(TypedDict):
    device_type: str
    psid: str | None
    device: str
    base_guid: str | None
    base_mac: str | None
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
        mac = fields.get("Base MAC") or fields.get("Port1 MAC") or ""
        # "Base GUID:  N/A" on some cards in Ethernet mode: as good as none.
        has_guid = _GUID.fullmatch(guid) is not None
        has_mac = _MAC.fullmatch(mac) is not None
        if not has_guid and not has_mac:
            raise ParseError(PROBE, start, f"device without a Base GUID or MAC: {guid or mac!r}")
        if firmware is None or firmware == "N/A":
            name = guid if has_guid else mac
            raise ParseError(PROBE, start, f"device {name} without a current FW version")
        out.append(
            {
                "device_type": fields.get("Device Type", ""),
                "psid": fields.get("PSID") or None,
                "device": fields.get("PCI Device Name", ""),
                "base_guid": "0x" + guid.lower() if has_guid else None,
                "base_mac": mac.lower() if has_mac else None,
                "firmware": firmware,
            }
        )
    return sorted(
        out, key=lambda d: (d["base_guid"] is None, d["base_guid"] or "", d["base_mac"] or "")
    )


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """On the fabric host (`state`: the fabric as the lab cables it, its `switches`): its own
    HCA, then every switch in-band whose firmware is known; nothing on a fabric without any."""
    if not state["switches"]:
        return {}
    blocks = ["Querying Mellanox devices firmware ...\n"]
    devices = [("ConnectX6", "/dev/mst/mt4123_pciconf0", "0c42a10300000000", "20.39.1002")]
    devices += [
        ("Quantum", f"/dev/mst/SW_MT54000_{s['name']}_lid-0x{lid(s['guid']):04x}",
         s["guid"][2:], s["firmware"])
        for s in state["switches"]
        if s["firmware"] is not None
    ]  # fmt: skip
    for n, (kind, device, guid, firmware) in enumerate(devices, 1):
        blocks.append(
            f"Device #{n}:\n----------\n\n  Device Type:      {kind}\n"
            f"  PCI Device Name:  {device}\n  Base GUID:        {guid}\n"
            f"  Versions:         Current        Available     \n"
            f"     FW             {firmware}   N/A           \n\n"
            "  Status:           No matching image found\n"
        )
    return {PROBE: "\n".join(blocks)}
