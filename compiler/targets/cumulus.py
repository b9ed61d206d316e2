"""`generated/switches/<name>/` of each Cumulus Linux switch (NVIDIA Spectrum), the files it
reads at those paths (EOS switches: `compiler/targets/eos.py`):
- `etc/network/interfaces`: ifupdown2; the management port eth0 in the `mgmt` VRF, each
  cabled port with its description (`alias`: far end and cable ID), host ports as access
  ports of the VLAN-aware bridge `br_default`, uplinks routed, one SVI `vlanN` per rack
  subnet the switch is the gateway of. Syntax as NVIDIA's Cumulus Linux 5.11 user guide
  writes it ("VLAN-aware Bridge Mode": bridge-ports, bridge-vids, bridge-pvid,
  bridge-vlan-aware; SVIs with vlan-raw-device and vlan-id; `vrf-table auto` for mgmt).
- `etc/frr/frr.conf`, `etc/frr/daemons`: BGP unnumbered (`neighbor swpN interface
  remote-as external`) on every routed port, the rack subnets announced with `network`;
  the Cumulus BGP guide's unnumbered leaf-spine design (one ASN for the spines, one per
  leaf). `frr defaults datacenter` is Cumulus's profile.
- `etc/lldpd.d/clusterforge.conf`: LLDP on the cabled ports.
"""

from __future__ import annotations

from compiler.ethernet import EthernetSwitch
from compiler.model import SwitchOs
from compiler.plan import Plan
from compiler.targets.render import template


def switch_files(plan: Plan, sw: EthernetSwitch) -> dict[str, str]:
    """The files of one Cumulus Linux switch, by their path on it."""
    ports = " ".join(f"swp{p.port}" for p in sw.access)
    files = {
        "etc/network/interfaces": template(
            "cumulus-interfaces.j2", site=plan.site, sw=sw, bridge_ports=ports
        ),
        "etc/lldpd.d/clusterforge.conf": template(
            "lldpd.conf.j2", site=plan.site, sw=sw, pattern="eth0,swp*"
        ),
    }
    if sw.asn is not None:
        files["etc/frr/frr.conf"] = template("frr.conf.j2", site=plan.site, sw=sw)
        files["etc/frr/daemons"] = template("frr-daemons.j2", site=plan.site, sw=sw)
    return files


def render(plan: Plan) -> dict[str, str]:
    out: dict[str, str] = {}
    for sw in plan.ethernet.switches:
        if sw.os != SwitchOs.CUMULUS:
            continue
        files = switch_files(plan, sw)
        out.update({f"switches/{sw.name}/{path}": text for path, text in files.items()})
    return out
