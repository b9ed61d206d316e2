"""`compiler/plan.py`: the one derived view every target reads."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from compiler.load import load
from compiler.model import Medium
from compiler.pipeline import compile_source
from compiler.plan import Plan
from tests.conftest import REPO


def _renamed(data: Any, old: str, new: str) -> Any:
    """`data` with every key and value `old` written `new`: one name changed throughout."""
    if isinstance(data, str):
        return new if data == old else data
    if isinstance(data, dict):
        return {_renamed(k, old, new): _renamed(v, old, new) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_renamed(v, old, new) for v in data)
    return data


def test_the_management_network_is_the_one_with_the_default_route_whatever_its_name() -> None:
    """A site calling its management network `oob` gets the same plain host names, scrape
    addresses and NCCL socket interfaces as one calling it `mgmt`."""
    source = load(REPO / "cluster")
    mgmt = compile_source(source)
    oob = compile_source(replace(source, data=_renamed(source.data, "mgmt", "oob")))
    assert (mgmt.plan.management, oob.plan.management) == ("mgmt", "oob")
    for a, b in zip(mgmt.plan.hosts, oob.plan.hosts, strict=True):
        assert (a.management, b.management) == ("mgmt", "oob")
        assert a.management_interface._replace(network="oob") == b.management_interface
    same = ["hosts", "monitoring/targets/node.json", "gpudirect/gpu/nccl.conf"]
    assert [oob.files[p] for p in same] == [mgmt.files[p] for p in same]
    assert f"\t{mgmt.plan.hosts[0].name}.".encode() in mgmt.files["hosts"]


def test_the_plan_holds_no_raw_model_and_derives_the_fabric_once() -> None:
    compiled = compile_source(load(REPO / "cluster"))
    plan = compiled.plan
    assert "cluster" not in {f.name for f in fields(Plan)}
    ib = {n for n, net in compiled.cluster.networks.items() if net.medium == Medium.INFINIBAND}
    assert plan.ib_networks == ib == {"ipoib"}
    assert plan.ib_mtu == 4096


def test_a_hosts_software_is_its_roles_services_with_their_versions_in() -> None:
    """Packages name the host's own versions (`{ofed}`, `{key_major}`); hosts of one role at
    one baseline share one record; ports are the union of the role's services'."""
    plan = compile_source(load(REPO / "cluster")).plan
    catalogue = load(REPO / "cluster").data["services"]["services"]
    templated = 0
    for host in plan.hosts:
        names = [n for n, _ in host.software.services]
        assert tuple(names) == host.services
        assert not any("{" in p for p in host.software.packages + host.software.module_streams)
        majors = {f"{k}_major": v.split(".")[0] for k, v in host.versions.items()}
        variables = host.versions | majors
        raw = [p for n in names for p in catalogue[n].get("packages", ()) if "{" in p]
        assert {p.format(**variables) for p in raw} <= set(host.software.packages)
        templated += len(raw)
        ports = {p for n in names for p in catalogue[n].get("ports", ())}
        assert set(host.software.ports) == ports
        assert len(host.software.packages) == len(set(host.software.packages))
    by_role = {}
    for host in plan.hosts:
        twin = by_role.setdefault((host.role, tuple(host.versions.items())), host)
        assert twin.software is host.software
    assert templated and len(by_role) < len(plan.hosts)
