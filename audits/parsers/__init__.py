"""The audit's probe parsers: one pure module per read-only command, and their registry.

Each module is named after its probe, exposes `parse(text) -> JSON-compatible result` and
documents its command, schema and an example in its docstring. `PARSERS` maps probe names to
those functions; `audits.probes.PROBES` holds the matching commands. `RESULTS` holds the
parsers of the acceptance run's logs (`clusterforge accept`): tests the audit never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from audits.parsers import (
    all_reduce_perf,
    dcgmi_diag,
    dmidecode_bios,
    ethtool_i,
    file_exists,
    ib_write_bw,
    iblinkinfo,
    ibnetdiscover,
    ibstat,
    ip_addr,
    ip_route,
    ipmitool_mc_info,
    lsmod,
    mlxfwmanager,
    nccl_conf,
    nvidia_smi_ecc,
    nvidia_smi_gpus,
    nvidia_smi_nvlink,
    nvidia_smi_topo,
    nvidia_smi_xml,
    ofed_info,
    sha256sum,
    sinfo_r,
    slurmd_c,
    systemctl_show,
    uname_r,
    xid,
)
from audits.parsers.base import ParseError, RegistryError

Parser = Callable[[str], object]

__all__ = [
    "PARSERS",
    "RESULTS",
    "ParseError",
    "Parser",
    "RegistryError",
    "build_registry",
    "get_parser",
]


def build_registry(entries: Iterable[tuple[str, Parser]]) -> dict[str, Parser]:
    """Map probe names to parsers; a name given twice is an error."""
    registry: dict[str, Parser] = {}
    for name, parse in entries:
        if name in registry:
            raise RegistryError(f"parser {name!r} is registered twice")
        registry[name] = parse
    return registry


_MODULES: tuple[ModuleType, ...] = (
    dmidecode_bios,
    ethtool_i,
    file_exists,
    ibnetdiscover,
    iblinkinfo,
    ibstat,
    ip_addr,
    ip_route,
    ipmitool_mc_info,
    lsmod,
    nccl_conf,
    mlxfwmanager,
    nvidia_smi_ecc,
    nvidia_smi_gpus,
    nvidia_smi_nvlink,
    nvidia_smi_topo,
    nvidia_smi_xml,
    ofed_info,
    sha256sum,
    sinfo_r,
    slurmd_c,
    systemctl_show,
    uname_r,
    xid,
)
PARSERS: dict[str, Parser] = build_registry((module.PROBE, module.parse) for module in _MODULES)
RESULTS: dict[str, Parser] = build_registry(
    (module.PROBE, module.parse) for module in (all_reduce_perf, dcgmi_diag, ib_write_bw)
)


def get_parser(name: str) -> Parser:
    """Return the parser of probe `name`; an unknown name is an error listing the known ones."""
    try:
        return PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise RegistryError(f"no parser for probe {name!r}; known: {known}") from None
