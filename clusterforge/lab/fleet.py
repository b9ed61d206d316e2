"""A fleet: every host's probe outputs and the fabric scan, as the real commands print
them, rendered from `generated/expected/` and written in the replay layout of
`audits/collect.py`, with hooks to inject drift.

``Fleet.load(generated)`` starts from a fleet that matches its expectations exactly. Drift is
injected by changing a host's ``state`` (a copy of its contract: ``versions``, ``routes``,
``interfaces``, ``ib_ports``) or through the hooks (``unreachable``, ``fail``, ``xid``,
``nvlink_down``, ``ecc``, ``swap_far_ends``, ``degrade``, ``unplug``, ``unload``,
``pcie_path``); GPUDirect's probes render from the contract's ``gpudirect``; ``record(folder)``
writes the recording. The output shapes are those of ``tests/fixtures/<probe>/``, and the
lab's SSH hosts will answer from the same renderer (``Fleet.outputs(host)``).

Identifiers the contract does not hold (GPU serials and UUIDs, bus IDs, LIDs) are derived from
the host name, so a recording is the same every time. CA node GUIDs are port GUID - 1, as
ibsim makes them, so an audit matching CAs by node GUID would fail on it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audits.compare import probe_arguments
from audits.versions import leading
from compiler import output, pipeline
from contract import Deploy, Host
from contract.ib import LANE_GBPS

COLLECTED_AT = "2026-05-04T06:00:00+00:00"
_BUS_IDS = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")


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
    units: dict[str, tuple[str, str]] = field(default_factory=dict)  # unit -> (active, enabled)
    unloaded: set[str] = field(default_factory=set)  # kernel modules of the deploy map not loaded
    paths: dict[int, str] = field(default_factory=dict)  # GPU -> its path to the HCA now
    memory_mib: int | None = None  # what slurmd -C sees, when not what the model installs

    @classmethod
    def of(cls, contract: dict[str, Any]) -> HostState:
        """A host whose files and units are exactly its deploy map's."""
        deploy = contract.get("deploy", {})
        # A file checked for presence only has no planned digest: any stands for its bytes.
        files = {
            f["path"]: f["sha256"] or _digest("deployed", f["path"])
            for f in deploy.get("files", ())
        }
        units = dict.fromkeys(deploy.get("units", ()), ("active", "enabled"))
        return cls(contract, files=files, units=units)


def as_state(contract: Host) -> dict[str, Any]:
    """A host's contract as the JSON the fleet plays and faults edit, its deploy map under
    "deploy" (the fleet renders probe outputs from it)."""
    deploy = {"deploy": contract.deploy.as_dict()} if contract.deploy else {}
    return contract.as_dict() | deploy


