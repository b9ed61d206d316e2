"""Parser for `dmidecode -s bios-version`: the BIOS version from SMBIOS.

Output is one bare line such as `2.6.4`. dmidecode needs root: without it the errors go to
stderr and stdout is empty, so empty output is an error. When no SMBIOS table exists it
prints a `#` comment instead of a value.

Schema:

    {"bios_version": str}

Example:

    $ dmidecode -s bios-version
    2.6.4

    {"bios_version": "2.6.4"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError, single_line
from contract.probes.spec import KIB, Now, Probe

PROBE = "dmidecode_bios"
SPEC = Probe(
    PROBE,
    ("dmidecode", "-s", "bios-version"),
    "host",
    "/usr/sbin/dmidecode",
    root=True,
    max_output=4 * KIB,  # one line: SMBIOS strings are at most 255 bytes
)


class BiosVersion(TypedDict):
    bios_version: str


def parse(text: str) -> BiosVersion:
    """Parse `dmidecode -s bios-version` output."""
    number, line = single_line(PROBE, text, "the BIOS version (dmidecode needs root)")
    if line.startswith("#"):
        raise ParseError(PROBE, number, f"dmidecode found no version: {line!r}")
    return {"bios_version": line}


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The BIOS version as planned."""
    return {PROBE: f"{state['versions']['bios']}\n"}
