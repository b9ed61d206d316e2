"""`generated/dns/`: BIND zone files with the names /etc/hosts has (`shared.names`).

  db.<domain>              the forward zone: every name of every network (the names already
                           carry the network: gpu001-storage), one section per network;
  db.<reverse zone>        the reverse zones of each network's address block, cut at an octet
                           boundary (in-addr.arpa, RFC 1035); networks that share a block (bmc
                           and mgmt share 10.60/16) share its zone, one section each;
  named.conf.zones         the zone statements, file names relative to named's `directory`;
  named.conf               the server's configuration: authoritative only, answering the
                           site's networks, including the zones from ZONES_PATH.
SOA serials are monotonic and deterministic: a zone keeps the serial of the same zone in the
generated/ this compile replaces (`Plan.previous`) while its records are unchanged, and takes
that serial + 1 when they change (RFC 1982 arithmetic, so a secondary always sees it as newer);
a zone with no predecessor starts at SERIAL_START. Chosen over a commit date and counter
because a compile of a working tree has no commit, and the committed zones already hold the
last serial every secondary has seen.
"""

from __future__ import annotations

import re
from collections import defaultdict

from compiler.plan import Plan
from compiler.plan import network as cidr_block
from compiler.targets.render import template
from compiler.targets.shared import names

ZONES_PATH = "/etc/named/named.conf.zones"  # where services.yaml installs named.conf.zones
SERIAL_START = 1_000_000_000  # ten digits, far below 2**32, the SOA's 32-bit field
_SERIAL = re.compile(r"^\t\t([0-9]+)\t; serial$", re.MULTILINE)

Sections = dict[str, list[tuple[str, str, str]]]  # network -> [(owner, type, data)]


def serial(text: str, previous: str | None) -> int:
    """The serial of zone `text` (rendered with serial 0) after the zone `previous`."""
    found = _SERIAL.search(previous or "")
    if found is None:
        return SERIAL_START
    last = int(found.group(1))
    if _SERIAL.sub("\t\t0\t; serial", previous or "", count=1) == text:
        return last
    return (last + 1) % 2**32


def reverse_octets(plan: Plan, network: str) -> int:
    """How many leading octets name the reverse zone of `network`'s addresses: its prefix
    rounded up to an octet, since rounding down would claim addresses that are not the
    cluster's (10.60.0.0/16: 2, the zone 60.10.in-addr.arpa)."""
    prefix: int = cidr_block(plan.networks[network].cidr).prefixlen
    return min(3, -(-prefix // 8))


def _zone(plan: Plan, path: str, zone: str, sections: Sections) -> str:
    text = template(
        "zone.j2",
        serial=0,
        zone=zone,
        servers=[f"{s}.{plan.site.domain}." for s in plan.site.services.dns],
        contact=f"hostmaster.{plan.site.domain}.",
        sections=sorted(sections.items()),
    )
    number = serial(text, plan.previous.get(path))
    return _SERIAL.sub(f"\t\t{number}\t; serial", text, count=1)


def render(plan: Plan) -> dict[str, str]:
    domain = plan.site.domain
    forward: Sections = defaultdict(list)
    reverse: dict[str, Sections] = defaultdict(lambda: defaultdict(list))
    cut = {network: reverse_octets(plan, network) for network in plan.networks}
    for address, short, network in names(plan):
        forward[network].append((short, "A", address))
        octets = address.split(".")
        zone = ".".join(reversed(octets[: cut[network]])) + ".in-addr.arpa"
        reverse[zone][network].append(
            (".".join(reversed(octets[cut[network] :])), "PTR", f"{short}.{domain}.")
        )
    files = {f"dns/db.{domain}": _zone(plan, f"dns/db.{domain}", domain, forward)}
    files |= {
        f"dns/db.{zone}": _zone(plan, f"dns/db.{zone}", zone, reverse[zone])
        for zone in sorted(reverse)
    }
    files["dns/named.conf.zones"] = template("named-zones.j2", zones=[domain, *sorted(reverse)])
    clients = sorted({net.cidr for net in plan.networks.values()})
    files["dns/named.conf"] = template(
        "named.conf.j2", site=plan.site, clients=clients, zones=ZONES_PATH
    )
    return files