def as_record(state: Mapping[str, Any]) -> Host:
    """The contract record of a host's state (faults applied): what the audit reads."""
    contract = Host.from_json({k: v for k, v in state.items() if k != "deploy"})
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

    @classmethod
    def load(cls, generated: Path) -> Fleet:
        """A fleet exactly as `generated/expected/` says."""
        hosts = {}
        for p in sorted((generated / "expected" / "hosts").glob("*.json")):
            contract = json.loads(p.read_text(encoding="utf-8"))
            placed = generated / "deploy" / p.name
            if placed.is_file():  # as audits/expected.py reads it
                contract["deploy"] = json.loads(placed.read_text(encoding="utf-8"))
            hosts[p.stem] = HostState.of(contract)
        fabric = json.loads((generated / "expected" / "fabric.json").read_text(encoding="utf-8"))
        cables = {
            c["id"]: copy.deepcopy(c) for c in fabric["cables"] if c["lifecycle"] == "installed"
        }
        switches = {s["name"]: dict(s) for s in fabric.get("switches", [])}
        return cls(hosts, cables, switches=switches)

    # -- hooks -----------------------------------------------------------------------------

    def set_switch_firmware(self, switch: str, firmware: str | None) -> None:
        """A switch running `firmware`; None: one mlxfwmanager does not list."""
        self.switches[switch]["firmware"] = firmware

    def mlxfwmanager(self) -> str:
        """`mlxfwmanager --query` on the fabric host: its own HCA, then every switch in-band."""
        blocks = ["Querying Mellanox devices firmware ...\n"]
        devices = [("ConnectX6", "/dev/mst/mt4123_pciconf0", "0c42a10300000000", "20.39.1002")]
        devices += [
            ("Quantum", f"/dev/mst/SW_MT54000_{name}_lid-0x{_lid(s['guid']):04x}",
             s["guid"][2:], s["firmware"])
            for name, s in sorted(self.switches.items())
            if s["firmware"] is not None
        ]  # fmt: skip
        for n, (kind, device, guid, firmware) in enumerate(devices, 1):
            blocks.append(
                f"Device #{n}:\n----------\n\n  Device Type:      {kind}\n"
                f"  PCI Device Name:  {device}\n  Base GUID:        {guid}\n"
                f"  Versions:         Current        Available     \n"
                f"     FW             {firmware}   N/A           \n\n"
                "  Status:           No matching image found\n"
            )
        return "\n".join(blocks)

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

    def edit_file(self, host: str, path: str) -> None:
        """Someone changed a deployed file by hand."""
        self.hosts[host].files[path] = _digest("edited", host, path)

    def remove_file(self, host: str, path: str) -> None:
        del self.hosts[host].files[path]

    def set_unit(self, host: str, unit: str, active: str, enabled: str) -> None:
        self.hosts[host].units[unit] = (active, enabled)

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
        return probe_arguments(as_record(self.hosts[host].state))

    # -- rendering -------------------------------------------------------------------------

    def outputs(self, host: str) -> dict[str, str]:
        """Every probe's output on `host`, by probe key."""
        h = self.hosts[host]
        s = h.state
        v = s["versions"]
        out = {
            "uname_r": f"{v['kernel']}\n",
            "dmidecode_bios": f"{v['bios']}\n",
            "ipmitool_mc_info": _ipmitool(leading(v["bmc"], 2)),
            "ip_addr": _ip_addr(s),
            "ip_route": _ip_route(s),
        }
        if "ofed" in v:  # a host with an HCA, which runs MLNX_OFED
            out["ofed_info"] = f"MLNX_OFED_LINUX-{v['ofed']}:\n"
        for iface in s["interfaces"]:
            if iface["mac"] is None and "nic_firmware" in v:
                out[f"ethtool_i@{iface['name']}"] = _ethtool(v, host)
        if s["ib_ports"]:
            out["ibstat"] = _ibstat(s)
        if s["gpus"] is not None:
            out |= _gpus(h, host)
        if "gpudirect" in s:
            out |= _gpudirect(h)
        asked = self.arguments(host)
        if "sha256sum" in asked:
            hashed = set(asked["sha256sum"])
            out["sha256sum"] = "".join(
                f"{sha}  {path}\n" for path, sha in h.files.items() if path in hashed
            )
        if "file_exists" in asked:
            present = set(asked["file_exists"])
            out["file_exists"] = "".join(f"{path}\n" for path in h.files if path in present)
        if "slurm" in s:
            out["slurmd_c"] = _slurmd_c(host, s["slurm"], h.memory_mib)
        if "slurm_controller" in s:
            out["sinfo_r"] = self._sinfo_r(s["slurm_controller"])
        if h.units:
            out["systemctl_show"] = "\n".join(
                f"Id={unit}\nLoadState=loaded\nActiveState={active}\nUnitFileState={enabled}\n"
                for unit, (active, enabled) in h.units.items()
            )
        return out | h.overrides

    def _sinfo_r(self, controller: dict[str, Any]) -> str:
        """The controller's nodes held out of work: the spares, drained as planned, and
        whatever `drain` added, in the probe's fixed format."""
        held = {
            name: ("drained", "slurm", controller["spare_reason"])
            for name, node in controller["nodes"].items()
            if node["spare"]
        } | self.held
        return "".join(
            f"{name},{state},{user},{_SLURM_SINCE},{reason}\n"
            for name, (state, user, reason) in sorted(held.items())
        )

    def ibnetdiscover(self) -> str:
        """The fabric as `ibnetdiscover` prints it, cabled as `cables` says now."""
        owner = {
            p["port_guid"]: (name, p["device"])
            for name, h in self.hosts.items()
            for p in h.state["ib_ports"]
        }
        nodes: dict[str, dict[str, Any]] = {}  # node GUID -> {desc, kind, ports{port: line}}
        for cable in self.cables.values():
            ends = [_node(cable[s], owner) for s in ("a", "b")]
            for node in ends:
                nodes.setdefault(node["guid"], {**node, "ports": {}})
            lids = {node["guid"]: _lid(node["guid"]) for node in ends}
            for this, that in ((ends[0], ends[1]), (ends[1], ends[0])):
                nodes[this["guid"]]["ports"][this["port"]] = _port_line(
                    this, that, lids, cable["rate"]
                )
        blocks = ["#\n# Topology file: generated by clusterforge/lab/fleet.py\n#\n"]
        for guid in sorted(nodes, key=lambda g: (nodes[g]["kind"] != "Switch", g)):
            blocks.append(_block(nodes[guid], _lid(guid)))
        return "\n".join(blocks)

    def record(self, folder: Path) -> Path:
        """Write the recording (audits/collect.py layout) into `folder`; returns it."""
        (folder / "fabric").mkdir(parents=True, exist_ok=True)
        meta = {"schema": 1, "collected_at": self.collected_at}
        (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        (folder / "fabric" / "ibnetdiscover.txt").write_text(self.ibnetdiscover(), encoding="utf-8")
        if self.switches:
            (folder / "fabric" / "mlxfwmanager.txt").write_text(self.mlxfwmanager(), "utf-8")
        for name, h in self.hosts.items():
            where = folder / "hosts" / name
            where.mkdir(parents=True, exist_ok=True)
            if h.unreachable is not None:
                status = {"status": "unreachable", "reason": h.unreachable}
                (where / "status.json").write_text(json.dumps(status), encoding="utf-8")
                continue
            if h.failed:
                (where / "status.json").write_text(json.dumps({"failed": h.failed}), "utf-8")
            for key, text in self.outputs(name).items():
                if key not in h.failed:
                    (where / f"{key}.txt").write_text(text, encoding="utf-8")
        return folder


_SLURM_SINCE = "2026-05-04T05:00:00"


def _seen_memory(slurm: dict[str, Any]) -> int:
    """What slurmd -C shows of the installed memory: less the kernel's share (a 64th here,
    about what a 1 TiB server shows), never below slurm.conf's RealMemory."""
    installed: int = slurm["memory_mib"]
    return max(int(slurm["real_memory_mib"]), installed - installed // 64)


def _slurmd_c(host: str, slurm: dict[str, Any], memory_mib: int | None) -> str:
    memory = _seen_memory(slurm) if memory_mib is None else memory_mib
    return (
        f"NodeName={host} CPUs={slurm['cpus']} Boards=1 SocketsPerBoard={slurm['sockets']} "
        f"CoresPerSocket={slurm['cores_per_socket']} ThreadsPerCore={slurm['threads_per_core']} "
        f"RealMemory={memory}\nUpTime=12-04:31:10\n"
    )


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def _rate_gbps(rate: str) -> int:
    match = re.fullmatch(r"([0-9]+)x([A-Z]+)", rate)
    assert match, rate
    return int(int(match[1]) * LANE_GBPS[match[2]])


def _ipmitool(revision: str) -> str:
    return (
        "Device ID                 : 32\n"
        "Device Revision           : 1\n"
        f"Firmware Revision         : {revision}\n"
        "IPMI Version              : 2.0\n"
        "Manufacturer ID           : 10876\n"
        "Manufacturer Name         : Supermicro\n"
        "Product ID                : 6929 (0x1b11)\n"
        "Product Name              : Unknown (0x1B11)\n"
        "Device Available          : yes\n"
        "Provides Device SDRs      : no\n"
        "Additional Device Support :\n"
        "    Sensor Device\n"
        "    SEL Device\n"
        "    FRU Inventory Device\n"
        "Aux Firmware Rev Info     : \n"
        "    0x00\n"
        "    0x00\n"
        "    0x00\n"
        "    0x00\n"
    )


def _ethtool(v: dict[str, str], host: str) -> str:
    return (
        "driver: mlx5_core[ib_ipoib]\n"
        f"version: {v['ofed'].rsplit('.', 1)[0]}\n"
        f"firmware-version: {v['nic_firmware']} ({v.get('nic_psid', 'MT_0000000000')})\n"
        "expansion-rom-version: \n"
        f"bus-info: 0000:{_digest(host, 'bus')[:2]}:00.0\n"
        "supports-statistics: yes\n"
        "supports-test: yes\n"
        "supports-eeprom-access: no\n"
        "supports-register-dump: no\n"
        "supports-priv-flags: yes\n"
    )


def _ip_addr(s: dict[str, Any]) -> str:
    lo = {
        "ifindex": 1,
        "ifname": "lo",
        "flags": ["LOOPBACK", "UP", "LOWER_UP"],
        "mtu": 65536,
        "operstate": "UNKNOWN",
        "link_type": "loopback",
        "address": "00:00:00:00:00:00",
        "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host"}],
    }
    items = [lo]
    for index, iface in enumerate(s["interfaces"], 2):
        local, prefix = iface["address"].split("/")
        ib = iface["mac"] is None
        items.append(
            {
                "ifindex": index,
                "ifname": iface["name"],
                "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                "mtu": iface["mtu"],
                "operstate": "UP",
                "link_type": "infiniband" if ib else "ether",
                "address": _ipoib_hwaddr(s) if ib else iface["mac"],
                "addr_info": [
                    {"family": "inet", "local": local, "prefixlen": int(prefix), "scope": "global"}
                ],
            }
        )
    return json.dumps(items, separators=(",", ":")) + "\n"


