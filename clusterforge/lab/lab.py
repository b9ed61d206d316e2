"""The lab twin: the compiled cluster played on this machine, for the audit to run against.

`up(repo, state)` plays every host of `repo/generated/expected/` (or those a host list names)
on loopback, and `down(state)` takes all of it away again:

- **sshd**: real OpenSSH, a few processes, each listening on up to 16 hosts' addresses (sshd's
  own limit, MAX_LISTEN_SOCKS). A host's address is the loopback twin of its management
  address, 10.60.2.11 -> 127.60.2.11, and its port is a free high one, so labs coexist. Each
  command runs `respond.sh` (ForceCommand), which answers as the host the connection came
  to, from what `Fleet` renders of the host's contract, faults applied. The audit's key logs
  in through the audit account of `generated/access/`: its `authorized_keys` line
  (`restrict`, the forced command), and the forced command byte for byte but for the program
  paths, which lead to shims in `STATE/bin` that hand the probe's command line to
  `respond.sh`; so anything outside the allowlist is refused by the lab host itself.
- **ibsim** plays `generated/fabric/topology.net`, cable faults applied (`topology.stage`);
  the subnet-manager hosts answer the fabric probes by running the real `ibnetdiscover` and
  `iblinkinfo` against it.
- **a lab user**: sshd and ibsim run unprivileged. Run as any user, the lab is that user and
  needs no root at all: loopback addresses and high ports are anyone's. Run as root, it
  creates a system user of its own (`cflab` + 6 hex digits; home = the state folder, shell
  /bin/sh, no password, no groups) and runs everything as that user, because an sshd running
  as root would log the audit in as root; `down` deletes the user.
- **the state folder** (`$XDG_RUNTIME_DIR/clusterforge-lab`, else (and for root)
  `/tmp/clusterforge-lab-<uid>`, outside the repository): configs, keys, answers, logs, and
  for the audit `client/id_ed25519`, `known_hosts` and `inventory.json`. `lab.json` there
  says what `down` and `status` must find; `down` removes the folder.

Nothing binds an address that is not loopback: every address is checked before a config is
written. `linger=False` (the tests) ties every process to the calling thread's life
(`setpriv --pdeathsig`), so a killed test run leaves nothing behind either.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audits import expected
from audits.collect import probe_of
from audits.compare import host_probes
from clusterforge.lab import faults as fault
from clusterforge.lab import topology
from clusterforge.lab.fleet import Fleet, as_state
from clusterforge.lab.ibsim import LabError, find_umad2sim, require
from common import atomic
from common.hostlist import expand
from contract import manifest, probes
from contract.account import FORCED, PROBE_COMMAND

PER_SSHD = 16  # sshd's MAX_LISTEN_SOCKS
SUBNET_MANAGER = "subnet-manager"
FABRIC_SCANS = ("ibnetdiscover", "iblinkinfo")  # answered by the real programs on ibsim
RESPONDER = Path(__file__).with_name("respond.sh")
SUDO = "/usr/bin/sudo"  # as the forced command calls it
STATE_FILE = "lab.json"
_START_ATTEMPTS = 3  # a picked port can be taken before sshd binds it: pick others
_READY_TIMEOUT = 20.0


def default_state() -> Path:
    """Where a lab keeps its files unless told: never inside the repository."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    # Root's runtime folder is closed to the lab user that root's lab runs as.
    if runtime and os.geteuid() != 0:
        return Path(runtime) / "clusterforge-lab"
    return Path(f"/tmp/clusterforge-lab-{os.getuid()}")


@dataclass(frozen=True)
class Command:
    """One command a lab host was asked to run (a line of `commands.log`)."""

    at_ns: int  # when the responder started, ns since the epoch
    host: str
    line: str  # the command line as the client sent it


@dataclass(frozen=True)
class Lab:
    """A lab that is up: what the audit needs to reach it."""

    state: Path
    repo: Path  # pass as -C to the audit: its generated/expected/ is what the lab plays
    user: str
    hosts: dict[str, str]  # host -> address:port (a host down: nothing listens there)
    down: tuple[str, ...]

    @property
    def client_key(self) -> Path:
        return self.state / "client" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state / "known_hosts"

    @property
    def inventory(self) -> Path:
        return self.state / "inventory.json"

    def audit_args(self) -> list[str]:
        """`clusterforge` arguments that audit this lab."""
        return [
            *("-C", str(self.repo), "audit"),
            *("--ssh-key", str(self.client_key), "--known-hosts", str(self.known_hosts)),
            *("--inventory", str(self.inventory), "--user", self.user),
        ]

    def commands(self) -> list[Command]:
        """Every command the hosts were asked to run, in order."""
        log = self.state / "commands.log"
        found = []
        for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else ():
            at, host, command = line.split(" ", 2)
            found.append(Command(int(at), host, command))
        return sorted(found, key=lambda c: c.at_ns)


