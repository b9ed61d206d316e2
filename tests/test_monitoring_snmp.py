"""The switches' port monitoring through the real programs.

Debian bookworm's snmp_exporter (0.21, the version the monitoring host's package is pinned
to) loads the generated snmp.yml and refuses the same module in 0.23's layout. Then a switch
is played in a network namespace of its own: veth pairs named as the plan names its ports
(swp1, swp49, ...; their far ends in a second namespace, the cables' other ends), the
switch's management address on the namespace's loopback, and net-snmp's `snmpd` started as
root, dropping to `nobody`, on the switch's own generated snmpd.conf (byte for byte: its
agentAddress, port 161, its view and its community, the one the compile read from the
environment); the exporter, started as the packaged unit starts it (its options file, as
`prometheus`, the bundle's /etc/prometheus in place), walks the management address as the
generated target names it, with the generated module; and a real Prometheus with the
bundle's rules, scraping the switch through it, raises SwitchPortSpeedDegraded for the
planned ports (a veth's link runs at 10 Gb/s, below every cable's plan), then
SwitchUplinkDown, with the plan's cable, once the uplink's far end goes down. A port nothing
is cabled to stays quiet, down or not. The same snmpd.conf with another community answers
nothing: no metrics, and SwitchSnmpUnreachable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from ruamel.yaml import YAML

from compiler import bundle
from compiler.load import load
from compiler.model import SwitchOs
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.targets.render import to_json, to_yaml
from compiler.targets.shared import PROBES, SNMP_PLACEHOLDER
from tests import monitoring_fleet as fleet
from tests.conftest import REPO, require_tool, stop

COMMUNITY = "cf-test-community"  # read by the compile from $CLUSTERFORGE_SNMP_COMMUNITY
SWITCH = "stor04"
DEADLINE_S = 90
FAST = {"pending": "2s"}
# What fetches a URL inside the namespace: this Python, run there.
GET = (
    "import sys, urllib.request; "
    "print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())"
)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO / "cluster", repo / "cluster")
    site = repo / "cluster" / "site.yaml"
    text = site.read_text()
    for key, value in FAST.items():
        text, n = re.subn(rf"^(  {key}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        assert n == 1, key
    site.write_text(text)
    return compile_source(load(repo / "cluster"), {"CLUSTERFORGE_SNMP_COMMUNITY": COMMUNITY})


def overlay(compiled: Compiled, to: Path) -> Path:
    """The monitoring host's bundle root, its /etc/prometheus owned as the deploy map says."""
    host = compiled.plan.site.services.monitoring
    bundle.write(to, bundle.bundles(compiled, hosts=[host]))
    root = to / host
    for placed in compiled.deploys[host].files:
        if placed.path.startswith("/etc/prometheus/"):
            user, group = placed.owner.split(":")
            shutil.chown(root / placed.path.lstrip("/"), user, group)
    return root


def _options(text: str) -> list[str]:
    """SNMP_EXPORTER_OPTS of the unit's EnvironmentFile, split at whitespace as systemd
    splits an unbraced $VAR."""
    line = next(x for x in text.splitlines() if x.startswith("SNMP_EXPORTER_OPTS="))
    return line.split("=", 1)[1].strip('"').split()


