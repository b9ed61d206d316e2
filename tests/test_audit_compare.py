"""The audit's compare stage on one host, and its fabric compare, against the reference cluster.

Expectations are compiled from `cluster/` into a temporary folder; each host's outputs come
from the fleet recorder (`clusterforge/lab/fleet.py`), then one fact is changed per test.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from audits import ethernet
from audits.collect import Collected
from audits.compare import compare_host, host_probes
from audits.fabric import compare_fabric, fabric_probes
from audits.model import HostEntry
from audits.versions import same, tokens
from clusterforge.lab.fleet import Fleet, as_record
from common.errors import SourceError
from contract import Fabric
from tests.reference import compile_reference

NOW = datetime(2026, 5, 4, 6, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def generated(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_reference(repo, tmp_path_factory.mktemp("reference")) / "generated"


@pytest.fixture
def fleet(generated: Path) -> Fleet:
    return Fleet.load(generated)


@pytest.fixture(scope="module")
def contracts(generated: Path) -> dict[str, dict[str, Any]]:
    folder = generated / "expected" / "hosts"
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}


@pytest.fixture
def audit(
    fleet: Fleet, contracts: dict[str, dict[str, Any]]
) -> Callable[..., tuple[HostEntry, list[dict[str, Any]]]]:
    """Audit a host as the fleet renders it now, with probe outputs replaced as given."""

    def run(host: str, **change: str) -> tuple[HostEntry, list[dict[str, Any]]]:
        outputs = fleet.outputs(host) | change
        result = compare_host(
            as_record(copy.deepcopy(contracts[host])), Collected(outputs, {}), NOW
        )
        return result.entry, [dict(f) for f in result.findings]

    return run


Audit = Callable[..., tuple[HostEntry, list[dict[str, Any]]]]
Contracts = dict[str, dict[str, Any]]


# -- versions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("23.10-1.1.9.0", "23.10-01.1.9.0"),
        ("535.183.06", "535.183.6"),
        ("92.00.9E.00.03", "92.00.9e.00.03"),
        (" 4.18.0-513.24.1.el8_9.x86_64\n", "4.18.0-513.24.1.el8_9.x86_64"),
    ],
)
def test_versions_that_are_the_same(a: str, b: str) -> None:
    assert same(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("23.10-1.1.9.0", "5.8-1.0.1.1"), ("2.6", "2.6.0"), ("23.10-1", "23.10.1"), ("1.9", "1.10")],
)
def test_versions_that_differ(a: str, b: str) -> None:
    assert not same(a, b)


def test_version_tokens_compare_numbers_as_integers() -> None:
    assert tokens("535.183.06") == (535, ".", 183, ".", 6)


# -- one host -------------------------------------------------------------------------------


def test_a_host_as_planned_is_ok_with_every_check_complying(fleet: Fleet, audit: Audit) -> None:
    entry, findings = audit("gpu001")
    assert (entry["status"], findings, entry["failures"]) == ("ok", [], [])
    checks = {c["check"]: c["outcome"] for c in entry["checks"]}
    assert set(checks.values()) == {"complies"}
    assert "gpus" in checks and "vbios" in checks
    login, _ = audit("login01")
    assert "gpus" not in {c["check"] for c in login["checks"]}  # does not apply: not skipped


def test_semantically_equal_versions_are_not_drift(fleet: Fleet, audit: Audit) -> None:
    fleet.set_version(["gpu001"], "ofed", "23.10-01.1.9.0")
    fleet.set_version(["gpu001"], "gpu_driver", "535.183.6")
    entry, findings = audit("gpu001")
    assert findings == []
    assert entry["versions"]["ofed"]["state"] == "match"


def test_version_drift_names_kind_path_and_values(fleet: Fleet, audit: Audit) -> None:
    fleet.set_version(["gpu001"], "ofed", "5.8-1.0.1.1")
    fleet.set_version(["gpu001"], "vbios", "92.00.45.00.03")
    entry, findings = audit("gpu001")
    assert entry["status"] == "drift"
    assert [
        (f["kind"], f["path"], f["expected"], f["observed"], f["severity"]) for f in findings
    ] == [
        ("ofed", "versions.ofed", "23.10-1.1.9.0", "5.8-1.0.1.1", "critical"),
        ("firmware", "versions.vbios", "92.00.9E.00.03", "92.00.45.00.03", "warning"),
    ]


def test_bmc_is_compared_as_the_baseline_masks_it(fleet: Fleet, audit: Audit) -> None:
    """firmware.yaml masks hgx-a100's bmc to major.minor (what ipmitool prints); the report
    names the part left out."""
    assert fleet.hosts["gpu001"].state["versions"]["bmc"] == "1.01.10"
    entry, findings = audit("gpu001")  # ipmitool shows "1.01"
    assert findings == [] and entry["versions"]["bmc"]["observed"] == "1.01"
    assert entry["versions"]["bmc"]["masked"] == ".10"
    fleet.set_version(["gpu001"], "bmc", "1.02.01")
    _, findings = audit("gpu001")
    assert [(f["path"], f["observed"]) for f in findings] == [("versions.bmc", "1.02")]
    assert "the baseline masks the rest" in findings[0]["message"]


def test_without_a_mask_every_version_is_compared_in_full(
    fleet: Fleet, contracts: Contracts
) -> None:
    """No mask, no silent truncation: 1.01 of a BMC that should run 1.01.10 is drift."""
    contract = copy.deepcopy(contracts["gpu001"])
    assert contract["mask"] == {"bmc": 2}
    contract["mask"] = {}
    result = compare_host(as_record(contract), Collected(fleet.outputs("gpu001"), {}), NOW)
    assert [(f["path"], f["expected"], f["observed"]) for f in result.findings] == [
        ("versions.bmc", "1.01.10", "1.01")
    ]
    assert "masked" not in result.entry["versions"]["bmc"]


def test_varying_fields_are_masked(fleet: Fleet, audit: Audit) -> None:
    outputs = fleet.outputs("gpu001")
    routes = json.loads(outputs["ip_route"])
    for n, route in enumerate(routes):
        route |= {"metric": 600 + n, "protocol": "dhcp", "prefsrc": "10.0.0.9"}
    addrs = json.loads(outputs["ip_addr"])
    addrs.append(
        {
            "ifindex": 9,
            "ifname": "docker0",
            "mtu": 1500,
            "operstate": "DOWN",
            "address": "02:42:ac:11:00:01",
            "addr_info": [{"family": "inet", "local": "172.17.0.1", "prefixlen": 16}],
        }
    )
    addrs[1]["addr_info"].append({"family": "inet6", "local": "fe80::1", "prefixlen": 64})
    addrs[1]["operstate"] = "UNKNOWN"
    ibstat = (
        outputs["ibstat"].replace("Base lid: ", "Base lid: 1").replace("SM lid: 1", "SM lid: 7")
    )
    ibstat += (
        "CA 'mlx5_1'\n\tCA type: MT4125\n\tNumber of ports: 1\n\tFirmware version: 22.39.1002\n"
        "\tHardware version: 0\n\tNode GUID: 0xb8cef603001a2b3c\n"
        "\tSystem image GUID: 0xb8cef603001a2b3c\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Disabled\n\t\tRate: 10\n\t\tBase lid: 0\n\t\tLMC: 0\n"
        "\t\tSM lid: 0\n\t\tCapability mask: 0x00010000\n"
        "\t\tPort GUID: 0xbacef6fffe1a2b3c\n\t\tLink layer: Ethernet\n"
    )
    ecc = "".join(f"{i}, {i * 12}, 0\n" for i in range(8))  # below max_corrected_ecc (100)
    entry, findings = audit(
        "gpu001",
        ip_route=json.dumps(routes),
        ip_addr=json.dumps(addrs),
        ibstat=ibstat,
        nvidia_smi_ecc=ecc,
    )
    assert (entry["status"], findings) == ("ok", [])


def test_route_drift_missing_changed_and_unplanned(fleet: Fleet, audit: Audit) -> None:
    state = fleet.hosts["gpu001"].state
    fleet.drop_route("gpu001", "10.70.0.0/16")
    state["routes"][0] = {"dst": "default", "dev": "ens2f0", "gateway": "10.70.1.1"}
    state["routes"].append({"dst": "172.17.0.0/16", "dev": "eno1"})
    _, findings = audit("gpu001")
    assert [(f["path"], f["severity"], f["observed"]) for f in findings] == [
        ("routes[10.70.0.0/16]", "critical", None),
        ("routes[172.17.0.0/16]", "warning", {"dst": "172.17.0.0/16", "dev": "eno1"}),
        (
            "routes[default]",
            "critical",
            {"dst": "default", "dev": "ens2f0", "gateway": "10.70.1.1"},
        ),
    ]


def test_address_and_ib_port_drift(fleet: Fleet, audit: Audit) -> None:
    state = fleet.hosts["gpu001"].state
    state["interfaces"][1] |= {"address": "10.70.1.99/24", "mtu": 1500}
    state["interfaces"] = [i for i in state["interfaces"] if i["name"] != "eno1"]
    state["ib_ports"][0] |= {"rate": 100, "state": "Down"}
    _, findings = audit("gpu001")
    assert [
        (f["kind"], f["path"], f["expected"], f["observed"], f["severity"]) for f in findings
    ] == [
        (
            "address",
            "interfaces[eno1]",
            {"address": "10.60.2.11/24", "mac": "3c:ec:ef:ea:48:9e", "mtu": 1500},
            None,
            "critical",
        ),
        ("address", "interfaces[ens2f0].address", "10.70.1.11/24", "10.70.1.99/24", "critical"),
        ("address", "interfaces[ens2f0].mtu", 9000, 1500, "warning"),
        # The HCA NCCL is told to use is down: jobs would fall back to TCP sockets.
        ("gpudirect", "nccl.hca[mlx5_0:1]", "Active", "Down", "critical"),
        ("ib-port", "ib_ports[mlx5_0/1].rate", 200, 100, "critical"),
        ("ib-port", "ib_ports[mlx5_0/1].state", "Active", "Down", "critical"),
    ]


def test_gpu_admission_facts(fleet: Fleet, audit: Audit) -> None:
    h = fleet.hosts["gpu001"]
    h.inactive_nvlinks[3] = 2
    h.ecc[2] = (101, 0)
    h.xid.append((3, 79, "GPU has fallen off the bus."))
    h.state["gpus"] = h.state["gpus"] | {"count": 7}
    _, findings = audit("gpu001")
    assert [(f["path"], f["expected"], f["observed"], f["severity"]) for f in findings] == [
        # The GPU that fell off the bus has no PCIe path to the HCA either.
        ("affinity[GPU7].mlx5_0", "PXB", None, "critical"),
        ("gpus.count", 8, 7, "critical"),
        ("gpus[2].ecc.corrected", 100, 101, "warning"),
        ("gpus[3].nvlinks", 12, 10, "critical"),
        (
            "xid[0000:4e:00].79",
            None,
            {"count": 1, "message": "GPU has fallen off the bus.", "xid": 79},
            "critical",
        ),
    ]
    assert {f["kind"] for f in findings} == {"gpu", "gpudirect"}


def test_gpudirect_drift(fleet: Fleet, contracts: Contracts) -> None:
    """NCCL pointed at the wrong HCA and the storage NIC, nvidia-peermem not loaded, a GPU
    moved to a slot across the sockets: each is named, with what NCCL would do instead."""
    state = fleet.hosts["gpu001"].state
    nccl = state["gpudirect"]["nccl"]
    state["gpudirect"] = state["gpudirect"] | {
        "nccl": nccl | {"NCCL_IB_HCA": "=mlx5_1:1", "NCCL_SOCKET_IFNAME": "=ens2f0"}
    }
    fleet.unload("gpu001", "nvidia-peermem")
    fleet.pcie_path("gpu001", 6, "SYS")
    contract = copy.deepcopy(contracts["gpu001"])
    contract["deploy"] = {
        "schema": 1,
        "host": "gpu001",
        "kernel_modules": ["nvidia", "nvidia-peermem"],
    }
    result = compare_host(as_record(contract), Collected(fleet.outputs("gpu001"), {}), NOW)
    assert [(f["kind"], f["path"], f["expected"], f["observed"]) for f in result.findings] == [
        ("gpudirect", "affinity[GPU6].mlx5_0", "PXB", "SYS"),
        ("gpudirect", "modules[nvidia-peermem]", "loaded", None),
        ("gpudirect", "nccl.hca[mlx5_1:1]", "Active", None),
        ("gpudirect", "nccl[NCCL_IB_HCA]", "=mlx5_0:1", "=mlx5_1:1"),
        ("gpudirect", "nccl[NCCL_SOCKET_IFNAME]", "=eno1", "=ens2f0"),
    ]
    assert "falls back to TCP" in result.findings[2]["message"]
    assert all(f["severity"] == "critical" for f in result.findings)


def test_uncorrected_ecc_is_critical(fleet: Fleet, audit: Audit) -> None:
    fleet.hosts["gpu001"].ecc[5] = (0, 1)
    _, findings = audit("gpu001")
    assert [(f["path"], f["severity"]) for f in findings] == [
        ("gpus[5].ecc.uncorrected", "critical")
    ]


# -- could not collect ----------------------------------------------------------------------


def test_unreachable_is_its_own_status_with_every_check_skipped(
    fleet: Fleet, contracts: Contracts
) -> None:
    contract = contracts["gpu001"]
    result = compare_host(as_record(contract), Collected({}, {}, "ssh: timed out"), NOW)
    assert (result.entry["status"], result.entry["reason"], result.findings) == (
        "unreachable",
        "ssh: timed out",
        [],
    )
    assert {c["outcome"] for c in result.entry["checks"]} == {"skipped"}
    assert all("unreachable" in (c["reason"] or "") for c in result.entry["checks"])


def test_a_parse_failure_is_an_error_and_skips_only_its_check(fleet: Fleet, audit: Audit) -> None:
    fleet.set_version(["gpu001"], "kernel", "5.14.0-362.el9.x86_64")
    entry, findings = audit("gpu001", ofed_info="garbage\nmore garbage\n")
    assert entry["status"] == "error"  # not drift, although the kernel drifted
    assert [f["probe"] for f in entry["failures"]] == ["ofed_info"]
    assert "gpu001" in entry["failures"][0]["message"]
    outcome = {c["check"]: (c["outcome"], c["reason"]) for c in entry["checks"]}
    assert outcome["ofed"] == ("skipped", "no usable output from ofed_info")
    assert outcome["kernel"] == ("drift", None)
    assert [f["path"] for f in findings] == ["versions.kernel"]


def test_a_missing_command_is_an_error(fleet: Fleet, contracts: Contracts) -> None:
    contract = contracts["gpu001"]
    outputs = fleet.outputs("gpu001")
    del outputs["ipmitool_mc_info"]
    failed = {"ipmitool_mc_info": "exit 127: ipmitool: command not found"}
    result = compare_host(as_record(contract), Collected(outputs, failed), NOW)
    assert result.entry["status"] == "error"
    skipped = [c for c in result.entry["checks"] if c["outcome"] == "skipped"]
    assert [(c["check"], c["reason"]) for c in skipped] == [
        ("bmc", "no usable output from ipmitool_mc_info")
    ]


def test_host_probes_are_what_its_checks_need(fleet: Fleet, contracts: Contracts) -> None:
    assert host_probes(as_record(contracts["prov01"])) == (
        "dmidecode_bios",
        "ip_addr",
        "ip_route",
        "ipmitool_mc_info",
        "lldpcli_neighbors",
        "uname_r",
    )  # no HCA in prov01's model: no MLNX_OFED to ask for; its Ethernet cables from LLDP
    assert "ofed_info" in host_probes(as_record(contracts["gpu001"]))
    assert "ethtool_i@ib0" in host_probes(as_record(contracts["gpu001"]))
    assert "xid" in host_probes(as_record(contracts["gpu001"]))


# -- rollout window -------------------------------------------------------------------------


def _with_rollout(repo: Path, tmp_path: Path, rollout: str) -> Path:
    shutil.copytree(repo / "cluster", tmp_path / "cluster")
    firmware = tmp_path / "cluster" / "firmware.yaml"
    text = firmware.read_text(encoding="utf-8").replace("rollouts: []", f"rollouts:\n  - {rollout}")
    assert text != firmware.read_text(encoding="utf-8")
    firmware.write_text(text, encoding="utf-8")
    return compile_reference(tmp_path, tmp_path / "out") / "generated"


def test_a_rollout_accepts_the_previous_version_until_its_end(repo: Path, tmp_path: Path) -> None:
    generated = _with_rollout(
        repo, tmp_path, '{rings: [main], previous: {ofed: "23.07-0.5.1.2"}, until: "2026-06-30"}'
    )
    fleet = Fleet.load(generated)
    canary, main = (copy.deepcopy(fleet.hosts[h].state) for h in ("gpu001", "gpu002"))
    assert "accept" not in canary
    assert main["accept"] == {"ofed": {"previous": "23.07-0.5.1.2", "until": "2026-06-30"}}
    fleet.set_version(["gpu001", "gpu002"], "ofed", "23.07-00.5.1.2")

    def status(contract: dict[str, Any], now: datetime) -> tuple[str, list[str]]:
        result = compare_host(
            as_record(contract), Collected(fleet.outputs(contract["host"]), {}), now
        )
        return result.entry["status"], [f["message"] for f in result.findings]

    assert status(main, datetime(2026, 6, 30, 23, 59, tzinfo=UTC)) == ("ok", [])
    late = status(main, datetime(2026, 7, 1, tzinfo=UTC))
    assert late[0] == "drift" and "rollout window for 23.07-0.5.1.2 ended 2026-06-30" in late[1][0]
    assert status(canary, datetime(2026, 6, 1, tzinfo=UTC))[0] == "drift"  # not in the ring
    result = compare_host(as_record(main), Collected(fleet.outputs("gpu002"), {}), NOW)
    assert result.entry["accepted"] == [
        {
            "key": "ofed",
            "observed": "23.07-00.5.1.2",
            "expected": "23.10-1.1.9.0",
            "until": "2026-06-30",
        }
    ]
    assert result.entry["versions"]["ofed"]["state"] == "accepted"


@pytest.mark.parametrize(
    ("rollout", "message"),
    [
        ('{rings: [nightly], previous: {ofed: "1.0"}, until: "2026-06-30"}', "no ring named"),
        ('{rings: [main], previous: {colour: "1.0"}, until: "2026-06-30"}', "not a version key"),
        ('{rings: [main], previous: {ofed: "1.0"}, until: "2026-02-30"}', "not a calendar date"),
        ('{rings: [main], previous: {ofed: "1.0"}, until: 2026-06-30}', 'quote it, until: "2026'),
    ],
)
def test_a_bad_rollout_is_a_located_error(
    repo: Path, tmp_path: Path, rollout: str, message: str
) -> None:
    with pytest.raises(SourceError) as caught:
        _with_rollout(repo, tmp_path, rollout)
    assert any(
        message in d.message and d.location.file == "cluster/firmware.yaml"
        for d in caught.value.diagnostics
    ), caught.value.diagnostics


# -- fabric ---------------------------------------------------------------------------------


def _fabric(fleet: Fleet, generated: Path, contract: dict[str, Any] | None = None) -> Any:
    plan = contract or json.loads((generated / "expected" / "fabric.json").read_text())
    ports = {p["port_guid"]: name for name, h in fleet.hosts.items() for p in h.state["ib_ports"]}
    collected = Collected({"ibnetdiscover": fleet.fabric_outputs()["ibnetdiscover"]}, {})
    return compare_fabric(Fabric.from_json(plan), ports, collected)


def _ids(fleet: Fleet, *hosts: str) -> list[str]:
    by_host = {c["b"]["name"]: cable for cable, c in fleet.cables.items()}
    return [by_host[h] for h in hosts]


def test_the_fabric_as_planned_is_ok(fleet: Fleet, generated: Path) -> None:
    result = _fabric(fleet, generated)
    assert (result.entry["status"], result.findings) == ("ok", [])
    assert len(result.entry["checked"]) == len(fleet.cables)


def _with_firmware(fleet: Fleet, generated: Path) -> Any:
    plan = json.loads((generated / "expected" / "fabric.json").read_text())
    ports = {p["port_guid"]: name for name, h in fleet.hosts.items() for p in h.state["ib_ports"]}
    outputs = fleet.fabric_outputs()
    return compare_fabric(Fabric.from_json(plan), ports, Collected(outputs, {}))


def test_switch_firmware_is_read_from_the_fabric_scan(fleet: Fleet, generated: Path) -> None:
    """Every IB switch's firmware, in-band (mlxfwmanager): as planned, ok; one other, and one
    not seen, are firmware drift named by switch."""
    contract = json.loads((generated / "expected" / "fabric.json").read_text())
    assert {s["name"] for s in contract["switches"]} >= {"leaf01", "spine01"}
    assert "mlxfwmanager" in fabric_probes(Fabric.from_json(contract))
    result = _with_firmware(fleet, generated)
    assert (result.entry["status"], result.findings) == ("ok", [])
    fleet.set_switch_firmware("spine03", "31.2010.1000")
    fleet.set_switch_firmware("leaf07", None)
    result = _with_firmware(fleet, generated)
    assert result.entry["status"] == "drift"
    assert [(f["kind"], f["path"], f["expected"], f["observed"]) for f in result.findings] == [
        ("firmware", "switches[leaf07].firmware", "27.2010.6102", None),
        ("firmware", "switches[spine03].firmware", "31.2012.1068", "31.2010.1000"),
    ]


def test_hosts_are_matched_by_port_guid_not_node_guid(fleet: Fleet) -> None:
    # The recorder makes CA node GUIDs port GUID - 1 (ibsim), so only port GUIDs can match.
    text = fleet.fabric_outputs()["ibnetdiscover"]
    port = fleet.hosts["gpu001"].state["ib_ports"][0]["port_guid"]
    node = f"H-{int(port, 16) - 1:016x}"
    assert node in text and f'"H-{port[2:]}"' not in text


def test_missing_unexpected_and_degraded_cables(fleet: Fleet, generated: Path) -> None:
    gone, slow = _ids(fleet, "gpu020", "gpu021")
    moved = _ids(fleet, "gpu022")[0]
    fleet.unplug(gone)
    fleet.degrade(slow, "4xEDR")
    planned_port = fleet.cables[moved]["a"]["port"]
    fleet.cables[moved]["a"] = fleet.cables[moved]["a"] | {"port": 33}  # a free leaf port
    result = _fabric(fleet, generated)
    e = result.entry
    assert (e["status"], e["missing"], e["degraded"], e["miswired"], e["unexpected"]) == (
        "drift",
        [gone],
        [slow],
        [moved],
        [],
    )
    by_path = {f["path"]: f for f in result.findings}
    assert by_path[slow]["observed"] == "4xEDR" and by_path[slow]["expected"] == "4xHDR"
    assert by_path[moved]["observed"] == "leaf05/33 - gpu022/1"
    assert by_path[moved]["expected"] == f"leaf05/{planned_port} - gpu022/1"
    assert {f["kind"] for f in result.findings} == {"cable"}
    assert {f["host"] for f in result.findings} == {"fabric"}


def test_a_link_no_cable_plans_is_unexpected(fleet: Fleet, generated: Path) -> None:
    plan = json.loads((generated / "expected" / "fabric.json").read_text())
    dropped = plan["cables"].pop(0)
    result = _fabric(fleet, generated, plan)
    ends = sorted(f"{dropped[e]['name']}/{dropped[e]['port']}" for e in "ab")
    assert result.entry["unexpected"] == [" - ".join(ends)] == ["gpu001/1 - leaf01/1"]
    assert [(f["check"], f["severity"]) for f in result.findings] == [("unplanned", "warning")]


def test_two_swapped_cables_are_named_as_a_pair(fleet: Fleet, generated: Path) -> None:
    one, two = _ids(fleet, "gpu010", "gpu011")
    fleet.swap_far_ends(one, two)
    result = _fabric(fleet, generated)
    assert result.entry["swapped"] == [sorted([one, two])]
    assert result.entry["miswired"] == sorted([one, two])
    assert result.entry["missing"] == [] and result.entry["unexpected"] == []
    assert all("look swapped" in f["message"] for f in result.findings)
    observed = {f["path"]: f["observed"] for f in result.findings}
    assert observed[one].endswith("gpu011/1") and observed[two].endswith("gpu010/1")


def test_cables_not_yet_installed_are_never_drift(fleet: Fleet, generated: Path) -> None:
    plan = json.loads((generated / "expected" / "fabric.json").read_text())
    absent, present = plan["cables"][0], plan["cables"][1]
    absent["lifecycle"] = present["lifecycle"] = "planned"
    fleet.unplug(absent["id"])
    result = _fabric(fleet, generated, plan)
    assert (result.entry["status"], result.findings) == ("ok", [])
    assert absent["id"] not in result.entry["checked"]


def test_a_fabric_scan_that_cannot_be_parsed_is_an_error(fleet: Fleet, generated: Path) -> None:
    plan = json.loads((generated / "expected" / "fabric.json").read_text())
    result = compare_fabric(Fabric.from_json(plan), {}, Collected({"ibnetdiscover": "garbage"}, {}))
    assert result.entry["status"] == "error" and result.findings == []
    unreachable = compare_fabric(
        Fabric.from_json(plan), {}, Collected({}, {}, "sm01: connection refused")
    )
    assert unreachable.entry["status"] == "unreachable"


# -- Ethernet cabling (LLDP from the host end) ----------------------------------------------


def test_a_host_hears_its_planned_switch_ports_on_each_cabled_nic(
    fleet: Fleet, audit: Audit, contracts: Contracts
) -> None:
    links = contracts["gpu001"]["ethernet"]
    assert [(e["iface"], e["cable"], e["switch"], e["port"]) for e in links] == [
        ("eno1", "R01-MG01", "mgmt01", "swp1"),
        ("ens2f0", "R01-ST01", "stor01", "swp1"),
    ]
    entry, findings = audit("gpu001")
    assert findings == []
    assert {c["check"]: c["outcome"] for c in entry["checks"]}["ethernet"] == "complies"


def test_an_unplugged_and_a_moved_ethernet_cable_are_named_by_cable_id(
    fleet: Fleet, audit: Audit
) -> None:
    fleet.unplug_ethernet("R01-ST02")
    links = fleet.hosts["gpu002"].state["ethernet"]
    links[0]["port"] = "swp40"  # eno1 moved to another port of its switch
    entry, findings = audit("gpu002")
    assert entry["status"] == "drift"
    assert [(f["kind"], f["check"], f["path"], f["observed"], f["message"]) for f in findings] == [
        (
            "cable",
            "ethernet",
            "R01-MG02",
            "mgmt01/swp40 - gpu002/eno1",
            "R01-MG02 is cabled elsewhere: seen as mgmt01/swp40 - gpu002/eno1",
        ),
        (
            "cable",
            "ethernet",
            "R01-ST02",
            None,
            "R01-ST02 not seen (stor01/swp2 - gpu002/ens2f0)",
        ),
    ]
    assert {f["severity"] for f in findings} == {"critical"}


def test_what_a_nic_hears_is_named_as_lldpd_reports_it(audit: Audit, repo: Path) -> None:
    """gpu004 answering with gpu003's neighbours, one of them a server with no system name
    (its chassis and port IDs MACs): every neighbour heard is named, in order."""
    several = (repo / "tests/fixtures/lldpcli_neighbors/several.txt").read_text()
    _, findings = audit("gpu004", lldpcli_neighbors=several)
    assert {f["path"]: f["observed"] for f in findings} == {
        "R01-MG04": "mgmt01/swp3 - gpu004/eno1",
        "R01-ST04": "3c:ec:ef:6a:10:2f/3c:ec:ef:6a:10:2f, stor01/swp3 - gpu004/ens2f0",
    }


def test_a_link_on_a_pulled_cables_port_is_miswired_not_swapped(fleet: Fleet, audit: Audit) -> None:
    """gpu003's cable moved onto gpu004's port, gpu004's pulled: no pair, so no swap."""
    fleet.unplug_ethernet("R01-MG04")
    fleet.hosts["gpu003"].state["ethernet"][0]["port"] = "swp4"
    named = ethernet.name_swaps([audit("gpu003")[1], audit("gpu004")[1]])
    assert [[f["message"] for f in host] for host in named] == [
        ["R01-MG03 is cabled elsewhere: seen as mgmt01/swp4 - gpu003/eno1"],
        ["R01-MG04 not seen (mgmt01/swp4 - gpu004/eno1)"],
    ]
