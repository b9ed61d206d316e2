"""A fleet: every host's probe outputs and the fabric scan, as the real commands print
them, rendered from `generated/expected/` and written in the replay layout of
`audits/collect.py`, with hooks to inject drift.

``Fleet.load(generated)`` starts from a fleet that matches its expectations exactly. Drift is
injected by changing a host's ``state`` (a copy of its contract: ``versions``, ``routes``,
``interfaces``, ``ib_ports``) or through the hooks (``unreachable``, ``fail``, ``xid``,
``nvlink_down``, ``ecc``, ``swap_far_ends``, ``degrade``, ``unplug``, ``swap_ethernet``,
``unplug_ethernet``, ``frr_live``, ``unload``, ``pcie_path``); GPUDirect's probes render
from the contract's ``gpudirect``, LLDP's from its ``ethernet`` (a host's NICs, a switch's
ports to other switches), FRR's running configuration from a switch's ``running_config``;
``record(folder)`` writes the recording. Each host probe's output is its module's renderer's
(``contract/probes/<probe>.py``, shaped as ``tests/fixtures/<probe>/``), given the host's
state and what its faults make it show (``Fleet.now``); the lab's SSH hosts answer from the
same (``Fleet.outputs(host)``). The fabric probes' renderers take the fabric as cabled now
(``Fleet.fabric_state``). The fleet keeps the fault mechanics; the renderers only print.

Identifiers the contract does not hold (GPU serials and UUIDs, bus IDs, LIDs) are derived from
the host name (``contract/probes/_ids.py``), so a recording is the same every time. CA node
GUIDs are port GUID - 1, as ibsim makes them, so an audit matching CAs by node GUID would fail
on it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audits.compare import host_probes, probe_arguments
from contract import Deploy, EthernetSwitch, Host, eos, probes
from contract.ib import LANE_GBPS
from contract.probes import Now
from contract.probes._ids import digest
from contract.switch import AUDITED_OS, EOS

COLLECTED_AT = "2026-05-04T06:00:00+00:00"
End = tuple[str, str]  # an Ethernet cable's end: (device, its port as LLDP names it)
FABRIC = "fabric"  # the subject the fabric probes render for


@dataclass
class HostState:
    """What one host runs; starts as its contract."""

    state: dict[str, Any]
    unreachable: str | None = None
    failed: dict[str, str] = field(default_factory=dict)  # probe key -> why it gave nothing
    xid: list[tuple[int, int, str]] = field(default_factory=list)  # (gpu, code, message)
    inactive_nvlinks: dict[int, int] = field(default_factory=dict)  # gpu -> links down
    ecc: dict[int, tuple[int, int]] = field(default_factory=dict)  # gpu -> (corr., uncorr.)
    overrides: dict[str, str] = field(default_factory=dict)  # probe key -> raw output
    files: dict[str, str] = field(default_factory=dict)  # deployed path -> its sha256 now
    texts: dict[str, str] = field(default_factory=dict)  # snapshotted path -> its text now
    units: dict[str, tuple[str, str]] = field(default_factory=dict)  # unit -> (active, enabled)
    unloaded: set[str] = field(default_factory=set)  # kernel modules of the deploy map not loaded
    paths: dict[int, str] = field(default_factory=dict)  # GPU -> its path to the HCA now
    memory_mib: int | None = None  # what slurmd -C sees, when not what the model installs
    bgp_down: set[str] = field(default_factory=set)  # a switch's sessions down, by port

    @classmethod
    def of(cls, contract: dict[str, Any], generated: Path | None = None) -> HostState:
        """A host whose files and units are exactly its deploy map's; the text of the files
        its snapshot keeps read from `generated` (their sources)."""
        deploy = contract.get("deploy", {})
        # A file checked for presence only has no planned digest: any stands for its bytes.
        files = {
            f["path"]: f["sha256"] or digest("deployed", f["path"]) for f in deploy.get("files", ())
        }
        texts = {
            f["path"]: (generated / f["source"]).read_text(encoding="utf-8")
            for f in deploy.get("files", ())
            if f.get("snapshot") and generated is not None
        }
        units = dict.fromkeys(deploy.get("units", ()), ("active", "enabled"))
        return cls(contract, files=files, texts=texts, units=units)


def as_state(contract: Host | EthernetSwitch) -> dict[str, Any]:
    """A host's (or switch's) contract as the JSON the fleet plays and faults edit, its deploy
    map under "deploy" (the fleet renders probe outputs from it)."""
    deploy = {"deploy": contract.deploy.as_dict()} if contract.deploy else {}
    return contract.as_dict() | deploy


def as_record(state: Mapping[str, Any]) -> Host:
    """The contract record of a host's state (faults applied): what the audit reads."""
    contract = Host.from_json({k: v for k, v in state.items() if k != "deploy"})
    deploy = state.get("deploy")
    return contract.with_deploy(Deploy.from_json(dict(deploy)) if deploy else None)


