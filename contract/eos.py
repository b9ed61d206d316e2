"""An Arista EOS switch's running-config against the startup-config the compiler generated
for it: what differs, line by line, as hier_config (the EOS platform) sees it.

The one comparison of both readers: the audit's `running_config` check (the switch's
`show running-config` now against generated/) and the change plan's pre-check (the last
snapshot's running-config against BASE's startup-config), so the two never disagree. The
running-config is kept in each run's snapshot as `snapshots/<switch>/running-config`
(`RUNNING`).

hier_config parses both texts into their sections and compares them as sets of lines with
their parents, so line order within a section is not a difference; its EOS driver drops the
`!` comment lines (EOS's `! Command:`, `! device:`, `! boot system` header among them) and
`end`. A difference is named by its path, the section lines joined by ` / `, and read as a
diff from generated/ to the switch, as a drifted file's lines are (contract/snapshot.py):

- `- interface Ethernet3 / description gpu003 ens2f0 R01-ST03`: generated, not on the switch
  (what hier_config's remediation would configure);
- `+ interface Ethernet3 / description spare`: on the switch, not generated (what it would
  negate, or replace: an idempotent command such as a description is replaced).

What EOS shows by itself and pyavd does not render, and what pyavd renders and EOS does not
show (its defaults), is no difference: `IGNORED`, the one list of it, decided from EOS's own
output in public samples (tests/fixtures/eos_running_config/*.source): a vEOS 4.27.5M and a
cEOSLab 4.32.5M running-config, and a DCS-7150S-24 one (EOS 4.12), and the AVD-rendered
intended config of the same cEOSLab device.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from common.errors import ClusterforgeError, SetupError
from contract import snapshot

if TYPE_CHECKING:
    from hier_config import HConfig

RUNNING = snapshot.RUNNING  # its name in a switch's snapshot, and the probe's snapshot name
STARTUP = "/mnt/flash/startup-config"  # where the deploy map places the generated config
SEPARATOR = " / "

# Each rule: a line's path (its section lines and itself), one regular expression per level,
# matched in full; `extra` rules ignore a line the switch has and generated/ lacks, `missing`
# ones a line generated/ has and the switch does not show.
_Rule = tuple[str, ...]
IGNORED: dict[str, tuple[_Rule, ...]] = {
    "extra": (
        # EOS's defaults it prints all the same (vEOS 4.27, cEOSLab 4.32 samples): no root
        # password set, the QSFP breakout default, the default spanning-tree mode.
        ("no aaa root",),
        (r"transceiver qsfp default-mode \S+",),
        ("spanning-tree mode mstp",),
        # EOS 4.26 and later (cEOSLab 4.32 sample): the L1 defaults and the port-ID setting.
        ("system l1",),
        ("system l1", r"unsupported (speed|error-correction) action error"),
        ("no service interface inactive port-id allocation disabled",),
        # A physical port with nothing configured is listed bare (DCS-7150S-24 sample,
        # `interface Ethernet5` then `!`): a port the plan leaves unused.
        (r"interface (Ethernet|Management)[0-9/]+",),
    ),
    "missing": (
        # pyavd writes an interface's defaults out; EOS hides them (the AVD intended config
        # against the same device's running-config): enabled, a switchport, in access mode.
        (r"interface \S+", "no shutdown"),
        (r"interface \S+", "switchport"),
        (r"interface Ethernet\S+", "switchport mode access"),
    ),
}


class Difference(NamedTuple):
    """What differs: generated lines the switch lacks, and the switch's lines not generated,
    each a path (`SEPARATOR`-joined), in the configuration's order."""

    missing: tuple[str, ...]
    extra: tuple[str, ...]

    def lines(self) -> list[str]:
        """`- path` for every missing line, then `+ path` for every extra one."""
        return [*(f"- {p}" for p in self.missing), *(f"+ {p}" for p in self.extra)]

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra)


class ConfigError(ClusterforgeError):
    """Raised when hier_config cannot read a text as an EOS config (a section given twice:
    EOS never prints one, a broken or hostile switch may)."""


def difference(running: str, intended: str) -> Difference:
    """How `running` (a switch's `show running-config`) differs from `intended` (its
    generated startup-config), the lines of `IGNORED` left out; raises ConfigError for a
    text that is no config, SetupError when hier_config is not installed."""
    try:
        from hier_config import Platform, get_hconfig
        from hier_config.exceptions import DuplicateChildError
    except ImportError:
        raise SetupError(
            "EOS configs are compared by hier_config: pip install 'clusterforge[eos]'"
        ) from None
    try:
        have = get_hconfig(Platform.ARISTA_EOS, running)
    except DuplicateChildError as exc:
        raise ConfigError(f"the running-config is no EOS config: {exc}") from None
    try:
        want = get_hconfig(Platform.ARISTA_EOS, intended)
    except DuplicateChildError as exc:
        raise ConfigError(f"the generated startup-config is no EOS config: {exc}") from None
    return Difference(
        _paths(want.difference(have), IGNORED["missing"]),
        _paths(have.difference(want), IGNORED["extra"]),
    )


def _paths(config: HConfig, ignored: tuple[_Rule, ...]) -> tuple[str, ...]:
    out = []
    for child in config.all_children():
        if not child.is_leaf:
            continue  # a section is named by its lines
        path = tuple(child.path())
        if not any(_matches(rule, path) for rule in ignored):
            out.append(SEPARATOR.join(path))
    return tuple(out)


def _matches(rule: _Rule, path: tuple[str, ...]) -> bool:
    return len(rule) == len(path) and all(
        re.fullmatch(r, p) is not None for r, p in zip(rule, path, strict=True)
    )
