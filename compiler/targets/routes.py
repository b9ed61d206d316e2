"""`generated/routes/<host>/`: static routes that keep each network's traffic on its own NIC.

Storage reads once crawled because a wrong default route sent them out of the management
port; a route per destination network pins them to the storage NIC whatever the default is.
For every interface, from `Host.routes` (the routes generated/expected/ makes the audit look
for), minus the connected route the kernel makes from the address:
  route-<iface>          Rocky 8 network-scripts, ip-args style: one `ip route add` argument
                         list per line (FORMATS.md §6); only for interfaces with such routes;
  <iface>.nmconnection   a full NetworkManager keyfile (address, MTU, the same routes as
                         route1..N, the default route as `gateway=`); install it mode 0600.
"""

from __future__ import annotations

import netaddr

from compiler.model import Medium
from compiler.plan import IPOIB_DATAGRAM_MAX_MTU, Host, Interface, Plan, Route
from compiler.targets.render import template


def static_routes(host: Host, iface: Interface) -> list[Route]:
    """The routes of `iface` someone has to configure: all but its connected subnet's."""
    connected = str(netaddr.IPNetwork(iface.cidr).cidr)
    return [
        r
        for r in host.routes
        if r.dev == iface.name and not (r.gateway is None and r.dst == connected)
    ]


def render(plan: Plan) -> dict[str, str]:
    files: dict[str, str] = {}
    for host in plan.hosts:
        for iface in host.interfaces:
            routes = static_routes(host, iface)
            default = next((r for r in routes if r.dst == "default"), None)
            medium = plan.cluster.networks[iface.network].medium
            base = f"routes/{host.name}/"
            if routes:
                files[f"{base}route-{iface.name}"] = template(
                    "route-iface.j2", host=host, iface=iface, routes=routes
                )
            files[f"{base}{iface.name}.nmconnection"] = template(
                "nmconnection.j2",
                host=host,
                iface=iface,
                infiniband=medium == Medium.INFINIBAND,
                datagram=iface.mtu <= IPOIB_DATAGRAM_MAX_MTU,
                gateway=default.gateway if default else None,
                routes=[r for r in routes if r is not default],
                dns=[plan.address(d, iface.network) for d in plan.site.services.dns]
                if default
                else [],
                domain=plan.site.domain,
            )
    return files
