"""A valid rail-optimised cluster, as a `cluster/` tree: for `init --rails` and the tests.

Pure, like `compiler.generate` (whose site, firmware and policy files it shares): parameters
in, `{path below cluster/: YAML text}` out, identities derived from rack and slot.
The layout is the DGX SuperPOD reference architecture's (examples/rails/README.md says
what was taken from it): scalable units of 32 eight-GPU servers, four 8U servers a rack in
eight racks, one NDR HCA per GPU, each rail on the unit's own QM9700 leaf (32 ports down, 32
up), the leaves of a unit in a network rack of their own, as many spines as the leaves'
uplinks fill (four a unit of eight rails), every leaf linked evenly to every spine
(two-tier, 1:1). The service hosts on the fabric take the
last unit's last server position, one rail leaf each (the reference architecture's 127
servers of four units, the 128th position given to the fabric's managers).
"""

from __future__ import annotations

from compiler.generate import (
    _AUDIT,
    _ETHERNET,
    _FIRMWARE,
    _PROVISIONING,
    _SERVICE_HOSTS,
    _SERVICES,
    _SERVICES_UNAUDITED,
    _SITE,
    _guid,
    _mac,
    _switch,
)
from compiler.load import Source, parse

LEAF_PORTS = 64  # qm9700: 32 twin-port OSFP cages
UPLINK_PORT = 33  # ports 1-32 face the unit's servers, 33-64 the spines
MIN_SPINES = 2  # one spine is a fabric with a single point of failure
MAX_UNITS = LEAF_PORTS // 8  # two-tier: a spine's 64 ports, one link from each leaf
NETWORK_RACK = 650  # + unit: its rail leaves; the spines' rack is NETWORK_RACK itself
SERVICE_RACK = 700
CX_OUI = "a088c2"

# The one-HCA generator's Ethernet address plan, then an IPoIB network per rail.
_RAIL_NOTE = """\
# One IPoIB network per rail, each its own IP subnet: eight interfaces in one subnet would
# answer each other's ARP (and leave by whichever the kernel picks); one subnet a rail keeps
# each interface's traffic on its own HCA. Rail k's leaf is found by the scalable unit
# (fabric.yaml), not the rack.
"""

_RAIL_NETWORK = """\
ib{k}:
  medium: infiniband
  cidr: 10.{octet}.0.0/14
  rack_prefix: 24
  interface_prefix: 14
  host_base: 10
  reserved: [[0, 9], [250, 255]]
  mtu: 4092
  firewall: trusted
  switch: leaf
"""

_GPU_MODEL = """\
servers:
  hgx-h100:
    vendor: Supermicro SYS-821GE-TNHR
    height_u: 8
    cpu_sockets: 2
    cpu_model: Intel Xeon Platinum 8480+
    cores_per_socket: 56
    threads_per_core: 2
    memory_gib: 2048
    gpus:
      {{count: 8, model: NVIDIA H100-SXM5-80GB, nvlinks_per_gpu: 18, max_corrected_ecc: 100,
       gres_type: h100, cpu_affinity: [{{socket: 0, gpus: [0, 1, 2, 3]}}, {{socket: 1, gpus: [4, 5, 6, 7]}}]}}
    boot: uefi
    os_disks: ["/dev/disk/by-path/pci-0000:c1:00.0-nvme-1", "/dev/disk/by-path/pci-0000:c2:00.0-nvme-1"]
    bmc: bmc
    nics:
      - {{name: eno1, network: mgmt, speed_gbps: 1}}
      - {{name: ens2f0, network: storage, speed_gbps: 100}}
      # One 400G NDR HCA per GPU, rail k on mlx5_k: two GPUs and their two HCAs share a
      # PCIe switch, four switches, two under each socket.
{hcas}    affinity:
{affinity}"""

_HCA = (
    "      - {{name: ib{k}, network: ib{k}, speed_gbps: {gbps}, device: mlx5_{k}, port: 1, "
    "rail: {k}, numa_node: {numa}, pcie_switch: pex{switch}}}\n"
)

_OTHER_MODELS = """\
  svc-ib:
    vendor: Dell PowerEdge R660
    height_u: 1
    cpu_sockets: 2
    memory_gib: 512
    boot: uefi
    os_disks: ["/dev/disk/by-path/pci-0000:00:17.0-ata-1", "/dev/disk/by-path/pci-0000:00:17.0-ata-2"]
    bmc: bmc
    nics:
      - {name: eno1, network: mgmt, speed_gbps: 1}
      - {name: ens1f0, network: storage, speed_gbps: 100}
      - {name: ib0, network: ib0, speed_gbps: 400, device: mlx5_0, port: 1}
  svc-eth:
    vendor: Dell PowerEdge R660
    height_u: 1
    cpu_sockets: 2
    memory_gib: 256
    boot: uefi
    os_disks: ["/dev/disk/by-path/pci-0000:00:17.0-ata-1", "/dev/disk/by-path/pci-0000:00:17.0-ata-2"]
    bmc: bmc
    nics:
      - {name: eno1, network: mgmt, speed_gbps: 1}
      - {name: ens1f0, network: storage, speed_gbps: 100}
switches:
  qm9700:
    {vendor: NVIDIA Quantum-2 QM9700, medium: infiniband, ports: 64, speed_gbps: 400,
     cages: {connector: OSFP, count: 32, lanes: 8, split: 2}}
  sn2201: {vendor: NVIDIA Spectrum SN2201, medium: ethernet, ports: 52, speed_gbps: 1}
  sn4600c: {vendor: NVIDIA Spectrum SN4600C, medium: ethernet, ports: 64, speed_gbps: 100}
"""

