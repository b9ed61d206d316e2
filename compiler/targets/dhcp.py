"""`generated/dhcp/`: the management DHCP server, as ISC dhcpd and as Kea, with one content.

  dhcpd.conf        ISC dhcpd 4.4 (`dhcpd -t -cf dhcpd.conf`)
  kea-dhcp4.json    Kea 2.2 (`kea-dhcp4 -t kea-dhcp4.json`)

Every rack subnet of `provisioning.dhcp_networks` is declared with its router; nothing is
leased dynamically. Every known MAC with an address in one of those subnets (host NICs,
BMCs, switch management ports) gets a fixed reservation, named as in generated/hosts. Only
reservations on `provisioning.pxe_network` get the provisioning host as next-server and the
boot file of the host's boot mode (its hardware model's; none for the provisioning host
itself, which installs from media or upstream), when the client architecture
(option 93) asks for that mode: a UEFI host (7 or 9, x86-64) gets shim, a BIOS host (0) gets
PXELINUX; any other answer, or no option 93, no boot file: a UEFI box that falls back to
legacy PXE must not install a layout its firmware cannot boot. `dhcpd -t` misses duplicate
MACs and addresses: the checks (identities, addresses) reject them before anything is written.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, NamedTuple

import netaddr

from common.errors import TargetError
from compiler.model import BootMode
from compiler.plan import Plan, ip_int, network
from compiler.targets.render import template, to_json
from compiler.targets.shared import names

# RFC 4578 client system architectures, as the two-byte value of option 93.
ARCH = {BootMode.UEFI: (7, 9), BootMode.BIOS: (0,)}  # UEFI x86-64 (7, and 9 by errata); BIOS


class Reservation(NamedTuple):
    name: str
    mac: str
    address: str
    boot: BootMode | None  # PXE reservations: the host's boot mode; None: no boot file


class Subnet(NamedTuple):
    network: str
    rack: str
    cidr: netaddr.IPNetwork
    router: str | None
    reservations: tuple[Reservation, ...]


class Boot(NamedTuple):
    server: str
    files: dict[BootMode, str]  # the boot modes some PXE host has -> its loader


def subnets(plan: Plan) -> list[Subnet]:
    """The served subnets in address order, each with its reservations in address order."""
    served = plan.provisioning.dhcp_networks
    pxe = plan.provisioning.pxe_network
    name_of = {address: name for address, name, _ in names(plan)}
    # The provisioning host gets no boot file: it serves every install, its own included
    # would be from itself (it installs from media or upstream: provisioning.yaml bootstrap).
    itself = plan.site.services.provisioning
    macs: list[tuple[str, str, BootMode | None]] = [
        (i.mac, i.address, h.boot if i.network == pxe and h.name != itself else None)
        for h in plan.hosts
        for i in (*h.interfaces, h.bmc)
        if i.mac and i.network in served
    ]
    macs += [(sw.mac, sw.address, None) for sw in plan.switches if sw.address]
    out = []
    placed: set[str] = set()
    # Reservations sorted by address once; each subnet takes its slice by bisection, so the
    # work grows with the hosts, not with hosts times subnets.
    by_int = sorted((ip_int(address), mac, address, boot) for mac, address, boot in macs)
    keys = [n for n, *_ in by_int]
    for net in served:
        for rack, cidr in plan.subnets.get(net, ()):
            block = network(cidr)
            rows = [
                Reservation(name_of[address], mac, address, boot)
                for _, mac, address, boot in by_int[
                    bisect_left(keys, block.first) : bisect_right(keys, block.last)
                ]
            ]
            placed.update(r.mac for r in rows)
            out.append(Subnet(net, rack, block, plan.gateways.get((net, rack)), tuple(rows)))
    lost = [mac for mac, address, boot in macs if boot is not None and mac not in placed]
    if lost:
        raise TargetError(f"PXE MACs outside every served subnet: {', '.join(sorted(lost))}")
    return sorted(out, key=lambda s: s.cidr.first)


def _addresses(plan: Plan, hosts: tuple[str, ...]) -> list[str]:
    return [plan.address(h, plan.provisioning.pxe_network) for h in hosts]


def _kea(plan: Plan, rows: list[Subnet], boot: Boot, interface: str) -> dict[str, Any]:
    services = plan.site.services

    def arch_test(mode: BootMode) -> str:
        # PXE reservations carry their boot mode as a class; a test on KNOWN waits for the
        # host lookup, so the class is known by then and nothing else gets a boot file.
        either = " or ".join(f"option[93].hex == 0x{code:04x}" for code in ARCH[mode])
        return f"member('KNOWN') and member('{mode.value}') and ({either})"

    return {
        "Dhcp4": {
            "interfaces-config": {"interfaces": [interface]},
            "authoritative": True,
            "valid-lifetime": 86400,
            "match-client-id": False,  # firmware and installer send different client IDs
            "host-reservation-identifiers": ["hw-address"],
            "reservations-global": False,
            "reservations-in-subnet": True,
            "reservations-out-of-pool": True,
            "option-data": [
                {"name": "domain-name", "data": plan.site.domain},
                {"name": "domain-name-servers", "data": ", ".join(_addresses(plan, services.dns))},
                {"name": "ntp-servers", "data": ", ".join(_addresses(plan, services.ntp))},
            ],
            "client-classes": [{"name": mode.value} for mode in boot.files]
            + [
                {
                    "name": f"pxe-{mode.value}",
                    "test": arch_test(mode),
                    "next-server": boot.server,
                    "boot-file-name": file,
                }
                for mode, file in boot.files.items()
            ],
            "subnet4": [
                {
                    # The network address as the ID: stable when subnets come and go.
                    "id": s.cidr.first,
                    "subnet": str(s.cidr),
                    "option-data": [{"name": "routers", "data": s.router}] if s.router else [],
                    "reservations": [
                        {
                            "hostname": r.name,
                            "hw-address": r.mac,
                            "ip-address": r.address,
                            **({"client-classes": [r.boot.value]} if r.boot else {}),
                        }
                        for r in s.reservations
                    ],
                }
                for s in rows
            ],
        }
    }


def render(plan: Plan) -> dict[str, str]:
    prov = plan.provisioning
    server = plan.host(plan.site.services.provisioning).interface(prov.pxe_network)
    assert server is not None, "checks: the provisioning host is on the PXE network"
    itself = plan.site.services.provisioning
    pxe_hosts = [h for h in plan.hosts if h.interface(prov.pxe_network) and h.name != itself]
    modes = sorted({h.boot for h in pxe_hosts})
    files = {BootMode.UEFI: prov.boot_files.uefi, BootMode.BIOS: prov.boot_files.bios}
    boot = Boot(server.address, {mode: files[mode] or "" for mode in modes})
    rows = subnets(plan)
    services = plan.site.services
    isc = template(
        "dhcpd.conf.j2",
        site=plan.site,
        subnets=rows,
        boot=boot,
        dns=_addresses(plan, services.dns),
        ntp=_addresses(plan, services.ntp),
        arch={mode: [f"00:{code:02x}" for code in ARCH[mode]] for mode in boot.files},
    )
    return {
        "dhcp/dhcpd.conf": isc,
        "dhcp/kea-dhcp4.json": to_json(_kea(plan, rows, boot, server.name)),
    }
