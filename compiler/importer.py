"""`clusterforge import`: real hardware facts (serials, MACs, GUIDs) into `cluster/racks/*.yaml`.

A site racks its servers and then has their identities on a vendor's shipping list or a
racking sheet, or in its current DHCP server's leases; later the drift audit sees a replaced
NIC's MAC or HCA's GUID. `from_csv`, `from_leases` and `from_report` read them into `Fact`s
(which device, which key, what value, from which line); `resolve` checks them against the
cluster and splits them into `Change`s and `Conflict`s; `apply` is the one IO step: it edits
the rack files in place with ruamel.yaml's round-trip mode, so comments, key order, flow
style and quoting stay and only the values set change. Nothing is guessed: a row that names
no device, a MAC, GUID or serial another device already has, or two rows that disagree, is a
conflict, reported and not applied.

The CSV: a header row, then one row per device. Columns (case and spaces ignored):
`rack` and `u` (which device: the node whose units cover U, or the switch at U), `serial`,
`guid`, and one column per port MAC named after the NIC in hardware.yaml (`eno1`, `bmc`; a
`mac_` prefix or `_mac` suffix is allowed); a switch takes its management MAC from `mac`.
A server of several HCAs takes a port GUID per HCA, from `guid_<device>` (`guid mlx5_3`),
into its `guids`; one of a single HCA keeps `guid`, whichever column names it.
Empty cells are skipped. MACs may be in any common notation; they are normalised.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from common import atomic
from common.errors import ClusterforgeError, OutputError
from compiler.load import Source
from compiler.model import Cluster, normal_mac
from compiler.plan import Plan

# ("serial",), ("guid",), ("mac", "eno1"), ("guids", "mlx5_3"); a switch's MAC is ("mac",)
Key = tuple[str, ...]
GUIDS = ("guid", "guids")  # one namespace: a GUID is unique whichever key holds it
_SERIAL = re.compile(r"[A-Z0-9][A-Z0-9-]{3,31}")


class ImportError_(ClusterforgeError):
    """Raised when an input cannot be read at all (no header, no rack or U column)."""


@dataclass(frozen=True)
class Fact:
    """One value to set: on `device`, at `key`, from `origin` ("sheet.csv:4")."""

    device: str
    key: Key
    value: str
    origin: str


@dataclass(frozen=True)
class Change:
    """A value `apply` will set, where, and what it was."""

    file: str  # cluster/racks/<rack>.yaml
    device: str
    key: Key
    old: str | None
    new: str
    origin: str

    def __str__(self) -> str:
        return (
            f"{self.file}: {self.device} {'.'.join(self.key)}: {self.old or '(none)'} -> "
            f"{self.new} (from {self.origin})"
        )


@dataclass(frozen=True)
class Conflict:
    origin: str
    message: str

    def __str__(self) -> str:
        return f"{self.origin}: conflict: {self.message}"


@dataclass(frozen=True)
class _Device:
    name: str
    rack: str
    file: str
    switch: bool
    ports: tuple[str, ...]  # NIC names a MAC may be set for ("bmc" included); () for a switch
    values: dict[Key, str]
    hcas: tuple[str, ...] = ()  # its RDMA devices: several take a GUID each (`guids`)


def _devices(cluster: Cluster, source: Source, plan: Plan) -> dict[str, _Device]:
    ports = {
        h.name: (*(i.name for i in h.interfaces if i.mac is not None), "bmc") for h in plan.hosts
    }
    out = {}
    for r, rack in enumerate(cluster.racks):
        file = source.where(("racks", r)).file
        for node in rack.nodes:
            values: dict[Key, str] = {("serial",): node.serial}
            values |= {("mac", nic): mac for nic, mac in node.mac.items()}
            if node.guid:
                values[("guid",)] = node.guid
            values |= {("guids", hca): guid for hca, guid in node.guids.items()}
            hcas = tuple(plan.host(node.name).hca_of.values())
            out[node.name] = _Device(
                node.name, rack.name, file, False, ports[node.name], values, hcas
            )
        for sw in rack.switches:
            values = {("serial",): sw.serial, ("mac",): sw.mac}
            if sw.guid:
                values[("guid",)] = sw.guid
            out[sw.name] = _Device(sw.name, rack.name, file, True, (), values)
    return out


def from_csv(text: str, name: str, plan: Plan) -> tuple[list[Fact], list[Conflict]]:
    """The facts of a racking sheet or shipping list; rows that name no device conflict."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ImportError_(f"{name}: empty")
    header = [re.sub(r"[\s_-]+", "_", h.strip().lower()) for h in rows[0]]
    if "rack" not in header or "u" not in header:
        raise ImportError_(f"{name}:1: needs a 'rack' and a 'u' column, has {', '.join(header)}")
    columns = [re.sub(r"^mac_|_mac$", "", h) for h in header]
    at: dict[tuple[str, int], str] = {}
    for h in plan.hosts:
        at |= {(h.rack, u): h.name for u in range(h.u, h.u + h.height_u)}
    at |= {(s.rack, s.u): s.name for s in plan.switches}
    switches = {s.name for s in plan.switches}
    facts, conflicts = [], []
    for line, row in enumerate(rows[1:], 2):
        origin = f"{name}:{line}"
        cells = dict(zip(columns, (c.strip() for c in row), strict=False))
        if not any(cells.values()):
            continue
        rack, u = cells.get("rack", ""), cells.get("u", "").upper().removeprefix("U")
        device = at.get((rack, int(u))) if u.isdigit() else None
        if device is None:
            conflicts.append(Conflict(origin, f"no device planned at rack {rack!r} U{u}"))
            continue
        for column, value in cells.items():
            if column in ("rack", "u") or not value:
                continue
            if column in ("serial", "guid"):
                key: Key = (column,)
            elif column.startswith("guid_"):
                key = ("guids", column.removeprefix("guid_"))
            elif column == "mac" and device in switches:
                key = ("mac",)
            else:
                key = ("mac", column)
            facts.append(Fact(device, key, value, origin))
    return facts, conflicts


