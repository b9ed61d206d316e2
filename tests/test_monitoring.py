"""generated/monitoring/: promtool accepts the config, targets and rules, and each alert fires
when its condition holds and stays quiet when it does not.

The unit tests for `promtool test rules` are written here, into tmp_path, from the thresholds in
cluster/site.yaml; they run against the generated rules with the annotations left out, because
promtool compares annotations verbatim and they are prose (`promtool check rules` still parses
their templates on the real file).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.pipeline import Compiled, compile_repo
from compiler.targets.render import to_yaml
from tests.conftest import require_tool


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("promtool"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def install(compiled: Compiled, to: Path) -> Path:
    """generated/monitoring/ laid out as on the monitoring host."""
    for path, data in compiled.files.items():
        if path.startswith("monitoring/"):
            target = to / path.removeprefix("monitoring/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return to


def minutes(duration: str) -> int:
    units = {"m": 1, "h": 60, "d": 1440}
    found = re.fullmatch(r"(\d+)([mhd])", duration)
    assert found, f"test handles whole minutes, hours or days only, not {duration!r}"
    return int(found.group(1)) * units[found.group(2)]


def groups(compiled: Compiled, job: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(compiled.files[f"monitoring/targets/{job}.json"])
    return data


@pytest.mark.realtool
def test_config_and_targets_pass_promtool(compiled: Compiled, tmp_path: Path) -> None:
    conf = install(compiled, tmp_path)
    done = promtool("check", "config", "prometheus.yml", cwd=conf)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout + done.stderr
    # The oracle reads the target files: a bad label name there fails the config.
    (conf / "targets" / "node.json").write_text('[{"targets": ["x:1"], "labels": {"0bad": "x"}}]')
    broken = promtool("check", "config", "prometheus.yml", cwd=conf)
    assert broken.returncode != 0


@pytest.mark.realtool
def test_rules_pass_promtool(compiled: Compiled, tmp_path: Path) -> None:
    conf = install(compiled, tmp_path)
    done = promtool("check", "rules", "alerts.yml", cwd=conf)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (conf / "alerts.yml").read_text()
    (conf / "alerts.yml").write_text(text.replace("> 85", "> > 85", 1))
    assert promtool("check", "rules", "alerts.yml", cwd=conf).returncode != 0


def rule_tests(compiled: Compiled, wrong: bool = False) -> dict[str, Any]:
    """promtool unit tests: every alert once firing, once quiet (`wrong` expects a quiet one)."""
    m = compiled.plan.site.monitoring
    pending, bmc, window = minutes(m.pending), minutes(m.bmc_down_for), minutes(m.ecc_window)
    span = 2 * max(pending, bmc, window) + 10
    port = compiled.plan.host("gpu001").ib_ports[0]
    full, half = port.rate_gbps * 1e9 / 8, port.rate_gbps * 1e9 / 16
    ib = {"job": "node", "device": port.device, "port": str(port.port)}
    step_hot, step_cool = (
        2 * m.ecc_corrected_increase / window,
        m.ecc_corrected_increase / window / 2,
    )

    def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return {"series": f"{name}{{{inner}}}", "values": values}

    gpu = {"job": "dcgm", "instance": "gpu001"}
    hot_labels = gpu | {"gpu": "0", "severity": "critical"}
    return {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    series(
                        "DCGM_FI_DEV_GPU_TEMP", gpu | {"gpu": "0"}, f"{m.gpu_temp_c + 5}x{span}"
                    ),
                    series("DCGM_FI_DEV_GPU_TEMP", gpu | {"gpu": "1"}, f"{m.gpu_temp_c}x{span}"),
                    series(
                        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu | {"gpu": "0"}, f"0+{step_hot}x{span}"
                    ),
                    series(
                        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu | {"gpu": "1"}, f"0+{step_cool}x{span}"
                    ),
                    series(
                        "node_infiniband_rate_bytes_per_second",
                        ib | {"instance": "gpu001"},
                        f"{half}x{span}",
                    ),
                    series(
                        "node_infiniband_rate_bytes_per_second",
                        ib | {"instance": "gpu002"},
                        f"{full}x{span}",
                    ),
                    series(
                        "ipmi_up",
                        {"job": "ipmi", "instance": "gpu001", "collector": "bmc"},
                        f"0x{span}",
                    ),
                    series(
                        "ipmi_up",
                        {"job": "ipmi", "instance": "gpu001", "collector": "ipmi"},
                        f"0x{span}",
                    ),
                    series(
                        "ipmi_up",
                        {"job": "ipmi", "instance": "gpu002", "collector": "bmc"},
                        f"0x{span}",
                    ),
                    series(
                        "ipmi_up",
                        {"job": "ipmi", "instance": "gpu002", "collector": "ipmi"},
                        f"1x{span}",
                    ),
                    series(
                        "clusterforge_drift_findings",
                        {"host": "gpu003", "kind": "ofed", "instance": "mon01"},
                        f"2x{span}",
                    ),
                    series(
                        "clusterforge_drift_findings",
                        {"host": "gpu004", "kind": "bios", "instance": "mon01"},
                        f"0x{span}",
                    ),
                    series(
                        "clusterforge_hosts_unreachable", {"instance": "mon01"}, f"0x10 3x{span}"
                    ),
                ],
                "alert_rule_test": [
                    # Hot, but not yet for `pending`: quiet. Then only the hot GPU alerts.
                    {
                        "eval_time": f"{pending - 1}m",
                        "alertname": "GpuTemperatureHigh",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": f"{pending + 2}m",
                        "alertname": "GpuTemperatureHigh",
                        "exp_alerts": [{"exp_labels": hot_labels}]
                        + ([{"exp_labels": hot_labels | {"gpu": "1"}}] if wrong else []),
                    },
                    {
                        "eval_time": f"{window + 5}m",
                        "alertname": "GpuEccCorrectedRising",
                        "exp_alerts": [{"exp_labels": gpu | {"gpu": "0", "severity": "warning"}}],
                    },
                    {
                        "eval_time": f"{pending - 1}m",
                        "alertname": "IbPortRateDegraded",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": f"{pending + 2}m",
                        "alertname": "IbPortRateDegraded",
                        "exp_alerts": [
                            {"exp_labels": ib | {"instance": "gpu001", "severity": "warning"}}
                        ],
                    },
                    {"eval_time": f"{bmc - 1}m", "alertname": "BmcUnreachable", "exp_alerts": []},
                    {
                        "eval_time": f"{bmc + 2}m",
                        "alertname": "BmcUnreachable",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "job": "ipmi",
                                    "instance": "gpu001",
                                    "severity": "warning",
                                }
                            }
                        ],
                    },
                    {
                        "eval_time": "5m",
                        "alertname": "ClusterDrift",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "host": "gpu003",
                                    "kind": "ofed",
                                    "severity": "warning",
                                }
                            }
                        ],
                    },
                    {"eval_time": "5m", "alertname": "AuditHostsUnreachable", "exp_alerts": []},
                    {
                        "eval_time": "15m",
                        "alertname": "AuditHostsUnreachable",
                        "exp_alerts": [{"exp_labels": {"severity": "warning"}}],
                    },
                ],
            }
        ],
    }


def _unit_test_dir(compiled: Compiled, tmp_path: Path, wrong: bool) -> Path:
    rules = YAML(typ="safe").load(compiled.files["monitoring/alerts.yml"].decode())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    (tmp_path / "alerts.yml").write_text(to_yaml(rules))
    (tmp_path / "tests.yml").write_text(to_yaml(rule_tests(compiled, wrong)))
    return tmp_path


@pytest.mark.realtool
def test_each_alert_fires_and_stays_quiet(compiled: Compiled, tmp_path: Path) -> None:
    done = promtool("test", "rules", "tests.yml", cwd=_unit_test_dir(compiled, tmp_path, False))
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = {t["alertname"] for t in rule_tests(compiled)["tests"][0]["alert_rule_test"]}
    rules = YAML(typ="safe").load(compiled.files["monitoring/alerts.yml"].decode())
    assert alerts == {r["alert"] for g in rules["groups"] for r in g["rules"]}


@pytest.mark.realtool
def test_a_wrong_expectation_fails(compiled: Compiled, tmp_path: Path) -> None:
    """A GPU exactly at the limit must not alert; expecting it to makes promtool fail."""
    done = promtool("test", "rules", "tests.yml", cwd=_unit_test_dir(compiled, tmp_path, True))
    assert done.returncode != 0
    assert "GpuTemperatureHigh" in done.stdout + done.stderr


def test_targets_carry_rack_role_and_leaf(compiled: Compiled) -> None:
    plan = compiled.plan
    node = {g["labels"]["instance"]: g for g in groups(compiled, "node")}
    assert set(node) == {h.name for h in plan.hosts}
    assert node["gpu001"]["targets"] == [f"{plan.address('gpu001', 'mgmt')}:9100"]
    assert node["gpu001"]["labels"] == {
        "instance": "gpu001",
        "rack": "r01",
        "role": "gpu",
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
