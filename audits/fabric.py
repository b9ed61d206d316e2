"""Stage 4b of the audit: the discovered InfiniBand fabric against `expected/fabric.json`.

Links are compared as unordered pairs of ends. A host end is matched by its HCA port GUID
(what the plan knows reliably: CA node GUIDs differ between ibsim and hardware), a switch end
by its node GUID and port number. Every installed cable ends as one of:

- fine: seen as planned, at the planned width and speed or better;
- degraded: seen as planned, but narrower or slower than its rate (`4xHDR` seen as `4xEDR`);
- miswired: not seen, but one of its ends is seen cabled elsewhere; when two planned cables'
  far ends are exchanged, both are named as a swapped pair;
- missing: not seen, and neither end is cabled elsewhere.

Switch firmware: every switch of the contract's `switches` is looked up by node GUID in the
fabric host's `mlxfwmanager --query` (in-band, so no SSH to the switches) and its FW compared
in full (`audits.versions`); a switch not listed there is drift too (not reachable in-band).

A link seen that no cable plans, and that no miswired cable explains, is unexpected; it has no
cable ID, so it is named by its ends. Cables with lifecycle `planned` (not installed yet) are
never drift: not missing when absent, not unexpected when already there; nor are `spare`
cables (cabled, their switch port disabled by design until a link moves onto them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from audits.collect import Collected
from audits.model import FABRIC, Finding, ProbeFailure, Status, finding_order
from audits.observe import Observed, observe
from audits.versions import same
from contract import End, Fabric, Host, Kind, Severity, Switch

PROBES = ("ibnetdiscover",)
FIRMWARE_PROBE = "mlxfwmanager"
FIRMWARE = "firmware"  # the check name of switch firmware findings
UNPLANNED = "unplanned"  # the check name of links no cable plans
_SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
_RATE = re.compile(r"(?P<width>[0-9]+)x(?P<speed>[A-Z]+[0-9]*)")

Pair = frozenset[str]


class FabricEntry(TypedDict):
    """The fabric in the report: its status, and the cable IDs in each class."""

    status: str
    reason: str | None
    failures: list[ProbeFailure]
    checked: list[str]  # installed cable IDs the audit looked for
    missing: list[str]
    miswired: list[str]
    swapped: list[list[str]]  # pairs of cable IDs whose far ends look exchanged
    degraded: list[str]
    unexpected: list[str]  # links no cable plans, named by their ends


@dataclass(frozen=True)
class FabricAudit:
    entry: FabricEntry
    findings: list[Finding]


@dataclass(frozen=True)
class _Cable:
    id: str
    ends: tuple[str, str]  # end keys, a then b
    names: tuple[str, str]
    rate: str


def port_names(hosts: Mapping[str, Host]) -> dict[str, str]:
    """Every planned HCA port GUID's name: its host's, and the HCA's too where the host has
    several (`gpu001 mlx5_3`), so the eight rails of a server read apart in a finding."""
    return {
        p.port_guid: name if len({q.device for q in c.ib_ports}) == 1 else f"{name} {p.device}"
        for name, c in hosts.items()
        for p in c.ib_ports
    }


def compare_fabric(
    contract: Fabric, host_ports: Mapping[str, str], collected: Collected
) -> FabricAudit:
    """Audit the fabric. `host_ports` maps every planned HCA port GUID to its name
    (`port_names`): it tells host ends from switch ends, and names host ports."""
    return compare_fabric_observed(
        contract, host_ports, observe(FABRIC, collected), collected.unreachable
    )


def compare_fabric_observed(
    contract: Fabric,
    host_ports: Mapping[str, str],
    observed: Observed,
    unreachable: str | None,
) -> FabricAudit:
    """Audit the fabric from its parsed facts (`compare_fabric` without the parsing)."""
    installed, planned = _cables(contract, host_ports)
    checked = sorted(c.id for c in installed.values())
    if unreachable is not None:
        entry = _entry(Status.UNREACHABLE, unreachable, [], checked)
        return FabricAudit(entry, [])
    if not contract.cables:
        return FabricAudit(_entry(Status.OK, None, [], checked), [])
    if "ibnetdiscover" not in observed.facts:
        reason = "; ".join(f"{f['probe']}: {f['message']}" for f in observed.failures)
        return FabricAudit(_entry(Status.ERROR, reason, observed.failures, checked), [])
    known = {str(e.guid): e.name for c in contract.cables for e in (c.a, c.b)}
    known |= host_ports
    audit = _audit(installed, planned, known, observed.facts["ibnetdiscover"], observed.failures)
    if FIRMWARE_PROBE not in observed.facts:
        return audit  # a recording from before the probe, or its failure is in `failures`
    drift = _firmware(contract.switches, observed.facts[FIRMWARE_PROBE])
    if not drift:
        return audit
    entry = audit.entry.copy()
    if entry["status"] == Status.OK.value:
        entry["status"] = Status.DRIFT.value
    return FabricAudit(entry, sorted([*audit.findings, *drift], key=finding_order))


def _firmware(switches: Sequence[Switch], devices: Sequence[Any]) -> list[Finding]:
    """A finding per switch whose firmware is not its baseline's, or is not seen at all."""
    seen = {d["base_guid"]: d["firmware"] for d in devices}
    out = []
    for switch in switches:
        want, have = switch.firmware, seen.get(switch.guid)
        if have is not None and same(want, have):
            continue
        text = (
            f"{switch.name} firmware {have}, expected {want}"
            if have is not None
            else f"{switch.name} ({switch.guid}) not seen by mlxfwmanager"
        )
        out.append(
            Finding(
                kind=Kind.FIRMWARE.value,
                host=FABRIC,
                check=FIRMWARE,
                path=f"switches[{switch.name}].firmware",
                expected=want,
                observed=have,
                severity=Severity.WARNING.value,  # as host firmware: nothing breaks at once
                message=text,
            )
        )
    return out