def twin(address: str) -> str:
    """The loopback twin of an IPv4 address: 10.60.2.11 -> 127.60.2.11."""
    return "127." + address.split("/")[0].split(".", 1)[1]


def loopback(address: str) -> str:
    """`address`, if it is a loopback one; raises LabError for anything the lab must not bind."""
    try:
        if ipaddress.ip_address(address).is_loopback:
            return address
    except ValueError:
        pass
    raise LabError(f"refusing to bind {address!r}: the lab binds loopback addresses only")


def up(
    repo: Path,
    state: Path | None = None,
    hosts: Sequence[str] | None = None,
    faults_file: Path | None = None,
    *,
    linger: bool = True,
) -> Lab:
    """Play `repo`'s compiled cluster (only `hosts`, and the subnet managers, if given) with
    the faults of `faults_file`; returns once every host answers. Raises LabError, or
    SourceError for a bad faults file; on failure everything started is taken down again."""
    state = (state or default_state()).absolute()
    if (state / STATE_FILE).exists():
        raise LabError(f"a lab is already up in {state}: `clusterforge lab down` first")
    if state.exists() and any(state.iterdir()):
        raise LabError(f"{state} exists and is not an empty folder; name another")
    expectations = expected.read(repo)
    contracts = {h: as_state(c) for h, c in expectations.hosts.items()}
    # The audited switches are played as hosts are, through their OS's forced command; one
    # whose OS has no audit account compiled is left out of the view.
    switches = {
        s: as_state(c)
        for s, c in expectations.switches.items()
        if (repo / "generated" / "access" / c.os / FORCED).is_file()
    }
    played = _played(contracts | switches, hosts)
    gone = contracts.keys() - set(played)
    cables = {
        c["id"]: c
        for c in expectations.fabric.as_dict()["cables"]
        if c["lifecycle"] == "installed" and not {c["a"]["name"], c["b"]["name"]} & gone
    }
    # Faults may name only what is played: the hosts, the switches, the cables still installed.
    on = {h: (contracts | switches)[h] for h in played}
    staged = fault.read(faults_file, on, list(cables)) if faults_file else fault.NONE
    tools = {name: require(name) for name in ("sshd", "ssh-keygen", "ibsim", *FABRIC_SCANS)}
    try:
        state.mkdir(parents=True, exist_ok=True)
        state.chmod(0o700)
    except OSError as exc:
        raise LabError(f"cannot make the lab's folder {state}: {exc}") from None
    record: dict[str, Any] = {"repo": str(repo), "processes": [], "user": None}
    _save(state, record)
    try:
        user = _user(state, record)
        if user.uid != os.getuid():
            _reachable(state)
        # A view without the switches the lab cannot play, as one of some hosts leaves the
        # others out.
        every = contracts | switches
        whole = played == sorted(every) and switches.keys() == expectations.switches.keys()
        view = repo if whole else _view(repo, state, played, list(contracts))
        record["view"] = str(view)
        lab = _start(state, view, user, every, cables, played, staged, tools, record, linger)
    except BaseException as exc:
        with contextlib.suppress(LabError):
            down(state)
        if isinstance(exc, OSError):
            raise LabError(f"cannot bring the lab up: {exc}") from None
        raise
    return lab


def _played(contracts: Mapping[str, Any], hosts: Sequence[str] | None) -> list[str]:
    if hosts is None:
        return sorted(contracts)
    unknown = sorted(set(hosts) - contracts.keys())
    if unknown:
        raise LabError(f"not hosts of this cluster: {', '.join(unknown)}")
    managers = {h for h, c in contracts.items() if c["role"] == SUBNET_MANAGER}
    return sorted(set(hosts) | managers)