@pytest.mark.realtool
def test_snmp_exporter_loads_the_module_and_refuses_the_newer_layout(
    compiled: Compiled, tmp_path: Path
) -> None:
    exporter = require_tool("prometheus-snmp-exporter")
    conf = overlay(compiled, tmp_path / "bundle") / "etc/prometheus"
    text = (conf / "snmp.yml").read_text()
    assert f"community: {COMMUNITY}\n" in text
    done = subprocess.run(
        [exporter, f"--config.file={conf / 'snmp.yml'}", "--dry-run"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Configuration parsed successfully" in done.stderr, done.stderr
    # 0.23's layout: auths apart, the modules under `modules:`. 0.21 reads it strictly: refused.
    data = YAML(typ="safe").load(text)
    module = data[PROBES["snmp"].module]
    auth = {"site": module.pop("auth") | {"version": module.pop("version")}}
    (tmp_path / "newer.yml").write_text(to_yaml({"auths": auth, "modules": data}))
    done = subprocess.run(
        [exporter, f"--config.file={tmp_path / 'newer.yml'}", "--dry-run"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stderr


class Switch:
    """SWITCH in a network namespace: its ports as veths, their far ends in another."""

    def __init__(self, name: str) -> None:
        self.ns, self.far = f"cfsnmp{name}", f"cfsnmpfar{name}"
        self.ip = require_tool("ip")

    def run(self, *argv: str) -> None:
        subprocess.run([self.ip, *argv], check=True, capture_output=True, timeout=30)

    def exec(self, *argv: str, **kw: Any) -> subprocess.Popen[str]:
        return subprocess.Popen([self.ip, "netns", "exec", self.ns, *argv], text=True, **kw)

    def get(self, url: str) -> str | None:
        """`url` fetched from inside the namespace, or None when it does not answer 200."""
        done = subprocess.run(
            [self.ip, "netns", "exec", self.ns, sys.executable, "-c", GET, url],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout if done.returncode == 0 else None


@contextmanager
def switch_namespace(ports: list[tuple[str, str, bool]], address: str = "") -> Iterator[Switch]:
    """(ifName, alias, up) per port; the far end of port k is far<k>, up when the port is;
    `address` on the loopback, as the switch's management address."""
    sw = Switch(str(os.getpid()))
    sw.run("netns", "add", sw.ns)
    try:
        sw.run("netns", "add", sw.far)
        sw.run("-n", sw.ns, "link", "set", "lo", "up")
        if address:  # the management port's: a local address, so the exporter asks from it
            sw.run("-n", sw.ns, "addr", "add", f"{address}/32", "dev", "lo")
        for k, (name, alias, up) in enumerate(ports):
            sw.run("-n", sw.ns, "link", "add", name, "type", "veth", "peer", "name", f"far{k}",
                   "netns", sw.far)  # fmt: skip
            if alias:  # as ifupdown2 sets a Cumulus port's `alias`
                sw.run("-n", sw.ns, "link", "set", name, "alias", alias)
            sw.run("-n", sw.ns, "link", "set", name, "up")
            if up:
                sw.run("-n", sw.far, "link", "set", f"far{k}", "up")
        yield sw
    finally:
        subprocess.run([sw.ip, "netns", "del", sw.ns], check=False, capture_output=True)
        subprocess.run([sw.ip, "netns", "del", sw.far], check=False, capture_output=True)


def _wait(what: str, probe: Any, procs: list[subprocess.Popen[str]]) -> Any:
    until = time.monotonic() + DEADLINE_S
    while True:
        for proc in procs:
            assert proc.poll() is None, f"{proc.args} exited while waiting for {what}"
        got = probe()
        if got:
            return got
        assert time.monotonic() < until, f"no {what}"
        time.sleep(0.5)


def _samples(text: str, name: str) -> dict[str, tuple[dict[str, str], float]]:
    """ifName -> (labels, value) of metric `name` in the exporter's answer."""
    out = {}
    for labels, value in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, flags=re.M):
        parsed = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[parsed["ifName"]] = (parsed, float(value))
    return out


class Rig(NamedTuple):
    """The switch's namespace with its snmpd and the exporter running, and how to start more."""

    sw: Switch
    start: Callable[..., None]  # (*argv, log=NAME): one more process in the namespace
    started: list[subprocess.Popen[str]]
    url: str  # the exporter's walk of the switch's management address
    prom: Path  # Prometheus's configuration, its one job the switch's snmp target
    pid: Path  # snmpd's pid file


@contextmanager
def rig(
    compiled: Compiled, tmp_path: Path, ports: list[tuple[str, str, bool]], conf_bytes: bytes
) -> Iterator[Rig]:
    """SWITCH's namespace, its ports `ports`, running snmpd on `conf_bytes` (as root, dropping
    to nobody) and the exporter as the packaged unit runs it; Prometheus's files written."""
    exporter, snmpd = require_tool("prometheus-snmp-exporter"), require_tool("snmpd")
    for tool in ("unshare", "setpriv", "mount", "prometheus"):
        require_tool(tool)
    root = overlay(compiled, tmp_path / "bundle")
    argv = _options((root / "etc/default/snmp_exporter").read_text())
    assert f"--web.listen-address={PROBES['snmp'].exporter}" in argv
    Path("/etc/prometheus").mkdir(exist_ok=True)
    # snmpd's folder, reachable by nobody all the way down as /etc/snmp is by snmp on the
    # switch (tmp_path is root's alone: a reload would find no file, unlike the switch's).
    agent = Path(tempfile.mkdtemp(prefix="cfsnmpd-"))
    agent.chmod(0o755)
    shutil.chown(agent, "nobody")
    # The switch's own snmpd.conf, as its deploy map homes it: its management address answers.
    (agent / "snmpd.conf").write_bytes(conf_bytes)
    # As homed, 0640 root and snmpd's group (nogroup here, snmp on Cumulus): root reads it at
    # start, snmpd's own user again on reload.
    (agent / "snmpd.conf").chmod(0o640)
    shutil.chown(agent / "snmpd.conf", "root", "nogroup")
    management = compiled.plan.ethernet.switch(SWITCH).management
    assert management is not None
    address = management.split("/")[0]
    assert f"agentAddress udp:{address}:161\n".encode() in conf_bytes
    # The rules as the bundle has them; Prometheus scrapes the one switch, its target the
    # namespace's agent, its labels the generated ones.
    conf = root / "etc/prometheus"
    config = YAML(typ="safe").load((conf / "prometheus.yml").read_text())
    config["global"] |= {"scrape_interval": "2s", "scrape_timeout": "2s"}
    config["global"]["evaluation_interval"] = "1s"
    del config["alerting"]
    config["scrape_configs"] = [j for j in config["scrape_configs"] if j["job_name"] == "snmp"]
    config["scrape_configs"][0].pop("scrape_interval")
    (tmp_path / "prom").mkdir()
    for name in ("alerts.yml", "recording.yml"):
        shutil.copy(conf / name, tmp_path / "prom" / name)
    (tmp_path / "prom" / "targets").mkdir()
    groups = json.loads((conf / "targets" / "snmp.json").read_text())
    (group,) = [g for g in groups if g["labels"]["instance"] == SWITCH]
    assert group["targets"] == [address]  # the generated target, unchanged: snmpd's port 161
    (tmp_path / "prom" / "targets" / "snmp.json").write_text(to_json([group]))
    (tmp_path / "prom" / "prometheus.yml").write_text(to_yaml(config))
    mount = (
        'mount --bind "$1/etc/prometheus" /etc/prometheus && shift && '
        'exec setpriv --reuid=prometheus --regid=prometheus --init-groups "$@"'
    )
    with switch_namespace(ports, address) as sw, ExitStack() as procs:
        procs.callback(shutil.rmtree, agent, True)
        started: list[subprocess.Popen[str]] = []

        def start(*argv: str, log: str) -> None:
            out = (tmp_path / log).open("w")
            proc = sw.exec(*argv, stdout=out, stderr=subprocess.STDOUT)
            started.append(proc)
            procs.callback(out.close)
            procs.callback(stop, proc)

        start(snmpd, "-f", "-Lo", "-C", "-c", str(agent / "snmpd.conf"), "-u", "nobody",
              "-g", "nogroup", "-p", str(agent / "pid"), log="snmpd.log")  # fmt: skip
        start("unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", str(root),
              exporter, *argv, log="exporter.log")  # fmt: skip
        url = f"http://{PROBES['snmp'].exporter}{PROBES['snmp'].path}?" + (
            f"module={PROBES['snmp'].module}&target={address}"
        )
        yield Rig(sw, start, started, url, tmp_path / "prom", agent / "pid")


@pytest.mark.realtool
def test_a_switch_s_snmpd_walked_by_the_generated_module_raises_the_port_alerts(
    compiled: Compiled, tmp_path: Path
) -> None:
    plan = compiled.plan
    picked = fleet.snmp_ports(plan, SWITCH)  # every cabled port, and one nothing is cabled to
    uplink = next(p for p, _ in picked if p is not None and p.peer is not None)
    planned = {lab["ifName"] for p, lab in picked if p is not None}
    ports = [(lab["ifName"], lab["ifAlias"], p is not None) for p, lab in picked]
    conf_bytes = compiled.files[f"switches/{SWITCH}/etc/snmp/snmpd.conf"]
    with rig(compiled, tmp_path, ports, conf_bytes) as (sw, start, started, url, _, pid):
        text = _wait("walk of snmpd", lambda: sw.get(url), started)
        status = _samples(text, "ifOperStatus")
        assert {n for n, _, _ in ports} <= set(status), status
        for name, _, up in ports:  # named as the plan names the ports, with their lookups
            labels, value = status[name]
            assert {"ifIndex", "ifName", "ifAlias", "ifDescr"} <= set(labels)
            assert labels["ifDescr"] == name and value == (1 if up else 2)
        assert _samples(text, "ifHighSpeed")[uplink_name(picked)][1] == 10000  # a veth's
        for metric in ("ifHCInOctets", "ifHCOutOctets", "ifInErrors", "ifOutErrors"):
            assert set(_samples(text, metric)) >= planned, metric
        assert re.search(r"^sysUpTime \d", text, flags=re.M)
        # `systemctl reload snmpd` (its ExecReload, SIGHUP): snmpd, now nobody, reads the file
        # again and still answers.
        os.kill(int(pid.read_text()), signal.SIGHUP)
        time.sleep(1)
        again = _wait("walk of snmpd after its reload", lambda: sw.get(url), started)
        assert set(_samples(again, "ifOperStatus")) == set(status)

        start(require_tool("prometheus"), f"--config.file={tmp_path / 'prom' / 'prometheus.yml'}",
              f"--storage.tsdb.path={tmp_path / 'data'}", "--web.listen-address=127.0.0.1:9090",
              "--log.level=warn", log="prometheus.log")  # fmt: skip

        def firing(name: str) -> dict[str, dict[str, str]]:
            body = sw.get("http://127.0.0.1:9090/api/v1/alerts")
            if body is None:
                return {}
            alerts = json.loads(body)["data"]["alerts"]
            return {
                a["labels"]["ifName"]: a["labels"]
                for a in alerts
                if a["labels"]["alertname"] == name and a["state"] == "firing"
            }

        slow = _wait("speed alerts", lambda: (s := firing("SwitchPortSpeedDegraded")) and
                     set(s) == planned and s, started)  # fmt: skip
        assert firing("SwitchUplinkDown") == {} and firing("SwitchPortMissing") == {}
        for p, labels in picked:
            if p is not None:
                alert = slow[labels["ifName"]]
                assert alert["cable"] == p.cable and alert["port"] == str(p.port)
                assert alert["switch"] == SWITCH and alert["rack"] == "r04"

        # Its far end down, the port's carrier drops: net-snmp reports ifOperStatus 2 once its
        # interface cache (a few seconds) expires.
        far = next(k for k, (p, _) in enumerate(picked) if p == uplink)
        sw.run("-n", sw.far, "link", "set", f"far{far}", "down")
        name = uplink_name(picked)
        down = _wait("SwitchUplinkDown", lambda: firing("SwitchUplinkDown"), started)
        assert set(down) == {name}, down
        assert down[name]["cable"] == uplink.cable and down[name]["link"] == "uplink"
        assert down[name]["peer"] == uplink.description.removesuffix(f" {uplink.cable}")
        assert down[name]["rack"] == "r04" and down[name]["severity"] == "critical"
        # A port that is down is no slower than planned: its speed alert resolves.
        _wait("the down port's speed alert to resolve",
              lambda: name not in firing("SwitchPortSpeedDegraded"), started)  # fmt: skip


def uplink_name(picked: list[Any]) -> str:
    return str(next(lab["ifName"] for p, lab in picked if p is not None and p.peer is not None))


def test_every_cumulus_switch_s_snmpd_answers_its_own_address_with_the_walk_s_community(
    compiled: Compiled,
) -> None:
    plan = compiled.plan
    snmp = YAML(typ="safe").load(compiled.files["monitoring/snmp.yml"].decode())
    community = snmp[PROBES["snmp"].module]["auth"]["community"]
    assert community == COMMUNITY
    mgmt = plan.networks[plan.management or ""].cidr
    cumulus = [sw for sw in plan.ethernet.switches if sw.os == SwitchOs.CUMULUS]
    assert cumulus
    for sw in cumulus:
        assert sw.management is not None
        text = compiled.files[f"switches/{sw.name}/etc/snmp/snmpd.conf"].decode()
        lines = [x for x in text.splitlines() if not x.startswith("#")]
        assert lines[0] == f"agentAddress udp:{sw.management.split('/')[0]}:161", sw.name
        assert lines[-1] == f'rocommunity "{community}" {mgmt} -V clusterforge', sw.name
    placeholder = compile_repo(REPO).files  # generated/: one placeholder on both sides
    assert (
        f'rocommunity "{SNMP_PLACEHOLDER}" '.encode()
        in placeholder[f"switches/{cumulus[0].name}/etc/snmp/snmpd.conf"]
    )
    assert f"community: {SNMP_PLACEHOLDER}\n".encode() in placeholder["monitoring/snmp.yml"]


@pytest.mark.realtool
def test_a_switch_s_snmpd_with_another_community_gives_no_metrics_and_alerts(
    compiled: Compiled, tmp_path: Path
) -> None:
    picked = fleet.snmp_ports(compiled.plan, SWITCH)
    ports = [(lab["ifName"], lab["ifAlias"], p is not None) for p, lab in picked]
    conf_bytes = compiled.files[f"switches/{SWITCH}/etc/snmp/snmpd.conf"]
    wrong = conf_bytes.replace(f'"{COMMUNITY}"'.encode(), b'"not-the-community"')
    assert wrong != conf_bytes
    with rig(compiled, tmp_path, ports, wrong) as (sw, start, started, url, prom, _):
        start(require_tool("prometheus"), f"--config.file={prom / 'prometheus.yml'}",
              f"--storage.tsdb.path={tmp_path / 'data'}", "--web.listen-address=127.0.0.1:9090",
              "--log.level=warn", log="prometheus.log")  # fmt: skip

        def unreachable() -> list[dict[str, str]]:
            body = sw.get("http://127.0.0.1:9090/api/v1/alerts")
            alerts = json.loads(body)["data"]["alerts"] if body else []
            return [
                a["labels"]
                for a in alerts
                if a["labels"]["alertname"] == "SwitchSnmpUnreachable" and a["state"] == "firing"
            ]

        (alert,) = _wait("SwitchSnmpUnreachable", unreachable, started)
        assert alert["instance"] == SWITCH
        # snmpd drops a request of an unknown community unanswered: the walk times out.
        assert sw.get(url) is None