def crashed_fabric(why: str) -> FabricAudit:
    """The fabric when the audit's own bug kept it from being judged: `error`, saying why."""
    return FabricAudit(_entry(Status.ERROR, why, [], []), [])


def not_scanned() -> FabricEntry:
    """The fabric entry of a shard that leaves the scan to shard 1 (`audits.shard`)."""
    return _entry(Status.OK, "scanned by shard 1", [], [])


def _entry(
    status: Status,
    reason: str | None,
    failures: list[ProbeFailure],
    checked: list[str],
    **classes: list[Any],
) -> FabricEntry:
    return FabricEntry(
        status=status.value,
        reason=reason,
        failures=failures,
        checked=checked,
        missing=classes.get("missing", []),
        miswired=classes.get("miswired", []),
        swapped=classes.get("swapped", []),
        degraded=classes.get("degraded", []),
        unexpected=classes.get("unexpected", []),
    )


def _cables(
    contract: Fabric, host_ports: Mapping[str, str]
) -> tuple[dict[Pair, _Cable], dict[Pair, _Cable]]:
    installed: dict[Pair, _Cable] = {}
    planned: dict[Pair, _Cable] = {}

    def key(end: End) -> str:
        guid = str(end.guid)
        return guid if guid in host_ports else f"{guid}[{end.port}]"

    for c in contract.cables:
        ends = (key(c.a), key(c.b))
        names = (
            f"{host_ports.get(str(c.a.guid), c.a.name)}/{c.a.port}",
            f"{host_ports.get(str(c.b.guid), c.b.name)}/{c.b.port}",
        )
        cable = _Cable(c.id, ends, names, c.rate)
        (installed if c.lifecycle == "installed" else planned)[frozenset(ends)] = cable
    return installed, planned