def _ipoib_hwaddr(s: dict[str, Any]) -> str:
    guid = s["ib_ports"][0]["port_guid"][2:] if s["ib_ports"] else "0" * 16
    raw = "00000029fe800000000000" + guid[:16]
    return ":".join(raw[i : i + 2] for i in range(0, 40, 2))


def _ip_route(s: dict[str, Any]) -> str:
    source = {i["name"]: i["address"].split("/")[0] for i in s["interfaces"]}
    metric = {i["name"]: 100 + n for n, i in enumerate(s["interfaces"])}
    items = []
    for r in s["routes"]:
        item: dict[str, Any] = {"dst": r["dst"]}
        if "gateway" in r:
            item |= {"gateway": r["gateway"], "dev": r["dev"], "protocol": "static"}
        else:
            item |= {"dev": r["dev"], "protocol": "kernel", "scope": "link"}
            item["prefsrc"] = source.get(r["dev"], "")
        item |= {"metric": metric.get(r["dev"], 100), "flags": []}
        items.append(item)
    return json.dumps(items, separators=(",", ":")) + "\n"


def _ibstat(s: dict[str, Any]) -> str:
    blocks = []
    for p in s["ib_ports"]:
        node = f"0x{int(p['port_guid'], 16) - 1:016x}"
        blocks.append(
            f"CA '{p['device']}'\n"
            "\tCA type: MT4123\n"
            "\tNumber of ports: 1\n"
            f"\tFirmware version: {s['versions'].get('nic_firmware', '20.39.1002')}\n"
            "\tHardware version: 0\n"
            f"\tNode GUID: {node}\n"
            f"\tSystem image GUID: {node}\n"
            f"\tPort {p['port']}:\n"
            f"\t\tState: {p['state']}\n"
            f"\t\tPhysical state: {'LinkUp' if p['state'] == 'Active' else 'Polling'}\n"
            f"\t\tRate: {p['rate']}\n"
            f"\t\tBase lid: {_lid(node)}\n"
            "\t\tLMC: 0\n"
            "\t\tSM lid: 1\n"
            "\t\tCapability mask: 0x2651e848\n"
            f"\t\tPort GUID: {p['port_guid']}\n"
            "\t\tLink layer: InfiniBand\n"
        )
    return "".join(blocks)


