"""Stage 4a of the audit: one host's observed facts against its `expected/hosts/<host>.json`.

Checks, in report order (a check that does not apply to a host, e.g. `gpus` on a login node,
is left out; one whose probes gave nothing usable is skipped with the reason):

| check        | kind     | probes                        | compares                              |
| ------------ | -------- | ----------------------------- | ------------------------------------- |
| bios         | firmware | dmidecode_bios                | versions.bios                         |
| bmc          | firmware | ipmitool_mc_info              | versions.bmc                          |
| nic_firmware | firmware | ethtool_i@<IPoIB iface>       | versions.nic_firmware, nic_psid (the  |
|              |          |                               | HCA behind each interface the         |
|              |          |                               | contract lists without a MAC)         |
| vbios        | firmware | nvidia_smi_gpus               | versions.vbios, on every GPU          |
| gpu_driver   | driver   | nvidia_smi_xml                | versions.gpu_driver, versions.cuda    |
| ofed         | ofed     | ofed_info                     | versions.ofed                         |
| kernel       | kernel   | uname_r                       | versions.kernel                       |
| routes       | route    | ip_route                      | routes, per destination, normalised   |
|              |          |                               | by `contract.normal_routes`            |
| addresses    | address  | ip_addr                       | interfaces: address, mac, mtu         |
| ib_ports     | ib-port  | ibstat                        | ib_ports: port_guid, rate, state      |
| gpus         | gpu      | nvidia_smi_gpus, _nvlink,     | node admission (audits/admission.py): |
|              |          | _ecc, xid                     | GPU count and model, NVLinks, ECC, Xid|
| ethernet     | cable    | lldpcli_neighbors             | ethernet: each planned cable's switch |
|              |          |                               | and port as LLDP hears them on its NIC|
|              |          |                               | (audits/ethernet.py), by cable ID     |
| files        | file     | sha256sum (the deploy map's   | deploy.files: each file there, with   |
|              |          | paths), file_exists (those    | generated/'s bytes (or just there:    |
|              |          | never to be read)             | the secret-bearing ones)              |
| units        | service  | systemctl_show (its units)    | deploy.units: installed, active and   |
|              |          |                               | enabled                               |
| gpudirect    | gpudirect| nccl_conf, ibstat, lsmod,     | gpudirect (audits/gpudirect.py): NCCL |
|              |          | nvidia_smi_topo               | settings, its HCAs Active, modules    |
|              |          |                               | loaded, GPU<->HCA PCIe paths          |
| slurmd       | slurm    | slurmd_c                      | slurm: CPU topology, RealMemory       |
|              |          |                               | (audits/slurm.py)                     |
| slurm_drains | slurm    | sinfo_r (on the controller)   | slurm_controller: every node held out |
|              |          |                               | of work, named by that node; spares   |
|              |          |                               | drained as "spare" are as planned     |

A switch has its own checks (`SWITCH_CHECKS`). A Cumulus switch's are ethernet, files
and units as above (its switch-to-switch cables, its deploy map), bgp (vtysh_bgp_summary:
each planned session Established, with prefixes) and running_config (vtysh_running_config:
FRR's running lines against its frr.conf's). An EOS switch's is running_config alone
(eos_running_config: `show running-config` against its generated startup-config by
hier_config, contract/eos.py): it has no Linux files, units, lldpd or FRR to read.

Versions compare semantically (`audits.versions`) and in full, unless the contract's `mask`
(the baseline's, in cluster/firmware.yaml) says to compare a key's first N parts only, as
for a BMC whose probe, ipmitool, prints major.minor; the part left out is reported. A
version key listed in the contract's `accept` (a rollout of `cluster/firmware.yaml`) also
matches its `previous` version up to and including the `until` date, read on the audit's
clock `now` (UTC); after it, it is drift.
Interfaces and IB ports are compared as records keyed by name: a planned record missing or a
planned field that differs is drift; unplanned records are masked. Every check is total over
what its parsers can return: whatever a host printed that parsed, the check gives findings,
never an exception (tests/test_audit_total.py feeds them arbitrary parser-shaped facts).

Masked, because they vary by nature and are not planned: route metric, protocol, scope and
source; interfaces the contract does not list, IPv6 addresses, link state and the IPoIB
hardware address; IB ports the contract does not list, LIDs, SM LID, physical state and link
layer; IB width (ibstat prints only the rate; the fabric audit checks width per cable); GPU
serials, UUIDs and bus IDs; ECC counters below their thresholds.

Severity: critical for what breaks jobs or mixes the fleet (OFED, driver, CUDA, kernel, a
missing or changed route, address, IB port and GPU admission faults); warning for firmware,
PSID, MTU, routes nobody planned, corrected ECC above the threshold and unreadable ECC.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from audits import admission, ethernet, gpudirect, slurm
from audits.collect import Collected, probe_key
from audits.model import (
    Accepted,
    CheckResult,
    Finding,
    HostEntry,
    HostKeyFact,
    Outcome,
    Status,
    VersionPair,
    finding_order,
)
from audits.observe import Observed, observe
from audits.sink import Facts, Sink
from common.registry import Registry
from contract import EthernetSwitch, Host, Kind, Placed, Severity, eos, normal_routes
from contract.deploy import file_arguments
from contract.probes import eos_running_config, file_texts
from contract.probes.vtysh_bgp_summary import ESTABLISHED
from contract.probes.vtysh_bgp_summary import PROBE as BGP_PROBE
from contract.probes.vtysh_running_config import PROBE as RUNNING_PROBE

INTERNAL_ERROR = "internal error"  # how a reason starts when a bug, not the host, is at fault


Audited = Host | EthernetSwitch  # what the audit logs into: a host, or a Cumulus switch
C = TypeVar("C", contravariant=True)  # a check of any machine serves a host's too


@dataclass(frozen=True)
class Check(Generic[C]):
    name: str
    kind: Kind
    applies: Callable[[C], bool]
    probes: Callable[[C], tuple[str, ...]]  # empty while applying: cannot run
    run: Callable[[C, Facts, Sink], None]


def _has(*keys: str) -> Callable[[Host], bool]:
    return lambda c: any(k in c.versions for k in keys)


def _fixed(*probes: str) -> Callable[[Audited], tuple[str, ...]]:
    return lambda c: probes


def _ipoib(c: Host) -> tuple[str, ...]:
    # IPoIB interfaces are the ones without a MAC in the contract; ethtool on them reads the HCA.
    return tuple(probe_key("ethtool_i", i.name) for i in c.interfaces if i.mac is None)


def _bios(c: Host, facts: Facts, sink: Sink) -> None:
    sink.version(c, "bios", facts["dmidecode_bios"]["bios_version"])


def _bmc(c: Host, facts: Facts, sink: Sink) -> None:
    sink.version(c, "bmc", facts["ipmitool_mc_info"]["firmware_revision"])


def _nic_firmware(c: Host, facts: Facts, sink: Sink) -> None:
    for key in _ipoib(c):
        for version, field_ in (("nic_firmware", "firmware_version"), ("nic_psid", "psid")):
            if version in c.versions:
                sink.version(c, version, facts[key][field_])


def _vbios(c: Host, facts: Facts, sink: Sink) -> None:
    values = {g["vbios_version"] for g in facts["nvidia_smi_gpus"]}
    for vbios in sorted(values, key=lambda v: v or ""):
        sink.version(c, "vbios", vbios)


def _gpu_driver(c: Host, facts: Facts, sink: Sink) -> None:
    xml = facts["nvidia_smi_xml"]
    for key, observed in (("gpu_driver", xml["driver_version"]), ("cuda", xml["cuda_version"])):
        if key in c.versions:
            sink.version(c, key, observed)


def _single(key: str, probe: str, field_: str) -> Callable[[Host, Facts, Sink], None]:
    return lambda c, facts, sink: sink.version(c, key, facts[probe][field_])


def _routes(c: Host, facts: Facts, sink: Sink) -> None:
    expected: dict[str, list[dict[str, str]]] = defaultdict(list)
    observed: dict[str, list[dict[str, str]]] = defaultdict(list)
    for planned in c.routes:
        expected[planned.dst].append(planned.as_dict())
    for route in normal_routes(facts["ip_route"]):
        observed[route["dst"]].append(route)
    for dst in sorted(expected.keys() | observed.keys()):
        want, have = _one(expected.get(dst, [])), _one(observed.get(dst, []))
        if want == have:
            continue
        if want is None:
            sink.drift(f"routes[{dst}]", None, have, Severity.WARNING, f"unplanned route {dst}")
        elif have is None:
            sink.drift(f"routes[{dst}]", want, None, Severity.CRITICAL, f"route {dst} missing")
        else:
            sink.drift(f"routes[{dst}]", want, have, Severity.CRITICAL, f"route {dst} differs")


def _one(values: list[Any]) -> Any:
    """Nothing, the one value, or all of them: how a finding shows what was seen."""
    return None if not values else values[0] if len(values) == 1 else values


def _addresses(c: Host, facts: Facts, sink: Sink) -> None:
    seen = {i["name"]: i for i in facts["ip_addr"]}
    expected: dict[str, dict[str, Any]] = {}
    observed: dict[str, dict[str, Any]] = {}
    for iface in c.interfaces:
        name = iface.name
        expected[name] = {"address": iface.address, "mtu": iface.mtu}
        if iface.mac is not None:
            expected[name]["mac"] = iface.mac
        if name in seen:
            have = seen[name]
            v4 = sorted(have["ipv4"])
            address = iface.address if iface.address in v4 else _one(v4)
            observed[name] = {"address": address, "mtu": have["mtu"]}
            if "mac" in expected[name]:
                observed[name]["mac"] = (have["mac"] or "").lower() or None
    severity = {"mtu": Severity.WARNING}
    _records(sink, "interfaces", expected, observed, severity)


def _ib_ports(c: Host, facts: Facts, sink: Sink) -> None:
    keys = ("port_guid", "rate", "state")
    expected = {f"{p.device}/{p.port}": p.model_dump(include=set(keys)) for p in c.ib_ports}
    observed = {
        f"{ca['name']}/{p['port']}": {k: p[k] for k in keys}
        for ca in facts["ibstat"]
        for p in ca["ports"]
    }
    _records(sink, "ib_ports", expected, observed, {})


def _records(
    sink: Sink,
    section: str,
    expected: dict[str, dict[str, Any]],
    observed: dict[str, dict[str, Any]],
    severity: dict[str, Severity],
) -> None:
    """Findings for every planned record missing or differing; unplanned records are masked."""
    for name, want in sorted(expected.items()):
        have = observed.get(name)
        if have is None:
            sink.drift(f"{section}[{name}]", want, None, Severity.CRITICAL, f"{name} missing")
            continue
        for key, value in want.items():
            seen = have.get(key)
            if seen != value or type(seen) is not type(value):
                text = f"{name} {key} {seen}, expected {value}"
                level = severity.get(key, Severity.CRITICAL)
                sink.drift(f"{section}[{name}].{key}", value, seen, level, text)


def _deployed(c: Audited) -> tuple[Placed, ...]:
    return c.deploy.files if c.deploy else ()


def _units_of(c: Audited) -> tuple[str, ...]:
    return c.deploy.units if c.deploy else ()


def probe_arguments(c: Audited) -> dict[str, tuple[str, ...]]:
    """The arguments of the probes that take the host's own list: its deployed paths, its
    units (from generated/deploy/<host>.json)."""
    out = file_arguments(_deployed(c))
    if _units_of(c):
        out["systemctl_show"] = _units_of(c)
    return out


def _file_probes(c: Audited) -> tuple[str, ...]:
    return tuple(p for p in file_arguments(_deployed(c)) if p != SNAPSHOT_PROBE)


def _files(c: Audited, facts: Facts, sink: Sink) -> None:
    seen: dict[str, str] = dict(facts.get("sha256sum", {}))
    seen |= dict.fromkeys(facts.get("file_exists", ()), "present")
    for f in _deployed(c):
        path, source, want = f.path, f.source, f.sha256
        where = f"files[{path}]"
        if path not in seen:
            text = f"{path} missing (or unreadable); it should hold generated/{source}"
            sink.drift(where, want or "present", None, Severity.CRITICAL, text)
        elif want is not None and seen[path] != want:
            text = f"{path} differs from generated/{source}"
            sink.drift(where, want, seen[path], Severity.CRITICAL, text)


# UnitFileState values under which a unit starts at boot without being enabled by name.
_STARTS_AT_BOOT = {"enabled", "enabled-runtime", "static", "indirect", "generated", "alias"}


def _units(c: Audited, facts: Facts, sink: Sink) -> None:
    seen = {u["unit"]: u for u in facts["systemctl_show"]}
    for unit in _units_of(c):
        state = seen.get(unit)
        where = f"units[{unit}]"
        if state is None or state["load"] == "not-found":
            sink.drift(where, "active", None, Severity.CRITICAL, f"unit {unit} not installed")
            continue
        if state["active"] != "active":
            text = f"unit {unit} is {state['active']}, not active"
            sink.drift(f"{where}.active", "active", state["active"], Severity.CRITICAL, text)
        if state["enabled"] not in _STARTS_AT_BOOT:
            text = f"unit {unit} is {state['enabled'] or 'not'} enabled: it will not start at boot"
            sink.drift(f"{where}.enabled", "enabled", state["enabled"], Severity.WARNING, text)


def _bgp(c: EthernetSwitch, facts: Facts, sink: Sink) -> None:
    """Every planned session (a routed port's) Established, with prefixes received: one that
    is down or learns nothing leaves the rack reachable only through the other spines."""
    sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in facts[BGP_PROBE]:
        sessions[s["peer"]].append(s)
    for planned in c.bgp:
        port, peer = planned.port, planned.peer
        where = f"bgp[{port}]"
        seen = sessions.get(port, [])
        up = [s for s in seen if s["state"] == ESTABLISHED]
        if not seen:
            text = f"no BGP session on {port} (to {peer}): frr.conf has no such neighbour"
            sink.drift(where, ESTABLISHED, None, Severity.CRITICAL, text)
        elif not up:
            state = seen[0]["state"]
            text = f"BGP session on {port} to {peer} is {state}, not {ESTABLISHED}"
            sink.drift(f"{where}.state", ESTABLISHED, state, Severity.CRITICAL, text)
        elif not any(s["prefixes_received"] > 0 for s in up):
            text = f"BGP session on {port} to {peer} is up but has received no prefixes"
            sink.drift(f"{where}.prefixes_received", "> 0", 0, Severity.CRITICAL, text)


def _frr_running(c: EthernetSwitch, facts: Facts, sink: Sink) -> None:
    """FRR's running configuration against the deployed frr.conf's, line by canonical line
    (contract/probes/vtysh_running_config.py): a line of one side only was changed live in
    vtysh and not written to the file (or the file was never loaded), and is lost, or comes
    back, at FRR's next reload."""
    running = facts[RUNNING_PROBE]
    planned = c.running_config or ()
    seen, want = set(running), set(planned)
    for line in (p for p in planned if p not in seen):
        text = f"FRR runs without `{line}`, which frr.conf holds: removed live, not in the file"
        sink.drift(f"running-config[{line}]", line, None, Severity.CRITICAL, text)
    for line in (r for r in running if r not in want):
        text = f"FRR runs `{line}`, which frr.conf does not hold: set live, not in the file"
        sink.drift(f"running-config[{line}]", None, line, Severity.CRITICAL, text)


def _eos_running(c: EthernetSwitch, facts: Facts, sink: Sink) -> None:
    """An EOS switch's running-config against its generated startup-config (contract/eos.py):
    one finding naming every line that differs, `-` generated and not running, `+` running
    and not generated (a diff from generated/ to the switch, as a drifted file's)."""
    source = f"generated/switches/{c.host}/startup-config"
    where = f"running_config[{eos.STARTUP}]"
    if c.intended is None:
        text = f"no startup-config in {c.host}'s deploy map to compare its running-config with"
        sink.drift(where, source, None, Severity.CRITICAL, text)
        return
    running = eos_running_config.text(facts[eos_running_config.PROBE])
    try:
        found = eos.difference(running, c.intended)
    except eos.ConfigError as exc:
        sink.drift(where, source, None, Severity.CRITICAL, f"cannot compare: {exc}")
        return
    if found:
        lines = found.lines()
        shown = "; ".join(lines[:_SHOWN_LINES])
        more = f"; … {len(lines) - _SHOWN_LINES} more" if len(lines) > _SHOWN_LINES else ""
        text = f"running-config differs from {source}: {shown}{more}"
        sink.drift(where, list(found.missing), list(found.extra), Severity.CRITICAL, text)


_SHOWN_LINES = 10  # differing lines a finding's message names; its expected/observed hold all


def _linux(check: Check[Any]) -> Check[Any]:
    """`check` on a switch whose OS is Linux only (Cumulus): an EOS switch has no files to
    read nor units to ask, and no FRR; its running-config check covers what they would."""
    return replace(check, applies=lambda c: not c.eos and check.applies(c))


def _running_config(c: EthernetSwitch, facts: Facts, sink: Sink) -> None:
    """The switch's running configuration against what generated/ says it runs: FRR's on a
    Cumulus switch, the whole config on an EOS one."""
    (_eos_running if c.eos else _frr_running)(c, facts, sink)


def _running_probes(c: EthernetSwitch) -> tuple[str, ...]:
    return (eos_running_config.PROBE,) if c.eos else (RUNNING_PROBE,)


# In order: a host's findings come out check by check; a name given twice fails at import.
# A deploy map's files and units: a host's and a Cumulus switch's alike.
_FILES: Check[Any] = Check("files", Kind.FILE, lambda c: bool(_deployed(c)), _file_probes, _files)
_UNITS: Check[Any] = Check(
    "units", Kind.SERVICE, lambda c: bool(_units_of(c)), _fixed("systemctl_show"), _units
)
# Each planned cable's far end as LLDP hears it: a host's NICs, a switch's switch-facing ports.
_ETHERNET: Check[Any] = Check(
    ethernet.CHECK, Kind.CABLE, lambda c: bool(c.ethernet), _fixed(ethernet.PROBE), ethernet.check
)


CHECKS: Registry[Check[Host]] = Registry(
    "check",
    (
        (check.name, check)
        for check in (
            Check("bios", Kind.FIRMWARE, _has("bios"), _fixed("dmidecode_bios"), _bios),
            Check("bmc", Kind.FIRMWARE, _has("bmc"), _fixed("ipmitool_mc_info"), _bmc),
            Check(
                "nic_firmware",
                Kind.FIRMWARE,
                _has("nic_firmware", "nic_psid"),
                _ipoib,
                _nic_firmware,
            ),
            Check("vbios", Kind.FIRMWARE, _has("vbios"), _fixed("nvidia_smi_gpus"), _vbios),
            Check(
                "gpu_driver",
                Kind.DRIVER,
                _has("gpu_driver", "cuda"),
                _fixed("nvidia_smi_xml"),
                _gpu_driver,
            ),
            Check(
                "ofed",
                Kind.OFED,
                _has("ofed"),
                _fixed("ofed_info"),
                _single("ofed", "ofed_info", "version"),
            ),
            Check(
                "kernel",
                Kind.KERNEL,
                _has("kernel"),
                _fixed("uname_r"),
                _single("kernel", "uname_r", "kernel_release"),
            ),
            Check("routes", Kind.ROUTE, lambda c: True, _fixed("ip_route"), _routes),
            Check("addresses", Kind.ADDRESS, lambda c: True, _fixed("ip_addr"), _addresses),
            Check(
                "ib_ports", Kind.IB_PORT, lambda c: bool(c.ib_ports), _fixed("ibstat"), _ib_ports
            ),
            Check(
                "gpus",
                Kind.GPU,
                lambda c: c.gpus is not None,
                _fixed("nvidia_smi_gpus", "nvidia_smi_nvlink", "nvidia_smi_ecc", "xid"),
                admission.gpus,
            ),
            _ETHERNET,
            _FILES,
            _UNITS,
            Check(
                "gpudirect",
                Kind.GPUDIRECT,
                lambda c: c.gpudirect is not None,
                _fixed("nccl_conf", "ibstat", "lsmod", "nvidia_smi_topo"),
                gpudirect.check,
            ),
            Check(
                "slurmd", Kind.SLURM, lambda c: c.slurm is not None, _fixed("slurmd_c"), slurm.node
            ),
            Check(
                "slurm_drains",
                Kind.SLURM,
                lambda c: c.slurm_controller is not None,
                _fixed("sinfo_r"),
                slurm.drains,
            ),
        )
    ),
)


# The probe whose output is a device's snapshot (contract/snapshot.py): fetched where its
# deploy map marks files, kept by the audit, judged by no check (a failed read costs the
# snapshot, never the checks of the device's files).
SNAPSHOT_PROBE = file_texts.PROBE


# A Cumulus switch's: its cables to other switches, its deploy map's files and units, as a
# host's, its BGP sessions and FRR's running configuration against its frr.conf; an EOS
# switch's: its running-config.
SWITCH_CHECKS: Registry[Check[EthernetSwitch]] = Registry(
    "switch check",
    (
        (check.name, check)
        for check in (
            _linux(_ETHERNET),
            _linux(_FILES),
            _linux(_UNITS),
            _linux(Check("bgp", Kind.BGP, lambda c: bool(c.bgp), _fixed(BGP_PROBE), _bgp)),
            Check[EthernetSwitch](
                "running_config",
                Kind.CONFIG,
                lambda c: c.eos or bool(c.running_config),
                _running_probes,
                _running_config,
            ),
        )
    ),
)


def _checks(c: Audited) -> list[Check[Any]]:
    """The checks of a host, or of a switch."""
    return list(SWITCH_CHECKS.values() if isinstance(c, EthernetSwitch) else CHECKS.values())


def host_probes(c: Audited) -> tuple[str, ...]:
    """The probe keys a host's (or switch's) checks need, and its snapshot's: what a
    collector must fetch from it."""
    keys = {k for check in _checks(c) if check.applies(c) for k in check.probes(c)}
    if SNAPSHOT_PROBE in file_arguments(_deployed(c)):
        keys.add(SNAPSHOT_PROBE)
    return tuple(sorted(keys))


@dataclass(frozen=True)
class HostAudit:
    entry: HostEntry
    findings: list[Finding]


def compare_host(c: Audited, collected: Collected, now: datetime) -> HostAudit:
    """Audit one host (or switch): run every check that applies, and settle its status."""
    observed = observe(c.host, collected)
    return compare_observed(c, observed, collected.unreachable, now, collected.host_key)


def compare_observed(
    c: Audited,
    observed: Observed,
    unreachable: str | None,
    now: datetime,
    host_key: HostKeyFact | None = None,
) -> HostAudit:
    """Audit one host from its parsed facts (`compare_host` without the parsing)."""
    host = c.host
    checks: list[CheckResult] = []
    findings: list[Finding] = []
    accepted: list[Accepted] = []
    versions: dict[str, VersionPair] = {}
    for check in _checks(c):
        if not check.applies(c):
            continue
        probes = check.probes(c)
        missing = [k for k in probes if k not in observed.facts]
        reason = None
        if unreachable is not None:
            reason = f"host unreachable: {unreachable}"
        elif not probes:
            reason = "the contract names nothing to read it from"
        elif missing:
            reason = f"no usable output from {', '.join(missing)}"
        if reason is not None:
            checks.append(
                CheckResult(check=check.name, kind=check.kind, outcome="skipped", reason=reason)
            )
            continue
        sink = Sink(host, check.name, check.kind, now.astimezone(UTC).date())
        check.run(c, observed.facts, sink)
        findings += sink.findings
        accepted += sink.accepted
        versions |= sink.versions
        outcome: Outcome = "drift" if sink.findings else "complies"
        checks.append(CheckResult(check=check.name, kind=check.kind, outcome=outcome, reason=None))
    if host_key is not None:
        findings.append(host_key_finding(host, host_key))
    if unreachable is not None:
        status, why = Status.UNREACHABLE, unreachable
    elif observed.failures:
        status = Status.ERROR
        why = "; ".join(f"{f['probe']}: {f['message']}" for f in observed.failures)
    else:
        status, why = (Status.DRIFT if findings else Status.OK), None
    entry = HostEntry(
        host=host,
        role=c.role,
        model=c.model,
        rack=c.rack,
        u=c.u,
        ring=c.ring,
        status=status.value,
        reason=why,
        failures=observed.failures,
        checks=checks,
        versions=dict(sorted(versions.items())),
        accepted=sorted(accepted, key=lambda a: a["key"]),
    )
    return HostAudit(entry, sorted(findings, key=finding_order))


def host_key_finding(host: str, key: HostKeyFact) -> Finding:
    """An unknown host key is a warning (a new or reinstalled host to vet); a changed one is
    critical: it can be a machine in the middle. Either way nothing was run there."""
    changed = key["state"] == "changed"
    offered = key["offered"] or "a key that could not be read"
    text = (
        f"host key changed: known {', '.join(key['known'])}, offered {offered}"
        if changed
        else f"host key unknown: offered {offered}, none known"
    )
    return Finding(
        kind=Kind.HOST_KEY.value,
        host=host,
        check="host_key",
        path="host_key",
        expected=key["known"] or None,
        observed=key["offered"],
        severity=(Severity.CRITICAL if changed else Severity.WARNING).value,
        message=text,
    )


def crashed_host(c: Audited, why: str) -> HostAudit:
    """A host the audit could not judge because of its own bug: `error`, saying why."""
    entry = HostEntry(
        host=c.host,
        role=c.role,
        model=c.model,
        rack=c.rack,
        u=c.u,
        ring=c.ring,
        status=Status.ERROR.value,
        reason=why,
        failures=[],
        checks=[],
        versions={},
        accepted=[],
    )
    return HostAudit(entry, [])