def _audit(
    installed: dict[Pair, _Cable],
    planned: dict[Pair, _Cable],
    known: Mapping[str, str],
    discovered: Mapping[str, Any],
    failures: list[ProbeFailure],
) -> FabricAudit:
    """`known` names planned nodes by switch node GUID and HCA port GUID."""
    names = {
        k: n
        for c in (*installed.values(), *planned.values())
        for k, n in zip(c.ends, c.names, strict=True)
    }
    nodes = {n["guid"]: n["description"] for n in discovered["nodes"]}
    seen: dict[Pair, str] = {}
    for link in discovered["links"]:
        ends = [
            pg if pg is not None else f"{guid}[{port}]"
            for (guid, port), pg in zip(link["ends"], link["port_guids"], strict=True)
        ]
        for end, pg, (guid, port) in zip(ends, link["port_guids"], link["ends"], strict=True):
            node = known.get(pg or guid) or nodes.get(guid, guid)
            names.setdefault(end, f"{node}/{port}")
        seen[frozenset(ends)] = f"{link['width']}{link['speed']}"

    findings: list[Finding] = []
    missing = {c.id: c for pair, c in installed.items() if pair not in seen}
    unexpected = [p for p in seen if p not in installed and p not in planned]
    owner = {end: c for c in missing.values() for end in c.ends}

    def describe(pair: Pair, first: str = "") -> str:
        """The link's ends by name; `first` (an end key) leads, else they go sorted."""
        return " - ".join(
            sorted((names[end] for end in pair), key=lambda n: (n != names.get(first), n))
        )

    swapped: list[list[str]] = []
    miswired: set[str] = set()
    explained: set[Pair] = set()
    for pair in sorted(unexpected, key=describe):
        owners = sorted({owner[e].id for e in pair if e in owner})
        if len(owners) == 2 and pair not in explained:
            one, two = missing[owners[0]], missing[owners[1]]
            other = frozenset(one.ends + two.ends) - pair
            if other in seen and other not in installed:
                swapped.append(owners)
                explained |= {pair, other}
                for cable, partner in ((one, two), (two, one)):
                    got = describe(pair if cable.ends[0] in pair else other, cable.ends[0])
                    text = f"{cable.id} and {partner.id} look swapped: far ends exchanged"
                    findings.append(_finding(cable.id, " - ".join(cable.names), got, text))
                miswired |= {one.id, two.id}
                continue
        if owners and pair not in explained:
            explained.add(pair)
            for cable_id in owners:
                cable = missing[cable_id]
                # In the cable's own orientation: the end that took the place of its a end first.
                a_end = cable.ends[0] if cable.ends[0] in pair else min(pair - {cable.ends[1]})
                got = describe(pair, a_end)
                text = f"{cable_id} is cabled elsewhere: seen as {got}"
                findings.append(_finding(cable_id, " - ".join(cable.names), got, text))
                miswired.add(cable_id)
    for cable_id in sorted(missing.keys() - miswired):
        cable = missing[cable_id]
        text = f"{cable_id} not seen ({' - '.join(cable.names)})"
        findings.append(_finding(cable_id, " - ".join(cable.names), None, text))
    for pair in sorted((p for p in unexpected if p not in explained), key=describe):
        text = f"link {describe(pair)} is in no cable plan"
        findings.append(_finding(describe(pair), None, describe(pair), text, UNPLANNED))
    degraded = sorted(
        (c for pair, c in installed.items() if pair in seen and _below(seen[pair], c.rate)),
        key=lambda c: c.id,
    )
    for cable in degraded:
        pair = frozenset(cable.ends)
        text = f"{cable.id} runs at {seen[pair]}, planned {cable.rate}"
        findings.append(_finding(cable.id, cable.rate, seen[pair], text))
    # Other fabric probes failing (none is used yet) would make the fabric an error, not drift.
    status = Status.ERROR if failures else Status.DRIFT if findings else Status.OK
    entry = _entry(
        status,
        "; ".join(f"{f['probe']}: {f['message']}" for f in failures) or None,
        failures,
        sorted(c.id for c in installed.values()),
        missing=sorted(missing.keys() - miswired),
        miswired=sorted(miswired),
        swapped=sorted(swapped),
        degraded=[c.id for c in degraded],
        unexpected=sorted(describe(p) for p in unexpected if p not in explained),
    )
    return FabricAudit(entry, sorted(findings, key=finding_order))


def _finding(
    path: str, expected: str | None, observed: str | None, message: str, check: str = ""
) -> Finding:
    return Finding(
        kind=Kind.CABLE.value,
        host=FABRIC,
        check=check or path,
        path=path,
        expected=expected,
        observed=observed,
        severity=(Severity.WARNING if check == UNPLANNED else Severity.CRITICAL).value,
        message=message,
    )


def _below(seen: str, planned: str) -> bool:
    """Whether a link trained narrower or slower than its plan (`4xEDR` against `4xHDR`)."""
    have, want = _RATE.fullmatch(seen), _RATE.fullmatch(planned)
    if have is None or want is None:
        return seen != planned
    return int(have["width"]) < int(want["width"]) or _rank(have["speed"]) < _rank(want["speed"])


def _rank(speed: str) -> int:
    return _SPEEDS.index(speed) if speed in _SPEEDS else -1


def fabric_probes(contract: Fabric) -> Sequence[str]:
    """The fabric probes to collect: none when no InfiniBand cable is planned."""
    if not contract.cables:
        return ()
    return (*PROBES, FIRMWARE_PROBE) if contract.switches else PROBES
