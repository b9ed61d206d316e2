"""The audit's fixed allowlist of read-only commands: one probe per command, named after its parser.

A probe's `argv` is run as is; nothing else is ever run on a node. `scope` says where: `host`
probes run on every node, `fabric` probes once from a host attached to the fabric.
`ethtool_i` runs once per interface: its argv holds the placeholder `{iface}`, filled by
`Probe.argv_for` with a name checked against what Linux allows, so no text from inventory
reaches a remote shell unchecked. `sha256sum` and `systemctl_show` take the host's own list of
arguments (`takes`: the paths and units of its deploy map, `probe_arguments`), each checked
against a strict pattern and passed after `--`, so none can be read as an option or reach a
shell as anything but one word. Several probes need root (`dmidecode`, `ipmitool`, the fabric
scans, `sha256sum` of the 0600 keyfiles) and the collector must provide it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from audits.parsers.base import RegistryError
from compiler.errors import ClusterforgeError

IFACE = "{iface}"
# Linux interface names: at most 15 bytes, no '/', no whitespace; shell-safe subset of those.
_IFACE_NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
# What a deploy map may name: absolute paths of plain characters, no "..", and unit names.
_ARGUMENT = {
    "paths": re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._-]*)+"),
    "units": re.compile(r"[A-Za-z0-9@_.-]+\.(service|socket|timer|target)"),
}


class ProbeError(ClusterforgeError):
    """Raised when a probe is defined inconsistently, or asked for with a bad interface name."""


@dataclass(frozen=True)
class Probe:
    """One read-only command of the audit; `name` is also its parser's name."""

    name: str
    argv: tuple[str, ...]
    scope: Literal["host", "fabric"]
    per_interface: bool = False
    takes: Literal["paths", "units"] | None = None  # arguments from the host's deploy map
    ok_exits: tuple[int, ...] = (0,)  # sha256sum exits 1 when a file is missing: a finding

    def __post_init__(self) -> None:
        if (IFACE in self.argv) != self.per_interface:
            raise ProbeError(f"probe {self.name!r}: '{IFACE}' must be in argv iff per_interface")

    def argv_for(
        self, iface: str | None = None, arguments: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """Return the command to run, with `{iface}` filled in for a per-interface probe, and
        `arguments` appended (after `--`) for a probe that takes them."""
        if self.takes is not None:
            pattern = _ARGUMENT[self.takes]
            bad = [a for a in arguments if pattern.fullmatch(a) is None or ".." in a]
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


def build_probes(probes: Iterable[Probe]) -> dict[str, Probe]:
    """Map probe names to probes; a name given twice is an error."""
    registry: dict[str, Probe] = {}
    for probe in probes:
        if probe.name in registry:
            raise RegistryError(f"probe {probe.name!r} is defined twice")
        registry[probe.name] = probe
    return registry


_GPU_QUERY = "index,name,serial,uuid,vbios_version,driver_version,pci.bus_id"
_ECC_QUERY = "index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"

PROBES: dict[str, Probe] = build_probes(
    (
        Probe("ofed_info", ("ofed_info", "-s"), "host"),
        Probe("ibstat", ("ibstat",), "host"),
        Probe(
            "nvidia_smi_gpus",
            ("nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv,noheader"),
            "host",
        ),
        Probe("nvidia_smi_xml", ("nvidia-smi", "-q", "-x"), "host"),
        Probe("dmidecode_bios", ("dmidecode", "-s", "bios-version"), "host"),
        Probe("ipmitool_mc_info", ("ipmitool", "mc", "info"), "host"),
        Probe("ethtool_i", ("ethtool", "-i", IFACE), "host", per_interface=True),
        Probe("ip_route", ("ip", "-j", "route", "show"), "host"),
        Probe("ip_addr", ("ip", "-j", "addr", "show"), "host"),
        Probe("uname_r", ("uname", "-r"), "host"),
        Probe("nvidia_smi_nvlink", ("nvidia-smi", "nvlink", "-s"), "host"),
        Probe(
            "nvidia_smi_ecc",
            ("nvidia-smi", f"--query-gpu={_ECC_QUERY}", "--format=csv,noheader"),
            "host",
        ),
        # -k implies -b: Xids of earlier boots were seen by earlier audits.
        Probe("xid", ("journalctl", "-k", "--no-pager"), "host"),
        Probe("sha256sum", ("sha256sum",), "host", takes="paths", ok_exits=(0, 1)),
        Probe(
            "systemctl_show",
            ("systemctl", "show", "--property=Id,LoadState,ActiveState,UnitFileState"),
            "host",
            takes="units",
        ),
        Probe("ibnetdiscover", ("ibnetdiscover",), "fabric"),
        Probe("iblinkinfo", ("iblinkinfo", "-l"), "fabric"),
        # The switches' firmware, in-band from the fabric host (audits/parsers/mlxfwmanager.py).
        Probe("mlxfwmanager", ("mlxfwmanager", "--query"), "fabric"),
    )
)
