"""`clusterforge audit` collecting live over SSH, against the lab twin (clusterforge.lab).

Each scenario brings up a lab of the five-host lab cluster (tests/lab/small.py): real sshd on
loopback, ibsim for the fabric scan, each host answering the audit's commands from its own
generated/expected/, faults staged as a faults file. A clean lab audits ok and its recording
replays to the same report; then things go wrong (OFED drift, a host key unknown or changed, a
host down, a command missing, a host that never answers) and the report must say exactly that.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import tempfile
import time
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
from audits.ssh import TRUNCATED, SshCollector, SshOptions, Target, fabric_host
from clusterforge.cli import main
from clusterforge.lab import lab as twin
from clusterforge.lab.fleet import Fleet, as_record
from compiler.targets.access import REFUSED
from contract import Host
from contract.probes import PROBES
from tests.conftest import require_tool
from tests.lab.small import compile_lab

SCAN_HOST = "sm01"  # the lab's one subnet manager: the default host to scan the fabric from
# The rack switches of the lab's two racks, played beside the hosts and audited as planned.
SWITCHES = {"mgmt01": "ok", "stor01": "ok", "mgmt-s01": "ok", "stor-s01": "ok"}
OLD_OFED = "5.8-1.0.1.1"


@dataclass(frozen=True)
class Run:
    code: int
    out: Path
    commands: list[twin.Command]  # what the lab's hosts were asked to run, in order
    # The tree the audit read: the repository the lab plays, or its view of the hosts played.
    repo: Path

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
    return Run(code, tmp / "report", lab.commands(), lab.repo)


def fingerprint(public: Path) -> str:
    return str(asyncssh.read_public_key(public).get_fingerprint())


def _waiting(host: Path) -> list[int]:
    """The pids of a lab host's probes that hung (respond.sh's `hang` notes them)."""
    path = host / "waiting"
    return [int(p) for p in path.read_text(encoding="utf-8").split()] if path.exists() else []


def _still_running(pids: list[int], patience: float = 20.0) -> list[int]:
    """The pids still alive after up to `patience` seconds (the host's timeout(1) sends
    SIGTERM when the audit's time is up, SIGKILL 5 s later; nothing here is timed)."""
    deadline = time.monotonic() + patience
    while True:
        alive = [p for p in pids if Path(f"/proc/{p}").exists()]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _answer(lab: twin.Lab, host: str, command: str, shell: str) -> None:
    """Make lab `host` answer `command` (a probe's command line) by running `shell`."""
    path = lab.state / "hosts" / host / "answers.sh"
    head, rest = path.read_text(encoding="utf-8").split("\n", 1)
    path.write_text(f"{head}\n{shlex.quote(command)})\n{shell}\n;;\n{rest}", encoding="utf-8")


def allowlisted(key: str, contract: dict[str, Any] | None = None) -> str:
    iface = key.split("@", 1)[1] if "@" in key else None
    arguments = probe_arguments(as_record(contract)).get(key, ()) if contract else ()
    return shlex.join(PROBES[probe_of(key)].spec.argv_for(iface, arguments))


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
    assert report["summary"]["status"] == {"ok": 9, "drift": 0, "unreachable": 0, "error": 0}
    assert {h["host"]: h["status"] for h in report["hosts"]}.items() >= SWITCHES.items()
    assert report["findings"] == [] and report["fabric"]["status"] == "ok"
    assert report["fabric"]["checked"]  # the lab has cables, and every one was seen
    assert most_at_once(clean.commands) > 2  # hosts in parallel: what the bound test measures


@pytest.mark.realtool
def test_the_recording_replays_to_the_same_report(clean: Run, tmp_path: Path) -> None:
    recording = clean.out / "recording"  # the default: beside the report
    meta = json.loads((recording / "meta.json").read_text(encoding="utf-8"))
    assert meta["collected_at"] == clean.report["collected_at"] == clean.report["now"]
    argv = ["-C", str(clean.repo), "audit", "--replay", str(recording), "--out", str(tmp_path)]
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
        wanted = set(host_probes(as_record(state.state)))
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
        keys = [*host_probes(as_record(state.state)), *scan]
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
    impostor: str  # the fingerprint known_hosts has for gpu001
    keys: list[str]  # the fingerprints of the lab's sshd host keys
    hung: list[int]  # pids of mon01's probe that hung, when the audit gave up on it
    lingering: list[int]  # those still running once the audit returned and a moment passed


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
        hung = _waiting(lab.state / "hosts" / "mon01")
        yield Faults(
            run,
            (before, lab.known_hosts.read_bytes()),
            fingerprint(lab.state / "impostor" / "host_key.pub"),
            [fingerprint(p) for p in sorted(lab.state.glob("sshd/*/host_key.pub"))],
            hung,
            _still_running(hung),
        )


@pytest.mark.realtool
def test_every_host_that_cannot_be_collected_says_why(faults: Faults) -> None:
    run = faults.run
    assert run.code == 2
    assert (
        run.status()
        == {
            "gpu001": "unreachable",
            "gpu002": "unreachable",
            "mon01": "error",  # reached; its probes hang
            "prov01": "error",
            "sm01": "unreachable",
        }
        | SWITCHES
    )
    status = json.loads((run.out / "recording/hosts/gpu002/status.json").read_text("utf-8"))
    assert status == {"status": "unreachable", "reason": run.host("gpu002")["reason"]}


@pytest.mark.realtool
def test_a_host_key_unknown_or_changed_is_rejected_and_never_trusted(faults: Faults) -> None:
    keys = {f["host"]: f for f in faults.run.report["findings"] if f["kind"] == "host-key"}
    changed, unknown = keys.pop("gpu001"), keys.pop("sm01")
    assert keys == {}
    # Changed: maybe a machine in the middle; critical, naming both fingerprints.
    assert (changed["severity"], changed["expected"]) == ("critical", [faults.impostor])
    assert changed["observed"] in faults.keys
    assert faults.run.host("gpu001")["reason"].startswith("ssh: host key CHANGED at 127.")
    # Unknown: a host nobody vetted yet; a warning, naming what it offers.
    assert (unknown["severity"], unknown["expected"]) == ("warning", None)
    assert unknown["observed"] in faults.keys
    assert faults.run.host("sm01")["reason"].startswith("ssh: host key unknown:")
    # Rejected before logging in: neither was asked to run anything, and nothing was added.
    assert not {c.host for c in faults.run.commands} & {"gpu001", "sm01"}
    assert faults.known_hosts[0] == faults.known_hosts[1]


@pytest.mark.realtool
def test_a_host_that_is_down_is_refused_at_its_lab_address(faults: Faults) -> None:
    reason = faults.run.host("gpu002")["reason"]
    assert "Connection refused" in reason and "127." in reason, reason


@pytest.mark.realtool
def test_a_probe_that_hangs_on_a_reached_host_is_that_probes_outcome(
    faults: Faults, lab_repo: Path
) -> None:
    """mon01 lets the audit in and then never answers a probe: the host was reached, the
    first probe timed out, and the rest had no time left; nothing says it was unreachable."""
    entry = faults.run.host("mon01")
    failures = [(f["probe"], f["message"]) for f in entry["failures"]]
    first, *rest = failures
    # The probe's window is what the host's 10 s left after logging in: 10 s, less on a
    # machine slow to log in (9 in a CI run with half its CPU stolen).
    took = re.match(r"timed out after (\d+)s: the host answered", first[1])
    assert took and 1 <= int(took[1]) <= 10, first[1]
    assert rest and all(
        why == f"not run: the host's 10s ran out after {first[0]} hung" for _, why in rest
    )
    assert "unreachable" not in (entry["reason"] or "") and "ssh:" not in entry["reason"]
    # Its one command sent was the hung one, and nothing of it is kept as a reading.
    sent = [c.line for c in faults.run.commands if c.host == "mon01"]
    assert len(sent) == 1
    folder = faults.run.out / "recording" / "hosts" / "mon01"
    assert sorted(p.name for p in folder.iterdir()) == ["status.json"]


@pytest.mark.realtool
def test_a_hung_probe_is_ended_on_the_host(faults: Faults) -> None:
    # The lab's hang ignores the audit hanging up; only the forced command's timeout(1),
    # told by the audit how long the host's time still lasts, ends it.
    assert len(faults.hung) == 1  # the first probe hung; nothing after it was sent
    assert faults.lingering == []


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
    assert "needs --ssh-key FILE (or --ssh-agent) and --known-hosts FILE" in capsys.readouterr().err
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


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":22",
        "host:",
        "host:0",
        "host:65536",
        "[::1]x",
        "[::1]:",
        "gpu001..mgmt.example",
        "gpu\x00001:22",
        "gpu 001",
        "a" * 64 + ".example",
    ],
)
def test_bad_inventory_addresses(text: str) -> None:
    with pytest.raises(ValueError, match=r"address|host name"):
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
        "no address: no management interface in its contract and no inventory entry"
    )
    assert collection.fabric.failed == {
        "ibnetdiscover": "skipped: no --fabric-from, and no subnet-manager host in "
        "generated/expected/"
    }


