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

from typing import TypedDict

from audits.parsers.base import ParseError, single_line

PROBE = "dmidecode_bios"


class BiosVersion(TypedDict):
    bios_version: str


def parse(text: str) -> BiosVersion:
    """Parse `dmidecode -s bios-version` output."""
    number, line = single_line(PROBE, text, "the BIOS version (dmidecode needs root)")
    if line.startswith("#"):
        raise ParseError(PROBE, number, f"dmidecode found no version: {line!r}")
    return {"bios_version": line}