def _view(repo: Path, state: Path, played: Sequence[str], every: Sequence[str]) -> Path:
    """A repository as if only the played hosts and switches were installed: their contracts,
    the fabric without the others' cables, for the lab to play and the audit to compare it
    with."""
    source, view = repo / "generated", state / "view" / "generated"
    (view / "expected" / "hosts").mkdir(parents=True)
    (view / "expected" / "switches").mkdir()
    (view / "fabric").mkdir()
    (view / "deploy").mkdir()
    for host in played:
        contract = next(
            f"expected/{kind}/{host}.json"
            for kind in ("hosts", "switches")
            if (source / "expected" / kind / f"{host}.json").is_file()
        )
        for name in (contract, f"deploy/{host}.json"):
            if (source / name).is_file():
                shutil.copyfile(source / name, view / name)
        placed = source / "deploy" / f"{host}.json"
        # The files a snapshot keeps: the fleet answers `file_texts` with their text.
        for f in (
            json.loads(placed.read_text(encoding="utf-8"))["files"] if placed.is_file() else ()
        ):
            if f.get("snapshot"):
                (view / f["source"]).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / f["source"], view / f["source"])
    gone = set(every) - set(played)
    fabric = json.loads((source / "expected" / "fabric.json").read_text(encoding="utf-8"))
    fabric["cables"] = [c for c in fabric["cables"] if not {c["a"]["name"], c["b"]["name"]} & gone]
    (view / "expected" / "fabric.json").write_text(
        json.dumps(fabric, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    net = (source / "fabric" / "topology.net").read_text(encoding="utf-8")
    (view / "fabric" / "topology.net").write_text(topology.only(net, played, every), "utf-8")
    if (source / "access").is_dir():
        shutil.copytree(source / "access", view / "access", dirs_exist_ok=True)
    # The view is a tree of its own, its manifest made as a compile makes one, so the audit's
    # check that it reads a whole compiled tree holds for it too.
    manifest.seal(view, manifest.load(source).source_sha256)
    return view.parent


def _start(
    state: Path,
    repo: Path,
    user: _User,
    contracts: Mapping[str, Mapping[str, Any]],
    cables: Mapping[str, Mapping[str, Any]],
    played: Sequence[str],
    staged: fault.Staged,
    tools: Mapping[str, str],
    record: dict[str, Any],
    linger: bool,
) -> Lab:
    down_hosts = staged.hosts(fault.Kind.HOST_DOWN)
    served = [h for h in played if h not in down_hosts]
    addresses = _addresses(contracts, played)
    fleet = Fleet.load(repo / "generated")
    for f in staged.faults:
        if isinstance(f, fault.VersionDrift):
            fleet.set_version(expand(f.hosts), f.version, f.value)
        elif isinstance(f, fault.RouteMissing):
            for host in expand(f.hosts):
                fleet.drop_route(host, f.dst)
        elif isinstance(f, fault.FileFault):
            for host in expand(f.hosts):
                if f.fault == fault.Kind.FILE_CHANGED:
                    fleet.edit_file(host, f.path)
                else:
                    fleet.remove_file(host, f.path)
        elif isinstance(f, fault.UnitState):
            for host in expand(f.hosts):
                fleet.set_unit(host, f.unit, f.active, f.enabled)
        elif isinstance(f, fault.MemoryLost):
            for host in expand(f.hosts):
                fleet.lose_memory(host, f.gib)
        elif isinstance(f, fault.SlurmDrained):
            for host in expand(f.hosts):
                fleet.drain(host, f.reason, f.user, f.state)
        elif isinstance(f, fault.CableDegraded):
            fleet.degrade(f.cable, f.rate)
        elif isinstance(f, fault.CableUnplugged):
            fleet.unplug(f.cable)
        elif isinstance(f, fault.EthernetSwapped):
            fleet.swap_ethernet(*f.cables)
        elif isinstance(f, fault.EthernetUnplugged):
            fleet.unplug_ethernet(f.cable)
    # The fabric: ibsim on the planned topology as cabled now.
    net = (repo / "generated" / "fabric" / "topology.net").read_text(encoding="utf-8")
    (state / "fabric").mkdir()
    net, stood_in = topology.stand_in(topology.stage(net, cables, staged.faults))
    (state / "fabric" / "topology.net").write_text(net, encoding="utf-8")
    sockname = f"cflab{os.getpid()}x{uuid.uuid4().hex[:8]}"
    scan_env = {
        "LD_PRELOAD": str(find_umad2sim()),
        "IBSIM_SOCKNAME": sockname,
    }
    read_back = topology.played_back(stood_in) if stood_in else None
    # What every host answers.
    hang = staged.probes(fault.Kind.PROBE_HANGS)
    missing = staged.probes(fault.Kind.PROBE_MISSING)
    for host in played:
        _serve(
            state,
            host,
            addresses[host],
            contracts[host],
            fleet,
            hang,
            missing,
            scan_env,
            tools,
            read_back,
        )
    shutil.copyfile(RESPONDER, state / RESPONDER.name)
    # Keys: the audit's, one host key per sshd, and an impostor's for changed keys.
    _keygen(tools, state / "client" / "id_ed25519", "lab-audit")
    _access(state, repo / "generated" / "access")
    _keygen(tools, state / "impostor" / "host_key", "impostor")
    groups = [served[i : i + PER_SSHD] for i in range(0, len(served), PER_SSHD)]
    for n, _ in enumerate(groups):
        _keygen(tools, state / "sshd" / str(n) / "host_key", f"lab-sshd-{n}")
    if user.uid != os.getuid():
        _chown(state, user)
    # ibsim first: a scan may come as soon as an sshd answers.
    ibsim = [tools["ibsim"], "-n", "-s", str(state / "fabric" / "topology.net")]
    _spawn(state, record, "ibsim", ibsim, state / "fabric" / "ibsim.log", user, linger, sockname)
    _wait_ibsim(sockname, record)
    ports = _start_sshds(state, record, groups, addresses, user, tools, linger)
    # A host down is still in the inventory, where nothing listens: the audit is refused
    # there, and never falls back to the host's real address.
    ports |= {h: _free_port(addresses[h]) for h in down_hosts}
    hosts = {h: f"{addresses[h]}:{ports[h]}" for h in played}
    _client_files(state, hosts, staged, groups)
    lab = Lab(state, repo, user.name, hosts, tuple(sorted(down_hosts)))
    record.update(
        hosts=hosts,
        down=list(lab.down),
        audit=lab.audit_args(),
        addresses={h: addresses[h] for h in played},
    )
    _save(state, record)
    if user.uid != os.getuid():
        _chown(state, user)
    return lab


def _addresses(contracts: Mapping[str, Mapping[str, Any]], played: Sequence[str]) -> dict[str, str]:
    """Each host's loopback twin of its management address, the address of the interface its
    default route leaves by (as the compiler defines the management network, whatever the
    site names it); hosts without one (or whose twin is taken) get 127.255.x.y. Raises
    LabError for anything that is not loopback."""
    out: dict[str, str] = {}
    spare = (f"127.255.{n // 250}.{n % 250 + 1}" for n in range(65536))
    taken: set[str] = set()
    for host in played:
        contract = contracts[host]
        out_by = {r["dev"] for r in contract.get("routes", ()) if r["dst"] == "default"}
        mgmt = [i["address"] for i in contract.get("interfaces", ()) if i["name"] in out_by]
        if "management" in contract:  # a switch: its management port's address
            mgmt = [contract["management"]]
        address = twin(mgmt[0]) if mgmt and ":" not in mgmt[0] else None
        while address is None or address in taken:
            address = next(spare)
        taken.add(loopback(address))
        out[host] = address
    return out


def _serve(
    state: Path,
    host: str,
    address: str,
    contract: Mapping[str, Any],
    fleet: Fleet,
    hang: Mapping[str, set[str] | None],
    missing: Mapping[str, set[str] | None],
    scan_env: Mapping[str, str],
    tools: Mapping[str, str],
    read_back: str | None,
) -> None:
    """Write what `host` answers (`answers.sh`, a case over command lines; see respond.sh):
    its probes' outputs, and on a subnet manager the real fabric scans (through `read_back`,
    a sed script, when ibsim plays a stand-in speed); a probe missing is left out, a hanging
    one calls `hang` first."""
    folder = state / "hosts" / host
    folder.mkdir(parents=True)
    (folder / "name").write_text(f"{host}\n", encoding="utf-8")
    # The audit account's forced command to run: a host's role's, a switch's OS's.
    role = contract["os"] if "os" in contract else contract["role"]
    (folder / "role").write_text(f"{role}\n", encoding="utf-8")
    (state / "at").mkdir(exist_ok=True)
    (state / "at" / address).symlink_to(Path("..") / "hosts" / host)
    outputs = fleet.outputs(host)
    answers: dict[str, str] = {}
    for key in host_probes(fleet.record_of(host)):
        if key in outputs:
            answers[key] = f"printf %s {shlex.quote(outputs[key])}"
    if contract["role"] == SUBNET_MANAGER and contract.get("ib_ports"):
        env = {**scan_env, "SIM_HOST": f"{host} {contract['ib_ports'][0]['device']}"}
        assigned = [f"{k}={v}" for k, v in sorted(env.items())]
        for name in FABRIC_SCANS:
            # A scan whose ibsim is gone would retry for ever.
            run = ["env", *assigned, "timeout", "-s", "KILL", "60", tools[name]]
            scan = shlex.join([*run, *probes.PROBES[name].spec.argv[1:]])
            # sh has no pipefail: the scan's own exit status is kept by hand.
            answers[name] = (
                f"exec {scan}"
                if read_back is None
                else f"out=$({scan}); rc=$?\n"
                f"printf '%s\\n' \"$out\" | sed {shlex.quote(read_back)}; exit $rc"
            )
        rendered = fleet.fabric_outputs()
        if "mlxfwmanager" in rendered:
            # ibsim has no switch firmware to read: the fabric host plays mlxfwmanager's answer.
            answers["mlxfwmanager"] = f"printf %s {shlex.quote(rendered['mlxfwmanager'])}"
    arguments = fleet.arguments(host)

    def hit(key: str, faults: Mapping[str, set[str] | None]) -> bool:
        return host in faults and (faults[host] is None or probe_of(key) in (faults[host] or ()))

    def line(key: str) -> str:
        iface = key.split("@", 1)[1] if "@" in key else None
        argv = probes.PROBES[probe_of(key)].spec.argv_for(iface, arguments.get(probe_of(key), ()))
        # As the shims hand it over: the words joined by spaces ("$*"), as sh quotes none.
        return shlex.quote(" ".join(argv))

    script = ["case $SSH_ORIGINAL_COMMAND in"]
    for key, answer in sorted(answers.items()):
        if not hit(key, missing):
            script.append(f"{line(key)})\n{'hang; ' if hit(key, hang) else ''}{answer}\n;;")
    script.append(
        '*)\necho "bash: ${SSH_ORIGINAL_COMMAND%% *}: command not found" >&2\nexit 127\n;;\nesac\n'
    )
    (folder / "answers.sh").write_text("\n".join(script), encoding="utf-8")


@dataclass(frozen=True)
class _User:
    name: str
    uid: int
    gid: int


def _user(state: Path, record: dict[str, Any]) -> _User:
    """The user the lab runs as: the caller, or, for root, a system user made for this lab."""
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        return _User(me.pw_name, me.pw_uid, me.pw_gid)
    name = "cflab" + hashlib.sha256(str(state).encode()).hexdigest()[:6]
    argv = [require("useradd"), "--system", "--user-group", "--no-create-home"]
    argv += ["--home-dir", str(state), "--shell", "/bin/sh", "--comment", "clusterforge lab"]
    record["user"] = name  # before it exists: down deletes it even if useradd half-failed
    _save(state, record)
    done = subprocess.run([*argv, name], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        record["user"] = None  # not ours: never delete a user we did not make
        _save(state, record)
        raise LabError(f"useradd {name} failed: {done.stderr.strip()}")
    entry = pwd.getpwnam(name)
    return _User(name, entry.pw_uid, entry.pw_gid)


def _reachable(state: Path) -> None:
    """Raise LabError unless any user can pass through every folder above `state`."""
    for parent in state.parents:
        if not parent.stat().st_mode & 0o001:
            raise LabError(
                f"the lab user cannot reach {state}: {parent} is closed to other users; "
                "name a folder below /tmp with --dir"
            )


def _chown(state: Path, user: _User) -> None:
    for path in [state, *state.rglob("*")]:
        os.chown(path, user.uid, user.gid, follow_symlinks=False)


def _access(state: Path, access: Path) -> None:
    """The audit account of `access` (generated/access/) as the lab plays it: each role's
    forced command with every program, sudo included, a shim in STATE/bin (the lab has no
    root to grant: its sudo shim just runs the command), and the key's authorized_keys line,
    whose command runs the forced command of the role of the host the connection came to
    (one sshd plays hosts of several roles; a real host has its own role's only)."""
    roles = sorted(p.parent.name for p in access.glob(f"*/{FORCED}"))
    if not roles:
        raise LabError(f"{access} has no audit account: site.yaml names no `audit`")
    bin_dir = state / "bin"
    bin_dir.mkdir()
    respond = shlex.join(["/bin/sh", str(state / RESPONDER.name), str(state)])
    # An EOS CLI command has no program: the SSH lab plays no EOS switch (fleet.py does).
    programs = {e.spec.program for e in probes.PROBES.values() if e.spec.program} | {SUDO}
    scripts = {r: (access / r / FORCED).read_text(encoding="utf-8") for r in roles}
    for program in sorted(programs):
        name = program.rsplit("/", 1)[1]
        shim = bin_dir / name
        if program == SUDO:
            body = 'shift 2\nexec "$@"\n'  # `sudo -n -- COMMAND...`
        else:
            # "$*": the words as the forced command passed them, joined by spaces; answers.sh
            # matches the probes' command lines joined so (`vtysh -c show bgp summary json`).
            body = f'set -- {name} "$@"\nexport SSH_ORIGINAL_COMMAND="$*"\nexec {respond}\n'
        shim.write_text(f"#!/bin/sh\n{body}", encoding="utf-8")
        shim.chmod(0o755)
        # Each program path starts a word of a `set --` line: replaced there, nowhere else.
        # A role may run without some (a stat of secret files where it has none).
        count = 0
        for role, script in scripts.items():
            pattern = f"(?<=set -- ){re.escape(program)}\\b"
            scripts[role], n = re.subn(pattern, str(shim), script)
            count += n
        if not count:
            raise LabError(f"{program} is in no forced command of {access}")
    for role, script in scripts.items():
        command = state / "access" / role / FORCED
        command.parent.mkdir(parents=True, exist_ok=True)
        command.write_text(script, encoding="utf-8")
        command.chmod(0o755)
    # The host is the one at the connection's local address, as respond.sh finds it.
    dispatch = state / FORCED
    dispatch.write_text(
        "#!/bin/sh\n"
        "set -f\n"
        "IFS=' '\n"
        "set -- $SSH_CONNECTION\n"
        f'read -r role < "{state}/at/$3/role" || exit 255\n'
        f'exec /bin/sh "{state}/access/$role/{FORCED}"\n',
        encoding="utf-8",
    )
    dispatch.chmod(0o755)
    generated = (access / "authorized_keys").read_text(encoding="utf-8")
    entry = next(ln for ln in generated.splitlines() if ln.startswith("restrict,"))
    options = entry.split(" ", 1)[0].replace(PROBE_COMMAND, str(dispatch))
    public = (state / "client" / "id_ed25519.pub").read_text(encoding="utf-8").strip()
    (state / "client" / "authorized_keys").write_text(f"{options} {public}\n", encoding="utf-8")


def _keygen(tools: Mapping[str, str], path: Path, comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = [tools["ssh-keygen"], "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def _spawn(
    state: Path,
    record: dict[str, Any],
    what: str,
    argv: list[str],
    log: Path,
    user: _User,
    linger: bool,
    sockname: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` as the lab user in its own session, and note it in lab.json first thing."""
    prefix = [require("setpriv")]
    if not linger:
        prefix += ["--pdeathsig", "KILL"]
    if user.uid != os.getuid():
        prefix += [f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8"}
    if sockname:
        env["IBSIM_SOCKNAME"] = sockname
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*prefix, "--", *argv] if len(prefix) > 1 else argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=state,
            start_new_session=True,  # its own group: down kills the group
        )
    # sshd rewrites its command line; the file it was started on stays in it.
    record["processes"].append({"what": what, "pid": proc.pid, "mark": argv[-1]})
    _save(state, record)
    return proc


def _wait_ibsim(sockname: str, record: dict[str, Any]) -> None:
    # ibsim binds its control socket, then its client sockets, then serves: the last client
    # socket bound means it is ready.
    deadline = time.monotonic() + _READY_TIMEOUT
    pid = record["processes"][-1]["pid"]
    while time.monotonic() < deadline:
        if f"@{sockname}:out9@" in Path("/proc/net/unix").read_text(encoding="utf-8"):
            return
        if not _alive(pid):
            raise LabError("ibsim exited at start; see fabric/ibsim.log in the lab's folder")
        time.sleep(0.05)
    raise LabError(f"ibsim did not open its sockets within {_READY_TIMEOUT:g}s")


def _start_sshds(
    state: Path,
    record: dict[str, Any],
    groups: Sequence[Sequence[str]],
    addresses: Mapping[str, str],
    user: _User,
    tools: Mapping[str, str],
    linger: bool,
) -> dict[str, int]:
    """Start one sshd per group of hosts, all at once; returns each host's port once every
    address is listened on and every sshd sends its banner."""
    ports: dict[str, int] = {}
    pending = dict(enumerate(groups))
    for _ in range(_START_ATTEMPTS):
        started = {}
        for n, group in pending.items():
            folder = state / "sshd" / str(n)
            for host in group:
                ports[host] = _free_port(addresses[host])
            config = _sshd_config(state, folder, group, addresses, ports, user)
            if user.uid != os.getuid():
                os.chown(config, user.uid, user.gid)
            (folder / "sshd.log").unlink(missing_ok=True)
            argv = [tools["sshd"], "-D", "-e", "-f", str(config)]
            proc = _spawn(state, record, f"sshd {n}", argv, folder / "sshd.log", user, linger)
            started[n] = (proc, record["processes"][-1])
        for n, (proc, process) in started.items():
            expect = [f"Server listening on {addresses[h]} port {ports[h]}." for h in pending[n]]
            if _listening(proc, state / "sshd" / str(n) / "sshd.log", expect):
                del pending[n]
            else:  # a port was taken before sshd bound it: again, with others
                _kill(process)
                record["processes"].remove(process)
                _save(state, record)
        if not pending:
            for group in groups:
                _banner(addresses[group[0]], ports[group[0]])
            return ports
    n = next(iter(pending))
    tail = (state / "sshd" / str(n) / "sshd.log").read_text("utf-8", errors="replace")[-2000:]
    raise LabError(f"sshd {n} did not start:\n{tail}")


def _listening(proc: subprocess.Popen[bytes], log: Path, expect: Sequence[str]) -> bool:
    """Whether sshd says it listens on every address; False once it has exited."""
    deadline = time.monotonic() + _READY_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        if all(line in text for line in expect):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    raise LabError(f"sshd did not listen within {_READY_TIMEOUT:g}s; see {log}")


def _banner(address: str, port: int) -> None:
    try:
        with socket.create_connection((address, port), timeout=_READY_TIMEOUT) as s:
            if s.recv(8).startswith(b"SSH-"):
                return
    except OSError as exc:
        raise LabError(f"sshd at {address}:{port} does not answer: {exc}") from None
    raise LabError(f"sshd at {address}:{port} sent no SSH banner")


def _sshd_config(
    state: Path,
    folder: Path,
    group: Sequence[str],
    addresses: Mapping[str, str],
    ports: Mapping[str, int],
    user: _User,
) -> Path:
    lines = []
    for host in group:
        lines.append(f"ListenAddress {loopback(addresses[host])}:{ports[host]}")
    lines += [
        f"HostKey {folder / 'host_key'}",
        "PidFile none",
        f"AuthorizedKeysFile {state / 'client' / 'authorized_keys'}",
        f"AllowUsers {user.name}",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The state folder may sit below /tmp, which sshd's ownership checks would refuse.
        "StrictModes no",
        "DisableForwarding yes",
        "PermitTTY no",
        "PermitUserRC no",
        "PermitUserEnvironment no",
        "PrintMotd no",
        # Nothing may linger: an idle or half-open client is dropped within seconds.
        "LoginGraceTime 10",
        "ClientAliveInterval 5",
        "ClientAliveCountMax 2",
        "MaxStartups 200",
        "LogLevel INFO",
    ]
    path = folder / "sshd_config"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((loopback(address), 0))
        port: int = s.getsockname()[1]
        return port


def _client_files(
    state: Path, hosts: Mapping[str, str], staged: fault.Staged, groups: Sequence[Sequence[str]]
) -> None:
    """The audit's inventory and known_hosts (a changed key is the impostor's, an unknown
    one left out)."""
    (state / "inventory.json").write_text(json.dumps(hosts, indent=2) + "\n", "utf-8")
    changed = staged.hosts(fault.Kind.KEY_CHANGED)
    unknown = staged.hosts(fault.Kind.KEY_UNKNOWN)
    lines = []
    for n, group in enumerate(groups):
        for host in group:
            if host in unknown:
                continue
            key = state / ("impostor" if host in changed else f"sshd/{n}") / "host_key.pub"
            public = key.read_text(encoding="utf-8").split()[:2]
            address, port = hosts[host].rsplit(":", 1)
            lines.append(f"[{address}]:{port} {' '.join(public)}\n")
    (state / "known_hosts").write_text("".join(lines), encoding="utf-8")


def _save(state: Path, record: Mapping[str, Any]) -> None:
    atomic.replace(state / STATE_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")


# -- down and status --------------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    """What `lab status` reports."""

    state: Path
    up: bool  # every process alive
    processes: dict[str, bool]  # what -> alive
    hosts: dict[str, str]
    down: tuple[str, ...]
    audit: list[str]


def status(state: Path | None = None) -> Status | None:
    """The lab in `state`, or None when there is none."""
    state = (state or default_state()).absolute()
    record = _load(state)
    if record is None:
        return None
    alive = {p["what"]: _alive(p["pid"], p["mark"]) for p in record["processes"]}
    return Status(
        state,
        bool(alive) and all(alive.values()) and "audit" in record,
        alive,
        record.get("hosts", {}),
        tuple(record.get("down", ())),
        record.get("audit", []),
    )


def down(state: Path | None = None) -> list[str]:
    """Stop every process of the lab in `state`, delete its user (if it made one) and its
    folder; returns what it removed. Safe to repeat; raises LabError when something stays."""
    state = (state or default_state()).absolute()
    record = _load(state)
    if record is None:
        if state.exists() and any(state.iterdir()):
            raise LabError(f"{state} holds no lab ({STATE_FILE} is missing); not touching it")
        with contextlib.suppress(FileNotFoundError):
            state.rmdir()
        return []
    removed = []
    for process in record["processes"]:
        if _kill(process):
            removed.append(f"process {process['pid']} ({process['what']})")
    user = record.get("user")
    if user:
        uid = _uid(user)
        if uid is not None:
            # The user is the lab's own: whatever runs as it is the lab's. A session sshd was
            # still forking can appear after the kill (userdel: "currently used by process"),
            # so kill and delete again until the user is gone.
            for attempt in range(10):
                _kill_uid(uid)
                done = subprocess.run(
                    [require("userdel"), user], capture_output=True, text=True, timeout=60
                )
                if done.returncode == 0 or _uid(user) is None:
                    break
                time.sleep(0.1 * (attempt + 1))
            if _uid(user) is not None:
                raise LabError(f"userdel {user} failed: {done.stderr.strip()}")
            removed.append(f"user {user}")
    shutil.rmtree(state)
    removed.append(f"folder {state}")
    return removed


def _load(state: Path) -> dict[str, Any] | None:
    path = state / STATE_FILE
    if not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LabError(f"cannot read {path}: {exc}") from None
    return data


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return None if state == "Z" else raw.decode(errors="replace").split("\0")[:-1]


def _alive(pid: int, mark: str | None = None) -> bool:
    """Whether `pid` runs (and, given `mark`, still runs a program started on that file:
    pids are reused)."""
    cmdline = _cmdline(pid)
    if cmdline is None:
        return False
    return mark is None or mark in " ".join(cmdline)


def _kill(process: Mapping[str, Any]) -> bool:
    """Kill a lab process, its session's children and its group; False if it was gone."""
    pid = process["pid"]
    if not _alive(pid, process["mark"]):
        return False
    # sshd's per-connection children call setsid: a group kill alone would miss them.
    for child in [pid, *_descendants(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)  # ours when the lab came up in this process (the tests)
    _gone([pid])
    return True


def _kill_uid(uid: int) -> None:
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            line = next(x for x in status.read_text().splitlines() if x.startswith("Uid:"))
            if int(line.split()[1]) == uid:
                pids.append(int(status.parent.name))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _gone(pids)


def _gone(pids: Sequence[int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise LabError(f"processes {list(pids)} are still there after SIGKILL")
        time.sleep(0.02)


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name may hold spaces and parentheses: the fields follow the last ')'.
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@contextlib.contextmanager
def running(
    repo: Path, state: Path, hosts: Sequence[str] | None = None, faults_file: Path | None = None
) -> Iterator[Lab]:
    """A lab for the length of a `with` block, its processes tied to this thread (tests)."""
    lab = up(repo, state, hosts, faults_file, linger=False)
    try:
        yield lab
    finally:
        down(state)
