"""Parser for `ethtool -i IFACE`: the driver, its version and the firmware of one interface.

Output is `key: value` lines (ethtool 6.1 strings). mlx5 prints the firmware with the board's
PSID in brackets, `20.39.1002 (MT_0000000223)`; that is split into `firmware_version` and
`psid`. Other drivers print their own firmware form (`1.63, 0x800009fa` on igb), kept whole
with `psid` null. `version` is the OFED version when MLNX_OFED's driver is loaded, the kernel
release for an inbox driver. An empty value (`expansion-rom-version: `, a virtual device's
`bus-info: `) becomes null. The five lines of the schema must all be present, so cut-off
output is caught; the `supports-*` lines are read past.

Schema:

    {"driver": str, "version": str | None, "firmware_version": str | None, "psid": str | None,
     "expansion_rom_version": str | None, "bus_info": str | None}

Example:

    $ ethtool -i ib0
    driver: mlx5_core[ib_ipoib]
    version: 23.10-1.1.9
    firmware-version: 20.39.1002 (MT_0000000223)
    expansion-rom-version:
    bus-info: 0000:4b:00.0
    supports-statistics: yes

    {"driver": "mlx5_core[ib_ipoib]", "version": "23.10-1.1.9",
     "firmware_version": "20.39.1002", "psid": "MT_0000000223",
     "expansion_rom_version": null, "bus_info": "0000:4b:00.0"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes._ids import digest
from contract.probes.base import ParseError
from contract.probes.spec import IFACE, KIB, Now, Probe

PROBE = "ethtool_i"
SPEC = Probe(
    PROBE,
    ("ethtool", "-i", IFACE),
    "host",
    "/usr/sbin/ethtool",
    per_interface=True,
    max_output=16 * KIB,
)

_FIELD = re.compile(r"(?P<key>[a-z][a-z-]*):(?P<value>.*)")
_FIRMWARE_PSID = re.compile(r"(?P<firmware>\S+) \((?P<psid>[A-Z]{2}_\d+)\)")
_REQUIRED = ("driver", "version", "firmware-version", "expansion-rom-version", "bus-info")


class EthtoolInfo(TypedDict):
    driver: str
    version: str | None
    firmware_version: str | None
    psid: str | None
    expansion_rom_version: str | None
    bus_info: str | None


def parse(text: str) -> EthtoolInfo:
    """Parse `ethtool -i IFACE` output."""
    fields: dict[str, str | None] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        match = _FIELD.fullmatch(raw.strip())
        if match is None:
            raise ParseError(PROBE, number, f"expected 'key: value', got {raw.strip()!r}")
        fields[match["key"]] = match["value"].strip() or None
    if not fields:
        raise ParseError(PROBE, 0, "empty output: expected 'driver: ...' and the rest")
    for key in _REQUIRED:
        if key not in fields:
            raise ParseError(PROBE, 0, f"no {key!r} line (truncated?)")
    driver = fields["driver"]
    if driver is None:
        raise ParseError(PROBE, 0, "'driver' is empty")
    firmware, psid = fields["firmware-version"], None
    if firmware is not None and (split := _FIRMWARE_PSID.fullmatch(firmware)):
        firmware, psid = split["firmware"], split["psid"]
    return {
        "driver": driver,
        "version": fields["version"],
        "firmware_version": firmware,
        "psid": psid,
        "expansion_rom_version": fields["expansion-rom-version"],
        "bus_info": fields["bus-info"],
    }


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Each IPoIB interface's driver and HCA firmware (the ones the audit asks about)."""
    v = state["versions"]
    if "nic_firmware" not in v:
        return {}
    text = (
        "driver: mlx5_core[ib_ipoib]\n"
        f"version: {v['ofed'].rsplit('.', 1)[0]}\n"
        f"firmware-version: {v['nic_firmware']} ({v.get('nic_psid', 'MT_0000000000')})\n"
        "expansion-rom-version: \n"
        f"bus-info: 0000:{digest(host, 'bus')[:2]}:00.0\n"
        "supports-statistics: yes\n"
        "supports-test: yes\n"
        "supports-eeprom-access: no\n"
        "supports-register-dump: no\n"
        "supports-priv-flags: yes\n"
    )
    return {f"{PROBE}@{i['name']}": text for i in state["interfaces"] if i["mac"] is None}
