"""`generated/hosts`: /etc/hosts for all three networks, in address order.

A host's name on the network that carries its default route is its plain name; on every
other network it is `<host>-<network>` (gpu001-storage, gpu001-bmc).
"""

from __future__ import annotations

from compiler.plan import Plan, ip_int
from compiler.targets.render import template


def names(plan: Plan) -> list[tuple[str, str, str]]:
    """(address, short name, network) of every host interface, BMC and switch management
    port, in address order; shared with DNS and DHCP."""
    rows = []
    for host in plan.hosts:
        for iface in (*host.interfaces, host.bmc):
            suffix = "" if iface.network == host.management else f"-{iface.network}"
            rows.append((iface.address, f"{host.name}{suffix}", iface.network))
    rows += [(sw.address, sw.name, sw.network) for sw in plan.switches if sw.address and sw.network]
    return sorted(rows, key=lambda row: (ip_int(row[0]), row[1]))


def render(plan: Plan) -> dict[str, str]:
    domain = plan.site.domain
    entries = [(ip, f"{name}.{domain}", name) for ip, name, _ in names(plan)]
    return {"hosts": template("hosts.j2", site=plan.site, entries=entries)}
