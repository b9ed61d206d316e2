"""The audit's fixed allowlist of read-only commands: one probe per command, named after its parser.

The contract between the audit (`audits/`, which asks for probes by name) and the hosts, which
run them through the audit account's forced command (`compiler/targets/access.py`, compiled
from this table): so it lives where both may import it. A probe's `argv` is what runs on a
node, its program found at `program`; nothing else is ever run there. `scope` says where: `host`
probes run on every node, `fabric` probes once from a host attached to the fabric.
`ethtool_i` runs once per interface: its argv holds the placeholder `{iface}`, filled by
`Probe.argv_for` with a name checked against what Linux allows, so no text from inventory
reaches a remote shell unchecked. `sha256sum`, `file_exists` and `systemctl_show` take the
host's own list of arguments (`takes`: the paths and units of its deploy map,
`probe_arguments`), each checked against a strict pattern (here, and again by the forced
command, which allows the file probes only the exact lists of the role's deploy maps) and
passed after `--`, so none can be read as an option or reach a shell as anything but one
word; no path under /dev, /proc or /sys is ever one. Each probe's output is kept up to its
`max_output`, sized to what the command prints. Probes with `root`
(`dmidecode`, `ipmitool`, the kernel log, the fabric scans, `sha256sum` of the 0600 keyfiles)
run through sudo, granted exactly those command lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from common.errors import ClusterforgeError, RegistryError

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
_ARGUMENT = {
    "paths": re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._-]*)+"),
    "units": re.compile(rf"[A-Za-z0-9@_.-]+\.({'|'.join(UNIT_SUFFIXES)})"),
}


_KIB = 1024
_MIB = 1024 * _KIB


class ProbeError(ClusterforgeError):
    """Raised when a probe is defined inconsistently, or asked for with a bad interface name."""


@dataclass(frozen=True)
class Probe:
    """One read-only command of the audit; `name` is also its parser's name."""

    name: str
    argv: tuple[str, ...]
    scope: Literal["host", "fabric"]
    program: str  # argv[0]'s absolute path on a node: what the forced command and sudo run
    root: bool = False  # needs root: run through sudo, which grants exactly this command
    per_interface: bool = False
    takes: Literal["paths", "units"] | None = None  # arguments from the host's deploy map
    ok_exits: tuple[int, ...] = (0,)  # sha256sum exits 1 when a file is missing: a finding
    # Bytes of output kept, sized to what the command prints on the largest host or fabric
    # planned (a BIOS version is one short line, a kernel log since boot can be megabytes);
    # more is a hostile or broken host: the probe fails, and no host costs more than its caps.
    max_output: int = 16 * _KIB

    def __post_init__(self) -> None:
        if (IFACE in self.argv) != self.per_interface:
            raise ProbeError(f"probe {self.name!r}: '{IFACE}' must be in argv iff per_interface")
        if not self.program.startswith("/") or self.program.rsplit("/", 1)[1] != self.argv[0]:
            raise ProbeError(f"probe {self.name!r}: program must be the absolute path of argv[0]")

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
    return any(path == root or path.startswith(f"{root}/") for root in FORBIDDEN_ROOTS)


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
        Probe("ofed_info", ("ofed_info", "-s"), "host", "/usr/bin/ofed_info", max_output=4 * _KIB),
        Probe("ibstat", ("ibstat",), "host", "/usr/sbin/ibstat", max_output=256 * _KIB),
        Probe(
            "nvidia_smi_gpus",
            ("nvidia-smi", f"--query-gpu={_GPU_QUERY}", "--format=csv,noheader"),
            "host",
            "/usr/bin/nvidia-smi",
            max_output=64 * _KIB,
        ),
        # About 40 KB a GPU (nvidia-smi 535 on an H100): 4 MiB holds 16 GPUs with room.
        Probe(
            "nvidia_smi_xml",
            ("nvidia-smi", "-q", "-x"),
            "host",
            "/usr/bin/nvidia-smi",
            max_output=4 * _MIB,
        ),
        Probe(
            "dmidecode_bios",
            ("dmidecode", "-s", "bios-version"),
            "host",
            "/usr/sbin/dmidecode",
            root=True,
            max_output=4 * _KIB,  # one line: SMBIOS strings are at most 255 bytes
        ),
        Probe(
            "ipmitool_mc_info",
            ("ipmitool", "mc", "info"),
            "host",
            "/usr/bin/ipmitool",
            True,
            max_output=16 * _KIB,
        ),
        Probe(
            "ethtool_i",
            ("ethtool", "-i", IFACE),
            "host",
            "/usr/sbin/ethtool",
            per_interface=True,
            max_output=16 * _KIB,
        ),
        Probe("ip_route", ("ip", "-j", "route", "show"), "host", "/usr/sbin/ip", max_output=_MIB),
        Probe("ip_addr", ("ip", "-j", "addr", "show"), "host", "/usr/sbin/ip", max_output=_MIB),
        Probe("uname_r", ("uname", "-r"), "host", "/usr/bin/uname", max_output=4 * _KIB),
        # One line a link: 18 NVLinks of 16 GPUs is under 20 KB.
        Probe(
            "nvidia_smi_nvlink",
            ("nvidia-smi", "nvlink", "-s"),
            "host",
            "/usr/bin/nvidia-smi",
            max_output=256 * _KIB,
        ),
        Probe(
            "nvidia_smi_ecc",
            ("nvidia-smi", f"--query-gpu={_ECC_QUERY}", "--format=csv,noheader"),
            "host",
            "/usr/bin/nvidia-smi",
            max_output=64 * _KIB,
        ),
        # -k implies -b: Xids of earlier boots were seen by earlier audits. Root: the kernel
        # log is not for every user to read. A long boot's log runs to megabytes.
        Probe(
            "xid",
            ("journalctl", "-k", "--no-pager"),
            "host",
            "/usr/bin/journalctl",
            True,
            max_output=16 * _MIB,
        ),
        # Root: some deployed files are 0600 (NetworkManager keyfiles). Only the files whose
        # bytes the deploy map plans are hashed; the forced command and sudoers allow exactly
        # the lists of the host's role (compiler/targets/access.py).
        Probe(
            "sha256sum",
            ("sha256sum",),
            "host",
            "/usr/bin/sha256sum",
            root=True,
            takes="paths",
            ok_exits=(0, 1),
            max_output=_MIB,  # a line a file: the provisioning host has one a server
        ),
        # The files whose deployed bytes carry secrets (`check: exists`: the BMC password, the
        # root password hash): present or not, never read. stat(1) opens no file; as root, so
        # a 0750 folder above one does not hide it.
        Probe(
            "file_exists",
            ("stat", "--format=%n"),
            "host",
            "/usr/bin/stat",
            root=True,
            takes="paths",
            ok_exits=(0, 1),
            max_output=_MIB,
        ),
        Probe(
            "systemctl_show",
            ("systemctl", "show", "--property=Id,LoadState,ActiveState,UnitFileState"),
            "host",
            "/usr/bin/systemctl",
            takes="units",
            max_output=64 * _KIB,
        ),
        # GPUDirect: the PCIe paths between GPUs and HCAs, the modules loaded, NCCL's config
        # (0644, like /proc/modules: no root needed).
        Probe(
            "nvidia_smi_topo",
            ("nvidia-smi", "topo", "-m"),
            "host",
            "/usr/bin/nvidia-smi",
            max_output=64 * _KIB,
        ),
        Probe("lsmod", ("lsmod",), "host", "/usr/sbin/lsmod", max_output=256 * _KIB),  # a page
        Probe(
            "nccl_conf",
            ("cat", "--", "/etc/nccl.conf"),
            "host",
            "/usr/bin/cat",
            max_output=64 * _KIB,
        ),
        # Slurm: the CPUs and memory slurmd sees on the node; on the controller, every node
        # held out of work with its reason, in a fixed format (audits/parsers/sinfo_r.py).
        Probe("slurmd_c", ("slurmd", "-C"), "host", "/usr/sbin/slurmd", max_output=4 * _KIB),
        Probe(
            "sinfo_r",
            ("sinfo", "--list-reasons", "--Node", "--noheader", "--format=%N,%T,%u,%H,%E"),
            "host",
            "/usr/bin/sinfo",
            max_output=_MIB,  # a line a held-out node
        ),
        # The fabric scans open the umad devices, which only root may. A few hundred bytes a
        # port: 64 MiB holds the largest fat tree the model plans (three tiers, 4,096 servers).
        Probe(
            "ibnetdiscover",
            ("ibnetdiscover",),
            "fabric",
            "/usr/sbin/ibnetdiscover",
            True,
            max_output=64 * _MIB,
        ),
        Probe(
            "iblinkinfo",
            ("iblinkinfo", "-l"),
            "fabric",
            "/usr/sbin/iblinkinfo",
            True,
            max_output=64 * _MIB,
        ),
        # The switches' firmware, in-band from the fabric host (audits/parsers/mlxfwmanager.py);
        # MFT reads the in-band devices as root.
        Probe(
            "mlxfwmanager",
            ("mlxfwmanager", "--query"),
            "fabric",
            "/usr/bin/mlxfwmanager",
            True,
            max_output=16 * _MIB,
        ),
    )
)
