"""`generated/routes/<host>/<iface>.nmconnection`: each interface of a host as a NetworkManager
keyfile, the one way the cluster configures its networks (the kickstart installs them through
the host's bundle and removes what the installer wrote).

Storage reads once crawled because a wrong default route sent them out of the management
port; a route per destination network pins them to the storage NIC whatever the default is.
A keyfile holds the address, MTU, the routes of `Host.routes` (the routes generated/expected/
makes the audit look for) minus the connected one the kernel makes from the address, the
default route as `gateway=`, and the firewalld zone of the interface's network.

Matched by hardware address, never by name (names change with firmware, slots and kernels):
Ethernet by its MAC; IPoIB by its 20-byte address, of which NetworkManager compares only the
last 8 bytes, the port GUID (nm_utils_hwaddr_matches: the first 4 carry the queue pair number,
which changes on every boot). Install mode 0600, root: NetworkManager ignores other keyfiles.
"""

from __future__ import annotations

from common import memo
from compiler.plan import IPOIB_DATAGRAM_MAX_MTU, Host, IbPort, Interface, Plan
from compiler.targets.render import guarded
from contract import Route

# QPN bytes (any: not compared) and the link-local GID prefix fe80::/64 before the port GUID.
IPOIB_HWADDR_PREFIX = "00:00:00:00:fe:80:00:00:00:00:00:00"


def ipoib_hwaddr(port_guid: str) -> str:
    """The IPoIB hardware address NetworkManager matches: ...:<port GUID as 8 bytes>."""
    digits = port_guid.removeprefix("0x")
    return ":".join([IPOIB_HWADDR_PREFIX, *(digits[i : i + 2] for i in range(0, 16, 2))])


def _port_of(host: Host, iface: Interface) -> IbPort:
    """The HCA port an IPoIB interface rides (ib3 on mlx5_3 of an eight-rail server)."""
    device = host.hca_of.get(iface.name)
    return next((p for p in host.ib_ports if p.device == device), host.ib_ports[0])


def static_routes(host: Host, iface: Interface) -> list[Route]:
    """The routes of `iface` someone has to configure: all but its connected subnet's."""
    connected = iface.subnet
    return [
        r
        for r in host.routes
        if r.dev == iface.name and not (r.gateway is None and r.dst == connected)
    ]


def render(plan: Plan) -> dict[str, str]:
    networks = {i.network for h in plan.hosts for i in h.interfaces}
    zones = tuple(sorted((n, plan.firewall_zone(n)) for n in networks))
    servers = [plan.host(d) for d in plan.site.services.dns]
    # The site's DNS servers' addresses on each network all of them are on: what a keyfile
    # with the default route names as its resolvers.
    resolvers = []
    for n in sorted(networks):
        found = tuple(i.address for d in servers if (i := d.interface(n)) is not None)
        if len(found) == len(servers):
            resolvers.append((n, found))
    dns = tuple(resolvers)  # one object for every host: a diff keys it once a side
    files: dict[str, str] = {}
    for host in plan.hosts:
        files.update(_host_keyfiles(host, plan.ib_networks, zones, dns, plan.site.domain))
    return files


@memo.by_value  # a diff's two sides share each host's keyfiles unless the host changed
def _host_keyfiles(
    host: Host,
    ib_networks: frozenset[str],
    zones: tuple[tuple[str, str], ...],
    dns: tuple[tuple[str, tuple[str, ...]], ...],
    domain: str,
) -> tuple[tuple[str, str], ...]:
    """A host's keyfiles (path, text): `zones` and `dns` are each network's (the site's DNS
    servers' addresses on it), made once for every host."""
    zone, servers = dict(zones), dict(dns)
    files = []
    for iface in host.interfaces:
        routes = static_routes(host, iface)
        default = next((r for r in routes if r.dst == "default"), None)
        infiniband = iface.network in ib_networks
        hwaddr = ipoib_hwaddr(_port_of(host, iface).guid) if infiniband else iface.mac
        keyfile = _keyfile(
            host.name,
            iface,
            infiniband,
            hwaddr,
            zone[iface.network],
            default.gateway if default else None,
            tuple(r for r in routes if r is not default),
            servers[iface.network] if default else (),
            domain,
        )
        files.append((f"routes/{host.name}/{iface.name}.nmconnection", keyfile))
    return tuple(files)


def _keyfile(
    host: str,
    iface: Interface,
    infiniband: bool,
    hwaddr: str | None,
    zone: str,
    gateway: str | None,
    routes: tuple[Route, ...],
    dns: tuple[str, ...],
    domain: str,
) -> str:
    """One keyfile, of plain values only. Written here, line by line as the file reads, not
    by a template: a compile writes one per interface (12,304 at 4,096 one-HCA servers), and
    rendering them was most of this target's time. The values go through the templates'
    guard all the same."""
    guarded("nmconnection", host, iface.name, iface.network, zone, hwaddr, iface.cidr, gateway,
            domain, *dns, *(x for r in routes for x in (r.dst, r.gateway)))  # fmt: skip
    kind = "infiniband" if infiniband else "ethernet"
    lines = [
        f"# /etc/NetworkManager/system-connections/{iface.name}.nmconnection on {host}"
        f" ({iface.network}).",
        "# Generated by clusterforge from cluster/; do not edit. Mode 0600, owned by root.",
        "[connection]",
        f"id={iface.name}",
        f"type={kind}",
        "autoconnect=true",
        f"zone={zone}",
        "",
        f"[{kind}]",
        f"mac-address={hwaddr}",
    ]
    if infiniband:
        mode = "datagram" if iface.mtu <= IPOIB_DATAGRAM_MAX_MTU else "connected"
        lines.append(f"transport-mode={mode}")
    lines += [f"mtu={iface.mtu}", "", "[ipv4]", "method=manual", f"address1={iface.cidr}"]
    lines.append(f"gateway={gateway}" if gateway else "never-default=true")
    lines += [
        f"route{i}={r.dst}" + (f",{r.gateway}" if r.gateway else "")
        for i, r in enumerate(routes, 1)
    ]
    if dns:
        lines += [f"dns={';'.join(dns)};", f"dns-search={domain};"]
    lines += ["", "[ipv6]", "method=disabled", ""]
    return "\n".join(lines)
