"""The generated Cumulus configuration at work: two racks' storage switches and a storage spine,
each in its own network namespace, carry a jumbo frame from a host in one rack to a host in
the other, routed by FRR over BGP unnumbered sessions.

What is applied and what is only parsed. This kernel builds veths, plain bridges, addresses,
routes and jumbo MTUs, but no 802.1Q devices, VLAN-filtering bridges or VRFs. So each switch
is read through ifupdown2's own parser (`ifquery -o json` of its generated `interfaces`),
and its facts are applied with `ip`: every cabled port a veth named as the port (swp1, swp49)
with its `mtu`; the access ports of the storage VLAN enslaved to a plain bridge `br_default`
that carries the SVI's address and MTU (one VLAN per storage switch, so one bridge is that
VLAN); uplinks routed, with no address. Not applied, only parsed (by `ifup -a -s` in
tests/test_switches.py): `bridge-vlan-aware`, `bridge-vids`, `bridge-access` as tags, the
`vlanN` device itself, and eth0 in the `mgmt` VRF. FRR runs from the generated frr.conf
unchanged: `zebra` and `bgpd` per switch namespace, as the `frr` user, their sockets and pid
files in a temporary folder. Hosts get their storage NIC, address, MTU and storage route from
the plan, which their NetworkManager keyfiles are written from. Then a one-hop-short MTU on
the spine's port to the far rack makes the same don't-fragment ping fail, as the `switch-mtu`
check foresees.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from audits import ethernet
from audits.compare import SWITCH_CHECKS
from audits.sink import Sink
from compiler.ethernet import EthernetSwitch as PlannedSwitch
from compiler.pipeline import Compiled, compile_repo
from compiler.plan import Host
from contract import EthernetSwitch, Kind
from contract.probes import lldpcli_neighbors, vtysh_bgp_summary, vtysh_running_config
from tests.conftest import require_tool, stop

RACK_A, RACK_B = ("stor01", "gpu001"), ("stor02", "gpu006")
SPINE = "stor-spine01"
JUMBO = 8972  # 9000 less the IPv4 and ICMP headers
_names = itertools.count()

pytestmark = pytest.mark.realtool


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done


class Lab:
    """Namespaces and veths made for one test, removed after it whatever happened."""

    def __init__(self, tmp: Path) -> None:
        self.ip = require_tool("ip")
        self.tag = f"cfe{os.getpid() % 10000}{next(_names)}"
        self.tmp = tmp
        self.runs = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))
        self.runs.chmod(0o755)
        self.spaces: dict[str, str] = {}
        self.daemons: list[subprocess.Popen[Any]] = []

    def ns(self, device: str) -> str:
        if device not in self.spaces:
            name = f"{self.tag}-{device}"
            _run(self.ip, "netns", "add", name)
            self.spaces[device] = name
            self.exec(device, "ip", "link", "set", "lo", "up")
            for key in ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"):
                self.exec(device, "sysctl", "-qw", key)
        return self.spaces[device]

    def exec(self, device: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(self.ip, "netns", "exec", self.ns(device), *args, check=check)

    def cable(self, a: str, a_port: str, b: str, b_port: str, mtu: int) -> None:
        """A veth pair, one end in each device's namespace, named as the device names it."""
        left, right = f"{self.tag}a{len(self.spaces)}", f"{self.tag}b{len(self.spaces)}"
        _run(self.ip, "link", "add", left, "type", "veth", "peer", "name", right)
        for end, device, port in ((left, a, a_port), (right, b, b_port)):
            _run(self.ip, "link", "set", end, "netns", self.ns(device))
            self.exec(device, "ip", "link", "set", end, "name", port)
            self.exec(device, "ip", "link", "set", port, "mtu", str(mtu), "up")

    def close(self) -> None:
        for proc in self.daemons:
            stop(proc)
        for name in self.spaces.values():
            subprocess.run([self.ip, "netns", "del", name], check=False, timeout=30)
        shutil.rmtree(self.runs, ignore_errors=True)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path)
    try:
        yield made
    finally:
        made.close()


