"""Facts that hold on real hardware (issue 12): IPoIB MTU, boot mode, disk names, DNS serials,
spine cages, versions compared in full. Each test failed on the output before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.pipeline import Compiled, compile_repo


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def _text(compiled: Compiled, path: str) -> str:
    return compiled.files[path].decode()


# --- IPoIB MTU (item 6) -----------------------------------------------------------------


def test_ipoib_runs_at_the_partition_mtu(compiled: Compiled) -> None:
    """The Default partition (where ib0 lives) sets IB MTU 4096 (mtu=5); ib0 runs 4092 in
    datagram mode, the same in the keyfile and the audit's contract."""
    partitions = _text(compiled, "opensm/partitions.conf")
    assert "Default=0x7fff, ipoib, mtu=5, defmember=full" in partitions
    for host in compiled.plan.hosts:
        for iface in host.interfaces:
            if iface.mac is not None:
                continue  # Ethernet
            assert iface.mtu == 4092, host.name
            keyfile = _text(compiled, f"routes/{host.name}/{iface.name}.nmconnection")
            assert "transport-mode=datagram\nmtu=4092\n" in keyfile
            contract = json.loads(compiled.files[f"expected/hosts/{host.name}.json"])
            assert {"name": iface.name, "mtu": 4092}.items() <= next(
                i for i in contract["interfaces"] if i["name"] == iface.name
            ).items()


def test_no_partition_claims_ipoib_without_an_interface(compiled: Compiled) -> None:
    lines = _text(compiled, "opensm/partitions.conf").splitlines()
    named = [line for line in lines if "=0x" in line and not line.startswith("Default=")]
    assert named, "the reference cluster has a named partition"
    assert not [line for line in named if "ipoib" in line]