def _gpus(h: HostState, host: str) -> dict[str, str]:
    s = h.state
    v = s["versions"]
    g = s["gpus"]
    ids = [
        (
            f"00000000:{_BUS_IDS[i % len(_BUS_IDS)].upper()}:00.0",
            str(1323221000000 + int(_digest(host, i)[:6], 16)),
            "GPU-{}-{}-{}-{}-{}".format(*(_digest(host, "uuid", i)[a:b] for a, b in _UUID)),
        )
        for i in range(g["count"])
    ]
    csv = "".join(
        f"{i}, {g['model']}, {serial}, {uuid}, {v['vbios']}, {v['gpu_driver']}, {bus}\n"
        for i, (bus, serial, uuid) in enumerate(ids)
    )
    xml = (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        f"<nvidia_smi_log>\n\t<timestamp>Mon May  4 06:00:00 2026</timestamp>\n"
        f"\t<driver_version>{v['gpu_driver']}</driver_version>\n"
        f"\t<cuda_version>{v['cuda']}</cuda_version>\n"
        f"\t<attached_gpus>{g['count']}</attached_gpus>\n"
    )
    for bus, serial, uuid in ids:
        xml += (
            f'\t<gpu id="{bus}">\n\t\t<product_name>{g["model"]}</product_name>\n'
            f"\t\t<serial>{serial}</serial>\n\t\t<uuid>{uuid}</uuid>\n"
            f"\t\t<vbios_version>{v['vbios']}</vbios_version>\n"
            f"\t\t<pci>\n\t\t\t<pci_bus_id>{bus}</pci_bus_id>\n\t\t</pci>\n\t</gpu>\n"
        )
    xml += "</nvidia_smi_log>\n"
    nvlink = ""
    for i, (_bus, _serial, uuid) in enumerate(ids):
        nvlink += f"GPU {i}: {g['model']} (UUID: {uuid})\n"
        down = h.inactive_nvlinks.get(i, 0)
        for link in range(g["nvlinks_per_gpu"]):
            nvlink += f"\t Link {link}: {'<inactive>' if link < down else '25 GB/s'}\n"
    ecc = "".join(
        f"{i}, {h.ecc.get(i, (0, 0))[0]}, {h.ecc.get(i, (0, 0))[1]}\n" for i in range(g["count"])
    )
    log = (
        f"May 04 05:40:01 {host} kernel: Linux version {v['kernel']} (mockbuild@rockylinux.org)\n"
        f"May 04 05:40:14 {host} kernel: nvidia-nvlink: Nvlink Core is being initialized\n"
        f"May 04 05:40:15 {host} kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  "
        f"{v['gpu_driver']}\n"
    )
    for gpu, code, message in h.xid:
        pci = ids[gpu][0].lower()[4:-2]
        log += (
            f"May 04 05:51:12 {host} kernel: NVRM: Xid (PCI:{pci}): {code}, pid=4821, "
            f"name=python, {message}\n"
        )
    return {
        "nvidia_smi_gpus": csv,
        "nvidia_smi_xml": xml,
        "nvidia_smi_nvlink": nvlink,
        "nvidia_smi_ecc": ecc,
        "xid": log,
    }