def parsed(compiled: Compiled, name: str, tmp: Path) -> dict[str, dict[str, Any]]:
    """The switch's generated interfaces file as ifupdown2 reads it, stanza by interface."""
    path = tmp / f"{name}.interfaces"
    path.write_bytes(compiled.files[f"switches/{name}/etc/network/interfaces"])
    out = _run(require_tool("ifquery"), "-a", "-i", str(path), "-o", "json").stdout
    return {s["name"]: s["config"] for s in json.loads(out)}


def apply_switch(lab: Lab, sw: PlannedSwitch, stanzas: dict[str, dict[str, Any]]) -> None:
    """The plain-bridge form of the parsed file: MTUs, the bridge with the SVI's address."""
    bridge = stanzas.get("br_default")
    if bridge is None:
        return
    svi = next(c for n, c in stanzas.items() if n.startswith("vlan"))
    lab.exec(sw.name, "ip", "link", "add", "br_default", "type", "bridge")
    for port in bridge["bridge-ports"].split():
        if port in _links(lab, sw.name):
            lab.exec(sw.name, "ip", "link", "set", port, "master", "br_default")
    lab.exec(sw.name, "ip", "link", "set", "br_default", "mtu", svi["mtu"], "up")
    lab.exec(sw.name, "ip", "addr", "add", svi["address"], "dev", "br_default")


def _links(lab: Lab, device: str) -> set[str]:
    shown = json.loads(lab.exec(device, "ip", "-j", "link", "show").stdout)
    return {link["ifname"] for link in shown}


