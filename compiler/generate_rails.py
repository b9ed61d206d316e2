"""A valid rail-optimised cluster, as a `cluster/` tree: for `init --rails` and the tests.

Pure, like `compiler.generate` (whose site, firmware and policy files it shares): parameters
in, `{path below cluster/: YAML text}` out, identities derived from rack and slot.
The layout is the DGX SuperPOD reference architecture's (examples/rails/README.md says
what was taken from it): scalable units of 32 eight-GPU servers, four 8U servers a rack in
eight racks, one NDR HCA per GPU, each rail on the unit's own QM9700 leaf (32 ports down, 32
up), the leaves of a unit in a network rack of their own, as many spines as the leaves'
uplinks fill (four a unit of eight rails), every leaf linked evenly to every spine
(two-tier, 1:1). Beyond what two tiers hold (a spine's 64 ports, one link from each of eight
units' eight leaves), three-tier: spine groups of as many units as a spine's 32 down ports
take one link from each of their leaves (four units of eight rails), each group's spines in
its units' network racks, and core groups, one a spine position (plane), with as many cores
as the spines' 32 up ports fill (1:1 at every tier). The service hosts on the fabric take the
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
SWITCHES_PER_RACK = 46  # 1U each, U2-U47 of a 48U rack under its management switch
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
  cidr: 10.{octet}.0.0/{prefix}
  rack_prefix: 24
  interface_prefix: {prefix}
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
{tiers}scalable_units:
{units}subnet_managers:
  - {{host: sm01, priority: 14}}
  - {{host: sm02, priority: 13}}
partitions:
  - {{name: storage, pkey: "0x0002", roles: [gpu, login]}}
cables: []
"""


_THREE_TIER = """\
# Three-tier: pods (spine groups) of units_per_pod units, in scalable_units order; a leaf
# links to its pod's spines (pod: on each spine), landing from port
# ((unit index mod units_per_pod) * 8 + rail) * links_per_spine + 1; a spine's ports from
# core_port on go, links_per_core each, to the cores of its plane (its place in its pod's
# spines by name), landing from port (pod - 1) * links_per_core + 1.
units_per_pod: {per_pod}
core_port: {core_port}
links_per_core: {links}
"""


