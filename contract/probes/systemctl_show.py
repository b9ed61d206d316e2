"""Parser for `systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- UNIT...`.

One read that answers both `systemctl is-active` and `systemctl is-enabled` for every unit of
the host's services, and stays aligned when a unit does not exist: `show` still prints its
block (LoadState=not-found), where `is-enabled` would print nothing and exit non-zero. Blocks
are separated by a blank line, one `Key=value` per line; the property order is systemd's, not
the command line's.

Schema:

    [{"unit": str, "load": str, "active": str, "enabled": str}]   # in output order

`enabled` is UnitFileState (enabled, disabled, static, masked, ... or "" when not found).

Example:

    $ systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- sshd.service
    Id=sshd.service
    LoadState=loaded
    ActiveState=active
    UnitFileState=enabled

    [{"unit": "sshd.service", "load": "loaded", "active": "active", "enabled": "enabled"}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe

PROBE = "systemctl_show"
SPEC = Probe(
    PROBE,
    ("systemctl", "show", "--property=Id,LoadState,ActiveState,UnitFileState"),
    "host",
    "/usr/bin/systemctl",
    takes="units",
    max_output=64 * KIB,
)

_FIELDS = {"Id": "unit", "LoadState": "load", "ActiveState": "active", "UnitFileState": "enabled"}


class Unit(TypedDict):
    unit: str
    load: str
    active: str
    enabled: str


def parse(text: str) -> list[Unit]:
    """Parse the blocks of `systemctl show`."""
    units: list[Unit] = []
    block: dict[str, str] = {}
    start = 1

    def close(number: int) -> None:
        if not block:
            return
        missing = [key for key in _FIELDS if key not in block]
        if missing:
            raise ParseError(PROBE, start, f"unit block without {', '.join(missing)}")
        units.append(
            Unit(
                unit=block["Id"],
                load=block["LoadState"],
                active=block["ActiveState"],
                enabled=block["UnitFileState"],
            )
        )
        block.clear()

    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            close(number)
            start = number + 1
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in _FIELDS:
            raise ParseError(PROBE, number, f"not one of {', '.join(_FIELDS)}: {line[:80]!r}")
        if key in block:
            raise ParseError(PROBE, number, f"{key} twice in one unit block")
        block[key] = value
    close(len(lines))
    return units


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Each unit of the host as it runs now (`now.units`)."""
    if not now.units:
        return {}
    return {
        PROBE: "\n".join(
            f"Id={unit}\nLoadState=loaded\nActiveState={active}\nUnitFileState={enabled}\n"
            for unit, (active, enabled) in now.units.items()
        )
    }
