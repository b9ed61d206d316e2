"""Faults a lab stages: a YAML list of incidents, read with located errors, applied as data.

    - fault: host-down          # its sshd address is not listened on: connection refused
      hosts: gpu050
    - fault: key-changed        # known_hosts holds another key than the host shows
      hosts: gpu051
    - fault: key-unknown        # known_hosts holds no key for it
      hosts: gpu052
    - fault: probe-hangs        # the command never answers (all of the host's, if no probe)
      hosts: gpu053
      probe: nvidia_smi_xml
    - fault: probe-missing      # "command not found", exit 127
      hosts: prov01
      probe: ipmitool_mc_info
    - fault: version-drift      # the host runs another version than expected
      hosts: gpu[010-012]
      version: ofed
      value: 5.8-1.0.1.1
    - fault: route-missing
      hosts: gpu020
      dst: 10.70.240.0/22
    - fault: file-changed       # a deployed file edited by hand (file-missing: gone)
      hosts: gpu001
      path: /etc/chrony.conf
    - fault: unit-state         # a unit of the deploy map stopped (active, enabled: as given)
      hosts: prov01
      unit: dhcpd.service
      active: inactive
    - fault: memory-lost        # slurmd -C shows this much less memory than the model has
      hosts: gpu017
      gib: 512
    - fault: slurm-drained      # the Slurm controller holds the node out of work
      hosts: gpu042
      reason: gres/gpu count reported lower than configured (7 < 8)
    - fault: cable-swapped      # the far (b) ends of two cables exchanged
      cables: [R03-IB02, R03-IB03]
    - fault: cable-unplugged
      cable: R04-IB01
    - fault: cable-degraded     # trains at a lower rate; a host on it sees that rate too
      cable: R05-IB01
      rate: 4xEDR
    - fault: ethernet-swapped   # two Ethernet cables' switch ends exchanged (LLDP shows it;
      cables: [R01-MG03, R01-MG04]  # two uplinks too: R01-ST49, R01-ST50, seen from both ends)
    - fault: ethernet-unplugged # the port at each end hears nothing
      cable: R02-ST05

`hosts` is a host list (`gpu[001-003],sm01`). `read` checks every name against the cluster
being played and reports each problem as `file:line:col: rule: message`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from common.errors import Diagnostic, Location, SourceError
from common.hostlist import expand
from common.rules import Rule
from common.yaml import Source, parse_document
from contract import probes


class Kind(StrEnum):
    HOST_DOWN = "host-down"
    KEY_CHANGED = "key-changed"
    KEY_UNKNOWN = "key-unknown"
    PROBE_HANGS = "probe-hangs"
    PROBE_MISSING = "probe-missing"
    VERSION_DRIFT = "version-drift"
    ROUTE_MISSING = "route-missing"
    FILE_CHANGED = "file-changed"
    FILE_MISSING = "file-missing"
    UNIT_STATE = "unit-state"
    CABLE_SWAPPED = "cable-swapped"
    CABLE_UNPLUGGED = "cable-unplugged"
    CABLE_DEGRADED = "cable-degraded"
    ETHERNET_SWAPPED = "ethernet-swapped"
    ETHERNET_UNPLUGGED = "ethernet-unplugged"
    MEMORY_LOST = "memory-lost"
    SLURM_DRAINED = "slurm-drained"


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HostFault(_Fault):
    """A host down, or its key changed or unknown to the audit."""

    fault: Literal[Kind.HOST_DOWN, Kind.KEY_CHANGED, Kind.KEY_UNKNOWN]
    hosts: str


class ProbeFault(_Fault):
    fault: Literal[Kind.PROBE_HANGS, Kind.PROBE_MISSING]
    hosts: str
    probe: str | None = None  # None: every command the host is asked


class VersionDrift(_Fault):
    fault: Literal[Kind.VERSION_DRIFT]
    hosts: str
    version: str
    value: str


class RouteMissing(_Fault):
    fault: Literal[Kind.ROUTE_MISSING]
    hosts: str
    dst: str


class FileFault(_Fault):
    """A deployed file (a path of the host's deploy map) edited by hand, or gone."""

    fault: Literal[Kind.FILE_CHANGED, Kind.FILE_MISSING]
    hosts: str
    path: str


class UnitState(_Fault):
    """A unit of the host's deploy map in another state than active and enabled."""

    fault: Literal[Kind.UNIT_STATE]
    hosts: str
    unit: str
    active: str = "inactive"
    enabled: str = "enabled"


class MemoryLost(_Fault):
    """DIMMs gone: slurmd on a Slurm node sees `gib` GiB less than its model installs."""

    fault: Literal[Kind.MEMORY_LOST]
    hosts: str
    gib: int = Field(gt=0)


class SlurmDrained(_Fault):
    """Slurm nodes held out of work with `reason`, by `user` (slurm: slurmctld itself)."""

    fault: Literal[Kind.SLURM_DRAINED]
    hosts: str
    reason: str = Field(min_length=1, pattern=r"^[^\n]*$")
    user: str = "slurm"
    state: str = "drained"


class CableSwapped(_Fault):
    fault: Literal[Kind.CABLE_SWAPPED]
    cables: tuple[str, str]


class CableUnplugged(_Fault):
    fault: Literal[Kind.CABLE_UNPLUGGED]
    cable: str


class CableDegraded(_Fault):
    fault: Literal[Kind.CABLE_DEGRADED]
    cable: str
    rate: str = Field(pattern=r"^[0-9]+x(SDR|DDR|QDR|FDR|EDR|HDR)$")  # what ibsim 0.10 knows


class EthernetSwapped(_Fault):
    fault: Literal[Kind.ETHERNET_SWAPPED]
    cables: tuple[str, str]


class EthernetUnplugged(_Fault):
    fault: Literal[Kind.ETHERNET_UNPLUGGED]
    cable: str


Fault = Annotated[
    HostFault
    | ProbeFault
    | VersionDrift
    | RouteMissing
    | FileFault
    | UnitState
    | MemoryLost
    | SlurmDrained
    | CableSwapped
    | CableUnplugged
    | CableDegraded
    | EthernetSwapped
    | EthernetUnplugged,
    Field(discriminator="fault"),
]
_FAULTS: TypeAdapter[list[Fault]] = TypeAdapter(list[Fault])


@dataclass(frozen=True)
class Staged:
    """The faults of one lab, with host lists expanded: what each part of the lab needs."""

    faults: tuple[Fault, ...]

    def hosts(self, *kinds: Kind) -> set[str]:
        """Every host named by a fault of one of `kinds`."""
        return {h for f in self.faults if f.fault in kinds for h in _hosts(f)}

    def probes(self, kind: Kind) -> dict[str, set[str] | None]:
        """Host -> probe names hit by `kind` (None: all of them)."""
        out: dict[str, set[str] | None] = {}
        for f in self.faults:
            if isinstance(f, ProbeFault) and f.fault == kind:
                for host in _hosts(f):
                    known = out.get(host, set())
                    out[host] = None if f.probe is None or known is None else known | {f.probe}
        return out


NONE = Staged(())
_ON_HOSTS = (
    HostFault | ProbeFault | VersionDrift | RouteMissing | FileFault | UnitState | MemoryLost
    | SlurmDrained
)  # fmt: skip


def _hosts(f: Fault) -> list[str]:
    return expand(f.hosts) if isinstance(f, _ON_HOSTS) else []


def read(path: Path, contracts: Mapping[str, Mapping[str, Any]], cables: Sequence[str]) -> Staged:
    """Read a faults file against the hosts and installed cable IDs of the cluster played;
    raises SourceError with every problem found."""
    name = str(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise SourceError([Diagnostic(Location(name), Rule.MISSING_FILE, str(exc))]) from None
    source = parse_document(name, text)
    data = source.data["document"]
    try:
        faults = tuple(_FAULTS.validate_python([] if data is None else data))
    except ValidationError as exc:
        raise SourceError(_diagnostics(source, exc)) from None
    problems = []
    for i, fault in enumerate(faults):
        for field, message in _problems(fault, contracts, set(cables)):
            where = source.where(("document", i, field))
            problems.append(Diagnostic(where, FaultRule(f"unknown-{field.rstrip('s')}"), message))
    if problems:
        raise SourceError(problems)
    return Staged(faults)


class FaultRule(StrEnum):
    """The faults file's own rules, beside cluster/'s shape rules (`Rule`): a fault that names
    what the lab does not play, `unknown-` and the key that names it."""

    UNKNOWN_CABLE = "unknown-cable"
    UNKNOWN_DST = "unknown-dst"
    UNKNOWN_GIB = "unknown-gib"
    UNKNOWN_HOST = "unknown-host"
    UNKNOWN_PATH = "unknown-path"
    UNKNOWN_PROBE = "unknown-probe"
    UNKNOWN_UNIT = "unknown-unit"
    UNKNOWN_VERSION = "unknown-version"


def _diagnostics(source: Source, exc: ValidationError) -> list[Diagnostic]:
    """pydantic's errors, each at its key in the file (union tags such as `host-down` left
    out of the path, so the key is found)."""
    tags = {k.value for k in Kind}
    out = []
    for err in exc.errors(include_url=False):
        path = tuple(p for p in err["loc"] if p not in tags)
        where = source.where(("document", *path))
        if err["type"] == "extra_forbidden":
            rule, message = Rule.UNKNOWN_KEY, f"unknown key {path[-1]!r}"
        elif err["type"] == "missing":
            rule, message = Rule.MISSING_FIELD, f"required key {path[-1]!r} is missing"
        elif err["type"].startswith("union_tag"):
            rule = Rule.INVALID_VALUE
            message = f"'fault' must be one of {', '.join(k.value for k in Kind)}"
        else:
            rule = Rule.INVALID_VALUE
            message = f"{'.'.join(map(str, path[1:]))}: {err['msg']} (got {err['input']!r})"
        out.append(Diagnostic(where, rule, message))
    return out


def _problems(
    fault: Fault, contracts: Mapping[str, Mapping[str, Any]], cables: set[str]
) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(fault, _ON_HOSTS):
        try:
            hosts = expand(fault.hosts)
        except ValueError:
            return [("hosts", f"{fault.hosts!r} is not a host list like gpu[001-003],sm01")]
        unknown = [h for h in hosts if h not in contracts]
        if unknown or not hosts:
            found.append(("hosts", f"not hosts this lab plays: {', '.join(unknown) or '(none)'}"))
            return found
        for host in hosts:
            c = contracts[host]
            if isinstance(fault, ProbeFault) and fault.probe not in (None, *probes.PROBES):
                found.append(
                    ("probe", f"{fault.probe!r} is not a probe ({', '.join(probes.PROBES)})")
                )
                break
            if isinstance(fault, VersionDrift) and fault.version not in c.get("versions", {}):
                known = ", ".join(sorted(c.get("versions", {})))
                found.append(("version", f"{host} has no version {fault.version!r} ({known})"))
                break
            if isinstance(fault, RouteMissing) and fault.dst not in {
                r["dst"] for r in c.get("routes", ())
            }:
                found.append(("dst", f"{host} has no planned route to {fault.dst!r}"))
                break
            deploy = c.get("deploy", {})
            paths = {f["path"] for f in deploy.get("files", ())}
            if isinstance(fault, FileFault) and fault.path not in paths:
                found.append(("path", f"{host} has no deployed file {fault.path!r}"))
                break
            if isinstance(fault, UnitState) and fault.unit not in deploy.get("units", ()):
                found.append(("unit", f"{host} has no unit {fault.unit!r} in its deploy map"))
                break
            if isinstance(fault, MemoryLost | SlurmDrained) and "slurm" not in c:
                found.append(("hosts", f"{host} is no Slurm node (its role runs no slurmd)"))
                break
            if isinstance(fault, MemoryLost) and fault.gib * 1024 >= c["slurm"]["memory_mib"]:
                found.append(("gib", f"{host} has {c['slurm']['memory_mib'] // 1024} GiB"))
                break
    ethernet = isinstance(fault, EthernetSwapped | EthernetUnplugged)
    if ethernet:  # the hosts' cabled NICs and the switches' switch-facing ports, from contracts
        cables = {e["cable"] for c in contracts.values() for e in c.get("ethernet", ())}
    ids = (
        list(fault.cables)
        if isinstance(fault, CableSwapped | EthernetSwapped)
        else [fault.cable]
        if isinstance(fault, CableUnplugged | CableDegraded | EthernetUnplugged)
        else []
    )
    field = "cables" if isinstance(fault, CableSwapped | EthernetSwapped) else "cable"
    unknown_cables = [c for c in ids if c not in cables]
    if unknown_cables:
        what = "Ethernet cables of the hosts or switches" if ethernet else "cables"
        found.append((field, f"not {what} this lab plays (installed): {', '.join(unknown_cables)}"))
    elif isinstance(fault, CableSwapped | EthernetSwapped) and fault.cables[0] == fault.cables[1]:
        found.append((field, "a cable cannot be swapped with itself"))
    return found
