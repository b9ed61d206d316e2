"""Arista EOS switches: a site variant of the reference whose Ethernet switch models run EOS
gets a `startup-config` per switch, from a structured config pyavd validates and renders;
pyavd refuses a broken structured config."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from compiler.load import load
from compiler.pipeline import Compiled, compile_source
from compiler.targets import eos


@pytest.fixture(scope="module")
def compiled(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """The reference with every `os: cumulus` model flipped to `os: eos`."""
    site = tmp_path_factory.mktemp("eos") / "cluster"
    shutil.copytree(repo / "cluster", site)
    hardware = site / "hardware.yaml"
    text = hardware.read_text()
    assert "os: cumulus" in text
    hardware.write_text(text.replace("os: cumulus", "os: eos"))
    return compile_source(load(site))


def test_every_eos_switch_gets_a_startup_config_pyavd_accepts(compiled: Compiled) -> None:
    plan = compiled.plan
    assert plan.ethernet.switches
    for sw in plan.ethernet.switches:
        assert f"switches/{sw.name}/startup-config" in compiled.files
        assert not any(p.startswith(f"switches/{sw.name}/etc/") for p in compiled.files)
    # The compile refuses what pyavd refuses; asked again, for one switch of each role.
    for name in ("stor01", "mgmt01", "stor-spine01", "mgmt-spine01"):
        assert eos.refusals(eos.structured_config(plan, plan.ethernet.switch(name))) == []


def test_the_startup_config_says_what_the_plan_does(compiled: Compiled) -> None:
    text = compiled.files["switches/stor01/startup-config"].decode()
    assert re.search(r"^interface Vlan70\n(   .*\n)*   ip address 10\.70\.1\.1/24\n", text, re.M)
    assert re.search(
        r"^interface Ethernet1\n   description gpu001 ens2f0 R01-ST01\n(   .*\n)*"
        r"   switchport access vlan 70\n",
        text,
        re.M,
    )
    assert "router bgp 4200070001\n" in text
    assert "neighbor interface Ethernet49 peer-group FABRIC remote-as 4200070000\n" in text
    assert "      network 10.70.1.0/24\n" in text
    spine = compiled.files["switches/stor-spine01/startup-config"].decode()
    assert "neighbor interface Ethernet1 peer-group FABRIC remote-as 4200070001\n" in spine


def test_pyavd_refuses_a_broken_structured_config(compiled: Compiled) -> None:
    config = eos.structured_config(compiled.plan, compiled.plan.ethernet.switch("stor01"))
    config["ethernet_interfaces"][0]["mtu"] = "jumbo"
    del config["vlan_interfaces"][0]["name"]
    refused = eos.refusals(config)
    assert any(r.startswith("ethernet_interfaces.0.mtu:") for r in refused), refused
    assert any(r.startswith("vlan_interfaces.0:") for r in refused), refused


def test_an_eos_switch_deploys_its_startup_config_on_flash(compiled: Compiled) -> None:
    for sw in compiled.plan.ethernet.switches:
        deploy = compiled.deploys[sw.name]
        assert [(f.path, f.source) for f in deploy.files] == [
            ("/mnt/flash/startup-config", f"switches/{sw.name}/startup-config")
        ]
        assert deploy.units == ()  # EOS takes it by its CLI, not a systemd unit
