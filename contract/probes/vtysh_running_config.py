"""Parser for `vtysh -c 'show running-config'`: the configuration FRR runs now, on a Cumulus
Linux switch, as lines comparable with the generated frr.conf it was started from.

FRR prints its running configuration in its own canonical form (lib/command.c and each
daemon's `config_write` functions; FRR 8.4 as tests/test_switches_netns.py runs it from the
generated frr.conf): a header `Building configuration...`, a blank line and `Current
configuration:`, then `!`-separated sections, a block's lines indented one space a level
under the line that opens it (`router bgp N`, ` address-family ipv4 unicast`), closed by
`exit` / `exit-address-family`, and `end`. It leaves out comments, the lines that only
repeat a default of the file's `frr defaults` profile and an address family's empty block,
and prints the version it runs (`frr version 8.4.4` for a file's `frr version 8.4`).

`canonical` turns either text, FRR's or the generated file, into the same lines: each
configuration line with the lines of the blocks it sits in, joined by ` > `
(`router bgp 4200070001 > neighbor swp49 interface remote-as external`), in the text's order,
once each. Left out: comments, `!`, the block closers, the header, and three kinds of line
that differ without anyone changing the configuration: `frr version` (the version FRR runs,
not the file's; a version change shows in the snapshot's history), `hostname` (vtysh adds
the machine's own hostname to the daemons'), and the defaults FRR does not print
(`_DEFAULTS`); an empty address-family block is left out, as FRR leaves it. A file loaded
unchanged gives the same lines as FRR's output for it, which tests/test_switches_netns.py
proves on the real FRR; a line set live with vtysh and not written to the file is a line of
one side only.

Schema:

    [str]   # canonical lines, in FRR's order

Example:

    $ vtysh -c 'show running-config'
    Building configuration...

    Current configuration:
    !
    frr version 8.4.4
    frr defaults datacenter
    hostname stor01
    !
    router bgp 4200070001
     neighbor swp49 interface remote-as external
    exit
    !
    end

    ["frr defaults datacenter", "router bgp 4200070001",
     "router bgp 4200070001 > neighbor swp49 interface remote-as external"]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.probes.base import ParseError
from contract.probes.spec import KIB, Now, Probe
from contract.snapshot import RUNNING

PROBE = "vtysh_running_config"
# Root, as vtysh_bgp_summary and for the same reason (the daemons' sockets are frr's); sudo
# grants this argv alone, and `show` is read-only in vtysh.
SPEC = Probe(
    PROBE,
    ("vtysh", "-c", "show running-config"),
    "host",
    "/usr/bin/vtysh",
    root=True,
    max_output=1024 * KIB,  # a spine's: a few lines per rack switch's session
    snapshot=RUNNING,  # kept whole in each run's snapshot (contract/snapshot.py)
)
FRR_VERSION = "8.4.4"  # what the lab's renderer prints, as Debian bookworm's FRR runs
SEPARATOR = " > "
_HEADER = ("Building configuration...", "Current configuration:")
_CLOSERS = frozenset({"end", "exit", "exit-address-family", "exit-vrf", "exit-vnc"})
_UNCOMPARED = ("frr version ", "hostname ")
_FAMILY = "address-family "
# Lines the generated frr.conf writes that FRR takes and never prints, being its defaults
# under `frr defaults datacenter` (bgpd/bgp_vty.c: `bgp ebgp-requires-policy` is off in the
# datacenter profile, so `no bgp ebgp-requires-policy` is the default, not shown).
_DEFAULTS = frozenset({"no bgp ebgp-requires-policy"})


def canonical(text: str) -> list[str]:
    """The configuration lines of an FRR configuration, FRR's output or a frr.conf alike,
    each prefixed by its enclosing blocks' lines (see the module's docstring)."""
    out: dict[str, None] = {}
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        words = line.strip()
        if not words or words.startswith("!") or words in _CLOSERS or words in _HEADER:
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = SEPARATOR.join([*(s for _, s in stack), words])
        stack.append((indent, words))
        if words.startswith(_UNCOMPARED) or words in _DEFAULTS:
            continue
        out[path] = None
    # FRR prints an address family's block only when it holds something (bgpd's
    # bgp_config_write_family); an empty one in a file is the same configuration.
    parents = {p.rsplit(SEPARATOR, 1)[0] for p in out if SEPARATOR in p}
    return [p for p in out if p in parents or not p.rsplit(SEPARATOR, 1)[-1].startswith(_FAMILY)]


def parse(text: str) -> list[str]:
    """Parse `show running-config` into its canonical lines; refuses what is not FRR's
    running configuration (vtysh's own errors: no daemon to ask, one not running)."""
    lines = text.splitlines()
    if "Current configuration:" not in lines[:4]:
        raise ParseError(PROBE, 1, "no 'Current configuration:' header: not FRR's output")
    if not lines or lines[-1].strip() != "end":
        raise ParseError(PROBE, len(lines), "no closing 'end': the output is cut off")
    return canonical(text)


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """What FRR prints for the switch's deployed frr.conf (`state["running_config"]`, its
    expected record's lines), block by block, as FRR 8.4 lays it out."""
    planned = state.get("running_config")
    if not planned:
        return {}
    body = [f"frr version {FRR_VERSION}"]
    previous: list[str] = []
    for path in planned:
        parts = path.split(SEPARATOR)
        shared = 0
        while shared < min(len(parts), len(previous)) and parts[shared] == previous[shared]:
            shared += 1
        for depth in range(len(previous) - 1, shared - 1, -1):
            if depth < len(previous) - 1:  # a block ends: FRR closes it
                body.append(" " * depth + ("exit-address-family" if depth else "exit"))
        if not shared and previous and len(previous) > 1:
            body.append("!")
        body += [" " * d + p for d, p in enumerate(parts) if d >= shared]
        previous = parts
    for depth in range(len(previous) - 2, -1, -1):
        body.append(" " * depth + ("exit-address-family" if depth else "exit"))
    text = "\n".join(["Building configuration...", "", "Current configuration:", "!", *body])
    return {PROBE: text + "\n!\nend\n"}
