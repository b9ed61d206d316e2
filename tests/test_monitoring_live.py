"""A real Prometheus (the Debian package) on 127.0.0.1 with the rules of the monitoring host's
bundle raises each expected alert, and no other, from exporters in failure states; a healthy
fleet raises none; every dashboard query answers. A real Alertmanager with the bundle's config
groups a rack's alerts into one notification and holds back a down host's GPU alerts.

The exporters are one small HTTP server on loopback serving tests/monitoring_fleet.py's
samples under the real metric names of node_exporter, dcgm-exporter, ipmi_exporter (its
/ipmi?target=), blackbox_exporter (its /probe?target=) and snmp_exporter (its /snmp?target=);
gpu001's node_exporter is a closed port. What the test changes, and only in its own copies:
- cluster/ is copied and its site.yaml `monitoring:` gets `pending: 2s`, `bmc_down_for: 2s`
  and `ecc_window: 30s`, then compiled; the rules are the mon01 overlay's files, unchanged;
- the overlay's prometheus.yml gets a 3 s scrape and 1 s evaluation interval, no Alertmanager, and
  the probe jobs' exporter address set to the test server; the target files keep their labels
  but only the fleet's hosts, with node/dcgm targets pointed at the test server (a
  `__metrics_path__` label per host).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler import bundle
from compiler.load import load
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.plan import Host, Plan
from compiler.targets.render import to_json, to_yaml
from compiler.targets.shared import PROBES
from tests import monitoring_fleet as fleet
from tests.conftest import REPO, require_tool, stop

DEADLINE_S = 90  # per Prometheus run; it usually settles in about ten seconds
FAST = {"pending": "2s", "bmc_down_for": "2s", "ecc_window": "30s"}


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
    return compile_repo(repo)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Fleet:
    """The test exporter's state: every target's scrape, found by path or probe target."""

    def __init__(self, plan: Plan, faulty: bool) -> None:
        self.start, self.faulty = time.time(), faulty
        self.by_path: dict[str, fleet.Scrape] = {}
        self.by_probe: dict[tuple[str, str], fleet.Scrape] = {}
        for scrape in fleet.scrapes(plan, now=self.start, faulty=faulty):
            if scrape.job in PROBES:
                address = scrape.extra.get("address") or plan.host(scrape.host).bmc.address
                self.by_probe[(scrape.job, address)] = scrape
            else:
                self.by_path[f"/{scrape.job}/{scrape.host}"] = scrape
        self.scraped: dict[int, int] = {}
        self.lock = threading.Lock()

    def answer(self, path: str, query: dict[str, list[str]]) -> str | None:
        job = {"/ipmi": "ipmi", "/probe": "icmp", "/snmp": "snmp"}.get(path)
        scrape = (
            self.by_probe.get((job, query.get("target", [""])[0]))
            if job
            else self.by_path.get(path)
        )
        if scrape is None or scrape.samples is None:
            return None
        with self.lock:
            n = self.scraped[id(scrape)] = self.scraped.get(id(scrape), -1) + 1
        return fleet.exposition(scrape.samples, n, time.time() - self.start)


@contextmanager
def exporter(state: Fleet) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            body = state.answer(url.path, urllib.parse.parse_qs(url.query))
            if body is None:
                self.send_error(503, "this exporter is in its failure state")
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # Prometheus gave up on a slow scrape: that scrape fails, as it should

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def prometheus_dir(compiled: Compiled, to: Path, exporter_at: str, faulty: bool) -> Path:
    """The mon01 overlay's /etc/prometheus, its config and targets adjusted as the module
    docstring says."""
    host = compiled.plan.site.services.monitoring
    bundle.write(to / "bundle", bundle.bundles(compiled, hosts=[host]))
    conf = to / "bundle" / host / "etc" / "prometheus"
    config = YAML(typ="safe").load((conf / "prometheus.yml").read_text())
    # 3 s to answer: on a loaded test machine a scrape of the Python exporter that times out
    # would be a real ExporterDown, pending, and spoil "no other alert".
    config["global"] |= {"scrape_interval": "3s", "scrape_timeout": "3s"}
    config["global"]["evaluation_interval"] = "1s"
    del config["alerting"]
    for job in config["scrape_configs"]:
        job.pop("scrape_interval", None)
        for relabel in job.get("relabel_configs", []):
            if relabel.get("target_label") == "__address__":
                relabel["replacement"] = exporter_at
    (conf / "prometheus.yml").write_text(to_yaml(config))
    closed = f"127.0.0.1:{_free_port()}"  # nothing listens: gpu001's node_exporter is down
    for path in (conf / "targets").glob("*.json"):
        job = path.stem
        kept = []
        for group in json.loads(path.read_text()):
            name = group["labels"]["instance"]
            if name not in (*fleet.FLEET, *fleet.SWITCHES):
                continue
            if job not in PROBES:
                down = faulty and job == "node" and fleet.FAULTS.get(name) == "host_down"
                group["targets"] = [closed if down else exporter_at]
                group["labels"]["__metrics_path__"] = f"/{job}/{name}"
            kept.append(group)
        path.write_text(to_json(kept))
    return conf


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@contextmanager
def serving(name: str, argv: list[str], log_dir: Path) -> Iterator[str]:
    """`argv` (with `{port}` for its loopback port) running until ready, killed on the way out;
    yields its base URL. Prometheus and Alertmanager both answer /-/ready."""
    port = _free_port()
    log_path = log_dir / f"{name}.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [arg.replace("{port}", str(port)) for arg in argv], stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        until = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < until, f"{name} did not get ready"
            time.sleep(0.2)
        yield base
    finally:
        stop(proc, timeout=10)
        log.close()


def prometheus(conf: Path, data: Path) -> AbstractContextManager[str]:
    """Prometheus on loopback over `conf`."""
    argv = [
        require_tool("prometheus"),
        f"--config.file={conf / 'prometheus.yml'}",
        f"--storage.tsdb.path={data}",
        "--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    return serving("prometheus", argv, data.parent)


def alerts(base: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = _get(f"{base}/api/v1/alerts")["data"]["alerts"]
    return found


def _key(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True)


def _settle(base: str, ready: Any) -> list[dict[str, Any]]:
    until = time.monotonic() + DEADLINE_S
    while True:
        now = alerts(base)
        if ready(now):
            return now
        assert time.monotonic() < until, json.dumps(now, indent=1)[:6000]
        time.sleep(0.5)


@pytest.mark.realtool
def test_prometheus_raises_each_expected_alert_and_no_other(
    compiled: Compiled, tmp_path: Path
) -> None:
    want = sorted(_key(a) for a in fleet.expected(compiled.plan))
    state = Fleet(compiled.plan, faulty=True)
    with (
        exporter(state) as at,
        prometheus(prometheus_dir(compiled, tmp_path, at, state.faulty), tmp_path / "data") as base,
    ):

        def same(now: list[dict[str, Any]]) -> bool:
            return sorted(_key(a["labels"]) for a in now) == want

        _settle(base, lambda now: same(now) and all(a["state"] == "firing" for a in now))
        time.sleep(3)  # three more evaluations: nothing else turns up
        now = alerts(base)
        assert sorted(_key(a["labels"]) for a in now) == want
        assert {a["state"] for a in now} <= {"pending", "firing"}
        # The dashboard's every query answers from the recording rules.
        board = json.loads(
            compiled.files["monitoring/grafana/dashboards/cluster-overview.json"].decode()
        )
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = target["expr"].replace("$rack", ".*")
                answer = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
                assert answer["status"] == "success" and answer["data"]["result"], expr


@pytest.mark.realtool
def test_a_healthy_fleet_raises_nothing(compiled: Compiled, tmp_path: Path) -> None:
    state = Fleet(compiled.plan, faulty=False)
    with (
        exporter(state) as at,
        prometheus(prometheus_dir(compiled, tmp_path, at, state.faulty), tmp_path / "data") as base,
    ):
        until = time.monotonic() + DEADLINE_S
        while True:
            targets = _get(f"{base}/api/v1/targets")["data"]["activeTargets"]
            if targets and all(t["health"] == "up" for t in targets):
                break
            assert time.monotonic() < until, [t for t in targets if t["health"] != "up"]
            time.sleep(0.5)
        assert len(targets) == len(fleet.scrapes(compiled.plan))
        time.sleep(4)  # evaluations over scraped data; a `for:` would show as pending already
        assert alerts(base) == []
        up = _get(f"{base}/api/v1/query?query=cluster:gpus_visible:count")["data"]["result"]
        gpus = sum(
            int(compiled.plan.host(h).gpus["count"])
            for h in fleet.FLEET
            if compiled.plan.host(h).gpus
        )
        assert up and float(up[0]["value"][1]) == gpus


# --- Alertmanager ------------------------------------------------------------------------------


@contextmanager
def webhooks() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """A chat-ops stand-in on loopback: records (path, body) of every notification."""
    got: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.path, json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def alertmanager(config: Path, data: Path) -> AbstractContextManager[str]:
    """Alertmanager on loopback (no cluster peering)."""
    argv = [
        require_tool("prometheus-alertmanager"),
        f"--config.file={config}",
        f"--storage.path={data}",
        "--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    return serving("alertmanager", argv, data.parent)


@pytest.mark.realtool
def test_alertmanager_groups_a_rack_and_holds_back_a_down_hosts_gpu_alerts(
    tmp_path: Path,
) -> None:
    """A rack losing power (every host down, every BMC silent) is one notification per
    receiver; the GPU alert of a host that is down is suppressed; a critical GPU alert
    elsewhere reaches on-call and the GPU team. The config is the mon01 overlay's, built with
    the webhook URLs read from the environment (loopback here); the test's copy only shortens
    group_wait and group_interval to 1 s."""
    with webhooks() as (hook, got):
        names = {"ops": "OPS", "oncall": "ONCALL", "gpu-team": "GPU"}
        environ = {f"CLUSTERFORGE_WEBHOOK_{v}": f"{hook}/{k}" for k, v in names.items()}
        built = compile_source(load(REPO / "cluster"), environ)
        host = built.plan.site.services.monitoring
        bundle.write(tmp_path / "bundle", bundle.bundles(built, hosts=[host]))
        installed = tmp_path / "bundle" / host / "etc" / "prometheus" / "alertmanager.yml"
        config = YAML(typ="safe").load(installed.read_text())
        assert {r["webhook_configs"][0]["url"] for r in config["receivers"][1:]} == {
            f"{hook}/{k}" for k in names
        }
        config["route"] |= {"group_wait": "1s", "group_interval": "1s"}
        (tmp_path / "alertmanager.yml").write_text(to_yaml(config))

        plan = built.plan
        rack = [h for h in plan.hosts if h.rack == plan.host("gpu001").rack]
        elsewhere = plan.host("gpu017")

        def alert(name: str, h: Host, severity: str, **extra: str) -> dict[str, Any]:
            labels = {"alertname": name, "host": h.name, "instance": h.name, "rack": h.rack}
            labels |= {"u": str(h.u), "role": h.role.value, "severity": severity}
            return {"labels": labels | extra, "annotations": {"summary": name}}

        sent = [alert("HostDown", h, "critical", job="node") for h in rack]
        sent += [alert("BmcUnreachable", h, "warning", job="ipmi") for h in rack]
        sent.append(alert("GpuTemperatureHigh", rack[0], "critical", job="dcgm", gpu="0"))
        sent.append(alert("GpuTemperatureHigh", elsewhere, "critical", job="dcgm", gpu="0"))
        with alertmanager(tmp_path / "alertmanager.yml", tmp_path / "am-data") as base:
            request = urllib.request.Request(
                f"{base}/api/v2/alerts",
                data=json.dumps(sent).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                assert response.status == 200
            until = time.monotonic() + DEADLINE_S
            while len(got) < 6:  # two groups (racks) to ops and gpu-team, two to on-call
                assert time.monotonic() < until, got
                time.sleep(0.2)
            time.sleep(3)  # three more group intervals: nothing else is sent
            state = {
                (a["labels"]["alertname"], a["labels"]["host"]): a["status"]
                for a in _get(f"{base}/api/v2/alerts")
            }
    held = state[("GpuTemperatureHigh", rack[0].name)]
    assert held["state"] == "suppressed" and held["inhibitedBy"]
    assert state[("GpuTemperatureHigh", elsewhere.name)]["state"] == "active"

    def received(path: str) -> dict[str, set[tuple[str, str]]]:
        return {
            body["groupLabels"]["rack"]: {
                (a["labels"]["alertname"], a["labels"]["host"]) for a in body["alerts"]
            }
            for at, body in got
            if at == path
        }

    down = {("HostDown", h.name) for h in rack}
    bmc = {("BmcUnreachable", h.name) for h in rack}
    hot = {("GpuTemperatureHigh", elsewhere.name)}
    everything = {rack[0].rack: down | bmc, elsewhere.rack: hot}
    assert received("/ops") == everything
    assert received("/gpu-team") == everything  # every host of both racks is a GPU server
    assert received("/oncall") == {rack[0].rack: down, elsewhere.rack: hot}
    assert len(got) == 6, [(at, b["groupLabels"]) for at, b in got]


@pytest.mark.realtool
def test_alertmanager_holds_back_a_silent_switch_s_port_alerts(tmp_path: Path) -> None:
    """A switch that does not answer ping (RackSwitchUnreachable) holds back its own SNMP and
    port alerts, which follow from it; another switch's port alert goes out. The overlay's
    config, webhook URLs on loopback, group_wait/group_interval 1 s as above."""
    with webhooks() as (hook, got):
        built = compile_source(load(REPO / "cluster"), {"CLUSTERFORGE_WEBHOOK_OPS": f"{hook}/ops"})
        host = built.plan.site.services.monitoring
        bundle.write(tmp_path / "bundle", bundle.bundles(built, hosts=[host]))
        installed = tmp_path / "bundle" / host / "etc" / "prometheus" / "alertmanager.yml"
        config = YAML(typ="safe").load(installed.read_text())
        config["route"] |= {"group_wait": "1s", "group_interval": "1s"}
        (tmp_path / "alertmanager.yml").write_text(to_yaml(config))

        def alert(name: str, switch: str, severity: str, **extra: str) -> dict[str, Any]:
            labels = fleet.labels_of(built.plan, switch) | {"alertname": name, "host": switch}
            labels |= {"severity": severity, "switch": switch} | extra
            return {"labels": labels, "annotations": {"summary": name}}

        dead, other = fleet.SWITCH_DOWN, "stor04"
        sent = [
            alert("RackSwitchUnreachable", dead, "critical", job="icmp"),
            alert("SwitchSnmpUnreachable", dead, "warning", job="snmp"),
            alert("SwitchUplinkDown", dead, "critical", job="snmp", ifName="swp49"),
            alert("SwitchUplinkDown", other, "critical", job="snmp", ifName="swp49"),
        ]
        with alertmanager(tmp_path / "alertmanager.yml", tmp_path / "am-data") as base:
            request = urllib.request.Request(
                f"{base}/api/v2/alerts",
                data=json.dumps(sent).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                assert response.status == 200
            until = time.monotonic() + DEADLINE_S
            while len(got) < 2:  # two racks' groups to ops
                assert time.monotonic() < until, got
                time.sleep(0.2)
            time.sleep(3)
            state = {
                (a["labels"]["alertname"], a["labels"]["host"]): a["status"]["state"]
                for a in _get(f"{base}/api/v2/alerts")
            }
    assert state == {
        ("RackSwitchUnreachable", dead): "active",
        ("SwitchSnmpUnreachable", dead): "suppressed",
        ("SwitchUplinkDown", dead): "suppressed",
        ("SwitchUplinkDown", other): "active",
    }
    notified = {
        (a["labels"]["alertname"], a["labels"]["host"]) for _, b in got for a in b["alerts"]
    }
    assert notified == {("RackSwitchUnreachable", dead), ("SwitchUplinkDown", other)}