def as_switch_record(state: Mapping[str, Any]) -> EthernetSwitch:
    """The contract record of a switch's state, as `as_record` a host's."""
    contract = EthernetSwitch.from_json({k: v for k, v in state.items() if k != "deploy"})
    deploy = state.get("deploy")
    return contract.with_deploy(Deploy.from_json(dict(deploy)) if deploy else None)


@dataclass
class Fleet:
    hosts: dict[str, HostState]
    cables: dict[str, dict[str, Any]]  # installed cable ID -> {a, b, rate} as cabled now
    collected_at: str = COLLECTED_AT
    switches: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {guid, firmware}
    # Slurm nodes held out of work beyond the drained spares: node -> (state, user, reason)
    held: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # The Ethernet switches the audit logs into, by name: a Cumulus Linux one's files, units
    # and BGP; an EOS one's running-config (its `texts["running-config"]`).
    ethernet: dict[str, HostState] = field(default_factory=dict)

    @classmethod
    def load(cls, generated: Path) -> Fleet:
        """A fleet exactly as `generated/expected/` says."""
        hosts = {}
        for p in sorted((generated / "expected" / "hosts").glob("*.json")):
            contract = json.loads(p.read_text(encoding="utf-8"))
            placed = generated / "deploy" / p.name
            if placed.is_file():  # as audits/expected.py reads it
                contract["deploy"] = json.loads(placed.read_text(encoding="utf-8"))
            hosts[p.stem] = HostState.of(contract, generated)
        fabric = json.loads((generated / "expected" / "fabric.json").read_text(encoding="utf-8"))
        cables = {
            c["id"]: copy.deepcopy(c) for c in fabric["cables"] if c["lifecycle"] == "installed"
        }
        switches = {s["name"]: dict(s) for s in fabric.get("switches", [])}
        ethernet = {}
        for p in sorted((generated / "expected" / "switches").glob("*.json")):
            contract = json.loads(p.read_text(encoding="utf-8"))
            if contract["os"] not in AUDITED_OS:  # as audits/expected.py skips it
                continue
            placed = generated / "deploy" / p.name
            if placed.is_file():
                contract["deploy"] = json.loads(placed.read_text(encoding="utf-8"))
            ethernet[p.stem] = HostState.of(contract, generated)
            if contract["os"] == EOS:
                ethernet[p.stem].texts |= _running(contract, generated)
        return cls(hosts, cables, switches=switches, ethernet=ethernet)

    def _machine(self, name: str) -> HostState:
        """A host's state, or an Ethernet switch's."""
        return self.hosts[name] if name in self.hosts else self.ethernet[name]

    def record_of(self, name: str) -> Host | EthernetSwitch:
        state = self._machine(name).state
        return as_record(state) if name in self.hosts else as_switch_record(state)

    # -- hooks -----------------------------------------------------------------------------

    def set_switch_firmware(self, switch: str, firmware: str | None) -> None:
        """A switch running `firmware`; None: one mlxfwmanager does not list."""
        self.switches[switch]["firmware"] = firmware

    def set_version(self, hosts: list[str], key: str, value: str) -> None:
        for host in hosts:
            self.hosts[host].state["versions"][key] = value

    def drop_route(self, host: str, dst: str) -> None:
        routes = self.hosts[host].state["routes"]
        self.hosts[host].state["routes"] = [r for r in routes if r["dst"] != dst]

    def unreachable(self, host: str, reason: str) -> None:
        self.hosts[host].unreachable = reason

    def fail(self, host: str, key: str, reason: str) -> None:
        self.hosts[host].failed[key] = reason

    def swap_far_ends(self, one: str, two: str) -> None:
        """Exchange the `b` ends of two cables: both plugged into each other's port."""
        self.cables[one]["b"], self.cables[two]["b"] = self.cables[two]["b"], self.cables[one]["b"]

    def degrade(self, cable: str, rate: str) -> None:
        """Cable `cable` trains at `rate` (`4xEDR`); a host on it sees the lower rate too."""
        self.cables[cable]["rate"] = rate
        for end in (self.cables[cable]["a"], self.cables[cable]["b"]):
            host = self.hosts.get(end["name"])
            for port in host.state["ib_ports"] if host else ():
                if port["port_guid"] == end["guid"]:
                    port["rate"] = _rate_gbps(rate)

    def unplug(self, cable: str) -> None:
        """Cable `cable` is pulled: gone from the fabric, and a host on it sees its port Down."""
        for end in (self.cables[cable]["a"], self.cables[cable]["b"]):
            host = self.hosts.get(end["name"])
            for port in host.state["ib_ports"] if host else ():
                if port["port_guid"] == end["guid"]:
                    port["state"] = "Down"
        del self.cables[cable]

    def swap_ethernet(self, one: str, two: str) -> None:
        """Exchange one end each of two Ethernet cables (of one host or two, or switch
        uplinks): a host's NIC hears the other's planned switch port; between two switches,
        the switch holding both cables (else the one first by name) keeps its ports and the
        far ends trade places, and the switches at both ends hear it."""
        (xs, x), (ys, y) = self._cable(one), self._cable(two)
        (ax, bx), (ay, by) = self._oriented(x, y), self._oriented(y, x)
        joined = {ax: by, by: ax, ay: bx, bx: ay}
        for views, ends in ((xs, (ax, bx)), (ys, (ay, by))):
            for name, link in views:
                here = next(end for end in ends if end[0] == name)
                link["switch"], link["port"] = joined[here]

    def unplug_ethernet(self, cable: str) -> None:
        """Ethernet cable `cable` is pulled: the port at each of its ends hears no neighbour."""
        for m in (*self.hosts.values(), *self.ethernet.values()):
            if m.state.get("ethernet"):
                m.state["ethernet"] = [e for e in m.state["ethernet"] if e["cable"] != cable]

    def _cable(self, cable: str) -> tuple[list[tuple[str, dict[str, Any]]], list[End]]:
        """An Ethernet cable's views (each audited end's link record, by machine) and its two
        ends as (device, port as its LLDP names it)."""
        machines = (*self.hosts.items(), *self.ethernet.items())
        views = [
            (name, e)
            for name, m in machines
            for e in m.state.get("ethernet") or ()
            if e["cable"] == cable
        ]
        ends = {name: e["iface"] for name, e in views} | {e["switch"]: e["port"] for _, e in views}
        return views, sorted(ends.items())

    def _oriented(self, ends: list[End], other: list[End]) -> tuple[End, End]:
        """A cable's ends as (moved, kept): a host's NIC stays, as does a switch holding both
        cables; else the end first by name moves."""
        shared = {d for d, _ in ends} & {d for d, _ in other}
        kept = [e for e in ends if e[0] in self.hosts or e[0] in shared]
        b = kept[0] if kept else ends[1]
        return next(e for e in ends if e != b), b

    def edit_file(self, host: str, path: str, line: str = "# edited by hand") -> None:
        """Someone changed a deployed file by hand (on a host or a switch): `line` added at
        its end."""
        m = self._machine(host)
        m.files[path] = digest("edited", host, path)
        if path in m.texts:
            m.texts[path] += f"{line}\n"

    def remove_file(self, host: str, path: str) -> None:
        m = self._machine(host)
        del m.files[path]
        m.texts.pop(path, None)

    def edit_text(self, device: str, name: str, find: str, replace: str) -> None:
        """Someone changed what a device's snapshot keeps by hand (an EOS switch's
        running-config, `name` "running-config"): the first `find` replaced by `replace`."""
        texts = self._machine(device).texts
        assert find in texts[name], (device, name, find)
        texts[name] = texts[name].replace(find, replace, 1)

    def set_unit(self, host: str, unit: str, active: str, enabled: str) -> None:
        self._machine(host).units[unit] = (active, enabled)

    def bgp_down(self, switch: str, port: str) -> None:
        """The BGP session on `switch`'s routed `port` dropped (the link, or the far end)."""
        self.ethernet[switch].bgp_down.add(port)

    def frr_live(self, switch: str, line: str) -> None:
        """Someone set `line` in FRR live (vtysh `configure`), and never wrote it to
        frr.conf: the switch's running configuration holds it, its file does not. `line` is
        canonical (contract/probes/vtysh_running_config.py): `router bgp N > neighbor ...`."""
        self.ethernet[switch].state["running_config"].append(line)

    def unload(self, host: str, module: str) -> None:
        self.hosts[host].unloaded.add(module)

    def pcie_path(self, host: str, gpu: int, path: str) -> None:
        """GPU `gpu` reaches its HCA over `path` (a card moved to another slot)."""
        self.hosts[host].paths[gpu] = path

    def lose_memory(self, host: str, gib: int) -> None:
        """slurmd sees `gib` GiB less than the model installs (DIMMs failed or pulled)."""
        self.hosts[host].memory_mib = self.hosts[host].state["slurm"]["memory_mib"] - gib * 1024

    def drain(self, host: str, reason: str, user: str = "slurm", state: str = "drained") -> None:
        """Slurm holds `host` out of work with `reason` (sinfo on the controller says so)."""
        self.held[host] = (state, user, reason)

    def arguments(self, host: str) -> dict[str, tuple[str, ...]]:
        """What the audit passes to the probes that take arguments on `host`."""
        return probe_arguments(self.record_of(host))

    # -- rendering -------------------------------------------------------------------------

    def now(self, host: str) -> Now:
        """What `host` shows beyond its expected state: the renderers' view of its faults."""
        h = self._machine(host)
        return Now(
            arguments=self.arguments(host),
            files=dict(h.files),
            texts=dict(h.texts),
            units=dict(h.units),
            unloaded=frozenset(h.unloaded),
            xid=tuple(h.xid),
            inactive_nvlinks=dict(h.inactive_nvlinks),
            ecc=dict(h.ecc),
            paths=dict(h.paths),
            memory_mib=h.memory_mib,
            held=dict(self.held),
            bgp_down=frozenset(h.bgp_down),
        )

    def outputs(self, host: str) -> dict[str, str]:
        """Every host probe's output on `host`, by probe key: what each probe's renderer
        (contract/probes/) prints for it now, then the raw overrides."""
        h = self._machine(host)
        now = self.now(host)
        # A switch answers only its checks' probes: the hosts' renderers read a host's record.
        wanted = set(host_probes(self.record_of(host))) if host in self.ethernet else None
        out: dict[str, str] = {}
        for name, entry in probes.PROBES.items():
            if entry.render is None or entry.spec.scope == "fabric":
                continue
            if wanted is None or name in wanted:
                out |= entry.render(host, h.state, now)
        return out | h.overrides

    def fabric_state(self) -> dict[str, Any]:
        """The fabric as cabled now, what the fabric probes' renderers take: its installed
        cables and switches (as `expected/fabric.json` has them) and each HCA port's owner."""
        return {
            "cables": list(self.cables.values()),
            "switches": [s for _, s in sorted(self.switches.items())],
            "hcas": {
                p["port_guid"]: {"host": name, "device": p["device"]}
                for name, h in self.hosts.items()
                for p in h.state["ib_ports"]
            },
        }

    def fabric_outputs(self) -> dict[str, str]:
        """Every fabric probe's output, by probe key, rendered from `fabric_state`."""
        state = self.fabric_state()
        out: dict[str, str] = {}
        for entry in probes.PROBES.values():
            if entry.render is not None and entry.spec.scope == "fabric":
                out |= entry.render(FABRIC, state, Now())
        return out

    def record(self, folder: Path) -> Path:
        """Write the recording (audits/collect.py layout) into `folder`; returns it."""
        (folder / "fabric").mkdir(parents=True, exist_ok=True)
        meta = {"schema": 1, "collected_at": self.collected_at}
        (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        for key, text in self.fabric_outputs().items():
            (folder / "fabric" / f"{key}.txt").write_text(text, encoding="utf-8")
        for name in [*self.hosts, *self.ethernet]:
            self._record_one(folder, name)
        return folder

    def _record_one(self, folder: Path, name: str) -> None:
        h = self._machine(name)
        where = folder / "hosts" / name
        where.mkdir(parents=True, exist_ok=True)
        if h.unreachable is not None:
            status = {"status": "unreachable", "reason": h.unreachable}
            (where / "status.json").write_text(json.dumps(status), encoding="utf-8")
            return
        if h.failed:
            (where / "status.json").write_text(json.dumps({"failed": h.failed}), "utf-8")
        for key, text in self.outputs(name).items():
            if key not in h.failed:
                (where / f"{key}.txt").write_text(text, encoding="utf-8")


def _running(contract: Mapping[str, Any], generated: Path) -> dict[str, str]:
    """An EOS switch's running-config as it runs once its generated startup-config is loaded
    (what its deploy map places on flash): the same text, under its snapshot name."""
    files = contract.get("deploy", {}).get("files", ())
    source = next((f["source"] for f in files if f["path"] == eos.STARTUP), None)
    if source is None:
        return {}
    return {eos.RUNNING: (generated / source).read_text(encoding="utf-8")}


def _rate_gbps(rate: str) -> int:
    match = re.fullmatch(r"([0-9]+)x([A-Z]+)", rate)
    assert match, rate
    return int(int(match[1]) * LANE_GBPS[match[2]])
