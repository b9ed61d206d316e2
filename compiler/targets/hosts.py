"""`generated/hosts`: /etc/hosts for all three networks, in address order.

A host's name on the network that carries its default route is its plain name; on every
other network it is `<host>-<network>` (gpu001-storage, gpu001-bmc).
"""

from __future__ import annotations

from compiler.plan import Plan
from compiler.targets.render import template
from compiler.targets.shared import names


def render(plan: Plan) -> dict[str, str]:
    domain = plan.site.domain
    entries = [(ip, f"{name}.{domain}", name) for ip, name, _ in names(plan)]
    return {"hosts": template("hosts.j2", site=plan.site, entries=entries)}