# Findings of a drift audit (report.json) that are a replaced part, not a fault to repair.
_REPLACED = {
    re.compile(r"interfaces\[([^\]]+)\]\.mac"): "mac",
    re.compile(r"ib_ports\[([^\]/]+)[^\]]*\]\.port_guid"): "guid",
}


_LEASE = re.compile(r"^lease\s+(\d+\.\d+\.\d+\.\d+)\s*\{(.*?)^\}", re.M | re.S)
_HARDWARE = re.compile(r"hardware\s+ethernet\s+([0-9A-Fa-f:]+)\s*;")
_STATE = re.compile(r"^\s*binding\s+state\s+(\w+)\s*;", re.M)


def from_leases(text: str, name: str, plan: Plan) -> list[Fact]:
    """The MACs of ISC dhcpd's leases file for the planned addresses: a site that already runs
    DHCP for its hosts adopts their MACs. The last lease of an address wins (dhcpd appends);
    a lease not in `binding state active` (expired, free) says nothing."""
    port = {i.address: (h.name, i.name) for h in plan.hosts for i in (*h.interfaces, h.bmc)}
    latest: dict[str, tuple[str, int]] = {}
    for match in _LEASE.finditer(text):
        address, body = match[1], match[2]
        state, mac = _STATE.search(body), _HARDWARE.search(body)
        line = text.count("\n", 0, match.start()) + 1
        if mac and address in port and (state is None or state[1] == "active"):
            latest[address] = (mac[1], line)
        elif address in port:
            latest.pop(address, None)
    return [
        Fact(port[address][0], ("mac", port[address][1]), mac, f"{name}:{line}")
        for address, (mac, line) in sorted(latest.items(), key=lambda i: i[1][1])
    ]