_FABRIC = """\
# Rail-optimised: rail k of every server of a scalable unit on the unit's leaf k, port
# place * servers_per_rack + slot (ports 1-32); from uplink_port on, links_per_spine ports
# go to each spine in spine order, landing on a spine from port
# (unit index * 8 + rail) * links_per_spine + 1 on, so a new unit adds cables and moves none.
topology: rail-optimised
rate: NDR
width: 4x
max_oversubscription: 1.0
uplink_port: {uplink}
links_per_spine: {links}
scalable_units:
{units}subnet_managers:
  - {{host: sm01, priority: 14}}
  - {{host: sm02, priority: 13}}
partitions:
  - {{name: storage, pkey: "0x0002", roles: [gpu, login]}}
cables: []
"""


def generate_rails(
    units: int,
    *,
    name: str = "rails",
    rails: int = 8,
    racks_per_unit: int = 8,
    per_rack: int = 4,
    audit_key: str | None = None,
) -> dict[str, str]:
    """A rail-optimised cluster of `units` scalable units of `racks_per_unit` racks of
    `per_rack` servers with `rails` HCAs each (the last unit's last position left to the
    service hosts on the fabric), plus six service hosts, as `{path below cluster/: text}`."""
    down = UPLINK_PORT - 1
    # As many spines as the leaves' uplinks fill (rails / 2 a unit, two at least), each
    # leaf's 32 uplinks spread evenly over them all: units and rails powers of two.
    if units not in (1, 2, 4, MAX_UNITS) or rails not in (1, 2, 4, 8):
        raise ValueError(f"need 1, 2, 4 or {MAX_UNITS} units (two-tier) and 1, 2, 4 or 8 rails")
    if racks_per_unit * per_rack > down or not 1 <= per_rack <= 5:
        raise ValueError(
            f"a unit's {racks_per_unit} racks of {per_rack} servers need {down} leaf ports "
            "at most, and a 48U rack holds five 8U servers"
        )
    spines = max(MIN_SPINES, rails * units // 2)
    links = (LEAF_PORTS - down) // spines
    hcas = "".join(
        _HCA.format(k=k, gbps=400, numa=k * 2 // rails, switch=k * 4 // rails) for k in range(rails)
    )
    affinity = "".join(
        f"      - {{hca: mlx5_{k}, gpus: [{', '.join(map(str, _gpus(k, rails)))}], path: PIX}}\n"
        for k in range(rails)
    )
    networks = (
        _ETHERNET
        + _RAIL_NOTE
        + "".join(_RAIL_NETWORK.format(k=k, octet=96 + 4 * k) for k in range(rails))
    )
    unit_rows = ""
    width = 3
    # The service hosts on the fabric take the last unit's last positions, a rail leaf each
    # in turn: as many positions as it takes to give each host a leaf port.
    on_ib = sum(model == "svc-ib" for _, model, _ in _SERVICE_HOSTS)
    reserved = -(-on_ib // rails)
    capacity = racks_per_unit * per_rack
    servers = 0
    out: dict[str, str] = {}
    for u in range(1, units + 1):
        racks = [(u - 1) * racks_per_unit + i for i in range(1, racks_per_unit + 1)]
        leaves = [f"su{u}-leaf{k}" for k in range(rails)]
        unit_rows += (
            f"  - name: su{u}\n    racks: [{', '.join(f'r{r:03d}' for r in racks)}]\n"
            f"    leaves: [{', '.join(leaves)}]  # rail 0, 1, ...\n"
            f"    servers_per_rack: {per_rack}\n"
        )
        # A unit a row: its racks, then its network rack at the row's end, so a rail cable
        # runs along one row.
        for place, r in enumerate(racks):
            text = f"name: r{r:03d}\nid: {r}\nrow: {_letter(u)}\ncol: {place + 1}\n"
            text += "height_u: 48\nswitches:\n"
            text += _switch(f"mgmt{r:03d}", "sn2201", "management", 48, r, 1, False)
            text += _switch(f"stor{r:03d}", "sn4600c", "storage", 47, r, 2, False)
            nodes = ""
            for slot in range(1, per_rack + 1):
                if u == units and place * per_rack + slot > capacity - reserved:
                    break  # the service hosts' positions on the rail leaves
                servers += 1
                nodes += _node(f"gpu{servers:0{width}d}", slot, 2 + 8 * (slot - 1), r, rails)
            text += f"nodes:\n{nodes}" if nodes else "nodes: []\n"
            out[f"racks/r{r:03d}.yaml"] = text
        rid = NETWORK_RACK + u
        text = f"name: n{u:02d}\nid: {rid}\nrow: {_letter(u)}\ncol: {racks_per_unit + 1}\n"
        text += "height_u: 48\nswitches:\n"
        text += _switch(f"mgmt-n{u:02d}", "sn2201", "management", 48, rid, 0, False)
        for k, leaf in enumerate(leaves):
            text += _switch(leaf, "qm9700", "leaf", 2 + k, rid, k + 1, True)
        out[f"racks/n{u:02d}.yaml"] = text
    rid = NETWORK_RACK
    # The spines and the service hosts in the row after the last unit's.
    text = f"name: n00\nid: {rid}\nrow: {_letter(units + 1)}\ncol: {racks_per_unit // 2}\n"
    text += "height_u: 48\nswitches:\n"
    text += _switch("mgmt-n00", "sn2201", "management", 48, rid, 0, False)
    for k in range(1, spines + 1):
        text += _switch(f"spine{k:02d}", "qm9700", "spine", 1 + k, rid, k, True)  # 1U each
    out["racks/n00.yaml"] = text
    text = f"name: s01\nid: {SERVICE_RACK}\nrow: {_letter(units + 1)}\ncol: 1\n"
    text += "height_u: 48\nswitches:\n"
    text += _switch("mgmt-s01", "sn2201", "management", 48, SERVICE_RACK, 0, False)
    text += _switch("stor-s01", "sn4600c", "storage", 47, SERVICE_RACK, 1, False)
    text += "nodes:\n"
    taken = 0
    for slot, (host, model, role) in enumerate(_SERVICE_HOSTS, start=1):
        macs = (
            f'eno1: "{_mac(1, SERVICE_RACK, slot)}", ens1f0: "{_mac(2, SERVICE_RACK, slot)}", '
            f'bmc: "{_mac(3, SERVICE_RACK, slot)}"'
        )
        extra = ""
        if model == "svc-ib":
            # The last unit's last server position, a rail leaf each: the subnet managers
            # and login hosts hang off different leaves.
            leaf = f"su{units}-leaf{taken % rails}"
            port = capacity - taken // rails
            extra = (
                f', guid: "{_guid(2, SERVICE_RACK, slot)}", '
                f"links: {{ib0: {{switch: {leaf}, port: {port}}}}}"
            )
            taken += 1
        out["racks/s01.yaml"] = text = text + (
            f"  - {{name: {host}, model: {model}, role: {role}, slot: {slot}, u: {slot + 1}, "
            f"serial: SN{SERVICE_RACK:04d}{slot:02d}, mac: {{{macs}}}{extra}}}\n"
        )
    firmware = (
        _FIRMWARE.format(canary="gpu001")
        .replace("hgx-a100", "hgx-h100")
        .replace('  qm8700: {firmware: "27.2010.6102"}\n', "")
        .replace("  sn2410:", "  sn4600c:")
        .replace('"20.39.1002"', '"28.39.1002"')
        .replace("MT_0000000223", "MT_0000000838")
    )
    out |= {
        "site.yaml": _SITE.format(name=name) + (_AUDIT.format(key=audit_key) if audit_key else ""),
        "networks.yaml": networks,
        "hardware.yaml": _GPU_MODEL.format(hcas=hcas, affinity=affinity) + _OTHER_MODELS,
        "fabric.yaml": _FABRIC.format(uplink=UPLINK_PORT, links=links, units=unit_rows),
        "firmware.yaml": firmware,
        "provisioning.yaml": _PROVISIONING,
        "services.yaml": _SERVICES if audit_key else _SERVICES_UNAUDITED,
    }
    return dict(sorted(out.items()))


def _letter(unit: int) -> str:
    return chr(ord("A") + unit - 1)


def _gpus(k: int, rails: int) -> list[int]:
    """The GPUs nearest to rail k's HCA: GPU k with eight rails, a share of them with fewer."""
    per = 8 // rails
    return list(range(k * per, (k + 1) * per))


def _node(name: str, slot: int, u: int, rack: int, rails: int) -> str:
    macs = f'eno1: "{_mac(1, rack, slot)}", ens2f0: "{_mac(2, rack, slot)}", '
    macs += f'bmc: "{_mac(3, rack, slot)}"'
    # Port GUIDs in ConnectX's form: NVIDIA's OUI (a0:88:c2), 03:00, then three bytes of the
    # adapter's own, here counted from rack, slot and HCA.
    guids = ", ".join(
        f'mlx5_{k}: "0x{CX_OUI}0300{((rack * 64 + slot) * 8 + k):06x}"' for k in range(rails)
    )
    return (
        f"  - name: {name}\n    model: hgx-h100\n    role: gpu\n    slot: {slot}\n    u: {u}\n"
        f"    serial: SN{rack:04d}{slot:02d}\n    mac: {{{macs}}}\n    guids: {{{guids}}}\n"
    )


def source(units: int, **options: object) -> Source:
    """`generate_rails(...)` parsed, as the compile would load it from disk."""
    tree = generate_rails(units, **options)  # type: ignore[arg-type]
    return parse({f"cluster/{path}": text.encode() for path, text in tree.items()})
