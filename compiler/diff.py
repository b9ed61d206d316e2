"""Compare two compiled revisions, the way a reviewer of a pull request needs it.

Pure: two `Side`s in (each a compile, or the located errors that stopped it), one `DiffReport`
out; `to_json` renders it (`draw.review` its Markdown). Reading revisions from git is
`compiler.gitsource`'s job. The report says what changes physically and logically (nodes,
switches, addresses, cables, firmware, fabric, routes), the blast radius per artifact family
(the first path component under generated/, so new targets need no code here), and the risk
flags a reviewer must not miss.

JSON, schema 2 (lists sorted; a value that does not exist on one side is null):
  schema: 2; compiles: both sides compile; changed: the generated trees differ
  base, head: {ref, commit, compiles, errors: [{location: {file, line, col}, rule, message}]}
  risks: [{kind (RiskKind), message, items: [str]}]
  nodes, switches: {added: [{name, place}], removed: [{name, place}],
                    moved: [{name, old: place, new: place}],
                    renamed: [{old, new, place}]}  place: {rack, u, slot}, slot null on a
                    switch; a rename is a device gone under one name and new under another
                    with the same serial, or in the same place with the same model
  identity: {devices: [{device, key, old, new}], roles: [{device, old, new}],
             root_guids: {removed: [guid], added: [guid]}, lids_kept,
             lids: [{device, port, old, new}]}
             key: serial, mac <port> (bmc too), guid (a switch), guid <hca/port>; a renamed
             device under its HEAD name; LIDs of ports on both sides, by device and port
  addresses: [{device, network, old, new}]  "a.b.c.d/len"; old null: added (a new device's
             too), new null: removed
  renumbered_nothing: no address or LID that exists on both sides changed
  label_commands: [str]  the `clusterforge labels` commands that print every label of the
                  change (new racks whole, both ends; other new or relabelled cables --only)
  cables: {added: [cable], removed: [cable], changed: [{id, repatched, relabel,
           changes: [{key, old, new}], old: cable, new: cable}]}
           cable: {id, network, a, b}, an end: {device, port, rack, u, location};
           change keys: network, {a,b}.{device,port,location}, medium, length_m, rate,
           installed, spare, note
  labels_to_reprint: [cable id]  existing cables whose label shows something new
  firmware: {software: [{key, old, new}], baselines: [{model, key, old, new}],
             rings: [{ring, hosts, changes: [{key, old, new, hosts: [name]}]}],
             switches: [{key, old, new, hosts: [name]}]}
  fabric: {settings: [{key, old, new}], subnet_managers: [{key: host, old, new: priority}],
           opensm_options: [{file, key, old, new}], lids: [{file, guid, old, new}]}
  routes: [{host, removed: [route], added: [route]}]  as `ip route` prints them
  parts: [{medium, rate, length_m, old, new}]  fabric/bom.csv's lines whose count changed:
         new > old is to order, new < old to return
  rollouts: [{status (added, removed), rings: [ring], previous: {key: version}, until}]
  artifacts: [{family, files_added, files_removed, files_changed, lines_added, lines_removed,
               files: [{path, status, lines_added, lines_removed}]}]  lines null: not text
  touched: {hosts, hosts_total, cables, cables_total, share_limit,
            host_kinds: {kind: n}, cable_kinds: {kind: n}}
           totals: devices or cables on either side (a renamed host once), so no share is
           over 100%; a host's kind is what its change is: added, removed, renamed, versions
           (only versions or pins), identity (only serial, MACs, GUIDs), other; a cable's:
           added, removed, changed. `large-change` counts only what routine work does not
           touch by its nature: removed, renamed and other hosts, removed and changed cables
When a side does not compile, every change section is empty and only the errors (and, when
HEAD broke what BASE compiled, the `head-fails` risk) are reported.

`flow-control-changed` names each network whose RoCE class (`rdma: roce` and its `roce:`)
differs, old → new: a class applied to some ends of a network and not yet to others breaks
RoCE between them, so the change is rolled to all of its switches and hosts together.

`kickstart-changed` lists the lines that change in kickstarts present on both sides
(`<file>[ and N more]: -line` / `+line`, one run per set of files changed alike).

Two risks read generated files under `opensm/` instead of the plan, so they hold whatever the
OpenSM target writes: `routing_engine` and `sm_priority` options (lines `key value`, as in
opensm.conf), and LIDs in guid2lid-style lines (`0x<16 hex GUID> 0x<LID> [0x<LID>]`): a GUID
present on both sides whose LIDs differ is a renumbered LID.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from deepdiff import DeepDiff
from deepdiff.helper import notpresent

from common.errors import Diagnostic, Location
from compiler.model import Rollout
from compiler.pipeline import MANIFEST, Compiled
from compiler.plan import Cable, CableEnd, Host, Plan, SwitchPlan, interface_prefix
from compiler.roce import RoceQos
from contract import Route
from contract.diff import (
    AddressChange,
    CableChange,
    CableRef,
    Cables,
    Change,
    Devices,
    FabricChanges,
    Family,
    FileDiff,
    FileOption,
    Firmware,
    GuidSet,
    Identity,
    IdentityChange,
    LidChange,
    LidMove,
    ModelChange,
    Move,
    Part,
    Place,
    Placed,
    Rename,
    Revision,
    RingChanges,
    Risk,
    RiskKind,
    RoleChange,
    RolloutChange,
    RouteChange,
    Touched,
    Value,
    VersionChange,
)

# The report's records are the contract's, which draw renders; re-exported as this module's.
from contract.diff import DiffReport as DiffReport

SCHEMA = 2
DEFAULT_SHARE_LIMIT = 0.10


@dataclass(frozen=True)
class Side:
    """One revision as `diff` takes it: its name, its commit, and its compile or its errors."""

    ref: str
    commit: str
    compiled: Compiled | None
    errors: tuple[Diagnostic, ...] = ()


# --- the comparison -------------------------------------------------------------------------


def diff(base: Side, head: Side, share_limit: float = DEFAULT_SHARE_LIMIT) -> DiffReport:
    """Compare two revisions; `share_limit` is the share of hosts or cables (0.1 = 10%) a
    change may touch before it is flagged as large."""
    old, new = _revision(base), _revision(head)
    if base.compiled is None or head.compiled is None:
        risks: tuple[Risk, ...] = ()
        if base.compiled is not None:
            risks = (
                Risk(
                    RiskKind.HEAD_FAILS,
                    f"HEAD does not compile while BASE does: {len(head.errors)} problem(s)",
                    tuple(str(d) for d in head.errors),
                ),
            )
        return DiffReport(old, new, risks=risks)
    a, b = base.compiled.plan, head.compiled.plan
    renames = _renames(a, b)
    cables = _cables(a, b, renames)
    fabric = _fabric(base.compiled, head.compiled)
    addresses = _addresses(a, b, renames)
    touched = _touched(a, b, renames, share_limit)
    identity = _identity(base.compiled, head.compiled, renames)
    reprint = tuple(c.id for c in cables.changed if c.relabel)
    nodes = _devices(
        {h.name: Place(h.rack, h.u, h.slot) for h in a.hosts},
        {h.name: Place(h.rack, h.u, h.slot) for h in b.hosts},
        renames,
    )
    switches = _devices(
        {s.name: Place(s.rack, s.u, None) for s in a.switches},
        {s.name: Place(s.rack, s.u, None) for s in b.switches},
        renames,
    )
    return DiffReport(
        base=old,
        head=new,
        risks=_risks(
            addresses,
            fabric,
            touched,
            identity,
            (nodes, switches),
            _kickstarts(base.compiled, head.compiled),
        )
        + _reinstall(a, b)
        + _flow_control(a, b),
        nodes=nodes,
        switches=switches,
        addresses=addresses,
        renumbered_nothing=not fabric.lids and not any(c.old and c.new for c in addresses),
        cables=cables,
        labels_to_reprint=reprint,
        label_commands=_label_commands(a, b, cables, reprint),
        firmware=_firmware(a, b),
        fabric=fabric,
        routes=_routes(a, b),
        identity=identity,
        parts=_parts(base.compiled.files, head.compiled.files),
        rollouts=_rollouts(a, b),
        artifacts=_artifacts(base.compiled.files, head.compiled.files),
        touched=touched,
    )


def _revision(side: Side) -> Revision:
    return Revision(side.ref, side.commit, side.compiled is not None, tuple(sorted(side.errors)))


def _devices(
    old: Mapping[str, Place], new: Mapping[str, Place], renames: Mapping[str, str]
) -> Devices:
    gone = {o for o in renames if o in old}
    came = {renames[o] for o in gone}
    return Devices(
        added=tuple(Placed(n, new[n]) for n in sorted(new.keys() - old.keys() - came)),
        removed=tuple(Placed(n, old[n]) for n in sorted(old.keys() - new.keys() - gone)),
        moved=tuple(
            Move(n, old[n], new[n]) for n in sorted(old.keys() & new.keys()) if old[n] != new[n]
        ),
        renamed=tuple(Rename(o, renames[o], new[renames[o]]) for o in sorted(gone)),
    )


def _renames(a: Plan, b: Plan) -> dict[str, str]:
    """BASE name -> HEAD name of every device gone under one name and new under another.

    The same serial is the same box; failing that (a serial corrected with the rename), the
    same model in the same place (rack, U, slot) is taken for it: a box swapped for another
    is a rename there, and its new serial shows in the identity section."""

    def devices(plan: Plan) -> dict[str, tuple[str, tuple[object, ...]]]:
        found: dict[str, tuple[str, tuple[object, ...]]] = {
            h.name: (h.serial, ("host", h.model, h.rack, h.u, h.slot)) for h in plan.hosts
        }
        found |= {s.name: (s.serial, ("switch", s.model, s.rack, s.u)) for s in plan.switches}
        return found

    old, new = devices(a), devices(b)
    gone = sorted(old.keys() - new.keys())
    came = sorted(new.keys() - old.keys())
    out: dict[str, str] = {}
    for key in (0, 1):
        index: dict[object, list[str]] = defaultdict(list)
        for name in came:
            if name not in out.values():
                index[new[name][key]].append(name)
        for name in gone:
            match = index.get(old[name][key], [])
            # Ambiguous (two boxes share it) is no evidence of a rename.
            if name not in out and len(match) == 1 and match[0] not in out.values():
                out[name] = match[0]
    return dict(sorted(out.items()))


def _address_book(plan: Plan) -> dict[tuple[str, str], str]:
    """(device, network) -> "address/prefix" of every host port (BMC included) and switch."""
    book = {(h.name, i.network): i.cidr for h in plan.hosts for i in (*h.interfaces, h.bmc)}
    for s in plan.switches:
        if s.address and s.network:
            prefix = interface_prefix(plan.networks[s.network])
            book[(s.name, s.network)] = f"{s.address}/{prefix}"
    return book


def _addresses(a: Plan, b: Plan, renames: Mapping[str, str]) -> tuple[AddressChange, ...]:
    """Every address added, removed or changed, a new or removed device's included: the
    reviewer checks the new ones against the site's IP plan too. A renamed device's are
    compared under its HEAD name."""
    old = {(renames.get(d, d), n): v for (d, n), v in _address_book(a).items()}
    new = _address_book(b)
    return tuple(
        AddressChange(device, network, old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        for device, network in [key]
        if old.get(key) != new.get(key)
    )


def _label_commands(a: Plan, b: Plan, cables: Cables, reprint: Sequence[str]) -> tuple[str, ...]:
    """`clusterforge labels` lines that print every label this change needs: a new rack
    whole (its sheet, its cables' far ends, its pull sheet), any other cable by ID."""
    new_racks = sorted({r.name for r in b.racks} - {r.name for r in a.racks})
    in_new = {c.id for c in cables.added if {c.a.rack, c.b.rack} & set(new_racks)}
    single = sorted({c.id for c in cables.added if c.id not in in_new} | set(reprint))
    commands = ["clusterforge labels " + " ".join(f"--rack {r}" for r in new_racks)]
    commands = commands if in_new else []
    if single:
        commands.append(f"clusterforge labels --only {','.join(single)}")
    return tuple(commands)


# What a cable label shows besides its ID (ends, medium, length), and what makes a re-patch.
_ENDS = ("a.device", "a.port", "b.device", "b.port")
_LABEL = (*_ENDS, "a.location", "b.location", "medium", "length_m")


def _cable_facts(c: Cable) -> dict[str, Value]:
    facts: dict[str, Value] = {"network": c.network}
    for side, end in (("a", c.a), ("b", c.b)):
        for key in ("device", "port", "location"):
            facts[f"{side}.{key}"] = getattr(end, key)
    return facts | {
        "medium": c.medium,
        "length_m": c.length_m,
        "rate": c.rate,
        "installed": c.installed,
        "spare": c.spare,
        "note": c.note,
    }


def _cable_ref(c: Cable) -> CableRef:
    return CableRef(c.id, c.network, c.a, c.b)


def _cables(a: Plan, b: Plan, renames: Mapping[str, str]) -> Cables:
    old = {c.id: c for c in a.cables}
    new = {c.id: c for c in b.cables}
    changed = []
    for cid in sorted(old.keys() & new.keys()):
        if old[cid] == new[cid]:  # most cables, in a tuple's compare: no facts to lay side by side
            continue
        before, after = _cable_facts(old[cid]), _cable_facts(new[cid])
        keys = [k for k in before if before[k] != after[k]]
        # A renamed device's cable goes where it went: relabelled (the label names it), not
        # re-patched.
        moved = [
            k
            for k in keys
            if k in _ENDS
            and not (k.endswith(".device") and renames.get(str(before[k])) == after[k])
        ]
        if keys:
            changed.append(
                CableChange(
                    cid,
                    repatched=bool(moved),
                    relabel=any(k in _LABEL for k in keys),
                    changes=tuple(Change(k, before[k], after[k]) for k in keys),
                    old=_cable_ref(old[cid]),
                    new=_cable_ref(new[cid]),
                )
            )
    return Cables(
        added=tuple(_cable_ref(new[i]) for i in sorted(new.keys() - old.keys())),
        removed=tuple(_cable_ref(old[i]) for i in sorted(old.keys() - new.keys())),
        changed=tuple(changed),
    )


def _value_changes(old: Mapping[str, Value], new: Mapping[str, Value]) -> tuple[Change, ...]:
    return tuple(
        Change(k, old.get(k), new.get(k))
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k)
    )


