"""generated/routes/: applied in a network namespace per sample host, traffic takes the planned NIC.

Each namespace gets the host's interfaces as veth links (a veth pair inside the namespace, so
each end has carrier; ib0 stands in for IPoIB the same way) with the host's addresses, then
every route of its NetworkManager keyfiles (`gateway=` and `routeN=`, read as NetworkManager
reads them) as `ip route add`. The kernel's own route lookup is the
oracle: `ip -j route get` must leave storage by the storage NIC and management by the
management NIC, also after the default route is moved to the wrong NIC; and `ip -j route show`,
normalised by `contract.normal_routes` (what the audit compares through), must equal the
routes generated/expected/ promises.
"""

from __future__ import annotations

import configparser
import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import netaddr
import pytest

from compiler.pipeline import Compiled, compile_repo
from compiler.plan import Host
from contract import Route, normal_routes
from tests.conftest import require_tool

SAMPLES = ("gpu001", "login01", "prov01")  # a GPU server, a login node, the provisioning host
STORAGE_SERVER = "10.70.241.17"  # a parallel file system server, in 10.70.240.0/22
FAR_STORAGE_HOST = "gpu060"  # another rack's GPU server: GPFS daemon and token traffic
_names = itertools.count()


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def _ip(*args: str) -> str:
    done = subprocess.run(
        [require_tool("ip"), *args], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def keyfile_routes(compiled: Compiled, host: str) -> list[Route]:
    """Every route the host's keyfiles configure: the default route of `gateway=`, and each
    `routeN=dst[,gateway]` of [ipv4], on the keyfile's interface."""
    routes = []
    for iface in compiled.plan.host(host).interfaces:
        keyfile = configparser.ConfigParser(interpolation=None)
        keyfile.read_string(compiled.files[f"routes/{host}/{iface.name}.nmconnection"].decode())
        ipv4 = keyfile["ipv4"]
        if "gateway" in ipv4:
            routes.append(Route("default", iface.name, ipv4["gateway"]))
        for key, value in ipv4.items():
            if key.startswith("route") and key[5:].isdigit():
                dst, _, gateway = value.partition(",")
                routes.append(Route(dst, iface.name, gateway or None))
    return routes


def route_lines(compiled: Compiled, host: str) -> list[str]:
    """The keyfiles' routes as `ip route add` arguments."""
    return [
        f"{r.dst} {'via ' + r.gateway + ' ' if r.gateway else ''}dev {r.dev}"
        for r in keyfile_routes(compiled, host)
    ]


@contextmanager
def namespace(host: Host, lines: list[str]) -> Iterator[str]:
    """A network namespace with the host's interfaces, addresses and `lines` as routes."""
    name = f"cf-{os.getpid()}-{next(_names)}-{host.name}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        for i, iface in enumerate(host.interfaces):
            peer = f"peer{i}"
            _ip("-n", name, "link", "add", iface.name, "type", "veth", "peer", "name", peer)
            _ip("-n", name, "link", "set", peer, "up")
            _ip("-n", name, "link", "set", iface.name, "up")
            _ip("-n", name, "addr", "add", iface.cidr, "dev", iface.name)
        for line in lines:
            _ip("-n", name, "route", "add", *line.split())
        yield name
    finally:
        subprocess.run([require_tool("ip"), "netns", "del", name], check=False, timeout=30)


def leaves_by(ns: str, address: str) -> str:
    """The device the kernel sends `address` out of."""
    answer: list[dict[str, Any]] = json.loads(_ip("-n", ns, "-j", "route", "get", address))
    return str(answer[0]["dev"])


def shown(ns: str) -> list[dict[str, str]]:
    return normal_routes(json.loads(_ip("-n", ns, "-j", "route", "show")))


def expected_routes(compiled: Compiled, host: str) -> list[dict[str, str]]:
    contract = json.loads(compiled.files[f"expected/hosts/{host}.json"])
    routes: list[dict[str, str]] = contract["routes"]
    return routes


def _nic(host: Host, network: str) -> str:
    iface = host.interface(network)
    assert iface is not None, f"{host.name} has no {network} interface"
    return iface.name


@pytest.mark.realtool
@pytest.mark.parametrize("name", SAMPLES)
def test_routes_take_the_planned_nic(compiled: Compiled, name: str) -> None:
    host = compiled.plan.host(name)
    storage, mgmt = _nic(host, "storage"), _nic(host, "mgmt")
    far_bmc = compiled.plan.host("gpu124").bmc.address  # another rack's BMC subnet
    far_storage = compiled.plan.address(FAR_STORAGE_HOST, "storage")
    with namespace(host, route_lines(compiled, name)) as ns:
        assert shown(ns) == expected_routes(compiled, name)
        assert leaves_by(ns, STORAGE_SERVER) == storage
        assert leaves_by(ns, far_storage) == storage
        assert leaves_by(ns, far_bmc) == mgmt
        # The fault from the field: a default route out of the wrong NIC.
        storage_gw = next(r.gateway for r in host.routes if r.dev == storage and r.gateway)
        assert storage_gw is not None
        _ip("-n", ns, "route", "replace", "default", "via", storage_gw, "dev", storage)
        assert leaves_by(ns, STORAGE_SERVER) == storage
        assert leaves_by(ns, far_bmc) == mgmt


@pytest.mark.realtool
def test_missing_storage_route_is_caught(compiled: Compiled) -> None:
    """Without the storage route, storage reads follow the default route: the oracle sees it."""
    host = compiled.plan.host("gpu001")
    lines = [line for line in route_lines(compiled, "gpu001") if "10.70.0.0/16" not in line]
    assert len(lines) == len(route_lines(compiled, "gpu001")) - 1
    with namespace(host, lines) as ns:
        assert leaves_by(ns, STORAGE_SERVER) == _nic(host, "mgmt")
        assert leaves_by(ns, STORAGE_SERVER) != _nic(host, "storage")
        assert shown(ns) != expected_routes(compiled, "gpu001")


def test_normaliser_matches_ip_json() -> None:
    """The FORMATS.md §6 sample of `ip -j route show` (a host route printed without /32)."""
    sample: list[dict[str, Any]] = [
        {"dst": "default", "gateway": "10.70.1.1", "dev": "v0", "metric": 100, "flags": []},
        {"dst": "10.70.1.0/24", "dev": "v0", "protocol": "kernel", "scope": "link"},
        {"dst": "10.80.0.0/16", "gateway": "10.70.1.254", "dev": "v0", "protocol": "static"},
        {"dst": "10.80.0.0/16", "gateway": "10.70.1.254", "dev": "v0", "metric": 101},
        {"dst": "10.9.9.9", "dev": "v0", "scope": "link"},
    ]
    assert normal_routes(sample) == [
        {"dst": "default", "dev": "v0", "gateway": "10.70.1.1"},
        {"dst": "10.70.1.0/24", "dev": "v0"},
        {"dst": "10.80.0.0/16", "dev": "v0", "gateway": "10.70.1.254"},
        {"dst": "10.9.9.9/32", "dev": "v0"},
    ]


@pytest.mark.parametrize("name", SAMPLES)
def test_keyfiles_carry_exactly_the_contracts_routes(compiled: Compiled, name: str) -> None:
    """The keyfiles' addresses and routes, plus the connected routes the kernel makes from the
    addresses, are exactly the routes generated/expected/ promises the audit."""
    host = compiled.plan.host(name)
    contract = {Route.from_ip(r) for r in expected_routes(compiled, name)}
    connected = set()
    for iface in host.interfaces:
        keyfile = configparser.ConfigParser(interpolation=None)
        keyfile.read_string(compiled.files[f"routes/{name}/{iface.name}.nmconnection"].decode())
        assert keyfile["ipv4"]["address1"] == iface.cidr
        connected.add(Route(str(netaddr.IPNetwork(iface.cidr).cidr), iface.name))
    assert set(keyfile_routes(compiled, name)) | connected == contract