_UUID = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))


def _gpudirect(h: HostState) -> dict[str, str]:
    """/etc/nccl.conf, `lsmod` and `nvidia-smi topo -m` as the host shows them now."""
    s = h.state
    conf = "# /etc/nccl.conf\n" + "".join(f"{k}={v}\n" for k, v in s["gpudirect"]["nccl"].items())
    modules = [
        m.replace("-", "_")
        for m in s.get("deploy", {}).get("kernel_modules", ())
        if m not in h.unloaded
    ]
    lsmod = "Module                  Size  Used by\n" + "".join(
        f"{m:<19} {16384 + 4096 * n:>8}  0\n" for n, m in enumerate([*modules, "ib_core"])
    )
    count = s["gpus"]["count"]
    near = {a["gpu"]: (a["hca"], a["path"]) for a in s["gpudirect"]["affinity"]}
    hcas = sorted({hca for hca, _ in near.values()}) or [p["device"] for p in s["ib_ports"]]
    links = s["gpus"]["nvlinks_per_gpu"]
    head = (
        "\t"
        + "\t".join([*(f"GPU{i}" for i in range(count)), *hcas])
        + "\tCPU Affinity\tNUMA Affinity\n"
    )
    rows = []
    for i in range(count):
        cells = [" X " if j == i else f"NV{links}" for j in range(count)]
        for hca in hcas:
            planned = near.get(i, (hca, "SYS"))
            cells.append(h.paths.get(i, planned[1] if planned[0] == hca else "SYS"))
        numa = 0 if i < count // 2 else 1
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{numa * 32}-{numa * 32 + 31}\t{numa}\n")
    legend = "\nLegend:\n\n  X    = Self\n  PXB  = Connection traversing multiple PCIe bridges\n"
    return {"nccl_conf": conf, "lsmod": lsmod, "nvidia_smi_topo": head + "".join(rows) + legend}