def _firmware(a: Plan, b: Plan) -> Firmware:
    fa, fb = a.firmware, b.firmware
    baselines = []
    for model in sorted(fa.baselines.keys() | fb.baselines.keys()):
        old = fa.baselines[model].model_dump(exclude_none=True) if model in fa.baselines else {}
        new = fb.baselines[model].model_dump(exclude_none=True) if model in fb.baselines else {}
        baselines += [ModelChange(model, c.key, c.old, c.new) for c in _value_changes(old, new)]

    # Which hosts each change reaches, by rollout ring (HEAD's), so a reviewer sees whether
    # a bump stays inside the canary ring.
    old_hosts = {h.name: h for h in a.hosts}
    by_ring: dict[str, dict[tuple[str, str | None, str | None], list[str]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for h in b.hosts:
        before = old_hosts.get(h.name)
        if before is None:
            continue
        for key in sorted(before.versions.keys() | h.versions.keys()):
            was, now = before.versions.get(key), h.versions.get(key)
            if was != now:
                by_ring[h.ring][(key, was, now)].append(h.name)
    ring_sizes = Counter(h.ring for h in b.hosts)
    order = [r.name for r in fb.rings]
    rings = tuple(
        RingChanges(ring, ring_sizes[ring], _grouped(by_ring[ring]))
        for ring in sorted(by_ring, key=lambda r: (order.index(r) if r in order else len(order), r))
    )

    old_switches = {s.name: s.firmware for s in a.switches}
    switch_groups: dict[tuple[str, str | None, str | None], list[str]] = defaultdict(list)
    for s in b.switches:
        if s.name in old_switches and old_switches[s.name] != s.firmware:
            switch_groups[("firmware", old_switches[s.name], s.firmware)].append(s.name)
    return Firmware(
        software=_value_changes(fa.software, fb.software),
        baselines=tuple(baselines),
        rings=rings,
        switches=_grouped(switch_groups),
    )


def _grouped(
    groups: Mapping[tuple[str, str | None, str | None], list[str]],
) -> tuple[VersionChange, ...]:
    return tuple(
        VersionChange(key, old, new, tuple(sorted(hosts)))
        for (key, old, new), hosts in sorted(
            groups.items(), key=lambda kv: tuple(part or "" for part in kv[0])
        )
    )


# The opensm.conf options whose change a reviewer must see, and the risk each one raises.
_OPENSM_RISKS = {"routing_engine": RiskKind.ROUTING_ENGINE, "sm_priority": RiskKind.SM_PRIORITY}
_OPTION = re.compile(r"^\s*(?P<key>[a-z_]+)[ \t]+(?P<value>[^#\s][^#]*?)\s*(?:#.*)?$")
_LID = re.compile(
    r"^\s*(?P<guid>0x[0-9a-fA-F]{16})\s+(?P<lids>0x[0-9a-fA-F]{1,4}(?:\s+0x[0-9a-fA-F]{1,4})?)"
    r"\s*$"
)


def _opensm_texts(files: Mapping[str, bytes]) -> dict[str, str]:
    return {
        path: data.decode("utf-8", "replace")
        for path, data in files.items()
        if path.startswith("opensm/")
    }


def _options(text: str) -> dict[str, str]:
    found = (_OPTION.match(line) for line in text.splitlines())
    return {m["key"]: m["value"] for m in found if m and m["key"] in _OPENSM_RISKS}


def _lids(text: str) -> dict[str, str]:
    found = (_LID.match(line) for line in text.splitlines())
    return {m["guid"].lower(): " ".join(m["lids"].split()) for m in found if m}


def _fabric(base: Compiled, head: Compiled) -> FabricChanges:
    a, b = base.plan.fabric, head.plan.fabric
    # Cable overrides show up in the cable plan and SMs in their own list, not as settings.
    skip = {"cables", "subnet_managers"}
    found = DeepDiff(
        a.model_dump(mode="json", exclude=skip),
        b.model_dump(mode="json", exclude=skip),
        view="tree",
    )
    settings = sorted(
        (
            Change(_deep_path(level.path(output_format="list")), _deep(level.t1), _deep(level.t2))
            for levels in found.values()
            for level in levels
        ),
        key=lambda c: c.key,
    )
    old_texts, new_texts = _opensm_texts(base.files), _opensm_texts(head.files)
    options = []
    # A file the same on both sides has nothing to compare: skipped, not parsed twice.
    for path in sorted(old_texts.keys() | new_texts.keys()):
        if old_texts.get(path) == new_texts.get(path):
            continue
        before, after = _options(old_texts.get(path, "")), _options(new_texts.get(path, ""))
        options += [
            FileOption(path, k, before.get(k), after.get(k))
            for k in sorted(before.keys() | after.keys())
            if before.get(k) != after.get(k)
        ]
    lids = []
    for path in sorted(old_texts.keys() & new_texts.keys()):
        if old_texts[path] == new_texts[path]:
            continue
        before, after = _lids(old_texts[path]), _lids(new_texts[path])
        lids += [
            LidChange(path, guid, before[guid], after[guid])
            for guid in sorted(before.keys() & after.keys())
            if before[guid] != after[guid]
        ]
    return FabricChanges(
        settings=tuple(settings),
        subnet_managers=_value_changes(
            {sm.host: sm.priority for sm in a.subnet_managers},
            {sm.host: sm.priority for sm in b.subnet_managers},
        ),
        opensm_options=tuple(options),
        lids=tuple(lids),
    )


def _deep_path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _deep(value: Any) -> Value:
    if value is notpresent:
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    # An added or removed list item or mapping is shown whole, in one line.
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _route(r: Route) -> str:
    via = f" via {r.gateway}" if r.gateway else ""
    return f"{r.dst}{via} dev {r.dev}"


def _routes(a: Plan, b: Plan) -> tuple[RouteChange, ...]:
    old = {h.name: {_route(r) for r in h.routes} for h in a.hosts}
    out = []
    for h in b.hosts:
        if h.name not in old:
            continue
        now = {_route(r) for r in h.routes}
        if now != old[h.name]:
            out.append(
                RouteChange(
                    h.name, tuple(sorted(old[h.name] - now)), tuple(sorted(now - old[h.name]))
                )
            )
    return tuple(out)


def _text(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _file_diff(path: str, old: bytes | None, new: bytes | None) -> FileDiff:
    status = "added" if old is None else "removed" if new is None else "changed"
    if old is not None and new is not None and _utf8(old) and _utf8(new):
        old, new = _middle(old, new)  # whole lines off: what is left decodes too
    before, after = _text(old), _text(new)
    if before is None or after is None:
        return FileDiff(path, status, None, None)
    # Lines both versions begin and end with are left out first, as diff(1) does: a one-host
    # change in a 40,000-line dhcpd.conf leaves difflib a few lines instead of the whole
    # file, whose matching grows faster than the file does. (`_middle` took the lines to a
    # line feed; what is left here are lines split at another break, a lone CR.)
    shorter = min(len(before), len(after))
    head = 0
    while head < shorter and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < shorter - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    before, after = before[head : len(before) - tail], after[head : len(after) - tail]
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=True)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return FileDiff(path, status, added, removed)


def _middle(old: bytes, new: bytes) -> tuple[bytes, bytes]:
    """Both files without the whole lines (to a line feed) they begin and end with alike,
    found by comparing bytes in C: split into lines and compared line by line in Python, a
    one-host change cost the 20 MB inventory.json of 4,096 eight-rail servers 0.2 s."""
    shorter = min(len(old), len(new))
    start = old.rfind(b"\n", 0, _alike(old, new, shorter)) + 1
    same = _alike(old, new, shorter - start, back=True)  # short of what the start took
    # Whole lines from the first line feed inside the alike end on (both sides have it).
    cut = old.find(b"\n", len(old) - same)
    end = len(old) - cut - 1 if same and cut >= 0 else 0
    return old[start : len(old) - end], new[start : len(new) - end]


_BLOCK = 1 << 16


def _alike(a: bytes, b: bytes, limit: int, back: bool = False) -> int:
    """How many bytes `a` and `b` begin (`back`: end) with alike, at most `limit`: block by
    block, then halving the block that differs. A slice is a copy, so only short ones."""

    def part(x: bytes, i: int, j: int) -> bytes:  # bytes i to j, from the end when back
        return x[len(x) - j : len(x) - i] if back else x[i:j]

    lo = 0
    while lo < limit:
        hi = min(lo + _BLOCK, limit)
        if part(a, lo, hi) != part(b, lo, hi):
            break
        lo = hi
    else:
        return limit
    while hi - lo > 1:  # alike before lo; a difference in [lo, hi)
        mid = (lo + hi) // 2
        if part(a, lo, mid) == part(b, lo, mid):
            lo = mid
        else:
            hi = mid
    return lo


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _artifacts(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> tuple[Family, ...]:
    families: dict[str, list[FileDiff]] = defaultdict(list)
    for path in sorted((old.keys() | new.keys()) - {MANIFEST}):
        if old.get(path) != new.get(path):
            families[path.split("/", 1)[0]].append(_file_diff(path, old.get(path), new.get(path)))
    out = []
    for name, files in sorted(families.items()):
        status = Counter(f.status for f in files)
        out.append(
            Family(
                name,
                files_added=status["added"],
                files_removed=status["removed"],
                files_changed=status["changed"],
                lines_added=sum(f.lines_added or 0 for f in files),
                lines_removed=sum(f.lines_removed or 0 for f in files),
                files=tuple(files),
            )
        )
    return tuple(out)


def _host_identity(h: Host) -> dict[str, str | None]:
    keys: dict[str, str | None] = {"serial": h.serial}
    keys |= {f"mac {i.name}": i.mac for i in (*h.interfaces, h.bmc) if i.mac}
    keys |= {f"guid {p.device}/{p.port}": p.guid for p in h.ib_ports}
    return keys


def _switch_identity(s: SwitchPlan) -> dict[str, str | None]:
    keys: dict[str, str | None] = {"serial": s.serial, "mac": s.mac}
    return keys | ({"guid": s.guid} if s.guid else {})


def _lid_book(plan: Plan) -> dict[tuple[str, str], int]:
    book = {(s.name, ""): s.lid for s in plan.switches if s.lid is not None}
    return book | {(h.name, f"{p.device}/{p.port}"): p.lid for h in plan.hosts for p in h.ib_ports}


_GUID_LINE = re.compile(r"^\s*(0x[0-9a-fA-F]{16})\s*$")
ROOT_GUIDS_FILE = "opensm/root_guids"


def _guid_list(files: Mapping[str, bytes]) -> set[str]:
    text = files.get(ROOT_GUIDS_FILE, b"").decode("utf-8", "replace")
    return {m[1].lower() for m in map(_GUID_LINE.match, text.splitlines()) if m}


def _identity(base: Compiled, head: Compiled, renames: Mapping[str, str]) -> Identity:
    """Serials, MACs and GUIDs of every device on both sides, old -> new; roles; the ftree
    roots OpenSM reads (from the generated file, so it holds whatever the target writes);
    and which LIDs stay."""
    a, b = base.plan, head.plan
    old = {renames.get(h.name, h.name): _host_identity(h) for h in a.hosts}
    old |= {renames.get(s.name, s.name): _switch_identity(s) for s in a.switches}
    new = {h.name: _host_identity(h) for h in b.hosts}
    new |= {s.name: _switch_identity(s) for s in b.switches}
    devices = [
        IdentityChange(name, key, old[name].get(key), new[name].get(key))
        for name in sorted(old.keys() & new.keys())
        for key in sorted(old[name].keys() | new[name].keys())
        if old[name].get(key) != new[name].get(key)
    ]

    def role_book(plan: Plan) -> dict[str, str]:
        book = {h.name: h.role.value for h in plan.hosts}
        return book | {s.name: s.role.value for s in plan.switches}

    old_roles = {renames.get(n, n): r for n, r in role_book(a).items()}
    new_roles = role_book(b)
    roles = [
        RoleChange(n, old_roles[n], new_roles[n])
        for n in sorted(old_roles.keys() & new_roles.keys())
        if old_roles[n] != new_roles[n]
    ]
    roots_a, roots_b = _guid_list(base.files), _guid_list(head.files)
    lids_a = {(renames.get(d, d), p): v for (d, p), v in _lid_book(a).items()}
    lids_b = _lid_book(b)
    both = sorted(lids_a.keys() & lids_b.keys())
    return Identity(
        devices=tuple(devices),
        roles=tuple(roles),
        root_guids=GuidSet(tuple(sorted(roots_a - roots_b)), tuple(sorted(roots_b - roots_a))),
        lids_kept=sum(lids_a[k] == lids_b[k] for k in both),
        lids=tuple(
            LidMove(d, p, lids_a[d, p], lids_b[d, p])
            for d, p in both
            if lids_a[d, p] != lids_b[d, p]
        ),
    )


BOM = "fabric/bom.csv"


def _bom(files: Mapping[str, bytes]) -> dict[tuple[str, str, str], int]:
    """The parts list's counts by (medium, rate, length): the header names the columns, so
    a column added to the target does not shift these."""
    text = files.get(BOM)
    if text is None:
        return {}
    rows = list(csv.DictReader(io.StringIO(text.decode("utf-8", "replace"))))
    out: dict[tuple[str, str, str], int] = {}
    for row in rows:
        try:
            key = (row["medium"], row["rate"], row["length_m"])
            out[key] = out.get(key, 0) + int(row["count"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _parts(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> tuple[Part, ...]:
    a, b = _bom(old), _bom(new)
    return tuple(
        Part(*key, a.get(key, 0), b.get(key, 0))
        for key in sorted(a.keys() | b.keys(), key=_part_order)
        if a.get(key, 0) != b.get(key, 0)
    )


def _part_order(key: tuple[str, str, str]) -> tuple[str, str, float, str]:
    try:
        length = float(key[2])
    except ValueError:
        length = 0.0
    return (key[0], key[1], length, key[2])


def _rollouts(a: Plan, b: Plan) -> tuple[RolloutChange, ...]:
    """Upgrade windows opened or closed: the reviewer of a rollout sees until when which
    rings may still run what."""

    def key(r: Rollout) -> str:
        return json.dumps(r.model_dump(mode="json"), sort_keys=True)

    old = {key(r): r for r in a.firmware.rollouts}
    new = {key(r): r for r in b.firmware.rollouts}
    return tuple(
        RolloutChange(status, r.rings, dict(sorted(r.previous.items())), str(r.until))
        for status, side, other in (("removed", old, new), ("added", new, old))
        for k, r in sorted(side.items())
        if k not in other
    )


_VERSIONS = ("versions", "pinned", "mask")


def _host_kind(old: Host, new: Host) -> str:
    """What a change to an existing host is: versions, identity, or other (placement,
    addresses, role, routes, ...), the first that is not routine winning."""

    def stripped(h: Host) -> Host:
        return h._replace(
            name="",
            serial="",
            versions={},
            pinned={},
            mask={},
            interfaces=tuple(i._replace(mac=None) for i in h.interfaces),
            bmc=h.bmc._replace(mac=None),
            ib_ports=tuple(p._replace(guid="") for p in h.ib_ports),
        )

    if stripped(old) != stripped(new):
        return "other"
    if _host_identity(old) != _host_identity(new):
        return "identity"
    return "versions"


# Kinds a change of their nature touches at any size: a new rack adds, a rollout bumps
# versions fleet-wide ring by ring, an import fills in serials and MACs.
_ROUTINE = {"added", "versions", "identity"}


def _touched(a: Plan, b: Plan, renames: Mapping[str, str], share_limit: float) -> Touched:
    old = {renames.get(h.name, h.name): h for h in a.hosts}
    new = {h.name: h for h in b.hosts}
    hosts: Counter[str] = Counter()
    for name in old.keys() | new.keys():
        before, after = old.get(name), new.get(name)
        if before is None:
            hosts["added"] += 1
        elif after is None:
            hosts["removed"] += 1
        elif before.name != after.name:
            hosts["renamed"] += 1
        elif before != after:
            hosts[_host_kind(before, after)] += 1
    old_c, new_c = {c.id: c for c in a.cables}, {c.id: c for c in b.cables}
    cables: Counter[str] = Counter()
    for cid in old_c.keys() | new_c.keys():
        if cid not in old_c:
            cables["added"] += 1
        elif cid not in new_c:
            cables["removed"] += 1
        elif old_c[cid] != new_c[cid]:
            cables["changed"] += 1
    return Touched(
        hosts=sum(hosts.values()),
        hosts_total=len(old.keys() | new.keys()),
        cables=sum(cables.values()),
        cables_total=len(old_c.keys() | new_c.keys()),
        share_limit=share_limit,
        host_kinds=dict(sorted(hosts.items())),
        cable_kinds=dict(sorted(cables.items())),
    )


def _share(part: int, total: int) -> float:
    # An empty BASE (a first commit) is wholly changed by anything.
    return part / total if total else float(part > 0)


KICKSTARTS = "kickstart/"


def _kickstarts(a: Compiled, b: Compiled) -> list[str]:
    """The lines that change in kickstarts on both sides, as `-line` and `+line`, each run of
    them said once for every kickstart it changes alike (a change to a profile is the same
    lines in a hundred files). A kickstart's lines, `%pre` and `%post` above all, run as root
    at every install: a reviewer reads them, not a count of files."""
    changes: defaultdict[tuple[str, ...], list[str]] = defaultdict(list)
    for path, new in b.files.items():
        old = a.files.get(path)
        if not path.startswith(KICKSTARTS) or old is None or old == new:
            continue
        old_lines, new_lines = old.decode().splitlines(), new.decode().splitlines()
        changed = tuple(
            line
            for line in difflib.unified_diff(old_lines, new_lines, n=0, lineterm="")
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        )
        changes[changed].append(path.removeprefix(KICKSTARTS))
    items = []
    for changed, names in sorted(changes.items(), key=lambda kv: (-len(kv[1]), kv[1])):
        which = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
        items += [f"{which}: {line}" for line in changed]
    return items


def _risks(
    addresses: Sequence[AddressChange],
    fabric: FabricChanges,
    touched: Touched,
    identity: Identity,
    devices: Sequence[Devices],
    kickstart_lines: Sequence[str] = (),
) -> tuple[Risk, ...]:
    risks = []
    renumbered = [
        f"{c.device} {c.network}: {c.old} → {c.new}" for c in addresses if c.old and c.new
    ]
    if renumbered:
        risks.append(
            Risk(
                RiskKind.ADDRESS_RENUMBERED,
                f"{len(renumbered)} existing address(es) renumbered",
                tuple(renumbered),
            )
        )
    if fabric.lids:
        risks.append(
            Risk(
                RiskKind.LID_RENUMBERED,
                f"{len(fabric.lids)} existing LID(s) renumbered",
                tuple(f"{c.guid} ({c.file}): {c.old} → {c.new}" for c in fabric.lids),
            )
        )
    for kind, what in (
        (RiskKind.ROUTING_ENGINE, "OpenSM routing engine changed"),
        (RiskKind.SM_PRIORITY, "subnet manager or SM priority changed"),
    ):
        items = [
            f"{o.file}: {o.key} {o.old or '(none)'} → {o.new or '(none)'}"
            for o in fabric.opensm_options
            if _OPENSM_RISKS[o.key] == kind
        ]
        if kind == RiskKind.SM_PRIORITY:
            items += [
                f"{c.key}: priority {_shown(c.old)} → {_shown(c.new)}"
                for c in fabric.subnet_managers
            ]
        if items:
            risks.append(Risk(kind, what, tuple(items)))
    gone = {p.name for d in devices for p in d.removed}
    removed = [c for c in addresses if c.old and not c.new and c.device in gone]
    lost = [c for c in addresses if c.old and not c.new and c.device not in gone]
    if removed:
        risks.append(
            Risk(
                RiskKind.ADDRESS_REMOVED,
                f"{len(removed)} address(es) removed with their device(s): their DHCP and "
                "DNS entries go",
                tuple(f"{c.device} {c.network}: {c.old}" for c in removed),
            )
        )
    if lost:
        risks.append(
            Risk(
                RiskKind.ADDRESS_LOST,
                f"{len(lost)} device(s) that stay lose an address: no DHCP lease, no DNS name",
                tuple(f"{c.device} {c.network}: {c.old} → (none)" for c in lost),
            )
        )
    roots = identity.root_guids
    if roots.removed or roots.added:
        risks.append(
            Risk(
                RiskKind.ROOT_GUIDS,
                "OpenSM's ftree root GUIDs changed: routing is recomputed from other roots",
                (
                    *(f"removed {g}" for g in roots.removed),
                    *(f"added {g}" for g in roots.added),
                ),
            )
        )
    if identity.roles:
        risks.append(
            Risk(
                RiskKind.ROLE_CHANGED,
                f"{len(identity.roles)} device(s) change role",
                tuple(f"{c.device}: {c.old} → {c.new}" for c in identity.roles),
            )
        )
    host_part = sum(n for k, n in touched.host_kinds.items() if k not in _ROUTINE)
    cable_part = sum(n for k, n in touched.cable_kinds.items() if k not in _ROUTINE)
    large = [
        f"{what}: {part} of {total} ({_share(part, total):.1%}) {how}"
        for what, part, total, kinds in (
            ("hosts", host_part, touched.hosts_total, touched.host_kinds),
            ("cables", cable_part, touched.cables_total, touched.cable_kinds),
        )
        for how in [", ".join(f"{n} {k}" for k, n in kinds.items() if k not in _ROUTINE)]
        if _share(part, total) > touched.share_limit
    ]
    if large:
        risks.append(
            Risk(
                RiskKind.LARGE_CHANGE,
                f"changes more than {touched.share_limit:.0%} of hosts or cables beyond "
                "what additions, version rollouts and imports touch",
                tuple(large),
            )
        )
    if kickstart_lines:
        risks.append(
            Risk(
                RiskKind.KICKSTART_CHANGED,
                "kickstart content changed: these lines run as root at every install",
                tuple(kickstart_lines),
            )
        )
    return tuple(risks)


def _reinstall(a: Plan, b: Plan) -> tuple[Risk, ...]:
    """Hosts BASE has that HEAD newly marks `reinstall`: their next PXE boot wipes them."""
    before = {h.name: h.reinstall for h in a.hosts}
    marked = [h.name for h in b.hosts if h.reinstall and before.get(h.name) is False]
    if not marked:
        return ()
    what = f"{len(marked)} existing host(s) marked for reinstall: the next PXE boot wipes them"
    return (Risk(RiskKind.REINSTALL, what, tuple(sorted(marked))),)


def _flow_control(a: Plan, b: Plan) -> tuple[Risk, ...]:
    """Networks whose RoCE class (rdma: roce, its roce: block) differs between the sides: the
    switches reload their QoS and the hosts set their NICs one by one, and until every end of
    the network has the new class, the links between changed and unchanged ends disagree."""
    before = {q.network: q for q in [n.qos for n in a.roce.nics] + [p.qos for p in a.roce.ports]}
    after = {q.network: q for q in [n.qos for n in b.roce.nics] + [p.qos for p in b.roce.ports]}
    items = [
        f"{net}: {_roce(before.get(net))} → {_roce(after.get(net))}"
        for net in sorted(before.keys() | after.keys())
        if before.get(net) != after.get(net)
    ]
    if not items:
        return ()
    what = "RoCE flow control changed: roll it to every switch and host of the network together"
    return (Risk(RiskKind.FLOW_CONTROL, what, tuple(items)),)


def _roce(q: RoceQos | None) -> str:
    if q is None:
        return "(no RoCE)"
    ecn = "ECN" if q.ecn else "no ECN"
    return f"PFC on {q.priority}, DSCP {q.dscp}, CNP {q.cnp_priority}/{q.cnp_dscp}, {ecn}"


def _shown(value: object) -> str:
    return "(none)" if value is None else str(value)


# --- JSON -----------------------------------------------------------------------------------


def _object(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dataclass as `asdict` makes it, an error's location and a cable's end as objects too
    (named tuples, which `asdict` keeps and JSON would write as lists)."""
    return {k: v._asdict() if isinstance(v, (Location, CableEnd)) else v for k, v in fields}


def to_json(report: DiffReport) -> str:
    """The report as JSON (schema 2): sorted keys, two-space indent, final newline."""
    body = {
        "schema": SCHEMA,
        "compiles": report.compiles,
        "changed": report.changed,
        **asdict(report, dict_factory=_object),
    }
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