def start_frr(lab: Lab, compiled: Compiled, name: str) -> None:
    # FRR's user must reach its folder: not below pytest's own, which is root's alone.
    conf = lab.runs / name / "frr.conf"
    conf.parent.mkdir()
    conf.write_bytes(compiled.files[f"switches/{name}/etc/frr/frr.conf"])
    run = conf.parent
    # As FRR's own user, as its packaged service runs it (root is in none of its groups).
    shutil.chown(run, "frr", "frr")
    zserv = str(run / "zserv.api")
    common = ["-f", str(conf), "--vty_socket", str(run), "-u", "frr", "-g", "frr"]
    for daemon, extra in (
        ("zebra", ["-z", zserv, "-i", str(run / "zebra.pid")]),
        ("bgpd", ["-z", zserv, "-i", str(run / "bgpd.pid"), "-p", "179"]),
    ):
        log = (run / f"{daemon}.log").open("w")
        binary = require_tool(f"/usr/lib/frr/{daemon}")
        lab.daemons.append(
            subprocess.Popen(
                [lab.ip, "netns", "exec", lab.ns(name), binary, *common, *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        if daemon == "zebra":
            zebra = lab.daemons[-1]
            _wait(lambda z=zebra: Path(zserv).exists() or z.poll() is not None, "zebra", run)
            assert zebra.poll() is None, (run / "zebra.log").read_text()


def _wait(done: Any, what: str, logs: Path, seconds: float = 90) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if done():
            return
        time.sleep(0.5)
    text = "\n".join(f"{p}: {p.read_text()[-2000:]}" for p in sorted(logs.rglob("*.log")))
    raise AssertionError(f"{what} not within {seconds:g}s\n{text}")


def _bgp_route(lab: Lab, device: str, subnet: str) -> bool:
    routes = json.loads(lab.exec(device, "ip", "-j", "route", "show", subnet).stdout)
    return any(r.get("protocol") == "bgp" for r in routes)


def build(lab: Lab, compiled: Compiled) -> tuple[Host, Host]:
    plan = compiled.plan
    eth = plan.ethernet
    wanted = {RACK_A[0], RACK_B[0], SPINE, RACK_A[1], RACK_B[1]}
    for c in plan.cables:
        if {c.a.device, c.b.device} <= wanted and c.network == "storage":
            # A host's end is its NIC (its MTU set below); a switch's its port, at the fabric's.
            far = c.b.port if c.b.device in {RACK_A[1], RACK_B[1]} else f"swp{c.b.port}"
            lab.cable(c.a.device, f"swp{c.a.port}", c.b.device, far, eth.mtu)
    for name in (RACK_A[0], RACK_B[0], SPINE):
        apply_switch(lab, eth.switch(name), parsed(compiled, name, lab.tmp))
    hosts = []
    for name in (RACK_A[1], RACK_B[1]):
        host = plan.host(name)
        iface = host.interface("storage")
        assert iface is not None
        lab.exec(name, "ip", "link", "set", iface.name, "mtu", str(iface.mtu))
        lab.exec(name, "ip", "addr", "add", iface.cidr, "dev", iface.name)
        for route in host.routes:
            if route.dev == iface.name and route.gateway:
                lab.exec(name, "ip", "route", "add", route.dst, "via", route.gateway)
        hosts.append(host)
    for name in (RACK_A[0], RACK_B[0], SPINE):
        start_frr(lab, compiled, name)
    return hosts[0], hosts[1]


def _ping(lab: Lab, host: Host, to: str) -> subprocess.CompletedProcess[str]:
    args = (require_tool("ping"), "-M", "do", "-s", str(JUMBO), "-c", "1", "-W", "2", to)
    return lab.exec(host.name, *args, check=False)


def test_a_jumbo_frame_crosses_racks_over_bgp_unnumbered(lab: Lab, compiled: Compiled) -> None:
    a, b = build(lab, compiled)
    a_subnet, b_subnet = (h.interface("storage").subnet for h in (a, b))  # type: ignore[union-attr]
    # Sessions up over the veths' link-local addresses, each rack's subnet learnt by the other.
    _wait(lambda: _bgp_route(lab, RACK_A[0], b_subnet), f"{b_subnet} on {RACK_A[0]}", lab.runs)
    _wait(lambda: _bgp_route(lab, RACK_B[0], a_subnet), f"{a_subnet} on {RACK_B[0]}", lab.runs)
    to = b.interface("storage").address  # type: ignore[union-attr]
    done = _ping(lab, a, to)
    assert done.returncode == 0, done.stdout + done.stderr
    # One hop short of the storage MTU and the same ping cannot pass without fragments.
    lab.exec(SPINE, "ip", "link", "set", f"swp{_spine_port(compiled, RACK_B[0])}", "mtu", "1500")
    failed = _ping(lab, a, to)
    assert failed.returncode != 0, failed.stdout


def _spine_port(compiled: Compiled, rack_switch: str) -> str:
    return next(
        c.b.port for c in compiled.plan.cables if c.a.device == rack_switch and c.b.device == SPINE
    )


def test_the_audit_reads_real_frr_sessions_against_the_planned_peers(
    lab: Lab, compiled: Compiled
) -> None:
    """`show bgp summary json` from the real FRR running the generated frr.conf, read by the
    audit's parser and judged by its BGP check against the switch's expected record: the
    session to the spine that is there is Established with a prefix, the one to the spine the
    lab leaves out is the one finding."""
    _, b = build(lab, compiled)
    b_subnet = b.interface("storage").subnet  # type: ignore[union-attr]
    _wait(lambda: _bgp_route(lab, RACK_A[0], b_subnet), f"{b_subnet} on {RACK_A[0]}", lab.runs)
    run = lab.runs / RACK_A[0]
    shown = lab.exec(RACK_A[0], "vtysh", "--vty_socket", str(run), "-c", "show bgp summary json")
    sessions = vtysh_bgp_summary.parse(shown.stdout)
    up = {s["peer"]: s for s in sessions if s["state"] == vtysh_bgp_summary.ESTABLISHED}
    assert up.keys() == {"swp49"} and up["swp49"]["hostname"] == SPINE
    record = EthernetSwitch.from_json(compiled.files[f"expected/switches/{RACK_A[0]}.json"])
    sink = Sink(RACK_A[0], "bgp", Kind.BGP, date(2026, 5, 4))
    SWITCH_CHECKS["bgp"].run(record, {vtysh_bgp_summary.PROBE: sessions}, sink)
    assert [(f["path"], f["observed"]) for f in sink.findings] == [("bgp[swp50].state", "Idle")]


def start_lldpd(lab: Lab, compiled: Compiled, name: str) -> Path:
    """lldpd in the switch's namespace with its generated lldpd.d/clusterforge.conf (its
    system name, ports and port ID subtype), plus a one-second transmit interval so a moved
    cable shows within seconds (the default is 30); its socket in the lab's folder."""
    require_tool("lldpd")
    confs = lab.runs / name / "lldpd.d"
    confs.mkdir(parents=True)
    (confs / "clusterforge.conf").write_bytes(
        compiled.files[f"switches/{name}/etc/lldpd.d/clusterforge.conf"]
    )
    (confs / "zz-test.conf").write_text("configure lldp tx-interval 1\n")
    socket = lab.runs / name / "lldpd.socket"
    log = (lab.runs / name / "lldpd.log").open("w")
    # Debian's lldpd drops to _lldpd in the chroot it was built with (/run/lldpd).
    Path("/run/lldpd").mkdir(exist_ok=True)
    binary = require_tool("lldpd")
    lab.daemons.append(
        subprocess.Popen(
            [
                lab.ip,
                "netns",
                "exec",
                lab.ns(name),
                binary,
                "-d",
                "-u",
                str(socket),
                "-O",
                str(confs),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    )
    _wait(socket.exists, f"{name}'s lldpd socket", lab.runs)
    return socket


def _neighbours(lab: Lab, name: str, socket: Path) -> str:
    lldpcli = require_tool("lldpcli")
    return lab.exec(name, lldpcli, "-u", str(socket), "-f", "json", "show", "neighbors").stdout


def _heard(lab: Lab, name: str, socket: Path) -> dict[str, str]:
    """Port -> the neighbours heard on it, as `chassis/port`, comma-joined."""
    heard: dict[str, list[str]] = {}
    for n in lldpcli_neighbors.parse(_neighbours(lab, name, socket)):
        heard.setdefault(n["iface"], []).append(f"{n['chassis']}/{n['port_id']}")
    return {iface: ",".join(sorted(seen)) for iface, seen in heard.items()}


def _cabling(compiled: Compiled, name: str, text: str) -> list[Any]:
    record = EthernetSwitch.from_json(compiled.files[f"expected/switches/{name}.json"])
    sink = Sink(name, "ethernet", Kind.CABLE, date(2026, 5, 4))
    SWITCH_CHECKS["ethernet"].run(
        record, {lldpcli_neighbors.PROBE: lldpcli_neighbors.parse(text)}, sink
    )
    return sink.findings


def test_real_lldpd_on_the_switches_names_their_uplinks_by_cable_id(
    lab: Lab, compiled: Compiled
) -> None:
    """Real lldpd per switch, running the generated lldpd config over veths named as the
    switches name their ports: each rack switch hears its spine on the planned port, and the
    audit's ethernet check on its `lldpcli -f json show neighbors` names only the cables the
    lab leaves out (the second spine's, the management patch). Then the spine's two ports
    to the racks are exchanged (its ends of two uplinks swapped): both rack switches name
    the pair as a swap, by cable ID."""
    build(lab, compiled)
    sockets = {name: start_lldpd(lab, compiled, name) for name in (RACK_A[0], RACK_B[0], SPINE)}
    a, b = RACK_A[0], RACK_B[0]
    a_port, b_port = (f"swp{_spine_port(compiled, s)}" for s in (a, b))
    _wait(lambda: len(_heard(lab, SPINE, sockets[SPINE])) == 2, "the spine's neighbours", lab.runs)
    _wait(lambda: "swp49" in _heard(lab, a, sockets[a]), f"{a}'s spine", lab.runs)
    assert _heard(lab, SPINE, sockets[SPINE]) == {a_port: f"{a}/swp49", b_port: f"{b}/swp49"}
    shown = _neighbours(lab, a, sockets[a])
    assert [(f["path"], f["observed"]) for f in _cabling(compiled, a, shown)] == [
        ("R01-MG46", None),
        ("R01-ST50", None),
    ]
    # The spine's two ends exchanged: each rack switch's swp49 hears the other's spine port
    # (alone, once the old neighbour's TTL, 4 transmit intervals, has passed).
    for port, to in ((a_port, "swpx"), (b_port, a_port), ("swpx", b_port)):
        lab.exec(SPINE, "ip", "link", "set", port, "down")
        lab.exec(SPINE, "ip", "link", "set", port, "name", to)
        lab.exec(SPINE, "ip", "link", "set", to, "up")

    def moved() -> bool:
        return (
            _heard(lab, a, sockets[a]).get("swp49") == f"{SPINE}/{b_port}"
            and _heard(lab, b, sockets[b]).get("swp49") == f"{SPINE}/{a_port}"
        )

    _wait(moved, "the moved cables", lab.runs)
    found = [
        f
        for findings in ethernet.name_swaps(
            [_cabling(compiled, s, _neighbours(lab, s, sockets[s])) for s in (a, b)]
        )
        for f in findings
        if f["path"].endswith("-ST49")
    ]
    assert sorted((f["host"], f["path"], f["message"]) for f in found) == [
        (a, "R01-ST49", "R01-ST49 and R02-ST49 look swapped: far ends exchanged"),
        (b, "R02-ST49", "R01-ST49 and R02-ST49 look swapped: far ends exchanged"),
    ]


def test_frr_runs_its_generated_frr_conf_and_a_live_change_is_named(
    lab: Lab, compiled: Compiled
) -> None:
    """Real FRR's `show running-config` for the generated frr.conf, normalised by the probe's
    parser, is exactly the switch record's `running_config` (the generated file normalised):
    on a rack switch and on the spine. Then one session added live in vtysh, not written to
    the file: the running_config check names exactly that line."""
    _, b = build(lab, compiled)
    b_subnet = b.interface("storage").subnet  # type: ignore[union-attr]
    _wait(lambda: _bgp_route(lab, RACK_A[0], b_subnet), f"{b_subnet} on {RACK_A[0]}", lab.runs)

    def running(name: str) -> str:
        vty = ("vtysh", "--vty_socket", str(lab.runs / name))
        return lab.exec(name, *vty, "-c", "show running-config").stdout

    def record(name: str) -> EthernetSwitch:
        return EthernetSwitch.from_json(compiled.files[f"expected/switches/{name}.json"])

    for name in (RACK_A[0], SPINE):
        assert vtysh_running_config.parse(running(name)) == list(record(name).running_config or ())
    asn = record(RACK_A[0]).asn
    vty = ("vtysh", "--vty_socket", str(lab.runs / RACK_A[0]))
    live = ("-c", "configure terminal", "-c", f"router bgp {asn}")
    lab.exec(RACK_A[0], *vty, *live, "-c", "neighbor swp51 interface remote-as external")
    sink = Sink(RACK_A[0], "running_config", Kind.CONFIG, date(2026, 5, 4))
    facts = {vtysh_running_config.PROBE: vtysh_running_config.parse(running(RACK_A[0]))}
    SWITCH_CHECKS["running_config"].run(record(RACK_A[0]), facts, sink)
    line = f"router bgp {asn} > neighbor swp51 interface remote-as external"
    assert [(f["path"], f["observed"]) for f in sink.findings] == [
        (f"running-config[{line}]", line)
    ]
