"""`report.md`: the report for people and pull requests, summary first, fleet-folded.

Hosts that share a fact are one line, their names compacted (`gpu[017,042,101]`), so a drift
on 120 hosts reads as one row: versions as "121/124 hosts OFED 23.10-1.1.9.0;
gpu[017,042,101] on 5.8-1.0.1.1", findings grouped by what differs. Given the previous run
(`history`), it leads with what changed since. Pure: report in, text out.

Everything a host printed (observed values, messages, reasons, names a fabric scan found) is
shown as a code span, so no host can add Markdown or HTML to a report or to the issue that
quotes it: no links, images, mentions, or a forged end of the table.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from audits.model import FABRIC, HostEntry, Status
from audits.report import Report
from common.hostlist import compact
from contract import Kind

LABELS = {
    "bios": "BIOS",
    "bmc": "BMC",
    "nic_firmware": "NIC firmware",
    "nic_psid": "NIC PSID",
    "vbios": "VBIOS",
    "gpu_driver": "GPU driver",
    "cuda": "CUDA",
    "ofed": "OFED",
    "kernel": "kernel",
}
_UNCOLLECTED = ("unreachable", "error")


def render(report: Report) -> str:
    """The whole report as Markdown."""
    parts = [
        _headline(report),
        changes(report),
        _summary(report),
        _versions(report["hosts"]),
        _findings(report),
        _fabric(report),
        _remedies(report),
        _uncollected(report["hosts"]),
        _skipped(report["hosts"]),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def _headline(report: Report) -> str:
    s = report["summary"]["status"]
    total = report["summary"]["hosts"]
    named = report["expectations"]
    commit = named["commit"][:12] if named["commit"] else "none (not in git)"
    source = (named["source_sha256"] or "unknown")[:12]
    title = f"# Drift audit: {s['ok']}/{total} hosts ok, {s['drift']} drift"
    lost = s["unreachable"] + s["error"]
    if lost:
        title += f", {lost} could not be collected"
    return (
        f"{title}\n\nExpectations: commit `{commit}`, cluster/ sha256 `{source}`. "
        f"State collected {report['collected_at']}. Exit code {report['exit_code']}."
    )


def changes(report: Report) -> str:
    """What changed since the previous run: new, resolved and flapping findings, and how
    many are still there; empty without a previous run to compare with."""
    h = report["history"]
    if h["previous"] is None:
        return ""
    messages = {(f["host"], f["check"], f["path"]): f["message"] for f in report["findings"]}
    head = (
        f"## Since the last run ({h['previous']})\n\n{len(h['new'])} new, "
        f"{len(h['resolved'])} resolved, {len(h['still'])} still there, "
        f"{len(h['flapping'])} flapping."
    )
    lines = [head]

    def listed(title: str, keys: list[Any], note: Any = None) -> None:
        if keys:
            lines.append(f"\n{title}:\n")
            for k in keys:
                where = _code(f"{k['host']} {k['path']}")
                said = messages.get((k["host"], k["check"], k["path"]))
                extra = f": {_code(said)}" if said else ""
                lines.append(f"- {where}{extra}{note(k) if note else ''}")

    since = {
        (s["key"]["host"], s["key"]["check"], s["key"]["path"]): s["since"] for s in h["still"]
    }
    listed("New", h["new"])
    listed("Resolved", h["resolved"])
    listed("Flapping (gone and back again)", h["flapping"])
    listed(
        "Still there",
        [s["key"] for s in h["still"]],
        lambda k: f" (since {since[(k['host'], k['check'], k['path'])]})",
    )
    return "\n".join(lines)


def _summary(report: Report) -> str:
    rows = ["| status | hosts | which |", "| --- | ---: | --- |"]
    by_status: dict[str, list[str]] = defaultdict(list)
    for entry in report["hosts"]:
        by_status[entry["status"]].append(entry["host"])
    for status in Status:  # not the dict's order: report.json stores keys sorted
        count = report["summary"]["status"][status.value]
        which = compact(by_status[status.value]) if status != Status.OK else ""
        rows.append(f"| {status.value} | {count} | {_cell(which)} |")
    fabric = report["fabric"]
    swaps = "; ".join(f"{one} and {two} look swapped" for one, two in fabric["swapped"])
    classes = (
        ("missing", fabric["missing"], ""),
        ("miswired", fabric["miswired"], f" ({swaps})" if swaps else ""),
        ("degraded", fabric["degraded"], ""),
        ("unexpected", fabric["unexpected"], ""),
    )
    counts = ", ".join(f"{len(ids)} {name}{note}" for name, ids, note in classes if ids)
    line = f"Fabric: {fabric['status']}, {len(fabric['checked'])} installed cables checked"
    return "\n".join(rows) + f"\n\n{line}" + (f"; {counts}." if counts else ".")


def _versions(hosts: list[HostEntry]) -> str:
    lines = []
    accepted = {(e["host"], a["key"]): a["until"] for e in hosts for a in e["accepted"]}
    for key, label in LABELS.items():
        # expected -> observed (None: as expected) -> hosts
        groups: dict[str, dict[str | None, list[str]]] = defaultdict(lambda: defaultdict(list))
        for entry in hosts:
            pair = entry["versions"].get(key)
            if pair is not None:
                seen = None if pair["state"] == "match" else pair["observed"] or "not reported"
                groups[pair["expected"]][seen].append(entry["host"])
        for expected, observed in sorted(groups.items()):
            total = sum(len(names) for names in observed.values())
            line = f"- {len(observed.get(None, []))}/{total} hosts {label} {expected}"
            others = sorted(
                ((v, n) for v, n in observed.items() if v is not None),
                key=lambda i: (-len(i[1]), i[0]),
            )
            for value, names in others:
                line += f"; {compact(names)} on {_code(value)}"
                until = sorted({accepted[(n, key)] for n in names if (n, key) in accepted})
                if until:
                    line += f" (rollout, accepted until {', '.join(until)})"
            lines.append(line)
    return "## Versions\n\n" + "\n".join(lines) if lines else ""


def _findings(report: Report) -> str:
    """Hosts that differ alike share a row; rows keep report.json's order (critical first,
    then by rack and U), each at the place of its first host."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for f in report["findings"]:
        if f["host"] != FABRIC:
            key = (
                f["severity"],
                f["kind"],
                f["check"],
                f["path"],
                _value(f["expected"]),
                _value(f["observed"]),
            )
            groups[key].append(f["host"])  # dicts keep the order of first appearance
    if not groups:
        return ""
    place = {e["host"]: (e["rack"], e["u"]) for e in report["hosts"]}
    rows = [
        "## Findings",
        "",
        "| severity | hosts | rack, U | kind | path | expected | observed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (severity, kind, _check, path, expected, observed), names in groups.items():
        where = _where(names, place)
        cells = (
            severity,
            _cell(compact(names)),
            _cell(where),
            kind,
            _code(path),
            expected,
            observed,
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _where(names: list[str], place: dict[str, tuple[str, int | None]]) -> str:
    """`r03 U10` for one host; a few hosts each so; many, their racks."""
    spots = [place[n] for n in names if n in place]
    if len(spots) <= 3:
        return ", ".join(f"{rack} U{u}" if u else rack for rack, u in spots)
    return "racks " + compact(sorted({rack for rack, _ in spots}))


# What to do about each kind of finding: the first step, not the whole runbook.
REMEDIES = {
    Kind.FIRMWARE: "flash the expected version (BIOS and BMC through the BMC, the NIC with "
    "mlxfwmanager); if the box is meant to differ, pin it in its rack file with a reason, "
    "or add a rollout in cluster/firmware.yaml while a ring upgrades",
    Kind.OFED: "reinstall MLNX_OFED at the fleet version (cluster/firmware.yaml software.ofed) "
    "and reboot; mixed OFED versions degrade the whole fabric",
    Kind.DRIVER: "drain the node, install the expected NVIDIA driver and CUDA from the site "
    "repository, reboot, resume",
    Kind.KERNEL: "boot the expected kernel (grubby --set-default) or reinstall the node from "
    "the provisioning server",
    Kind.ROUTE: "reapply the node's generated route files (clusterforge bundle --host H) and "
    "reload NetworkManager; a route added by hand is lost at the next reboot",
    Kind.ADDRESS: "reapply the generated NetworkManager keyfile; a different MAC means a "
    "replaced NIC: put the new MAC in the rack file",
    Kind.HOST_KEY: "a changed key: do not trust the host until you know why (reinstalled, "
    "replaced, or a machine in the middle); compare the fingerprint on its console, then "
    "update AUDIT_KNOWN_HOSTS; an unknown key: vet the new host the same way and add it",
    Kind.IB_PORT: "check the port with ibstat, reseat or replace the cable or the HCA; a port "
    "down or below its rate slows every job that spans it",
    Kind.CABLE: "re-patch the cable to its planned port (its label names both ends: "
    "clusterforge labels --only ID), or replace it when it trains below its rate",
    Kind.GPU: "drain the node and open a hardware ticket: a GPU off the bus, a lost NVLink or "
    "ECC errors past the threshold do not heal by themselves",
    Kind.FILE: "redeploy the host's bundle (clusterforge bundle --host H) and reload the "
    "unit the deploy map names; a file edited by hand on the host is lost at the next deploy",
    Kind.SERVICE: "start and enable the unit (systemctl enable --now UNIT), and read its "
    "journal for why it stopped; a service that should not run there belongs off its role",
    Kind.SLURM: "read the reason: a node slurmd sees with fewer CPUs or less memory than planned "
    "has lost a DIMM or a CPU, or runs with SMT off (fix the hardware or the model, then "
    "scontrol update nodename=N state=resume); a node drained for a GRES mismatch needs its "
    "GPUs (nvidia-smi) and /etc/slurm/gres.conf checked; a drain by a person is repair work in "
    "progress; a failed node waits for a spare (docs/howto.md)",
    Kind.GPUDIRECT: "redeploy the bundle (/etc/nccl.conf), bring the HCA it names Active, "
    "modprobe nvidia-peermem; a GPU farther from its HCA sits in the wrong slot or riser: "
    "until fixed, NCCL runs over TCP or through host memory, slowly",
    Kind.BGP: "on the switch, `vtysh -c 'show bgp neighbor PORT'` says why the session is not "
    "Established: the port or its cable down (the LLDP and link state of both ends), the far "
    "switch's frr.conf without the neighbour, or FRR stopped; a session up with no prefixes "
    "means the far end announces nothing (its frr.conf `network` lines, its SVIs down)",
    Kind.CONFIG: "FRR runs a line its frr.conf does not hold (or lacks one it does): a change "
    "made live in vtysh and never written to the file, lost at the next reload or reboot. "
    "Keep it: put it in cluster/, compile and deploy; drop it: `frr-reload.py --reload "
    "/etc/frr/frr.conf` brings FRR back to the file",
}


def _remedies(report: Report) -> str:
    kinds = list(dict.fromkeys(f["kind"] for f in report["findings"]))
    if not kinds:
        return ""
    lines = [f"- **{k}**: {REMEDIES[Kind(k)]}" for k in kinds if k in REMEDIES]
    return "## What to do\n\n" + "\n".join(lines)


def _fabric(report: Report) -> str:
    found = [f for f in report["findings"] if f["host"] == FABRIC]
    if not found:
        return ""
    rows = [
        "## Fabric",
        "",
        "| cable | expected | observed | problem |",
        "| --- | --- | --- | --- |",
    ]
    for f in found:
        cells = (
            _code(f["path"]),
            _value(f["expected"]),
            _value(f["observed"]),
            _code(f["message"]),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _uncollected(hosts: list[HostEntry]) -> str:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in hosts:
        if entry["status"] in _UNCOLLECTED:
            groups[(entry["status"], entry["reason"] or "")].append(entry["host"])
    if not groups:
        return ""
    rows = ["## Could not collect", "", "| hosts | status | reason |", "| --- | --- | --- |"]
    for (status, reason), names in sorted(groups.items()):
        rows.append(f"| {_cell(compact(names))} | {status} | {_code(reason)} |")
    return "\n".join(rows)


def _skipped(hosts: list[HostEntry]) -> str:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in hosts:
        if entry["status"] == "unreachable":
            continue  # listed above; every check of theirs is skipped for that one reason
        for result in entry["checks"]:
            if result["outcome"] == "skipped":
                groups[(result["check"], result["reason"] or "")].append(entry["host"])
    if not groups:
        return ""
    rows = ["## Skipped checks", "", "| hosts | check | reason |", "| --- | --- | --- |"]
    for (check, reason), names in sorted(groups.items()):
        rows.append(f"| {_cell(compact(names))} | {check} | {_code(reason)} |")
    return "\n".join(rows)


def _value(value: Any) -> str:
    """Short text, not JSON: `address 10.60.3.11/24, mtu 9000`; lists joined with `; `."""
    if value is None:
        return "-"
    return _code(_plain(value))


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in sorted(value.items()))
    if isinstance(value, list | tuple):
        return "; ".join(_plain(v) for v in value) if value else "none"
    return str(value)


def _code(text: str) -> str:
    """`text` as one code span, whatever it holds: inside one, Markdown and HTML are only
    text. The fence is longer than any run of backticks in it; a pipe is escaped (GFM ends a
    table cell at one even inside code), and line breaks become spaces."""
    text = _cell(text.replace("\r", " "))
    if not text.strip():
        return "-" if not text else f"`{text}`"
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: str) -> str:
    # A pipe would end the table cell; a newline would end the table.
    return text.replace("|", "\\|").replace("\n", " ")
