"""generated/monitoring/: the real programs accept every file as the monitoring host's bundle
installs it (promtool, amtool, blackbox_exporter), each alert fires on its failure and stays
quiet otherwise (`promtool test rules`), and Alertmanager routes and holds back as planned.

The `promtool test rules` cases are written here, into tmp_path, from tests/monitoring_fleet.py
(the fleet the running-Prometheus test scrapes too) and the thresholds in cluster/site.yaml.
They run against the generated rules with the annotations left out, because promtool compares
annotations verbatim and they are prose (`promtool check rules` parses their templates on the
real files).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from common.errors import SourceError
from compiler import bundle
from compiler.load import load
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.targets import alerts, monitoring, shared
from compiler.targets.alerts import seconds
from compiler.targets.render import to_yaml
from tests import monitoring_fleet as fleet
from tests.conftest import REPO, require_tool

PROMETHEUS_DIR = "etc/prometheus"


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool(tool), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        # A guard against a hang, not a speed check: `promtool test rules` of the whole rule
        # set took over 120 s in a CI run whose machine had half its CPU stolen.
        timeout=600,
        check=False,
    )


def monitoring_overlay(compiled: Compiled, to: Path) -> Path:
    """The monitoring host's bundle, written as `clusterforge bundle` writes it: its root."""
    host = compiled.plan.site.services.monitoring
    bundle.write(to, bundle.bundles(compiled, hosts=[host]))
    return to / host


