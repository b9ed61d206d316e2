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
- `etc/cumulus/datapath/qos/qos_features.conf`, on a switch of a RoCE network's path
  (networks.yaml `rdma: roce`; `compiler/roce.py`): DSCP trust, PFC and ECN on the RoCE
  priority of those ports. Cumulus Linux 5's own QoS file (user guide, "Quality of Service":
  qos_features.conf, applied by `systemctl reload switchd.service`; the 4.x traffic.conf is
  gone). The guide's RoCE page sets the same with NVUE (`nv set qos roce mode lossless`) and
  says RoCE is supported through NVUE alone; but NVUE rewrites /etc/network/interfaces and
  frr.conf from its own startup.yaml on `nv config apply`, so a switch configured by these
  files takes the "Linux Commands" form of its PFC and ECN sections, with the values of
  NVUE's lossless defaults (its table "Default RoCE Configuration").
- `etc/snmp/snmpd.conf`, when site.yaml has `monitoring: snmp:`: net-snmp's snmpd (Cumulus
  Linux's SNMP agent) answering the snmp_exporter's SNMPv2c walk (`monitoring.py`) with the
  same community, on the management port's address, to the site's management network, of
  the OIDs the walk reads alone. eth0 is in the `mgmt` VRF; the packaged snmpd.service runs
  in the default one, as it is: the Cumulus Linux 5.10 user guide, "Configure SNMP", says
  "You do not need to run SNMP in the management VRF if you just want to allow SNMP
  communication through the management VRF interfaces" (docs.nvidia.com/networking-ethernet-
  software/cumulus-linux-510/Monitoring-and-Troubleshooting/Simple-Network-Management-
  Protocol-SNMP/Configure-SNMP).
"""

from __future__ import annotations

from compiler.ethernet import EthernetSwitch
from compiler.model import SwitchOs
from compiler.plan import Plan
from compiler.roce import QOS_FEATURES, RocePort, port_set
from compiler.targets.render import template
from compiler.targets.shared import PROBES, frr_conf, snmp_community

SNMPD_CONF = "etc/snmp/snmpd.conf"
SNMP_VIEW = "clusterforge"
# The subtrees the snmp_exporter module reads (SNMPv2-MIB system for sysUpTime; IF-MIB's
# interfaces and ifMIB, RFC 2863): snmpd shows the community nothing more.
SNMP_VIEW_OIDS = (".1.3.6.1.2.1.1", ".1.3.6.1.2.1.2", ".1.3.6.1.2.1.31")


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
        files["etc/frr/frr.conf"] = frr_conf(plan, sw)
        files["etc/frr/daemons"] = template("frr-daemons.j2", site=plan.site, sw=sw)
    roce = plan.roce.of_switch(sw.name)
    if roce:
        files[QOS_FEATURES] = qos_features(plan, sw, roce)
    snmpd = snmpd_conf(plan, sw)
    if snmpd is not None:
        files[SNMPD_CONF] = snmpd
    return files


def snmpd_conf(plan: Plan, sw: EthernetSwitch) -> str | None:
    """snmpd.conf of a switch the snmp_exporter walks; None without `monitoring: snmp:`, a
    management address, or a site management network to answer."""
    if plan.site.monitoring.snmp is None or sw.management is None or plan.management is None:
        return None
    return template(
        "cumulus-snmpd.conf.j2",
        site=plan.site,
        sw=sw,
        module=PROBES["snmp"].module,
        address=sw.management.split("/")[0],
        view=SNMP_VIEW,
        view_oids=SNMP_VIEW_OIDS,
        network=plan.management,
        source=plan.networks[plan.management].cidr,
        community=snmpd_word(snmp_community(plan)),
    )


def snmpd_word(value: str) -> str:
    """`value` as one token of snmpd.conf: net-snmp's copy_nword reads a double-quoted word
    whole, a backslash escaping the next character (a community is any one line of text)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def qos_features(plan: Plan, sw: EthernetSwitch, roce: tuple[RocePort, ...]) -> str:
    """qos_features.conf: one RoCE class (a switch carries one; checks refuse two)."""
    q = roce[0].qos
    dscp: list[list[int]] = [[] for _ in range(8)]
    for d in range(64):
        dscp[{q.dscp: q.priority, q.cnp_dscp: q.cnp_priority}.get(d, 0)].append(d)
    ports = {p.port for p in roce}
    lengths = [
        c.length_m
        for c in plan.cables
        if any(
            e.device == sw.name and e.port.isdigit() and int(e.port) in ports for e in (c.a, c.b)
        )
    ]
    return template(
        "cumulus-qos.j2",
        site=plan.site,
        sw=sw,
        q=q,
        dscp=dscp,
        ports=port_set(ports),
        cable_m=round(max(lengths, default=10)),
    )


def render(plan: Plan) -> dict[str, str]:
    out: dict[str, str] = {}
    for sw in plan.ethernet.switches:
        if sw.os != SwitchOs.CUMULUS:
            continue
        files = switch_files(plan, sw)
        out.update({f"switches/{sw.name}/{path}": text for path, text in files.items()})
    return out
