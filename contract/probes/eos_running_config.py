"""Parser for `show running-config` on an Arista EOS switch: its configuration as it runs now,
as text lines, for the `running_config` check (contract/eos.py compares it with the generated
startup-config) and the switch's snapshot (`snapshots/<switch>/running-config`).

The audit logs in to the switch as its audit account and sends the command line itself as
SSH's command: an EOS user's login shell is EOS's CLI (FastCli; ansible/ansible#45987), which
runs it and exits, as it does for pyntc's SSH driver of EOS (networktocode/pyntc#419, on a
DCS-7050TX-64 with EOS 4.28.5M). EOS heads the output with comment lines
(`! Command: show running-config`, on older releases `! Time: ...`, `! device: NAME (MODEL,
EOS-VERSION)`, `! boot system flash:/EOS.swi`), puts `!` between sections and ends it with
`end` (tests/fixtures/eos_running_config/*.source: vEOS, cEOSLab and DCS-7150S samples). The
header and the closing `end` are required: an error message instead of a config (the role
refusing the command, say) or an output cut short is no reading of the switch.

Schema:

    [str]   the lines, as EOS prints them (indented by three spaces per section level)

Example:

    $ show running-config
    ! Command: show running-config
    ! device: stor01 (DCS-7050SX3-48YC8, EOS-4.31.2F)
    !
    hostname stor01
    !
    end

    ["! Command: show running-config", "! device: stor01 (DCS-7050SX3-48YC8, EOS-4.31.2F)",
     "!", "hostname stor01", "!", "end"]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.eos import RUNNING
from contract.probes.base import ParseError
from contract.probes.spec import KIB, MIB, Now, Probe

PROBE = "eos_running_config"
# Run in EOS's CLI, never through a forced command (EOS has none): the account's built-in
# network-operator role allows show commands and refuses configure and bash.
SPEC = Probe(
    PROBE,
    ("show", "running-config"),
    "eos",
    "",
    # A 64-port switch's config is ~10 KiB (the reference's spines: 8 KiB as pyavd renders
    # them); a chassis with hundreds of ports and ACLs stays far under this.
    max_output=1 * MIB,
    snapshot=RUNNING,
)
HEADER = "! Command: show running-config"
END = "end"
EOS_VERSION = "4.31.2F"  # what the lab's switches say they run: a release of pyavd 6.4's time
_MAX_LINE = 4 * KIB


def parse(text: str) -> list[str]:
    """The lines of `show running-config`; raises ParseError unless it is one, whole."""
    lines = text.splitlines()
    shown = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not shown:
        raise ParseError(PROBE, 0, "empty output: expected the running-config")
    n, first = shown[0]
    if first.rstrip() != HEADER:
        raise ParseError(PROBE, n, f"expected {HEADER!r}, got {first[:80]!r}")
    n, last = shown[-1]
    if last.strip() != END:
        raise ParseError(PROBE, n, f"the config does not end with {END!r}: cut short?")
    for n, line in enumerate(lines, 1):
        if len(line) > _MAX_LINE or "\0" in line:
            raise ParseError(PROBE, n, "not a config line (NUL, or longer than 4 KiB)")
    return lines


def text(lines: list[str]) -> str:
    """The config as one text again, what the comparison reads."""
    return "".join(f"{line}\n" for line in lines)


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """An EOS switch's config as it runs now (`now.texts[RUNNING]`: the generated
    startup-config as loaded, or as a fault edited it) under EOS's header; nothing elsewhere."""
    if state.get("os") != "eos" or RUNNING not in now.texts:
        return {}
    header = [
        HEADER,
        f"! device: {host} ({state['model']}, EOS-{EOS_VERSION})",
        "!",
        "! boot system flash:/EOS.swi",
    ]
    body = now.texts[RUNNING]
    # pyavd's text starts with "!" and has no `end`; a device's always has one.
    closing = "" if body.rstrip().endswith("\n" + END) else f"!\n{END}\n"
    return {PROBE: "\n".join(header) + "\n" + body + closing}