def groups(compiled: Compiled, job: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(compiled.files[f"monitoring/targets/{job}.json"])
    return data


def rule_names(compiled: Compiled) -> set[str]:
    rules = YAML(typ="safe").load(compiled.files["monitoring/alerts.yml"].decode())
    return {r["alert"] for g in rules["groups"] for r in g["rules"]}


def _scrape_ipmi(proc: subprocess.Popen[Any], url: str) -> str:
    """What the running ipmi_exporter `proc` answers at `url` (30 s to start); it is ended
    after. Exiting first means it refused its config."""
    try:
        until = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"ipmi_exporter refused its config: {proc.communicate()}"
            try:
                with urllib.request.urlopen(url, timeout=20) as response:
                    return str(response.read().decode())
            except OSError:
                assert time.monotonic() < until, "ipmi_exporter did not answer"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.mark.realtool
def test_config_targets_and_rules_pass_promtool(compiled: Compiled, tmp_path: Path) -> None:
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    done = run("promtool", "check", "config", "prometheus.yml", cwd=conf)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 2 rule files found" in done.stdout + done.stderr
    done = run("promtool", "check", "rules", "alerts.yml", "recording.yml", cwd=conf)
    assert done.returncode == 0, done.stdout + done.stderr  # its lint too: no duplicate rule
    # The oracle reads the target files: a bad label name there fails the config.
    (conf / "targets" / "node.json").write_text('[{"targets": ["x:1"], "labels": {"0bad": "x"}}]')
    assert run("promtool", "check", "config", "prometheus.yml", cwd=conf).returncode != 0
    text = (conf / "alerts.yml").read_text()
    (conf / "alerts.yml").write_text(text.replace("> 85", "> > 85", 1))
    assert run("promtool", "check", "rules", "alerts.yml", cwd=conf).returncode != 0


# --- promtool test rules ----------------------------------------------------------------------


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def fleet_series(compiled: Compiled, span: int, interval: int, faulty: bool) -> list[Any]:
    """The fleet's samples as promtool input series: `span` steps of `interval` seconds."""
    plan = compiled.plan
    out = []
    for scrape in fleet.scrapes(plan, faulty=faulty):
        target = fleet.labels_of(plan, scrape.host) | scrape.extra | {"job": scrape.job}
        up = 0 if scrape.samples is None else 1
        out.append(_series("up", target, f"{up}x{span}"))
        for s in scrape.samples or []:
            step = s.step + (interval if s.clock else 0)
            values = f"{s.value:g}+{step:g}x{span}" if step else f"{s.value:g}x{span}"
            out.append(_series(s.name, target | s.labels, values))
    return out


def minutes(duration: str) -> int:
    whole, rest = divmod(seconds(duration), 60)
    assert not rest, f"the test evaluates whole minutes, not {duration!r}"
    return whole


def rule_tests(compiled: Compiled, wrong: bool = False) -> dict[str, Any]:
    """Every alert fires on the faulty fleet exactly as `fleet.expected` says and not before
    its `for:`; none fires on the healthy fleet; AuditStale fires when the audit's metrics are
    absent and when they grow older than `audit_stale_after`. `wrong` expects a healthy GPU,
    exactly at the limit, to alert."""
    m = compiled.plan.site.monitoring
    hold = max(minutes(m.pending), minutes(m.bmc_down_for))
    early = min(minutes(m.pending), minutes(m.bmc_down_for)) - 1
    late, span = hold + 2, hold + 10
    names = sorted(rule_names(compiled))
    held = {"HostDown", "ExporterDown", "BmcUnreachable", "PingFailed", "GpuTemperatureHigh"}
    held |= {"RackSwitchUnreachable", "SwitchUplinkDown", "SwitchPortSpeedDegraded"}
    held |= {"SwitchSnmpUnreachable", "SwitchPortMissing"}
    held |= {"GpuNvlinkDown", "GpusMissing", "IbPortDown", "IbPortRateDegraded", "MdRaidDegraded"}
    want: dict[str, list[dict[str, str]]] = {n: [] for n in names}
    for alert in fleet.expected(compiled.plan):
        labels = dict(alert)
        want[labels.pop("alertname")].append(labels)
    if wrong:
        healthy = fleet.expected(compiled.plan)[1] | fleet.labels_of(compiled.plan, "gpu017")
        healthy |= {"host": "gpu017", "Hostname": "gpu017", "UUID": "GPU-gpu017-3"}
        want["GpuTemperatureHigh"].append({k: v for k, v in healthy.items() if k != "alertname"})

    def expect(at: int, alerts: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
        return [
            {
                "eval_time": f"{at}m",
                "alertname": name,
                "exp_alerts": [{"exp_labels": labels} for labels in alerts.get(name, [])],
            }
            for name in names
        ]

    mon = fleet.labels_of(compiled.plan, compiled.plan.site.services.monitoring)
    stale = seconds(m.audit_stale_after)
    return {
        "rule_files": ["recording.yml", "alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {  # the faulty fleet: each failure's alert, and no other
                "interval": "1m",
                "input_series": fleet_series(compiled, span, 60, faulty=True),
                "alert_rule_test": expect(late, want)
                + expect(early, {n: want[n] for n in names if n not in held}),
            },
            {  # the healthy fleet: nothing
                "interval": "1m",
                "input_series": fleet_series(compiled, span, 60, faulty=False),
                "alert_rule_test": expect(late, {}) + expect(early, {}),
            },
            {  # no audit textfile at all: its series absent
                "interval": "1m",
                "input_series": [_series("up", mon | {"job": "node"}, f"1x{span}")],
                "alert_rule_test": expect(late, {"AuditStale": [{"severity": "warning"}]}),
            },
            {  # a report that stops changing goes stale after audit_stale_after
                "interval": "1h",
                "input_series": [
                    _series("up", mon | {"job": "node"}, f"1x{stale // 3600 + 3}"),
                    _series(
                        "clusterforge_audit_last_success_timestamp_seconds",
                        mon | {"job": "node"},
                        f"0x{stale // 3600 + 3}",
                    ),
                ],
                "alert_rule_test": expect(stale // 60 - 60, {})
                + expect(stale // 60 + 60, {"AuditStale": [{"severity": "warning"}]}),
            },
        ],
    }


def _unit_test_dir(compiled: Compiled, tmp_path: Path, wrong: bool) -> Path:
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    out = tmp_path / "unit"
    out.mkdir()
    for name in ("alerts.yml", "recording.yml"):
        rules = YAML(typ="safe").load((conf / name).read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                rule.pop("annotations", None)
        (out / name).write_text(to_yaml(rules))
    (out / "tests.yml").write_text(to_yaml(rule_tests(compiled, wrong)))
    return out


@pytest.mark.realtool
def test_each_alert_fires_on_its_failure_and_stays_quiet(
    compiled: Compiled, tmp_path: Path
) -> None:
    done = run(
        "promtool", "test", "rules", "tests.yml", cwd=_unit_test_dir(compiled, tmp_path, False)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    fired = {a["alertname"] for a in fleet.expected(compiled.plan)}
    assert fired == rule_names(compiled)  # every alert has a failure that raises it


@pytest.mark.realtool
def test_a_wrong_expectation_fails(compiled: Compiled, tmp_path: Path) -> None:
    """A GPU exactly at the limit must not alert; expecting it to makes promtool fail."""
    done = run(
        "promtool", "test", "rules", "tests.yml", cwd=_unit_test_dir(compiled, tmp_path, True)
    )
    assert done.returncode != 0
    assert "GpuTemperatureHigh" in done.stdout + done.stderr


# --- the plan in the rules ----------------------------------------------------------------------


def test_targets_carry_rack_u_role_model_and_leaf(compiled: Compiled) -> None:
    plan = compiled.plan
    node = {g["labels"]["instance"]: g for g in groups(compiled, "node")}
    assert set(node) == {h.name for h in plan.hosts}
    assert node["gpu001"]["targets"] == [f"{plan.address('gpu001', 'mgmt')}:9100"]
    assert node["gpu001"]["labels"] == {
        "instance": "gpu001",
        "rack": "r01",
        "u": "2",
        "role": "gpu",
        "model": "hgx-a100",
        "leaf": "leaf01",
    }
    assert node["sm02"]["labels"]["leaf"] == "leaf13"  # cabled by a links: override
    assert "leaf" not in node["prov01"]["labels"]  # no HCA
    dcgm = {g["labels"]["instance"] for g in groups(compiled, "dcgm")}
    assert dcgm == {h.name for h in plan.hosts if h.gpus} and "login01" not in dcgm
    ipmi = {g["labels"]["instance"]: g["targets"] for g in groups(compiled, "ipmi")}
    assert ipmi["gpu001"] == [plan.host("gpu001").bmc.address]
    for h in plan.hosts:  # every leaf label is where the cable plan puts the host's HCA
        cable = [c.a.device for c in plan.cables if c.b.device == h.name and c.network == "ipoib"]
        assert node[h.name]["labels"].get("leaf") == (cable[0] if cable else None)


def test_every_bmc_and_management_address_is_pinged_every_minute(compiled: Compiled) -> None:
    plan = compiled.plan
    pinged = {
        (g["labels"]["instance"], g["labels"]["network"]): g for g in groups(compiled, "icmp")
    }
    assert len(pinged) == 2 * len(plan.hosts) + len(plan.switches)
    for h in plan.hosts:
        assert pinged[(h.name, "bmc")]["targets"] == [h.bmc.address]
        assert pinged[(h.name, "mgmt")]["targets"] == [plan.address(h.name, "mgmt")]
    for sw in plan.switches:  # every switch's management port, labelled with its role
        assert pinged[(sw.name, "bmc")]["targets"] == [sw.address]
        assert pinged[(sw.name, "bmc")]["labels"]["switch_role"] == sw.role.value
    config = YAML(typ="safe").load(compiled.files["monitoring/prometheus.yml"].decode())
    icmp = next(j for j in config["scrape_configs"] if j["job_name"] == "icmp")
    assert icmp["scrape_interval"] == "60s" and icmp["params"] == {"module": ["icmp"]}
    blackbox = YAML(typ="safe").load(compiled.files["monitoring/blackbox.yml"].decode())
    assert blackbox["modules"]["icmp"]["prober"] == "icmp"


def test_planned_rates_and_gpu_counts_come_from_the_plan(compiled: Compiled) -> None:
    text = compiled.files["monitoring/alerts.yml"].decode()
    assert '{job="node",model="hgx-a100",device="mlx5_0",port="1"} * 8 / 1e9 < 200' in text
    assert 'DCGM_FI_DEV_GPU_TEMP{job="dcgm",model="hgx-a100"}) or' in text and ") < 8" in text
    # One GPU server gets a 400G fabric port: its rule names it, the others keep the model's.
    port = compiled.plan.host("gpu005").ib_ports[0]
    plan = replace(
        compiled.plan,
        hosts=tuple(
            h._replace(ib_ports=(port._replace(rate_gbps=400),)) if h.name == "gpu005" else h
            for h in compiled.plan.hosts
        ),
    )
    rules = {r["alert"]: r["expr"] for r in alerts.alert_rules(plan)}
    slow = rules["IbPortRateDegraded"]
    assert 'instance="gpu005",device="mlx5_0",port="1"} * 8 / 1e9 < 400' in slow
    model = 'model="hgx-a100",instance!~"gpu005",device="mlx5_0",port="1"} * 8 / 1e9 < 200'
    assert model in slow and slow.count("< 200") == 2  # hgx-a100 but gpu005; svc-ib


def test_every_configured_switch_is_walked_over_snmp_and_its_ports_are_the_plan_s(
    compiled: Compiled,
) -> None:
    plan = compiled.plan
    walked = {g["labels"]["instance"]: g for g in groups(compiled, "snmp")}
    assert set(walked) == {sw.name for sw in plan.ethernet.switches}
    for sw in plan.switches:
        if sw.name in walked:  # on its management address, labelled as its ping is
            assert walked[sw.name]["targets"] == [sw.address]
            assert walked[sw.name]["labels"] == monitoring.switch_labels(sw)
    config = YAML(typ="safe").load(compiled.files["monitoring/prometheus.yml"].decode())
    snmp = next(j for j in config["scrape_configs"] if j["job_name"] == "snmp")
    assert snmp["metrics_path"] == "/snmp" and snmp["params"] == {"module": ["if_mib"]}
    assert snmp["relabel_configs"][-1]["replacement"] == "127.0.0.1:9116"
    # One planned series per cabled port, its speed the cable's in Mb/s, named as the OS does.
    ports = {(r["labels"]["instance"], r["labels"]["ifName"]): r for r in alerts.switch_ports(plan)}
    assert len(ports) == sum(len(sw.ports) for sw in plan.ethernet.switches)
    up = ports[("stor04", "swp49")]
    assert up["expr"] == "vector(100000)" and up["labels"]["cable"] == "R04-ST49"
    assert up["labels"]["link"] == "uplink" and up["labels"]["peer"] == "stor-spine01 P04"
    host = ports[("stor04", "swp1")]
    assert host["expr"] == "vector(25000)" and host["labels"]["link"] == "host"
    # A spare's port (down by design) and a cable not yet installed have no series: nothing
    # alerts on them.
    stor04 = plan.ethernet.switch("stor04")
    first, second, *rest = stor04.ports
    moved = stor04._replace(
        ports=(first._replace(enabled=False), second._replace(installed=False), *rest)
    )
    other = replace(
        plan,
        ethernet=plan.ethernet._replace(
            switches=tuple(moved if s.name == "stor04" else s for s in plan.ethernet.switches)
        ),
    )
    kept = {(r["labels"]["instance"], r["labels"]["port"]) for r in alerts.switch_ports(other)}
    assert ("stor04", str(first.port)) not in kept and ("stor04", str(second.port)) not in kept
    assert ("stor04", "49") in kept
    # snmp.yml: the module every switch is walked with; its OIDs IF-MIB's.
    module = YAML(typ="safe").load(compiled.files["monitoring/snmp.yml"].decode())["if_mib"]
    oids = {m["name"]: m["oid"] for m in module["metrics"]}
    assert oids["ifOperStatus"] == "1.3.6.1.2.1.2.2.1.8"
    assert oids["ifHighSpeed"] == "1.3.6.1.2.1.31.1.1.1.15"
    assert oids["ifHCInOctets"] == "1.3.6.1.2.1.31.1.1.1.6"
    lookups = {m["name"]: {x["labelname"] for x in m.get("lookups", [])} for m in module["metrics"]}
    assert lookups["ifInErrors"] == {"ifName", "ifAlias", "ifDescr"}
    walk = set(module["walk"])
    assert all(oid in walk for m in module["metrics"][1:] for oid in [m["oid"]])
    assert {x["oid"] for x in module["metrics"][1]["lookups"]} <= walk
    assert module["version"] == 2


def test_every_alert_names_host_rack_u_severity_and_a_first_command(compiled: Compiled) -> None:
    rules = YAML(typ="safe").load(compiled.files["monitoring/alerts.yml"].decode())
    for rule in rules["groups"][0]["rules"]:
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["annotations"]["first_command"], rule["alert"]
    fleet_wide = {"AuditHostsUnreachable", "AuditStale"}
    for alert in fleet.expected(compiled.plan):
        if alert["alertname"] not in fleet_wide:
            assert {"host", "rack", "u", "severity"} <= set(alert), alert


def test_dcgm_exports_every_field_a_rule_or_the_dashboard_reads(compiled: Compiled) -> None:
    rows = compiled.files["monitoring/dcgm-counters.csv"].decode().splitlines()
    exported = {r.split(",")[0] for r in rows if r and not r.startswith("#")}
    read = " ".join(
        compiled.files[f"monitoring/{f}"].decode()
        for f in ("alerts.yml", "recording.yml", "grafana/dashboards/cluster-overview.json")
    )
    used = set(re.findall(r"\bDCGM_[A-Z0-9_]+", read)) - {"DCGM_FR_OK"}
    assert used and used <= exported, used - exported
    for field in ("XID_ERRORS", "ECC_SBE_VOL_TOTAL", "ECC_DBE_VOL_TOTAL", "ROW_REMAP_FAILURE"):
        assert f"DCGM_FI_DEV_{field}" in exported
    assert "DCGM_FI_DEV_POWER_USAGE" in exported and "DCGM_EXP_GPU_HEALTH_STATUS" in exported


GO_READER = REPO / "tests/tools/dcgm-counters/main.go"


def read_counters(path: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`path` read by tests/tools/dcgm-counters (Go's encoding/csv, configured and checked as
    dcgm-exporter's ReadCSVFile and ExtractCounters do; its comment cites them). No network:
    the standard library only, the build cache in tmp."""
    go = require_tool("go")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "GOCACHE": str(tmp / "gocache"),
        "GOPATH": str(tmp / "gopath"),
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "",
    }
    return subprocess.run(
        [go, "run", str(GO_READER), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.realtool
def test_dcgm_exporter_s_own_reader_accepts_the_counters_file(
    compiled: Compiled, tmp_path: Path
) -> None:
    counters = tmp_path / "default-counters.csv"
    counters.write_bytes(compiled.files["monitoring/dcgm-counters.csv"])
    done = read_counters(counters, tmp_path)
    assert done.returncode == 0, done.stderr
    records = [line.split("\t") for line in done.stdout.splitlines()]
    assert [r[0] for r in records] == [row[0] for row in monitoring.DCGM_COUNTERS]
    assert all(len(r) == 3 and r[2] for r in records)
    # The same reader refuses a help text with a comma (the file it was given before).
    text = counters.read_text().replace("Power draw (in W).", "Power draw, in W.")
    counters.write_text(text)
    refused = read_counters(counters, tmp_path)
    assert refused.returncode != 0 and "wrong number of fields" in refused.stderr


def test_one_dcgm_family_throughout(compiled: Compiled) -> None:
    """DCGM_EXP_GPU_HEALTH_STATUS is a dcgm-exporter 4 field: the GPU hosts install DCGM 4 and
    its exporter by the names of NVIDIA's RHEL 8 repository, and enable their units."""
    ks = compiled.files["kickstart/gpu001.ks"].decode()
    cuda = compiled.plan.host("gpu001").versions["cuda"].split(".")[0]
    assert f'"datacenter-gpu-manager-4-cuda{cuda}"' in ks
    assert '"datacenter-gpu-manager-exporter"' in ks
    assert '"datacenter-gpu-manager"' not in ks and '"dcgm-exporter"' not in ks
    assert "nvidia-dcgm.service nvidia-dcgm-exporter.service" in ks
    assert "DCGM_EXP_GPU_HEALTH_STATUS, " in compiled.files["monitoring/dcgm-counters.csv"].decode()


# --- where it lives -------------------------------------------------------------------------


def test_the_bundles_carry_the_monitoring(compiled: Compiled) -> None:
    mon = {f.path: f for f in compiled.deploys[compiled.plan.site.services.monitoring].files}
    for path in (
        "/etc/prometheus/prometheus.yml",
        "/etc/prometheus/alerts.yml",
        "/etc/prometheus/recording.yml",
        "/etc/prometheus/targets/icmp.json",
        "/etc/prometheus/alertmanager.yml",
        "/etc/prometheus/blackbox.yml",
        "/etc/prometheus/ipmi_remote.yml",
        "/etc/prometheus/snmp.yml",
        "/etc/prometheus/targets/snmp.json",
        "/etc/default/snmp_exporter",
        "/etc/grafana/provisioning/datasources/clusterforge.yaml",
        "/etc/grafana/provisioning/dashboards/clusterforge.yaml",
        "/var/lib/grafana/dashboards/clusterforge/cluster-overview.json",
        "/etc/default/node_exporter",
    ):
        assert path in mon, path
    secrets = ("alertmanager.yml", "ipmi_remote.yml", "snmp.yml")
    for secret in (f"/etc/prometheus/{name}" for name in secrets):
        assert mon[secret].sha256 is None and mon[secret].mode == "0640"  # hold secrets
    gpu = {f.path: f.source for f in compiled.deploys["gpu001"].files}
    assert gpu["/etc/dcgm-exporter/default-counters.csv"] == "monitoring/dcgm-counters.csv"
    assert gpu["/etc/default/node_exporter"] == "monitoring/node_exporter.conf"
    assert "/etc/dcgm-exporter/default-counters.csv" not in {
        f.path for f in compiled.deploys["login01"].files
    }
    flags = compiled.files["monitoring/node_exporter.conf"].decode()
    for collector in ("infiniband", "mdadm", "textfile"):
        assert f"--collector.{collector}" in flags
    assert "--collector.textfile.directory=/var/lib/node_exporter/textfile" in flags
    # The textfile folder is where the drift-audit workflow publishes by default.
    workflow = (REPO / ".github/workflows/drift-audit.yml").read_text()
    assert "'/var/lib/node_exporter/textfile'" in workflow


@pytest.mark.realtool
def test_blackbox_exporter_accepts_its_config(compiled: Compiled, tmp_path: Path) -> None:
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    done = run(
        "prometheus-blackbox-exporter", "--config.file=blackbox.yml", "--config.check", cwd=conf
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (conf / "blackbox.yml").read_text()
    (conf / "blackbox.yml").write_text(text.replace("ip4", "ip4\n      bogus: 1"))
    assert (
        run(
            "prometheus-blackbox-exporter", "--config.file=blackbox.yml", "--config.check", cwd=conf
        ).returncode
        != 0
    )


@pytest.mark.realtool
def test_ipmi_exporter_reads_its_config_and_reports_a_silent_bmc(
    compiled: Compiled, tmp_path: Path
) -> None:
    """The real ipmi_exporter with the overlay's config: asked for a BMC that does not answer
    (loopback, nothing there), it serves ipmi_up 0 per collector, the series BmcUnreachable
    reads; a config with an unknown key stops it at start."""
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    exporter = require_tool("prometheus-ipmi-exporter")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = f"--config.file={conf / 'ipmi_remote.yml'}"
    proc = subprocess.Popen(
        [exporter, config, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/ipmi?target=127.0.0.1&module=default"
    text = _scrape_ipmi(proc, url)
    for collector in ("bmc", "ipmi", "chassis"):
        assert f'ipmi_up{{collector="{collector}"}} 0' in text
    text = (conf / "ipmi_remote.yml").read_text()
    (conf / "ipmi_remote.yml").write_text(
        text.replace("privilege: user", "privilege: user\n    bogus: 1")
    )
    done = subprocess.run(
        [exporter, config, f"--web.listen-address=127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0 and "bogus" in done.stderr


def _env_file(text: str) -> dict[str, str]:
    """A systemd EnvironmentFile of KEY="VALUE" lines (the only form the generated one has)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = shlex.split(value)[0]
    return out


@pytest.mark.realtool
def test_ipmi_exporter_as_the_packaged_unit_runs_it_loads_the_generated_config(
    compiled: Compiled, tmp_path: Path
) -> None:
    """The packaged unit (prometheus-rpm: EnvironmentFile=-/etc/default/ipmi_exporter,
    User=prometheus, ExecStart=/usr/bin/ipmi_exporter $IPMI_EXPORTER_OPTS, the variable split
    at whitespace as systemd does for an unbraced $VAR) started from the monitoring host's
    bundle: Debian's ipmi_exporter stands in for the RPM's binary, run as prometheus with the
    bundle's /etc/prometheus in place (a private mount namespace), files owned as the deploy
    map says. It serves the generated module on the address Prometheus's ipmi job asks."""
    exporter = require_tool("prometheus-ipmi-exporter")
    for tool in ("unshare", "setpriv", "mount", "ipmimonitoring"):
        require_tool(tool)
    host = compiled.plan.site.services.monitoring
    overlay = monitoring_overlay(compiled, tmp_path / "bundle")
    for placed in compiled.deploys[host].files:
        if not placed.path.startswith("/etc/prometheus/"):
            continue
        user, group = placed.owner.split(":")
        shutil.chown(overlay / placed.path.lstrip("/"), user, group)
    overlay.chmod(0o755)
    for parent in overlay.relative_to(tmp_path).parents:
        (tmp_path / parent).chmod(0o755)
    options = _env_file((overlay / "etc/default/ipmi_exporter").read_text())
    argv = options["IPMI_EXPORTER_OPTS"].split()
    address = next(a.split("=", 1)[1] for a in argv if a.startswith("--web.listen-address="))
    assert address == shared.PROBES["ipmi"].exporter
    assert "freeipmi" in compiled.files[f"kickstart/{host}.ks"].decode().split("dnf -y install")[-1]
    Path("/etc/prometheus").mkdir(exist_ok=True)
    script = (
        'mount --bind "$1/etc/prometheus" /etc/prometheus && shift && '
        'exec setpriv --reuid=prometheus --regid=prometheus --init-groups "$@"'
    )
    proc = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(overlay),
         exporter, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    url = f"http://{address}/ipmi?target=127.0.0.1&module={shared.PROBES['ipmi'].module}"
    text = _scrape_ipmi(proc, url)
    # The generated module's three collectors, each tried (no BMC on loopback: up 0).
    for collector in ("bmc", "ipmi", "chassis"):
        assert f'ipmi_up{{collector="{collector}"}} 0' in text


@pytest.mark.realtool
def test_node_exporter_reads_the_audit_s_metrics_where_the_workflow_publishes_them(
    compiled: Compiled, tmp_path: Path
) -> None:
    """The host site.yaml names to receive the audit's metrics, as its kickstart leaves it
    (its bundle, the %post accounts block: the publishing account and its textfile folder);
    the drift-audit workflow's publishing step run as that account (bash, as a runner does)
    with a real audit's textfile; then the real node_exporter as prometheus (the packaged
    unit's user), with the flags of its generated /etc/default/node_exporter, on loopback,
    reads it. The host's /var/lib/node_exporter is in place in a private mount namespace."""
    exporter = require_tool("prometheus-node-exporter")
    for tool in ("unshare", "setpriv", "mount", "systemd-sysusers", "systemd-tmpfiles"):
        require_tool(tool)
    from clusterforge.cli import main
    from clusterforge.lab.fleet import Fleet
    from tests.reference import compile_reference
    from tests.test_kickstart import host_root, run_accounts_block
    from tests.test_workflows import _step

    access = compiled.plan.site.audit
    assert access is not None
    host, user = access.metrics.host, access.metrics.user
    root = host_root(compiled, host, tmp_path / "bundle")
    run_accounts_block(compiled.files[f"kickstart/{host}.ks"].decode(), root)
    passwd = {
        ln.split(":")[0]: ln.split(":") for ln in (root / "etc/passwd").read_text().splitlines()
    }
    uid, gid = passwd[user][2], passwd[user][3]
    # A real audit's textfile, where the workflow's merge step leaves it ($RUNNER_TEMP: a
    # folder the runner's account can read).
    runner = Path(tempfile.mkdtemp(prefix="clusterforge-runner-"))
    try:
        runner.chmod(0o755)
        reference = compile_reference(REPO, tmp_path / "reference")
        recording = Fleet.load(reference / "generated").record(tmp_path / "recording")
        merged = runner / "drift/merged"
        code = main(
            ["-C", str(reference), "audit", "--replay", str(recording), "--out",
             str(tmp_path / "report"), "--textfile", str(merged / "clusterforge.prom")]
        )  # fmt: skip
        assert code == 0
        for folder in (runner / "drift", merged):
            folder.chmod(0o755)
        step = _step(
            "drift-audit.yml", "merge", "Publish metrics to the node_exporter textfile directory"
        )
        textfile = re.search(r"'(/[^']+)'", step["env"]["TEXTFILE_DIR"])
        assert textfile is not None and textfile[1] == monitoring.TEXTFILE_DIR
        (runner / "step.sh").write_text(step["run"])
        (runner / "step.sh").chmod(0o755)
        Path("/var/lib/node_exporter").mkdir(parents=True, exist_ok=True)  # a mount point only
        bind = 'mount --bind "$1/var/lib/node_exporter" /var/lib/node_exporter && shift && '
        publish = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c",
             bind + 'exec setpriv --reuid="$1" --regid="$2" --clear-groups -- bash -e "$3"',
             "sh", str(root), uid, gid, str(runner / "step.sh")],
            env={"PATH": "/usr/bin:/bin", "RUNNER_TEMP": str(runner), "TEXTFILE_DIR": textfile[1]},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )  # fmt: skip
        assert publish.returncode == 0, publish.stderr
    finally:
        shutil.rmtree(runner)
    published = root / "var/lib/node_exporter/textfile/clusterforge_drift.prom"
    assert published.stat().st_uid == int(uid)
    options = _env_file((root / "etc/default/node_exporter").read_text())
    flags = options["NODE_EXPORTER_OPTS"].split()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         bind + 'exec setpriv --reuid=prometheus --regid=prometheus --init-groups "$@"',
         "sh", str(root), exporter, *flags, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "node_exporter stopped"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
                    text = r.read().decode()
                break
            except OSError:
                assert time.monotonic() < until, "node_exporter did not answer"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "node_textfile_scrape_error 0" in text
    for metric in ("clusterforge_audit_last_success_timestamp_seconds", "clusterforge_hosts{"):
        assert metric in text, metric


_PROBE = """
import sys, time, urllib.request
for target in sys.argv[1:]:
    url = "http://127.0.0.1:9115/probe?module=icmp&target=" + target
    for _ in range(100):
        try:
            print(urllib.request.urlopen(url, timeout=10).read().decode(), "=" * 8)
            break
        except OSError:
            time.sleep(0.1)
"""


@pytest.mark.realtool
def test_blackbox_exporter_pings_with_the_generated_module(
    compiled: Compiled, tmp_path: Path
) -> None:
    """The real blackbox_exporter with the overlay's blackbox.yml, in a network namespace of
    its own (loopback only): 127.0.0.1 answers its ICMP probe, a planned BMC address, with no
    route there, does not."""
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    bmc = compiled.plan.host("gpu001").bmc.address
    script = (
        f"set -e; {require_tool('ip')} link set lo up; "
        f"{require_tool('prometheus-blackbox-exporter')} --config.file={conf / 'blackbox.yml'} "
        "--web.listen-address=127.0.0.1:9115 >/dev/null 2>&1 & trap 'kill $!' EXIT; "
        f"{sys.executable} -c '{_PROBE}' 127.0.0.1 {bmc}"
    )
    done = subprocess.run(
        [require_tool("unshare"), "-n", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loopback, planned, _ = done.stdout.split("=" * 8)
    assert (
        "\nprobe_success 1\n" in loopback and 'probe_icmp_duration_seconds{phase="rtt"}' in loopback
    )
    assert "\nprobe_success 0\n" in planned


# --- Alertmanager -----------------------------------------------------------------------------


def routed(conf: Path, **labels: str) -> set[str]:
    """The receivers `amtool config routes test` sends an alert with `labels` to."""
    pairs = [f"{k}={v}" for k, v in sorted(labels.items())]
    done = run(
        "amtool", "config", "routes", "test", "--config.file=alertmanager.yml", *pairs, cwd=conf
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return set(done.stdout.split()[-1].split(","))


@pytest.mark.realtool
def test_alertmanager_config_passes_amtool_and_routes_by_severity_and_role(
    compiled: Compiled, tmp_path: Path
) -> None:
    conf = monitoring_overlay(compiled, tmp_path / "bundle") / PROMETHEUS_DIR
    done = run("amtool", "check-config", "alertmanager.yml", cwd=conf)
    assert done.returncode == 0, done.stdout + done.stderr
    assert routed(conf, alertname="HostDown", severity="critical", role="gpu", rack="r01") == {
        "ops",
        "oncall",
        "gpu-team",
    }
    assert routed(conf, alertname="PingFailed", severity="warning", role="login", rack="s01") == {
        "ops"
    }
    assert routed(conf, alertname="MdRaidDegraded", severity="warning", role="spare") == {
        "ops",
        "gpu-team",
    }
    config = YAML(typ="safe").load((conf / "alertmanager.yml").read_text())
    assert config["route"]["group_by"] == ["rack"]  # a rack losing power: one notification
    inhibit = config["inhibit_rules"][0]
    assert inhibit["source_matchers"] == ['alertname="HostDown"'] and inhibit["equal"] == ["host"]
    switch = config["inhibit_rules"][1]  # a silent switch holds back its own port alerts
    assert 'role="switch"' in switch["source_matchers"] and switch["equal"] == ["host"]
    assert "webhook.invalid" in (conf / "alertmanager.yml").read_text()
    (conf / "alertmanager.yml").write_text(
        (conf / "alertmanager.yml").read_text().replace("receiver: ops", "receiver: nobody", 1)
    )
    assert run("amtool", "check-config", "alertmanager.yml", cwd=conf).returncode != 0


def test_webhook_urls_and_the_bmc_password_are_read_at_the_edge_and_checked() -> None:
    secret = "https://chat.example.org/hooks/T0/B0/xyz"
    environ = {
        "CLUSTERFORGE_WEBHOOK_ONCALL": secret + "\n",
        "CLUSTERFORGE_IPMI_PASSWORD": "s3 cret",
    }
    done = compile_source(load(REPO / "cluster"), environ)
    assert "pass: s3 cret\n" in done.files["monitoring/ipmi_exporter.yml"].decode()
    text = done.files["monitoring/alertmanager.yml"].decode()
    assert f"url: {secret}\n" in text
    assert "https://webhook.invalid/clusterforge/ops" in text  # the others keep placeholders
    assert any("$CLUSTERFORGE_WEBHOOK_ONCALL" in n for n in done.notices)
    plain = compile_repo(REPO).files["monitoring/alertmanager.yml"].decode()
    assert secret not in plain and "https://webhook.invalid/clusterforge/oncall" in plain
    assert "s3 cret" not in compile_repo(REPO).files["monitoring/ipmi_exporter.yml"].decode()
    community = compile_source(load(REPO / "cluster"), {"CLUSTERFORGE_SNMP_COMMUNITY": "r0 c"})
    assert "community: r0 c\n" in community.files["monitoring/snmp.yml"].decode()
    plain_snmp = compile_repo(REPO).files["monitoring/snmp.yml"].decode()
    assert f"community: {shared.SNMP_PLACEHOLDER}\n" in plain_snmp
    with pytest.raises(SourceError) as caught:
        compile_source(load(REPO / "cluster"), {"CLUSTERFORGE_WEBHOOK_OPS": "not a url"})
    (problem,) = caught.value.diagnostics
    assert problem.rule == "invalid-value" and "not a url" not in problem.message
    line = 1 + (REPO / "cluster/site.yaml").read_text().splitlines().index(
        "      url: {env: CLUSTERFORGE_WEBHOOK_OPS, file: /etc/clusterforge/webhook-ops.url}"
    )
    assert problem.location.file.endswith("site.yaml") and problem.location.line == line
