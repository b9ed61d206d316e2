"""`clusterforge audit` collecting live over SSH, against the lab twin (clusterforge.lab).

Each scenario brings up a lab of the five-host lab cluster (tests/lab/small.py): real sshd on
loopback, ibsim for the fabric scan, each host answering the audit's commands from its own
generated/expected/, faults staged as a faults file. A clean lab audits ok and its recording
replays to the same report; then things go wrong (OFED drift, a host key unknown or changed, a
host down, a command missing, a host that never answers) and the report must say exactly that.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from audits.collect import Collected, Collection, ReplayCollector, probe_of, write_recording
from audits.compare import host_probes, probe_arguments
from audits.model import AuditError
from audits.probes import PROBES
from audits.ssh import SshCollector, SshOptions, Target, fabric_host
from clusterforge.cli import main
from clusterforge.lab import lab as twin
from clusterforge.lab.fleet import Fleet
from tests.conftest import require_tool
from tests.lab.small import compile_lab

SCAN_HOST = "sm01"  # the lab's one subnet manager: the default host to scan the fabric from
OLD_OFED = "5.8-1.0.1.1"


@dataclass(frozen=True)
class Run:
    code: int
    out: Path
    commands: list[twin.Command]  # what the lab's hosts were asked to run, in order

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "report.json").read_text(encoding="utf-8"))
        return data

    def status(self) -> dict[str, str]:
        return {h["host"]: h["status"] for h in self.report["hosts"]}

    def host(self, name: str) -> dict[str, Any]:
        entry: dict[str, Any] = next(h for h in self.report["hosts"] if h["host"] == name)
        return entry


@pytest.fixture(scope="module")
def lab_repo(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_lab(repo, tmp_path_factory.mktemp("lab-repo"))


def lab_with(
    lab_repo: Path, tmp: Path, faults: list[dict[str, Any]] | None = None
) -> Iterator[twin.Lab]:
    for tool in ("sshd", "ssh-keygen", "ibsim", "ibnetdiscover"):
        require_tool(tool)
    path = None
    if faults is not None:
        path = tmp / "faults.yaml"
        path.write_text(json.dumps(faults), encoding="utf-8")  # JSON is YAML
    # Not below pytest's folder: as root the lab runs as a user of its own, who must reach it.
    state = Path(tempfile.mkdtemp(prefix="cf-lab-"))
    with twin.running(lab_repo, state, faults_file=path) as lab:
        yield lab


def audit_live(lab: twin.Lab, tmp: Path, *extra: str) -> Run:
    code = main([*lab.audit_args(), "--out", str(tmp / "report"), *extra])
    return Run(code, tmp / "report", lab.commands())


def allowlisted(key: str, contract: dict[str, Any] | None = None) -> str:
    iface = key.split("@", 1)[1] if "@" in key else None
    arguments = probe_arguments(contract).get(key, ()) if contract else ()
    return shlex.join(PROBES[probe_of(key)].argv_for(iface, arguments))


def most_at_once(commands: list[twin.Command]) -> int:
    """The most hosts busy at one moment, a host busy from its first command to its last."""
    spans: dict[str, tuple[int, int]] = {}
    for c in commands:
        first, _ = spans.get(c.host, (c.at_ns, c.at_ns))
        spans[c.host] = (first, c.at_ns)
    return max(sum(s <= start <= e for s, e in spans.values()) for start, _ in spans.values())


# -- clean ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("clean")
    for lab in lab_with(lab_repo, tmp):
        yield audit_live(lab, tmp)


@pytest.mark.realtool
def test_a_clean_lab_audits_ok(clean: Run) -> None:
    report = clean.report
    assert clean.code == 0 == report["exit_code"]
    assert report["summary"]["status"] == {"ok": 5, "drift": 0, "unreachable": 0, "error": 0}
    assert report["findings"] == [] and report["fabric"]["status"] == "ok"
    assert report["fabric"]["checked"]  # the lab has cables, and every one was seen
    assert most_at_once(clean.commands) > 2  # hosts in parallel: what the bound test measures


@pytest.mark.realtool
def test_the_recording_replays_to_the_same_report(
    clean: Run, lab_repo: Path, tmp_path: Path
) -> None:
    recording = clean.out / "recording"  # the default: beside the report
    meta = json.loads((recording / "meta.json").read_text(encoding="utf-8"))
    assert meta["collected_at"] == clean.report["collected_at"] == clean.report["now"]
    argv = ["-C", str(lab_repo), "audit", "--replay", str(recording), "--out", str(tmp_path)]
    assert main(argv) == 0
    for name in ("report.json", "report.md", "junit.xml"):
        assert (tmp_path / name).read_bytes() == (clean.out / name).read_bytes(), name


@pytest.mark.realtool
def test_the_recording_is_what_the_hosts_printed_for_exactly_the_probes(
    clean: Run, lab_repo: Path
) -> None:
    fleet = Fleet.load(lab_repo / "generated")
    recording = clean.out / "recording"
    for host, state in fleet.hosts.items():
        folder = recording / "hosts" / host
        wanted = set(host_probes(state.state))
        assert {p.stem for p in folder.iterdir()} == wanted, host
        outputs = fleet.outputs(host)
        for key in wanted:
            assert (folder / f"{key}.txt").read_text(encoding="utf-8") == outputs[key], key
    # The fabric scan is the real ibnetdiscover's, on ibsim playing generated/fabric/.
    scan = (recording / "fabric" / "ibnetdiscover.txt").read_text(encoding="utf-8")
    assert "# Topology file: generated on" in scan
    for host, state in fleet.hosts.items():
        for port in state.state["ib_ports"]:
            assert f'# "{host} {port["device"]}"' in scan


@pytest.mark.realtool
def test_each_probe_is_one_allowlisted_command_and_the_fabric_is_scanned_once(
    clean: Run, lab_repo: Path
) -> None:
    fleet = Fleet.load(lab_repo / "generated")
    for host, state in fleet.hosts.items():
        sent = sorted(c.line for c in clean.commands if c.host == host)
        scan = ["ibnetdiscover", "mlxfwmanager"] if host == SCAN_HOST else []  # one fabric scan
        keys = [*host_probes(state.state), *scan]
        assert sent == sorted(allowlisted(k, state.state) for k in keys), host


# -- drift, with at most two hosts at once ---------------------------------------------------


@pytest.fixture(scope="module")
def drift(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("drift")
    ofed = {"fault": "version-drift", "hosts": "gpu002", "version": "ofed", "value": OLD_OFED}
    for lab in lab_with(lab_repo, tmp, [ofed]):
        yield audit_live(lab, tmp, "--concurrency", "2")


@pytest.mark.realtool
def test_drift_on_one_host_is_named_exactly(drift: Run) -> None:
    assert drift.code == 1
    found = [(f["host"], f["kind"], f["path"], f["observed"]) for f in drift.report["findings"]]
    assert found == [("gpu002", "ofed", "versions.ofed", OLD_OFED)]
    assert {h for h, s in drift.status().items() if s != "ok"} == {"gpu002"}


@pytest.mark.realtool
def test_the_concurrency_bound_holds(drift: Run) -> None:
    assert most_at_once(drift.commands) <= 2
    assert {c.host for c in drift.commands} == set(drift.status())  # and every host had its turn


# -- deployed files and services ----------------------------------------------------------


@pytest.fixture(scope="module")
def deployed(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """On three hosts: a deployed file edited by hand, one missing, one unit stopped."""
    tmp = tmp_path_factory.mktemp("deployed")
    staged = [
        {"fault": "file-changed", "hosts": "gpu001", "path": "/etc/chrony.conf"},
        {"fault": "file-missing", "hosts": "sm01", "path": "/etc/opensm/opensm.conf"},
        {"fault": "unit-state", "hosts": "prov01", "unit": "dhcpd.service", "active": "inactive"},
    ]
    for lab in lab_with(lab_repo, tmp, staged):
        yield audit_live(lab, tmp)


@pytest.mark.realtool
def test_file_and_service_drift_is_named_exactly(deployed: Run) -> None:
    assert deployed.code == 1
    found = sorted((f["host"], f["kind"], f["path"]) for f in deployed.report["findings"])
    assert found == [
        ("gpu001", "file", "files[/etc/chrony.conf]"),
        ("prov01", "service", "units[dhcpd.service].active"),
        ("sm01", "file", "files[/etc/opensm/opensm.conf]"),
    ]
    messages = {f["host"]: f["message"] for f in deployed.report["findings"]}
    assert "generated/chrony/gpu001.conf" in messages["gpu001"]
    assert "generated/opensm/sm01/opensm.conf" in messages["sm01"]
    assert {h for h, s in deployed.status().items() if s != "ok"} == {"gpu001", "prov01", "sm01"}
    # The hosts were asked for exactly their deploy map's paths, each one word after `--`.
    sha = next(c.line for c in deployed.commands if c.host == "sm01" and "sha256sum" in c.line)
    assert sha.startswith("sha256sum -- /etc/") and "/etc/opensm/opensm.conf" in sha.split()


# -- hosts that cannot be collected, each in its own way, in one run ------------------------


@dataclass(frozen=True)
class Faults:
    run: Run
    known_hosts: tuple[bytes, bytes]  # the file before and after the run


@pytest.fixture(scope="module")
def faults(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    """gpu001 shows another key than known_hosts has, sm01 none known; gpu002 is down;
    mon01 never answers; prov01 has no ipmitool, and is told to scan the fabric (only the
    subnet manager has ibnetdiscover and mlxfwmanager)."""
    tmp = tmp_path_factory.mktemp("faults")
    staged = [
        {"fault": "key-changed", "hosts": "gpu001"},
        {"fault": "key-unknown", "hosts": "sm01"},
        {"fault": "host-down", "hosts": "gpu002"},
        {"fault": "probe-hangs", "hosts": "mon01"},
        {"fault": "probe-missing", "hosts": "prov01", "probe": "ipmitool_mc_info"},
    ]
    for lab in lab_with(lab_repo, tmp, staged):
        before = lab.known_hosts.read_bytes()
        # The timeout leaves prov01 (seven commands) time to spare even on a busy machine.
        run = audit_live(lab, tmp, "--fabric-from", "prov01", "--timeout", "10")
        yield Faults(run, (before, lab.known_hosts.read_bytes()))


@pytest.mark.realtool
def test_every_host_that_cannot_be_collected_says_why(faults: Faults) -> None:
    run = faults.run
    assert run.code == 2
    assert run.status() == {
        "gpu001": "unreachable",
        "gpu002": "unreachable",
        "mon01": "unreachable",
        "prov01": "error",
        "sm01": "unreachable",
    }
    status = json.loads((run.out / "recording/hosts/gpu002/status.json").read_text("utf-8"))
    assert status == {"status": "unreachable", "reason": run.host("gpu002")["reason"]}


@pytest.mark.realtool
def test_a_host_key_unknown_or_changed_is_rejected_and_never_trusted(faults: Faults) -> None:
    for host in ("gpu001", "sm01"):
        reason = faults.run.host(host)["reason"]
        assert "host key" in reason and "rejected" in reason, reason
    # Rejected before logging in: neither was asked to run anything, and nothing was added.
    assert not {c.host for c in faults.run.commands} & {"gpu001", "sm01"}
    assert faults.known_hosts[0] == faults.known_hosts[1]


@pytest.mark.realtool
def test_a_host_that_is_down_is_refused_at_its_lab_address(faults: Faults) -> None:
    reason = faults.run.host("gpu002")["reason"]
    assert "Connection refused" in reason and "127." in reason, reason


@pytest.mark.realtool
def test_a_host_slower_than_the_timeout_is_unreachable(faults: Faults) -> None:
    assert faults.run.host("mon01")["reason"].startswith("ssh: timed out after 10s")


@pytest.mark.realtool
def test_a_missing_command_is_an_error_for_the_host_and_for_the_fabric(faults: Faults) -> None:
    entry = faults.run.host("prov01")
    assert [(f["probe"], f["message"]) for f in entry["failures"]] == [
        ("ipmitool_mc_info", "exit 127: bash: ipmitool: command not found")
    ]
    fabric = faults.run.report["fabric"]
    assert fabric["status"] == "error"
    assert fabric["reason"] == (
        "ibnetdiscover: exit 127: bash: ibnetdiscover: command not found; "
        "mlxfwmanager: exit 127: bash: mlxfwmanager: command not found"
    )
    scans = [c.host for c in faults.run.commands if c.line == "ibnetdiscover"]
    assert scans == ["prov01"]


# -- the command line, without a lab ---------------------------------------------------------


def test_live_collection_needs_a_key_and_known_hosts(
    lab_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    argv = ["-C", str(lab_repo), "audit", "--out", str(out), "--ssh-key", str(tmp_path / "id")]
    assert main(argv) == 4
    assert "needs --ssh-key FILE and --known-hosts FILE" in capsys.readouterr().err
    assert not out.exists()


def test_live_options_are_refused_with_replay(
    lab_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-C", str(lab_repo), "audit", "--replay", str(tmp_path), "--concurrency", "4"]
    assert main([*argv, "--fabric-from", "sm01"]) == 4
    assert "--concurrency, --fabric-from: for live collection" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("inventory", "message"),
    [
        ({"gpu999": "127.0.0.2"}, "the inventory names hosts not in generated/expected/"),
        ({"gpu001": "127.0.0.2:http"}, "host 'gpu001': '127.0.0.2:http' is not address[:port]"),
        ({"gpu001": 22}, "host 'gpu001': 22 is not a string address[:port]"),
    ],
)
def test_a_bad_inventory_is_refused_before_connecting(
    lab_repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    inventory: dict[str, object],
    message: str,
) -> None:
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inventory), encoding="utf-8")
    argv = ["-C", str(lab_repo), "audit", "--out", str(tmp_path / "report")]
    (tmp_path / "id").write_text("not a key\n", encoding="utf-8")
    argv += ["--ssh-key", str(tmp_path / "id"), "--known-hosts", str(tmp_path / "kh")]
    assert main([*argv, "--inventory", str(path)]) == 4
    assert message in capsys.readouterr().err


def test_an_unreadable_key_or_known_hosts_is_refused(
    lab_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "id").write_text("not a key\n", encoding="utf-8")
    argv = ["-C", str(lab_repo), "audit", "--out", str(tmp_path / "report")]
    argv += ["--ssh-key", str(tmp_path / "id"), "--known-hosts", str(tmp_path / "kh")]
    assert main(argv) == 4
    assert f"cannot use the SSH key {tmp_path / 'id'}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("10.60.2.11", Target("10.60.2.11", 22)),
        ("127.0.0.3:40022", Target("127.0.0.3", 40022)),
        ("gpu001.example:2222", Target("gpu001.example", 2222)),
        ("[fe80::1]:2222", Target("fe80::1", 2222)),
        ("[::1]", Target("::1", 22)),
        ("::1", Target("::1", 22)),
    ],
)
def test_inventory_addresses(text: str, target: Target) -> None:
    assert Target.parse(text) == target
    assert Target.parse(str(target)) == target


@pytest.mark.parametrize("text", ["", ":22", "host:", "host:0", "host:65536", "[::1]x", "[::1]:"])
def test_bad_inventory_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="address"):
        Target.parse(text)


# -- the collector and the recording, without a network ---------------------------------------


def test_without_an_address_or_a_scan_host_nothing_is_tried_and_each_says_why(
    tmp_path: Path,
) -> None:
    key = tmp_path / "id"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    (tmp_path / "known_hosts").write_text("", encoding="utf-8")
    options = SshOptions(key, tmp_path / "known_hosts")
    collection = SshCollector({}, options, None).collect({"gpu001": ["uname_r"]}, ["ibnetdiscover"])
    assert collection.hosts["gpu001"].unreachable == (
        "no address: no mgmt interface in its contract and no inventory entry"
    )
    assert collection.fabric.failed == {
        "ibnetdiscover": "skipped: no --fabric-from, and no subnet-manager host in "
        "generated/expected/"
    }


def test_the_scan_host_is_the_first_subnet_manager_unless_one_is_named() -> None:
    contracts = {
        h: {"role": r} for h, r in [("sm02", "subnet-manager"), ("sm01", "subnet-manager")]
    }
    assert fabric_host(contracts, None) == "sm01"
    assert fabric_host(contracts, "sm02") == "sm02"
    assert fabric_host({"gpu001": {"role": "gpu"}}, None) is None


def _collection(**hosts: Collected) -> Collection:
    when = datetime(2026, 5, 4, 6, tzinfo=UTC)
    return Collection(when, dict(hosts), Collected({}, {}))


def test_a_recording_replaces_an_earlier_one_whole(tmp_path: Path) -> None:
    folder = tmp_path / "recording"
    write_recording(_collection(a=Collected({"uname_r": "6.1\n"}, {})), folder)
    write_recording(_collection(b=Collected({}, {}, "ssh: refused")), folder)
    assert sorted(p.name for p in (folder / "hosts").iterdir()) == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recording"]  # no staging left
    replayed = ReplayCollector(folder).collect({"b": ["uname_r"]}, [])
    assert replayed.hosts["b"].unreachable == "ssh: refused"


def test_a_folder_that_is_not_a_recording_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(AuditError, match="neither a recording"):
        write_recording(_collection(), tmp_path)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n"
