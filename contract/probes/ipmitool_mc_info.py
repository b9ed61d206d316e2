"""Parser for `ipmitool mc info`: the BMC's identity and firmware revision (IPMI Get Device ID).

Output is `Key : value` lines padded to one column (ipmitool 1.8.19 strings), and two lists of
indented lines: `Additional Device Support :` (capability names) and
`Aux Firmware Rev Info :` (four `0x..` bytes; ipmitool omits the block when the BMC sends none).
`Firmware Revision` is printed as `%u.%02x`: the minor is BCD, so `5.10` is kept as text, not a
number. `Product Name` appears only when ipmitool knows the product. Unknown keys are read
past; the keys of the schema without `| None` are required.

Schema:

    {"device_id": int, "device_revision": int, "firmware_revision": str, "ipmi_version": str,
     "manufacturer_id": int, "manufacturer_name": str | None, "product_id": int,
     "product_name": str | None, "device_available": str,
     "additional_device_support": [str], "aux_firmware_rev_info": [str]}

Example:

    $ ipmitool mc info
    Device ID                 : 32
    Device Revision           : 1
    Firmware Revision         : 1.73
    IPMI Version              : 2.0
    Manufacturer ID           : 10876
    Manufacturer Name         : Supermicro
    Product ID                : 6929 (0x1b11)
    Device Available          : yes
    Provides Device SDRs      : no
    Additional Device Support :
        Sensor Device
        SEL Device
    Aux Firmware Rev Info     :
        0x00
        0x00
        0x00
        0x00

    {"device_id": 32, "device_revision": 1, "firmware_revision": "1.73",
     "ipmi_version": "2.0", "manufacturer_id": 10876, "manufacturer_name": "Supermicro",
     "product_id": 6929, "product_name": null, "device_available": "yes",
     "additional_device_support": ["Sensor Device", "SEL Device"],
     "aux_firmware_rev_info": ["0x00", "0x00", "0x00", "0x00"]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError, decimal
from contract.probes.spec import KIB, Now, Probe

PROBE = "ipmitool_mc_info"
SPEC = Probe(
    PROBE,
    ("ipmitool", "mc", "info"),
    "host",
    "/usr/bin/ipmitool",
    True,
    max_output=16 * KIB,
)

_FIELD = re.compile(r"(?P<key>[A-Za-z][A-Za-z ]*?)\s+:(?P<value>.*)")
_REVISION = re.compile(r"\d+\.[0-9a-f]{2}")
_PRODUCT_ID = re.compile(r"(?P<id>\d+) \(0x[0-9a-fA-F]+\)")
_AUX_BYTE = re.compile(r"0x[0-9a-f]{2}")
_LISTS = ("Additional Device Support", "Aux Firmware Rev Info")


class McInfo(TypedDict):
    device_id: int
    device_revision: int
    firmware_revision: str
    ipmi_version: str
    manufacturer_id: int
    manufacturer_name: str | None
    product_id: int
    product_name: str | None
    device_available: str
    additional_device_support: list[str]
    aux_firmware_rev_info: list[str]


def parse(text: str) -> McInfo:
    """Parse `ipmitool mc info` output."""
    fields: dict[str, tuple[int, str]] = {}
    lists: dict[str, list[str]] = {}
    current_list: list[str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        if raw[0].isspace() and current_list is not None:
            current_list.append(raw.strip())
            continue
        match = _FIELD.fullmatch(raw.rstrip())
        if match is None:
            raise ParseError(PROBE, number, f"expected 'Key : value', got {raw.strip()!r}")
        key, value = match["key"], match["value"].strip()
        fields[key] = (number, value)
        current_list = lists.setdefault(key, []) if key in _LISTS and not value else None
    if not fields:
        raise ParseError(PROBE, 0, "empty output: expected 'Device ID : ...' and the rest")
    aux = lists.get("Aux Firmware Rev Info", [])
    if aux and (len(aux) != 4 or not all(_AUX_BYTE.fullmatch(byte) for byte in aux)):
        line = fields["Aux Firmware Rev Info"][0]
        raise ParseError(PROBE, line, f"expected four 0x.. bytes of aux revision, got {aux}")
    revision = _get(fields, "Firmware Revision")
    if _REVISION.fullmatch(revision[1]) is None:
        raise ParseError(PROBE, revision[0], f"Firmware Revision is not N.NN: {revision[1]!r}")
    product = _get(fields, "Product ID")
    product_id = _PRODUCT_ID.fullmatch(product[1])
    if product_id is None:
        raise ParseError(PROBE, product[0], f"Product ID is not 'N (0x..)': {product[1]!r}")
    return {
        "device_id": _int(_get(fields, "Device ID")),
        "device_revision": _int(_get(fields, "Device Revision")),
        "firmware_revision": revision[1],
        "ipmi_version": _get(fields, "IPMI Version")[1],
        "manufacturer_id": _int(_get(fields, "Manufacturer ID")),
        "manufacturer_name": fields.get("Manufacturer Name", (0, None))[1],
        "product_id": int(product_id["id"]),
        "product_name": fields.get("Product Name", (0, None))[1],
        "device_available": _get(fields, "Device Available")[1],
        "additional_device_support": lists.get("Additional Device Support", []),
        "aux_firmware_rev_info": aux,
    }


def _get(fields: dict[str, tuple[int, str]], key: str) -> tuple[int, str]:
    if key not in fields:
        raise ParseError(PROBE, 0, f"no {key!r} line (truncated?)")
    return fields[key]


def _int(located: tuple[int, str]) -> int:
    return decimal(PROBE, *located)


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """A Supermicro BMC's answer; ipmitool shows its firmware as major.minor only."""
    revision = ".".join(state["versions"]["bmc"].split(".")[:2])
    return {
        PROBE: (
            "Device ID                 : 32\n"
            "Device Revision           : 1\n"
            f"Firmware Revision         : {revision}\n"
            "IPMI Version              : 2.0\n"
            "Manufacturer ID           : 10876\n"
            "Manufacturer Name         : Supermicro\n"
            "Product ID                : 6929 (0x1b11)\n"
            "Product Name              : Unknown (0x1B11)\n"
            "Device Available          : yes\n"
            "Provides Device SDRs      : no\n"
            "Additional Device Support :\n"
            "    Sensor Device\n"
            "    SEL Device\n"
            "    FRU Inventory Device\n"
            "Aux Firmware Rev Info     : \n"
            "    0x00\n"
            "    0x00\n"
            "    0x00\n"
            "    0x00\n"
        )
    }