def test_the_scan_host_is_the_first_subnet_manager_unless_one_is_named(repo: Path) -> None:
    hosts = repo / "generated" / "expected" / "hosts"
    gpu = Host.from_json((hosts / "gpu001.json").read_text(encoding="utf-8"))
    contracts = {
        h: gpu.model_copy(update={"host": h, "role": r})
        for h, r in [("sm02", "subnet-manager"), ("sm01", "subnet-manager")]
    }
    assert fabric_host(contracts, None) == "sm01"
    assert fabric_host(contracts, "sm02") == "sm02"
    assert fabric_host({"gpu001": gpu}, None) is None


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


# -- a host that stalls mid-output ----------------------------------------------------------

STALLS, STALLED = "gpu001", "ip_addr"  # not its first probe: what came before it goes too


@dataclass(frozen=True)
class Stall:
    run: Run
    half: str  # what the stalled probe printed before it stalled
    hung: list[int]  # the stalled command's pid on the lab host
    lingering: list[int]  # still running once the audit returned and a moment passed


@pytest.fixture(scope="module")
def stalled(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stall]:
    """gpu001 prints the first half of its `ip -j addr show` and then stalls (it neither
    ends nor prints more, and ignores the audit hanging up); every other host is as planned."""
    tmp = tmp_path_factory.mktemp("stalled")
    fleet = Fleet.load(lab_repo / "generated")
    output = fleet.outputs(STALLS)[STALLED]
    half = output[: len(output) // 2]
    for lab in lab_with(lab_repo, tmp):
        # `exec`: the pid noted is the stalled command itself, which only timeout(1) ends.
        stall = f'printf %s {shlex.quote(half)}; echo "$$" >> "$dir/waiting"; exec sleep 600'
        _answer(lab, STALLS, allowlisted(STALLED, fleet.hosts[STALLS].state), stall)
        run = audit_live(lab, tmp, "--timeout", "30", "--probe-timeout", "5")
        hung = _waiting(lab.state / "hosts" / STALLS)
        yield Stall(run, half, hung, _still_running(hung))


@pytest.mark.realtool
def test_a_probe_stalled_mid_output_fails_alone_and_the_hosts_other_answers_are_kept(
    stalled: Stall, lab_repo: Path
) -> None:
    run = stalled.run
    assert run.code == 2
    assert run.status() == {h: "error" if h == STALLS else "ok" for h in run.status()}
    assert len(run.status()) == 5 + len(SWITCHES) and run.report["fabric"]["status"] == "ok"
    entry = run.host(STALLS)
    assert [(f["probe"], f["message"][:30]) for f in entry["failures"]] == [
        (STALLED, "timed out after 5s: the host a")
    ]
    # The probes before and after the stalled one ran, and their outputs are the readings.
    sent = [c.line for c in run.commands if c.host == STALLS]
    at = next(
        i for i, line in enumerate(sent) if line.endswith(shlex.join(PROBES[STALLED].spec.argv))
    )
    assert 0 < at < len(sent) - 1
    folder = run.out / "recording" / "hosts" / STALLS
    kept = {p.stem for p in folder.glob("*.txt")}
    assert kept and STALLED not in kept
    checks = {c["check"]: c["outcome"] for c in entry["checks"]}
    assert "complies" in checks.values() and "skipped" in checks.values()


@pytest.mark.realtool
def test_half_an_output_is_never_taken_as_a_reading(stalled: Stall) -> None:
    assert len(stalled.half) > 100  # it did print something before it stalled
    folder = stalled.run.out / "recording" / "hosts" / STALLS
    assert not (folder / f"{STALLED}.txt").exists()
    assert [f for f in stalled.run.report["findings"] if f["host"] == STALLS] == []


@pytest.mark.realtool
def test_a_stalled_probe_is_ended_on_the_host(stalled: Stall) -> None:
    assert len(stalled.hung) == 1
    assert stalled.lingering == []


# -- hosts in unexpected states cost nothing but themselves -----------------------------------

CAP = 4 * 2**20  # --max-output in the unruly run: a 50 MB answer is cut at 4 MiB
CHATTY = "Nov 30 06:00:00 gpu002 kernel: a line of an unusually chatty kernel log"
LAST_WORD = "uname: the last line on stderr, read to its end before the reason is taken"


@pytest.fixture(scope="module")
def unruly(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """gpu001's NICs carry other names than planned, gpu002's kernel log is 50 MB, mon01's
    probes hang, prov01's `uname -r` fails saying why; sm01 is as planned."""
    tmp = tmp_path_factory.mktemp("unruly")
    for lab in lab_with(lab_repo, tmp, [{"fault": "probe-hangs", "hosts": "mon01"}]):
        renamed = json.loads(Fleet.load(lab_repo / "generated").outputs("gpu001")["ip_addr"])
        for i, link in enumerate(renamed[1:]):
            link["ifname"] = f"enp{i}s0"
        _answer(lab, "gpu001", "ip -j addr show", f"printf %s {shlex.quote(json.dumps(renamed))}")
        chatty = f"yes {shlex.quote(CHATTY)} | head -c {50 * 2**20}"
        _answer(lab, "gpu002", "journalctl -k --no-pager", chatty)
        # A 10 MB "BIOS version": dmidecode prints one short line, and no more is kept.
        _answer(
            lab, "gpu002", "dmidecode -s bios-version", f"yes A | tr -d '\\n' | head -c {10**7}"
        )
        # A command that fails says why on stderr: its last line is the reason, every time.
        _answer(lab, "prov01", "uname -r", f"printf '%s\\n' {shlex.quote(LAST_WORD)} >&2; exit 3")
        yield audit_live(lab, tmp, "--timeout", "40", "--max-output", str(CAP))


@pytest.mark.realtool
def test_each_unruly_host_gets_its_status_and_every_other_is_reported(unruly: Run) -> None:
    assert unruly.code == 2
    assert (
        unruly.status()
        == {
            "gpu001": "drift",
            "gpu002": "error",
            "mon01": "error",  # reached; its probes hang
            "prov01": "error",  # one probe fails, saying why on stderr
            "sm01": "ok",
        }
        | SWITCHES
    )
    assert unruly.host("prov01")["failures"] == [
        {"probe": "uname_r", "message": f"exit 3: {LAST_WORD}"}
    ]
    for name in ("report.json", "report.md", "junit.xml"):
        assert (unruly.out / name).is_file(), name
    assert unruly.report["fabric"]["status"] == "ok"


@pytest.mark.realtool
def test_renamed_nics_are_missing_interfaces_not_a_crash(unruly: Run, lab_repo: Path) -> None:
    contract = Fleet.load(lab_repo / "generated").hosts["gpu001"].state
    found = [(f["kind"], f["path"]) for f in unruly.report["findings"] if f["host"] == "gpu001"]
    assert found == [("address", f"interfaces[{i['name']}]") for i in contract["interfaces"]]


@pytest.mark.realtool
def test_a_huge_output_is_cut_and_recorded_with_a_marker(unruly: Run) -> None:
    entry = unruly.host("gpu002")
    bios = PROBES["dmidecode_bios"].spec.max_output  # the probe's own cap, under --max-output
    assert [(f["probe"], f["message"]) for f in entry["failures"]] == [
        ("dmidecode_bios", f"output over {bios} bytes: the recording keeps the first"),
        ("xid", f"output over {CAP} bytes: the recording keeps the first"),
    ]
    line = (unruly.out / "recording/hosts/gpu002/dmidecode_bios.txt").read_bytes()
    assert line == b"A" * bios + TRUNCATED.format(cap=bios).encode()
    kept = (unruly.out / "recording/hosts/gpu002/xid.txt").read_bytes()
    marker = TRUNCATED.format(cap=CAP).encode()
    assert len(kept) == CAP + len(marker) and kept.endswith(marker)
    assert kept.startswith(CHATTY.encode())


# -- the audit account: the host runs the allowlist and nothing else -------------------------


@pytest.fixture(scope="module")
def account(lab_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[twin.Lab]:
    yield from lab_with(lab_repo, tmp_path_factory.mktemp("account"))


def _connect(lab: twin.Lab, host: str, **options: Any) -> Any:
    address, port = lab.hosts[host].rsplit(":", 1)
    return asyncssh.connect(
        address,
        int(port),
        username=lab.user,
        client_keys=[str(lab.client_key)],
        known_hosts=str(lab.known_hosts),
        config=[],
        agent_path=None,
        **options,
    )


def _run_as_audit(lab: twin.Lab, host: str, command: str) -> asyncssh.SSHCompletedProcess:
    async def run() -> asyncssh.SSHCompletedProcess:
        async with _connect(lab, host) as conn:
            return await conn.run(command, check=False)

    return asyncio.run(run())


@pytest.mark.realtool
@pytest.mark.parametrize(
    "command",
    [
        "id",
        "uname -r",  # a probe's own command line: the account takes probe names only
        "uname_r extra",
        "ethtool_i -S",
        "ethtool_i ib0;id",
        "ethtool_i $(id)",
        "sha256sum /etc/../etc/shadow",
        # The hash probe reads as root: only the host's own list of deployed files.
        "sha256sum /etc/shadow",
        "sha256sum /etc/ssh/ssh_host_ed25519_key",
        "sha256sum /dev/zero",
        "sha256sum /dev/watchdog",
        "sha256sum /proc/self/environ",
        "sha256sum /etc/chrony.conf",  # in the map, but not the host's whole list
        "file_exists /etc/shadow",
        "systemctl_show sshd",
        "--within 0 uname_r",
        "",
        "sh -c id",
    ],
)
def test_any_other_command_sent_with_the_audit_key_is_refused(
    account: twin.Lab, command: str
) -> None:
    before = len(account.commands())
    done = _run_as_audit(account, "gpu001", command)
    assert done.exit_status == REFUSED, (command, done.stdout, done.stderr)
    assert str(done.stderr).startswith("clusterforge-probe: refused:")
    assert done.stdout == "" and len(account.commands()) == before  # nothing ran there


@pytest.mark.realtool
def test_a_probe_by_name_runs_its_command_and_nothing_is_forwarded(
    account: twin.Lab, lab_repo: Path
) -> None:
    done = _run_as_audit(account, "gpu001", "--within 30 ethtool_i ib0")
    assert done.exit_status == 0
    assert done.stdout == Fleet.load(lab_repo / "generated").outputs("gpu001")["ethtool_i@ib0"]
    assert account.commands()[-1].line == "ethtool -i ib0"

    async def forward() -> None:
        async with _connect(account, "gpu001") as conn:
            await conn.open_connection("127.0.0.1", 22)

    with pytest.raises(asyncssh.ChannelOpenError):
        asyncio.run(forward())


# -- keys: encrypted, and an agent for interactive use ---------------------------------------


def _without_key(argv: list[str]) -> list[str]:
    at = argv.index("--ssh-key")
    return argv[:at] + argv[at + 2 :]


@pytest.mark.realtool
def test_an_encrypted_key_works_with_its_passphrase_from_the_environment_or_a_file(
    account: twin.Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "id_ed25519"
    shutil.copy(account.client_key, key)
    keygen = require_tool("ssh-keygen")
    subprocess.run(
        [keygen, "-q", "-p", "-P", "", "-N", "correct horse", "-f", str(key)], check=True
    )
    argv = [*_without_key(account.audit_args()), "--ssh-key", str(key)]
    monkeypatch.setenv("AUDIT_PASS", "correct horse")
    assert main([*argv, "--out", str(tmp_path / "env"), "--key-passphrase-env", "AUDIT_PASS"]) == 0
    (tmp_path / "pass").write_text("correct horse\n", encoding="utf-8")
    by_file = ["--key-passphrase-file", str(tmp_path / "pass")]
    assert main([*argv, "--out", str(tmp_path / "file"), *by_file]) == 0
    assert main([*argv, "--out", str(tmp_path / "none")]) == 4  # no passphrase: cannot run


@pytest.mark.realtool
def test_an_agent_is_used_only_when_asked_for(
    account: twin.Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, add = require_tool("ssh-agent"), require_tool("ssh-add")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen([agent, "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):  # the socket appears once the agent listens
            if sock.exists():
                break
            time.sleep(0.05)
        env = {"SSH_AUTH_SOCK": str(sock)}
        subprocess.run([add, str(account.client_key)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        argv = _without_key(account.audit_args())
        assert main([*argv, "--out", str(tmp_path / "agent"), "--ssh-agent"]) == 0
        # Without --ssh-agent the agent is never asked, SSH_AUTH_SOCK or not.
        assert main([*argv, "--out", str(tmp_path / "key")]) == 4
    finally:
        proc.kill()
        proc.wait(timeout=10)


# -- memory: two consecutive runs ------------------------------------------------------------

NEW_KERNEL = "4.18.0-553.5.1.el8_10.x86_64"


@pytest.mark.realtool
def test_the_next_run_says_what_was_fixed_and_what_is_new(
    drift: Run, lab_repo: Path, tmp_path: Path
) -> None:
    # After `drift` (gpu002 on an old OFED): gpu002 is fixed, gpu001 boots another kernel.
    staged = [
        {"fault": "version-drift", "hosts": "gpu001", "version": "kernel", "value": NEW_KERNEL}
    ]
    then = drift.out / "report.json"
    for lab in lab_with(lab_repo, tmp_path, staged):
        run = audit_live(lab, tmp_path, "--previous", str(then))
    assert run.code == 1
    history = run.report["history"]
    assert history["previous"] == drift.report["collected_at"]
    assert history["new"] == [{"host": "gpu001", "check": "kernel", "path": "versions.kernel"}]
    assert history["resolved"] == [{"host": "gpu002", "check": "ofed", "path": "versions.ofed"}]
    assert history["still"] == history["flapping"] == []
    lead = (run.out / "report.md").read_text(encoding="utf-8").split("\n## ")[1]
    assert lead.startswith("Since the last run") and "1 new, 1 resolved, 0 still there" in lead
    argv = ["-C", str(lab_repo), "audit", "history", str(then), str(run.out / "report.json")]
    assert main(argv) == 0  # the same, from the two reports alone