def _lid(guid: str) -> int:
    return 1 + int(_digest("lid", guid)[:4], 16) % 40000


def _node(end: dict[str, Any], owner: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """One end of a cable as ibnetdiscover sees its node: a CA behind a host port GUID."""
    if end["guid"] in owner:
        host, device = owner[end["guid"]]
        node = f"0x{int(end['guid'], 16) - 1:016x}"
        return {
            "guid": node,
            "port": end["port"],
            "port_guid": end["guid"],
            "kind": "Ca",
            "desc": f"{host} {device}",
        }
    return {
        "guid": end["guid"],
        "port": end["port"],
        "port_guid": None,
        "kind": "Switch",
        "desc": f"MF0;{end['name']}:MQM8700/U1",
    }


def _port_line(this: dict[str, Any], that: dict[str, Any], lids: dict[str, int], rate: str) -> str:
    remote = f'"{"H" if that["kind"] == "Ca" else "S"}-{that["guid"][2:]}"[{that["port"]}]'
    if this["kind"] == "Ca":
        local = f"[{this['port']}]({int(this['port_guid'], 16):x}) "
        return (
            f'{local}\t{remote}\t\t# lid {lids[this["guid"]]} lmc 0 "{that["desc"]}" '
            f"lid {lids[that['guid']]} {rate}"
        )
    if that["kind"] == "Ca":
        remote += f"({int(that['port_guid'], 16):x}) "
    return f'[{this["port"]}]\t{remote}\t\t# "{that["desc"]}" lid {lids[that["guid"]]} {rate}'


def _block(node: dict[str, Any], lid: int) -> str:
    guid = node["guid"]
    if node["kind"] == "Switch":
        nports = max(40, *node["ports"])
        head = (
            f"vendid=0x2c9\ndevid=0xd2f0\nsysimgguid={guid}\nswitchguid={guid}({guid[2:]})\n"
            f'Switch\t{nports} "S-{guid[2:]}"\t\t# "{node["desc"]}" '
            f"enhanced port 0 lid {lid} lmc 0\n"
        )
    else:
        head = (
            f"vendid=0x2c9\ndevid=0x101b\nsysimgguid={guid}\ncaguid={guid}\n"
            f'Ca\t1 "H-{guid[2:]}"\t\t# "{node["desc"]}"\n'
        )
    return head + "".join(node["ports"][p] + "\n" for p in sorted(node["ports"]))


def compile_reference(repo: Path, into: Path) -> Path:
    """Compile `repo`'s cluster/ into `into/generated/` (never into the repository itself);
    returns `into`, a folder to pass as `-C` to the audit."""
    output.write(into / "generated", pipeline.compile_repo(repo).files)
    return into