def generate_rails(
    units: int,
    *,
    name: str = "rails",
    rails: int = 8,
    racks_per_unit: int = 8,
    per_rack: int = 4,
    audit_key: str | None = None,
    switch_ports: int = LEAF_PORTS,
    tiers: int | None = None,
) -> dict[str, str]:
    """A rail-optimised cluster of `units` scalable units of `racks_per_unit` racks of
    `per_rack` servers with `rails` HCAs each (the last unit's last position left to the
    service hosts on the fabric), plus six service hosts, as `{path below cluster/: text}`.
    Two-tier while the spines' `switch_ports` hold every leaf, three-tier beyond (or as
    `tiers` says); a smaller `switch_ports` makes a small fabric of every tier for tests."""
    down = switch_ports // 2
    up = switch_ports - down
    two_tier_units = switch_ports // rails  # a spine's ports, a link from every leaf
    three = tiers == 3 if tiers is not None else units > two_tier_units
    if not (_power_of_two(units) and rails in (1, 2, 4, 8) and _power_of_two(switch_ports)):
        raise ValueError("need units a power of two, 1, 2, 4 or 8 rails and ports a power of two")
    if not three and units > two_tier_units:
        raise ValueError(f"two tiers of {switch_ports}-port switches hold {two_tier_units} units")
    if racks_per_unit * per_rack > down or not 1 <= per_rack <= 5:
        raise ValueError(
            f"a unit's {racks_per_unit} racks of {per_rack} servers need {down} leaf ports "
            "at most, and a 48U rack holds five 8U servers"
        )
    # Two-tier: as many spines as the leaves' uplinks fill (rails / 2 a unit of 64-port
    # switches, two at least), each leaf's uplinks spread evenly over them all.
    spines = max(MIN_SPINES, rails * units * up // switch_ports)
    links = up // spines
    # Three-tier: a pod (spine group) is as many units as a spine's down ports take one link
    # from each of their leaves; its `up` spines, one per leaf uplink; a core plane per spine
    # position, its cores taking an equal share of each pod's spine there.
    per_pod = max(1, down // rails)
    pods = units // per_pod if three else 0
    links_per_core = switch_ports // pods if three else 0
    if three and (units % per_pod or pods < 2 or links_per_core > up):
        raise ValueError(f"three tiers need two or more pods of {per_pod} units")
    cores_per_plane = up // links_per_core if three else 0
    # Rack ids: a two-tier site's network racks above the servers' (650 + unit); a
    # three-tier one has too many units for that, so its network and core racks follow the
    # servers' racks (skipping the service rack's 700, which its hosts' off-rail LIDs need
    # low: compiler/rails.py).
    core_racks = -(-up * cores_per_plane // SWITCHES_PER_RACK) if three else 0
    last = _rid(units * racks_per_unit + units + core_racks)
    hcas = "".join(
        _HCA.format(k=k, gbps=400, numa=k * 2 // rails, switch=k * 4 // rails) for k in range(rails)
    )
    affinity = "".join(
        f"      - {{hca: mlx5_{k}, gpus: [{', '.join(map(str, _gpus(k, rails)))}], path: PIX}}\n"
        for k in range(rails)
    )
    # The address plan holds every rack id: the shared one's blocks hold ids up to 1,023;
    # beyond, each block is twice as wide (the IPoIB blocks are the server racks').
    wide = last > 1023
    ethernet = _ETHERNET
    if wide:
        ethernet = ethernet.replace("10.64.0.0/13", "10.32.0.0/12")
        ethernet = ethernet.replace("10.72.0.0/14", "10.48.0.0/13")
    networks = (
        ethernet
        + _RAIL_NOTE
        + "".join(
            _RAIL_NETWORK.format(k=k, octet=96 + (8 if wide else 4) * k, prefix=13 if wide else 14)
            for k in range(rails)
        )
    )
    unit_rows = ""
    width = 3 if units * racks_per_unit * per_rack < 1000 else 4
    # The service hosts on the fabric take the last unit's last positions, a rail leaf each
    # in turn: as many positions as it takes to give each host a leaf port.
    on_ib = sum(model == "svc-ib" for _, model, _ in _SERVICE_HOSTS)
    reserved = -(-on_ib // rails)
    capacity = racks_per_unit * per_rack
    servers = 0
    out: dict[str, str] = {}
    for u in range(1, units + 1):
        racks = [_rid((u - 1) * racks_per_unit + i) for i in range(1, racks_per_unit + 1)]
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
        rid = _rid(units * racks_per_unit + u) if three else NETWORK_RACK + u
        text = f"name: n{u:02d}\nid: {rid}\nrow: {_letter(u)}\ncol: {racks_per_unit + 1}\n"
        text += "height_u: 48\nswitches:\n"
        text += _switch(f"mgmt-n{u:02d}", "sn2201", "management", 48, rid, 0, False)
        for k, leaf in enumerate(leaves):
            text += _switch(leaf, "qm9700", "leaf", 2 + k, rid, k + 1, True)
        if three:
            # The pod's spines, shared out over its units' network racks: spine group p's
            # spine k is sg{p}-spine{k}, its place (plane) in name order.
            pod, within = divmod(u - 1, per_pod)
            share = up // per_pod
            for j in range(share):
                k = within * share + j + 1
                text += _switch(
                    f"sg{pod + 1:02d}-spine{k:02d}", "qm9700", "spine", 2 + rails + j, rid,
                    rails + j + 1, True, f"pod: {pod + 1}, ",
                )  # fmt: skip
        out[f"racks/n{u:02d}.yaml"] = text
    if three:
        cores = [(plane, n) for plane in range(1, up + 1) for n in range(cores_per_plane)]
        for c in range(0, len(cores), SWITCHES_PER_RACK):
            index = c // SWITCHES_PER_RACK + 1
            rid = _rid(units * racks_per_unit + units + index)
            text = f"name: c{index:02d}\nid: {rid}\nrow: {_letter(units + 1)}\n"
            text += f"col: {1 + index}\nheight_u: 48\nswitches:\n"
            text += _switch(f"mgmt-c{index:02d}", "sn2201", "management", 48, rid, 0, False)
            for k, (plane, _) in enumerate(cores[c : c + SWITCHES_PER_RACK], start=1):
                text += _switch(
                    f"core{c + k:03d}", "qm9700", "core", 1 + k, rid, k, True, f"plane: {plane}, "
                )
            out[f"racks/c{index:02d}.yaml"] = text
    rid = NETWORK_RACK
    # The spines and the service hosts in the row after the last unit's.
    text = f"name: n00\nid: {rid}\nrow: {_letter(units + 1)}\ncol: {racks_per_unit // 2}\n"
    text += "height_u: 48\nswitches:\n"
    text += _switch("mgmt-n00", "sn2201", "management", 48, rid, 0, False)
    for k in range(1, spines + 1):
        text += _switch(f"spine{k:02d}", "qm9700", "spine", 1 + k, rid, k, True)  # 1U each
    if not three:
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
    models = _OTHER_MODELS
    if switch_ports != LEAF_PORTS:  # a shrunk QM9700 for a small fabric of every tier
        models = models.replace(
            "ports: 64, speed_gbps: 400,\n     cages: {connector: OSFP, count: 32,",
            f"ports: {switch_ports}, speed_gbps: 400,\n     cages: {{connector: OSFP, "
            f"count: {switch_ports // 2},",
        )
    firmware = (
        _FIRMWARE.format(canary=f"gpu{1:0{width}d}")
        .replace("hgx-a100", "hgx-h100")
        .replace('  qm8700: {firmware: "27.2010.6102"}\n', "")
        .replace("  sn2410:", "  sn4600c:")
        .replace('"20.39.1002"', '"28.39.1002"')
        .replace("MT_0000000223", "MT_0000000838")
    )
    out |= {
        "site.yaml": _SITE.format(name=name) + (_AUDIT.format(key=audit_key) if audit_key else ""),
        "networks.yaml": networks,
        "hardware.yaml": _GPU_MODEL.format(hcas=hcas, affinity=affinity) + models,
        "fabric.yaml": _FABRIC.format(
            uplink=down + 1,
            links=1 if three else links,
            units=unit_rows,
            tiers=(
                _THREE_TIER.format(per_pod=per_pod, core_port=down + 1, links=links_per_core)
                if three
                else ""
            ),
        ),
        "firmware.yaml": firmware,
        "provisioning.yaml": _PROVISIONING,
        "services.yaml": _SERVICES if audit_key else _SERVICES_UNAUDITED,
    }
    return dict(sorted(out.items()))


def _rid(n: int) -> int:
    """The n-th rack id, past the service rack's."""
    return n + (n >= SERVICE_RACK)


def _letter(unit: int) -> str:
    """Row A for unit 1 ... Z, then AA, AB, ..."""
    if unit <= 26:
        return chr(ord("A") + unit - 1)
    return chr(ord("A") + (unit - 1) // 26 - 1) + chr(ord("A") + (unit - 1) % 26)


def _power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


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
