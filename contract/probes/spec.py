"""A probe's command: the frozen record every probe module declares as its `SPEC`, and what
the registry keeps of a module (`Entry`: the spec, its parser, its lab renderer).

A probe's `argv` is what runs on a node, its program found at `program`; nothing else is ever
run there. `scope` says where: `host` probes run on every node, `fabric` probes once from a
host attached to the fabric, `eos` probes on an Arista EOS switch, whose CLI is the audit
account's login shell: there the command line itself is what SSH sends, EOS's CLI parses it,
and `program` is empty (no forced command, no program path; the account's `network-operator`
role is what keeps it to show commands, compiler/targets/eos.py). A per-interface probe
(`ethtool_i`) holds the placeholder `{iface}` in its argv, filled by `Probe.argv_for` with a
name checked against what Linux allows, so no text from inventory reaches a remote shell
unchecked. A probe that `takes` the host's own list of arguments (`paths` or `units` of its
deploy map, `probe_arguments`) gets each checked against a strict pattern (here, and again by
the forced command, which allows the file probes only the exact lists of the role's deploy
maps) and passed after `--`, so none can be read as an option or reach a shell as anything but
one word; no path under /dev, /proc or /sys is ever one. Each probe's output is kept up to its
`max_output`, sized to what the command prints. Probes with `root` run through sudo, granted
exactly those command lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from common.errors import ClusterforgeError

IFACE = "{iface}"
# Linux interface names: at most 15 bytes, no '/', no whitespace; a shell-safe subset of those,
# never starting with '-' (it would read as an option). The forced command checks the same.
IFACE_CHARS = "A-Za-z0-9_.:@-"
IFACE_MAX = 15
_IFACE_NAME = re.compile(f"(?!-)[{IFACE_CHARS}]{{1,{IFACE_MAX}}}")
# What a deploy map may name: absolute paths of plain characters, no "..", and unit names.
UNIT_SUFFIXES = ("service", "socket", "timer", "target")
# Where no deployed file lives and nothing may be read as root: devices (a read of /dev/zero
# never ends, an open of /dev/watchdog arms it) and the kernel's files.
FORBIDDEN_ROOTS = ("/dev", "/proc", "/sys")
# A root itself or anything below it: one match, as every deployed file of a fleet is asked.
_FORBIDDEN = re.compile(f"(?:{'|'.join(map(re.escape, FORBIDDEN_ROOTS))})(?:/|$)")
_ARGUMENT = {
    "paths": re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._-]*)+"),
    "units": re.compile(rf"[A-Za-z0-9@_.-]+\.({'|'.join(UNIT_SUFFIXES)})"),
}


# A snapshot name is one plain file name beside the device's `files/` (never `files`).
_SNAPSHOT_NAME = re.compile(r"(?!files$)[a-z0-9][a-z0-9._-]*")

KIB = 1024
MIB = 1024 * KIB


class ProbeError(ClusterforgeError):
    """Raised when a probe is defined inconsistently, or asked for with a bad interface name."""


@dataclass(frozen=True)
class Probe:
    """One read-only command of the audit; `name` is also its parser's name."""

    name: str
    argv: tuple[str, ...]
    scope: Literal["host", "fabric", "eos"]
    program: str  # argv[0]'s absolute path on a node: what the forced command and sudo run
    root: bool = False  # needs root: run through sudo, which grants exactly this command
    per_interface: bool = False
    takes: Literal["paths", "units"] | None = None  # arguments from the host's deploy map
    ok_exits: tuple[int, ...] = (0,)  # sha256sum exits 1 when a file is missing: a finding
    # A group the account must be in to run it without root (lldpcli talks to lldpd's socket,
    # which only its group may open): the account's sysusers.d file adds it.
    group: str | None = None
    # Bytes of output kept, sized to what the command prints on the largest host or fabric
    # planned (a BIOS version is one short line, a kernel log since boot can be megabytes);
    # more is a hostile or broken host: the probe fails, and no host costs more than its caps.
    max_output: int = 16 * KIB
    # Its whole output is a device's configuration as the device shows it: the audit keeps it
    # in the device's snapshot under this name (contract/snapshot.py), for the history and
    # the change plan's pre-check. None: a reading only, judged and not kept.
    snapshot: str | None = None

    def __post_init__(self) -> None:
        if (IFACE in self.argv) != self.per_interface:
            raise ProbeError(f"probe {self.name!r}: '{IFACE}' must be in argv iff per_interface")
        if self.scope == "eos":
            if self.program or self.root or self.takes or self.per_interface or self.group:
                raise ProbeError(
                    f"probe {self.name!r}: an EOS CLI command has no program, root, "
                    "arguments, interface or group"
                )
        elif not self.program.startswith("/") or self.program.rsplit("/", 1)[1] != self.argv[0]:
            raise ProbeError(f"probe {self.name!r}: program must be the absolute path of argv[0]")
        if self.snapshot is not None and _SNAPSHOT_NAME.fullmatch(self.snapshot) is None:
            raise ProbeError(f"probe {self.name!r}: snapshot {self.snapshot!r} is not a plain name")

    def argv_for(
        self, iface: str | None = None, arguments: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """Return the command to run, with `{iface}` filled in for a per-interface probe, and
        `arguments` appended (after `--`) for a probe that takes them."""
        if self.takes is not None:
            pattern = _ARGUMENT[self.takes]
            bad = [
                a
                for a in arguments
                if pattern.fullmatch(a) is None
                or ".." in a
                or (self.takes == "paths" and forbidden_path(a))
            ]
            if bad or not arguments:
                raise ProbeError(f"probe {self.name!r} needs {self.takes}, got {bad or 'none'}")
            return (*self.argv, "--", *arguments)
        if arguments:
            raise ProbeError(f"probe {self.name!r} takes no arguments, got {arguments!r}")
        if not self.per_interface:
            if iface is not None:
                raise ProbeError(f"probe {self.name!r} takes no interface, got {iface!r}")
            return self.argv
        if iface is None or _IFACE_NAME.fullmatch(iface) is None:
            raise ProbeError(f"probe {self.name!r} needs a valid interface name, got {iface!r}")
        return tuple(iface if arg == IFACE else arg for arg in self.argv)


def forbidden_path(path: str) -> bool:
    """Whether `path` is a device's or the kernel's: never deployed, never read."""
    return _FORBIDDEN.match(path) is not None


@dataclass(frozen=True)
class Now:
    """What a lab host shows beyond its expected state (`clusterforge/lab/fleet.py` keeps the
    faults that make it so): the renderers' second argument; empty is a host as planned."""

    arguments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # probe -> what the
    # audit passes it on this host (`audits.compare.probe_arguments`)
    files: Mapping[str, str] = field(default_factory=dict)  # deployed path -> its sha256 now
    # snapshotted path (or a probe snapshot's name: an EOS switch's running-config) -> its text
    texts: Mapping[str, str] = field(default_factory=dict)
    units: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # unit -> (active, enabled)
    unloaded: frozenset[str] = frozenset()  # kernel modules of the deploy map not loaded
    xid: tuple[tuple[int, int, str], ...] = ()  # (gpu, code, message) in the kernel log
    inactive_nvlinks: Mapping[int, int] = field(default_factory=dict)  # gpu -> links down
    ecc: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # gpu -> (corr., uncorr.)
    paths: Mapping[int, str] = field(default_factory=dict)  # GPU -> its path to the HCA now
    memory_mib: int | None = None  # what slurmd -C sees, when not what the model installs
    held: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)  # Slurm node held
    # out of work beyond the drained spares -> (state, user, reason)
    bgp_down: frozenset[str] = frozenset()  # a switch's BGP sessions down, by port


Parser = Callable[[str], object]
# A probe's output on a host in its expected state (the host's name, its expected JSON as the
# audit reads it, deploy map as "deploy") and what it shows `Now`: by probe key (`ethtool_i@ib0`
# for a per-interface probe); empty where the probe does not run on the host.
Renderer = Callable[[str, Mapping[str, Any], Now], dict[str, str]]


@dataclass(frozen=True)
class Entry:
    """A probe module as registered: its command, its pure parser, its lab renderer (None for
    a probe the lab answers by running the real program, or renders fabric-wide)."""

    spec: Probe
    parse: Parser
    render: Renderer | None = None

    @property
    def name(self) -> str:
        return self.spec.name
