"""`generated/switches/<name>/startup-config` of each Arista EOS switch: a structured config
(pyavd's eos_cli_config_gen schema) from the plan's facts, validated by pyavd and rendered by
it into EOS CLI.

The same design as the Cumulus switches: host ports are access ports of their network's VLAN,
uplinks routed ports with BGP unnumbered sessions (EOS: `neighbor interface EthernetN
peer-group ... remote-as` needs a fixed ASN, so the peer's planned ASN is written), one SVI per
rack subnet. On a RoCE network's path (networks.yaml `rdma: roce`), its ports trust DSCP and
pause on the RoCE priority (`priority-flow-control priority N no-drop`), its queue marks ECN,
and `qos map dscp` puts the RoCE and CNP markings on their traffic classes: pyavd's
ethernet_interfaces `qos`, `priority_flow_control`, `tx_queues` and the global `qos.map`.
pyavd is imported when an EOS switch is compiled, not before: it is large.

The drift audit's account (site.yaml `audit:`, the hosts' account) is a local user with EOS's
built-in `network-operator` role and the audit's public key, no password: EOS has no forced
command, and that role is its read-only equivalent (show commands; configure and bash
refused). Privilege 15 with `aaa authorization exec default local` starts its session in
privileged EXEC, where `show running-config` is (pyavd's local_users and aaa_authorization).
Its `nopassword` is no empty password over SSH: EOS lets a user without a password log in
remotely only under `aaa authentication policy local allow-nopassword-remote-login`, which is
never generated (and is drift where a switch has it), so the key is the only way in.
"""

from __future__ import annotations

from typing import Any

from common.errors import SetupError, TargetError
from compiler.ethernet import EthernetSwitch
from compiler.model import SwitchOs
from compiler.plan import Plan

AUDIT_ROLE = "network-operator"  # EOS's built-in read-only role


def structured_config(plan: Plan, sw: EthernetSwitch) -> dict[str, Any]:
    """What pyavd's eos_cli_config_gen takes for `sw`."""
    asn = {s.name: s.asn for s in plan.ethernet.switches}
    roce = {p.port: p.qos for p in plan.roce.of_switch(sw.name)}
    interfaces: list[dict[str, Any]] = []
    for p in sw.ports:
        port: dict[str, Any] = {
            "name": f"Ethernet{p.port}",
            "description": p.description,
            "shutdown": not p.enabled,
            "mtu": sw.mtu,
        }
        if p.vlan is None:
            port |= {"switchport": {"enabled": False}, "ipv6_enable": True}
        else:
            port |= {"switchport": {"enabled": True, "mode": "access", "access_vlan": p.vlan}}
        q = roce.get(p.port)
        if q is not None:
            port["qos"] = {"trust": "dscp"}
            port["priority_flow_control"] = {
                "enabled": True,
                "priorities": [{"priority": q.priority, "no_drop": True}],
            }
            if q.ecn:  # NVIDIA's RoCE defaults: 150 kB to 1.5 MB, every packet marked past it
                ecn = {"units": "bytes", "min": 150000, "max": 1500000, "max_probability": 100}
                port["tx_queues"] = [
                    {"id": q.priority, "random_detect": {"ecn": {"threshold": ecn}}}
                ]
        interfaces.append(port)
    config: dict[str, Any] = {
        "hostname": sw.name,
        "service_routing_protocols_model": "multi-agent",
        "ip_routing": True,  # EOS CLI: ip routing ipv6 interfaces, for the unnumbered uplinks
        "ipv6_unicast_routing": True,
        "ip_routing_ipv6_interfaces": True,
        "lldp": {"run": sw.lldp},
        "vlans": [{"id": v, "name": f"vlan{v}"} for v in sw.vlans],
        "ethernet_interfaces": interfaces,
        "vlan_interfaces": [
            {
                "name": f"Vlan{v.vlan}",
                "description": f"{v.network} gateway of rack {sw.rack}",
                "ip_address": v.address,
                "mtu": v.mtu,
                "shutdown": False,
            }
            for v in sw.svis
        ],
        "vrfs": [{"name": "MGMT", "ip_routing": False}],
    }
    audit = plan.site.audit
    if audit is not None:
        config["local_users"] = [
            {
                "name": audit.user,
                "privilege": 15,
                "role": AUDIT_ROLE,
                "no_password": True,
                "ssh_key": audit.public_key,
            }
        ]
        config["aaa_authorization"] = {"exec": {"default": "local"}}
    if roce:
        q = next(iter(roce.values()))
        config["qos"] = {
            "map": {
                "dscp": [
                    f"{q.dscp} to traffic-class {q.priority}",
                    f"{q.cnp_dscp} to traffic-class {q.cnp_priority}",
                ]
            }
        }
    if sw.management:
        config["management_interfaces"] = [
            {
                "name": "Management1",
                "vrf": "MGMT",
                "ip_address": sw.management,
                "shutdown": False,
            }
        ]
        if sw.management_gateway:
            config["static_routes"] = [
                {
                    "vrf": "MGMT",
                    "prefix": "0.0.0.0/0",
                    "next_hop": sw.management_gateway,
                }
            ]
    if sw.asn is not None:
        bgp: dict[str, Any] = {
            "as": str(sw.asn),
            "maximum_paths": {"paths": 64},
            "neighbor_interfaces": [
                {
                    "name": f"Ethernet{p.port}",
                    "peer_group": "FABRIC",
                    "remote_as": str(asn.get(p.peer or "")),
                    "description": p.description,
                }
                for p in sw.routed
            ],
            "peer_groups": [{"name": "FABRIC", "send_community": "all"}],
            "address_family_ipv4": {
                "peer_groups": [
                    {
                        "name": "FABRIC",
                        "activate": True,
                        "next_hop": {"address_family_ipv6": {"enabled": True, "originate": True}},
                    }
                ],
                "networks": [{"prefix": v.subnet} for v in sw.svis],
            },
        }
        if sw.router_id:
            bgp["router_id"] = sw.router_id
        config["router_bgp"] = bgp
    return config


def _pyavd() -> Any:
    try:
        import pyavd
    except ImportError:
        raise SetupError(
            "EOS switches are rendered by pyavd: pip install 'clusterforge[eos]'"
        ) from None
    return pyavd


def refusals(config: dict[str, Any]) -> list[str]:
    """What pyavd's schema refuses in a structured config (nothing: it is valid). pyavd takes
    keys it does not know (a site's own data), so a misspelt key is no refusal."""
    pyavd = _pyavd()

    result = pyavd.validate_structured_config(config)
    found = [f"{'.'.join(v.path)}: {v.message}" for v in result.validation_result.violations]
    if result.validated_data is None and not found:
        found.append("no validated data")
    return found


def startup_config(plan: Plan, sw: EthernetSwitch) -> str:
    """`sw`'s EOS CLI; a structured config pyavd refuses is a bug of this module."""
    config = structured_config(plan, sw)
    refused = refusals(config)
    if refused:
        raise TargetError(f"{sw.name}: pyavd refuses the structured config: {'; '.join(refused)}")
    return str(_pyavd().get_device_config(config))


def render(plan: Plan) -> dict[str, str]:
    return {
        f"switches/{sw.name}/startup-config": startup_config(plan, sw)
        for sw in plan.ethernet.switches
        if sw.os == SwitchOs.EOS
    }