def from_report(text: str, name: str) -> list[Fact]:
    """The MACs and HCA GUIDs a drift audit saw where it expected others (`report.json`):
    a replaced NIC or HCA, so its fix is a one-line pull request, not a visit."""
    try:
        findings = json.loads(text)["findings"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ImportError_(f"{name}: not a drift report (report.json): {exc}") from None
    facts = []
    for f in findings:
        for pattern, what in _REPLACED.items():
            match = pattern.fullmatch(f.get("path", ""))
            if match and isinstance(f.get("observed"), str):
                # The HCA's own key: `resolve` makes it `guid` on a host of one HCA.
                key: Key = ("mac", match[1]) if what == "mac" else ("guids", match[1])
                origin = f"{name}: {f['host']} {f['path']}"
                facts.append(Fact(f["host"], key, f["observed"], origin))
    return facts


def resolve(
    cluster: Cluster,
    source: Source,
    plan: Plan,
    facts: Sequence[Fact],
    earlier: Sequence[Conflict] = (),
) -> tuple[list[Change], list[Conflict]]:
    """Check `facts` against the cluster: what changes, and what conflicts (never applied),
    `earlier` ones (the reader's) included, in the order of the input."""
    devices = _devices(cluster, source, plan)
    conflicts = list(earlier)
    wanted: dict[tuple[str, Key], list[Fact]] = defaultdict(list)
    for fact in facts:
        if fact.device not in devices:
            conflicts.append(Conflict(fact.origin, f"{fact.device!r} is not in cluster/"))
            continue
        fact = _guid_key(devices[fact.device], fact)
        problem = _invalid(devices[fact.device], fact)
        if problem:
            conflicts.append(Conflict(fact.origin, problem))
            continue
        wanted[(fact.device, fact.key)].append(_normal(fact))
    chosen: dict[tuple[str, Key], Fact] = {}
    for (device, key), offered in wanted.items():
        values = sorted({f.value for f in offered})
        if len(values) > 1:
            where = ", ".join(f.origin for f in offered)
            conflicts.append(
                Conflict(
                    offered[0].origin, f"{device} {'.'.join(key)}: {' vs '.join(values)} ({where})"
                )
            )
        else:
            chosen[(device, key)] = offered[0]
    # The cluster as it would be: an identity held twice there is a conflict of each fact
    # that brought it, and none of those facts is applied.
    final = {(d.name, k): v for d in devices.values() for k, v in d.values.items()}
    final |= {slot: f.value for slot, f in chosen.items()}
    holders: dict[tuple[str, str], list[tuple[str, Key]]] = defaultdict(list)
    for (name, key), value in final.items():
        holders[(_space(key), value)].append((name, key))
    changes = []
    for (name, key), fact in sorted(chosen.items(), key=lambda i: _line(i[1].origin)):
        d = devices[name]
        old = d.values.get(key)
        others = [h for h in holders[(_space(key), fact.value)] if h != (name, key)]
        if others:
            held = ", ".join(f"{o} {'.'.join(k)}" for o, k in others)
            message = f"{name} {'.'.join(key)}: {fact.value} would also be {held}'s"
            conflicts.append(Conflict(fact.origin, message))
        elif old != fact.value:
            changes.append(Change(d.file, name, key, old, fact.value, fact.origin))
    return changes, sorted(conflicts, key=lambda c: _line(c.origin))


def _line(origin: str) -> tuple[str, int]:
    """ "sheet.csv:10" sorts after "sheet.csv:9"."""
    name, _, line = origin.rpartition(":")
    return (name, int(line)) if line.isdigit() else (origin, 0)


def _space(key: Key) -> str:
    """The namespace an identity is unique in: a GUID in `guid` or in `guids`."""
    return "guid" if key[0] in GUIDS else key[0]


def _guid_key(device: _Device, fact: Fact) -> Fact:
    """A GUID named by its HCA lands in `guid` on a host of one HCA, which has no `guids`."""
    if fact.key[0] == "guids" and len(device.hcas) <= 1 and not device.switch:
        return replace(fact, key=("guid",))
    return fact


def _invalid(device: _Device, fact: Fact) -> str | None:
    key = fact.key
    if key[0] == "guids" and key[1] not in device.hcas:
        known = ", ".join(device.hcas) or "none"
        return f"{device.name} has no HCA {key[1]!r} (its HCAs: {known})"
    if key == ("guid",) and len(device.hcas) > 1:
        return (
            f"{device.name} has {len(device.hcas)} HCAs: name the one this GUID is of "
            f"(a column guid_<device>, e.g. guid_{device.hcas[0]})"
        )
    if key[0] == "mac" and len(key) == 2 and key[1] not in device.ports:
        known = ", ".join(device.ports) if device.ports else "one, as 'mac'"
        return f"{device.name} has no port {key[1]!r} (its ports: {known})"
    if key[0] == "mac":
        try:
            normal_mac(fact.value)
        except ValueError as exc:
            return str(exc)
    if key[0] in GUIDS and _guid(fact.value) is None:
        return f"{fact.value!r} is not a GUID (16 hex digits, e.g. 0x0c42a103005ef939)"
    if key == ("serial",) and not _SERIAL.fullmatch(fact.value.upper()):
        return f"{fact.value!r} is not a serial number (A-Z, 0-9, '-')"
    return None


def _guid(value: str) -> str | None:
    digits = re.sub(r"[:.\s-]", "", value.lower()).removeprefix("0x")
    return f"0x{digits}" if re.fullmatch(r"[0-9a-f]{16}", digits) else None


def _normal(fact: Fact) -> Fact:
    if fact.key[0] == "mac":
        value = normal_mac(fact.value)
    elif fact.key[0] in GUIDS:
        value = _guid(fact.value) or fact.value
    else:
        value = fact.value.upper()
    return Fact(fact.device, fact.key, value, fact.origin)


# --- the IO edge ----------------------------------------------------------------------------


def _yaml() -> YAML:
    # The rack files' own layout, so an untouched file dumps back byte for byte.
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def apply(repo: Path, changes: Iterable[Change]) -> list[str]:
    """Set each change's value in its rack file, keeping everything else as it was; returns
    the files written."""
    by_file: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        by_file[change.file].append(change)
    yaml = _yaml()
    for name, edits in sorted(by_file.items()):
        path = repo / name
        data = yaml.load(path.read_text(encoding="utf-8"))
        entries = {e["name"]: e for e in (*data.get("nodes", ()), *data.get("switches", ()))}
        for c in edits:
            entry = entries[c.device]
            # Identities stay quoted: unquoted, 0x0c42... would load as a number.
            value = c.new if c.key == ("serial",) else DoubleQuotedScalarString(c.new)
            if len(c.key) == 2:
                entry.setdefault(c.key[0], {})[c.key[1]] = value
            else:
                entry[c.key[0]] = value
        out = io.StringIO()
        yaml.dump(data, out)
        try:
            atomic.replace(path, out.getvalue())
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc}") from None
    return sorted(by_file)
