"""Stage 2, live: the probes run over SSH on every host, with asyncssh.

`SshCollector` is a `Collector`: it connects to every host it is asked about, at most
`concurrency` at a time, runs the probe keys asked for, one allowlisted command each
(`contract.probes.PROBES`; nothing else is ever sent), one after the other on one connection,
and runs the fabric probes on the connection of the one host named to scan the fabric from.
It never interprets an output. `audit_live` is what `clusterforge audit` runs without
`--replay`: it records what the collector saw (`audits.collect.Recorder`) and reports from
that recording, so a live run and the replay of its recording give the same report.

Where a host is: its contract's management interface's address (`Host.management`: the one
its default route leaves by), port 22, unless an inventory file
(`--inventory`) says otherwise. That file is a JSON object mapping host names to
`address[:port]` (`"gpu001": "10.60.2.11"`, `"sm01": "127.0.0.6:2222"`, `"[::1]:2222"`); a
name that is not in generated/expected/ is an error, not a silent no-op.

What becomes of a host (see `audits.collect` for how it is recorded):
- unreachable, with the reason: no address, connection refused or failed, authentication
  refused, the host key unknown or changed, or the per-host `timeout` ran out before it
  let us in, or the connection dropped;
- otherwise (it was reached) each probe key has its stdout, or is failed with the reason:
  the command exited non-zero (127: not installed there), was killed by a signal, or did not
  finish in time (a hung `nvidia-smi`). A probe may take `probe_timeout` seconds, and all of
  a host's, the fabric scan included on the scan host, `timeout` from its turn; a hung
  probe is ended on the host (the forced command's timeout(1), told how long it has), its
  half output dropped, and the probes after it run in the time left, or are failed as not
  run when none is: what the host did answer is kept, and the report names the probe that
  hung, not an unreachable host.

Host keys are checked strictly against the given known_hosts file and nothing else (no
~/.ssh/known_hosts, no ~/.ssh/config, no agent): a host whose key is not there, or differs,
is unreachable, and no key is ever accepted or added. An entry may name the host by its name
(as with OpenSSH's HostKeyAlias) or by the address it is reached at.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncssh

from audits import expected, pipeline, shard
from audits.collect import (
    SCHEMA,
    Collected,
    Collection,
    Recorder,
    ReplayCollector,
    output_cap,
    over_cap,
    probe_of,
    read_object,
    write_status,
)
from audits.compare import INTERNAL_ERROR, probe_arguments
from audits.model import AuditError, HostKeyFact
from audits.report import Report
from contract import EthernetSwitch, Host, account, probes
from contract.probes import ProbeError

SSH_PORT = 22
AUDIT_USER = account.USER
SUBNET_MANAGER = "subnet-manager"  # the role whose hosts sit on the fabric to scan it from
_REASON_MAX = 300  # characters of a command's stderr kept in a reason
Progress = Callable[[int, int], None]  # (hosts done, hosts in all): the CLI's progress line


@dataclass(frozen=True)
class Target:
    """Where a host is reached."""

    address: str
    port: int = SSH_PORT

    @classmethod
    def parse(cls, text: str) -> Target:
        """`10.0.0.1`, `10.0.0.1:2222`, `gpu001.example:2222`, `[fe80::1]:2222` or `::1`;
        raises ValueError."""
        address, port = text, str(SSH_PORT)
        if text.startswith("["):
            address, _, rest = text[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"{text!r}: expected [address]:port")
                port = rest[1:]
        elif text.count(":") == 1:
            address, port = text.split(":")
        if not address or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r} is not address[:port]")
        try:
            ipaddress.ip_address(address)
        except ValueError:
            # A name must be one the resolver can be asked for: asyncssh would raise
            # UnicodeError (IDNA: an empty label, `gpu001..mgmt`) or ValueError (a NUL) mid-run.
            try:
                if "\0" in address or any(c.isspace() for c in address):
                    raise UnicodeError("NUL or whitespace")
                address.encode("idna")
            except UnicodeError:
                raise ValueError(f"{text!r}: {address!r} is not a host name") from None
        return cls(address, int(port))

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class SshOptions:
    """How to log in: the private key, the known_hosts file, the user, and the bounds."""

    key: Path | None  # None: log in with the agent's keys (`agent`)
    known_hosts: Path
    user: str = AUDIT_USER
    concurrency: int = 32  # hosts connected at once
    timeout: float = 120.0  # seconds per host: connect and all its probes
    probe_timeout: float = 60.0  # seconds one probe may take, within the host's
    # Bytes kept of one probe's output at most; each probe's own cap (its `max_output`) is
    # lower for most: more makes the host error.
    max_output: int = 16 * 2**20
    passphrase_env: str | None = None  # the environment variable holding the key's passphrase
    passphrase_file: Path | None = None  # or the file holding it
    agent: str | None = None  # an SSH agent's socket, to log in with instead of `key`


def read_inventory(path: Path) -> dict[str, Target]:
    """Read an inventory file (host -> `address[:port]`, JSON); raises AuditError."""
    data = read_object(path, "a JSON object mapping hosts to address[:port]")
    targets = {}
    for host, text in data.items():
        try:
            if not isinstance(text, str):
                raise ValueError(f"{text!r} is not a string address[:port]")
            targets[host] = Target.parse(text)
        except ValueError as exc:
            raise AuditError(f"{path}: host {host!r}: {exc}") from None
    return targets


def targets(
    contracts: Mapping[str, Host | EthernetSwitch], inventory: Mapping[str, Target]
) -> dict[str, Target]:
    """Every host's address: the inventory's, else its contract's management interface's
    (the one its default route leaves by, whatever the site names that network), a switch's
    management port's; one with neither is left out (the collector reports it unreachable)."""
    unknown = sorted(inventory.keys() - contracts.keys())
    if unknown:
        raise AuditError(f"the inventory names hosts not in generated/expected/: {unknown}")
    found = {}
    for host, contract in sorted(contracts.items()):
        if isinstance(contract, EthernetSwitch):
            address = contract.management
        else:
            address = contract.management.address if contract.management else None
        if host in inventory:
            found[host] = inventory[host]
        elif address is not None:
            found[host] = Target(str(ipaddress.ip_interface(address).ip))
    return found


def fabric_host(contracts: Mapping[str, Host], chosen: str | None) -> str | None:
    """The host to scan the fabric from: `chosen`, else the first subnet-manager host by
    name, else None (no scan)."""
    if chosen is not None:
        if chosen not in contracts:
            raise AuditError(f"--fabric-from {chosen!r} is not a host in generated/expected/")
        return chosen
    managers = sorted(h for h, c in contracts.items() if c.role == SUBNET_MANAGER)
    return managers[0] if managers else None


class SshCollector:
    """Collects over SSH; see the module docstring. `fabric_from` None: no fabric scan."""

    def __init__(
        self,
        targets: Mapping[str, Target],
        options: SshOptions,
        fabric_from: str | None,
        arguments: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None,
        progress: Progress | None = None,
    ) -> None:
        if (
            options.concurrency < 1
            or options.timeout <= 0
            or options.probe_timeout <= 0
            or options.max_output < 1
        ):
            raise AuditError(
                "concurrency and --max-output must be at least 1 and the timeouts above 0 seconds"
            )
        self.targets = dict(targets)
        self.arguments = dict(arguments or {})  # host -> probe key -> its arguments
        self.options = options
        self.fabric_from = fabric_from
        self.progress = progress
        # [] and an agent: the agent's keys only (None would turn public keys off, and leaving
        # it out would read ~/.ssh).
        self._keys: list[asyncssh.SSHKey] = []
        if options.agent is None:
            self._keys = [_private_key(options)]
        try:
            # Loaded once, and passed as an object: given a path asyncssh would re-read it for
            # every host, and given nothing it would fall back to ~/.ssh/known_hosts.
            self._known_hosts = asyncssh.read_known_hosts(str(options.known_hosts))
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise AuditError(f"cannot use known_hosts {options.known_hosts}: {exc}") from None

    def collect(self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]) -> Collection:
        """Collect through a recording in a private temporary folder, read back whole (the
        folder goes; `Recorder` with `record` keeps memory bounded instead)."""
        with tempfile.TemporaryDirectory(prefix="clusterforge-") as folder:
            at = self.record(hosts, fabric, Path(folder))
            (Path(folder) / "meta.json").write_text(
                json.dumps({"schema": SCHEMA, "collected_at": at.isoformat()}), encoding="utf-8"
            )
            read = ReplayCollector(Path(folder)).collect(hosts, fabric)
            return Collection(read.collected_at, dict(read.hosts), read.fabric)

    def record(
        self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str], folder: Path
    ) -> datetime:
        """Collect into `folder` (`audits.collect.Streaming`): each output is written as it
        arrives, at most `max_output` bytes of it."""
        collected_at = datetime.now(UTC).replace(microsecond=0)
        asyncio.run(self._collect(hosts, fabric, folder))
        return collected_at

    async def _collect(
        self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str], folder: Path
    ) -> None:
        gate = asyncio.Semaphore(self.options.concurrency)
        names = sorted(hosts)
        scan = self.fabric_from if fabric else None
        done = 0

        async def counted(name: str) -> tuple[Collected, Collected]:
            nonlocal done
            mine = fabric if name == scan else ()
            result = await self._host(gate, name, hosts[name], mine, folder)
            done += 1
            if self.progress is not None:
                self.progress(done, len(names))
            return result

        results = await asyncio.gather(*(counted(name) for name in names))
        by_host = dict(zip(names, results, strict=True))
        if not fabric:
            scanned = Collected({}, {})
        elif scan is None:
            why = f"skipped: no --fabric-from, and no {SUBNET_MANAGER} host in generated/expected/"
            scanned = Collected({}, dict.fromkeys(fabric, why))
        elif scan not in by_host:
            scanned = Collected({}, dict.fromkeys(fabric, f"skipped: {scan} was not collected"))
        else:
            scanned = by_host[scan][1]
        for name, (own, _) in by_host.items():
            write_status(_mkdir(folder / "hosts" / name), own)
        write_status(_mkdir(folder / "fabric"), scanned)

    async def _host(
        self,
        gate: asyncio.Semaphore,
        name: str,
        keys: Sequence[str],
        fabric: Sequence[str],
        folder: Path,
    ) -> tuple[Collected, Collected]:
        """The host's probes and, on the scan host, the fabric's: each a value, never raised.
        Outputs go to `folder`'s hosts/<name>/ and fabric/; what is returned says how each
        probe ended."""
        target = self.targets.get(name)
        if target is None:
            lost = "no address: no management interface in its contract and no inventory entry"
            return Collected({}, {}, lost), Collected({}, {}, f"scan host {name}: {lost}")
        async with gate:  # the per-host clock starts once the host's turn has come
            deadline = asyncio.get_running_loop().time() + self.options.timeout
            try:
                async with asyncio.timeout_at(deadline):
                    conn = await asyncssh.connect(
                        target.address,
                        target.port,
                        username=self.options.user,
                        client_keys=self._keys,
                        known_hosts=self._known_hosts,
                        host_key_alias=name,
                        # Nothing from the environment decides whom we trust or how we log in;
                        # the agent only when asked for (--ssh-agent).
                        config=[],
                        agent_path=self.options.agent,
                        agent_forwarding=False,
                        preferred_auth="publickey",
                        x509_trusted_certs=None,
                        x509_trusted_cert_paths=[],
                    )
                # Reached: from here a probe that hangs is that probe's outcome, not the
                # host's; each is bounded by its own limit within the host's deadline.
                try:
                    run = _Runner(conn, deadline, self.options)
                    mine = self.arguments.get(name, {})
                    own = await run.all(keys, folder / "hosts" / name, mine)
                    scanned = await run.all(fabric, folder / "fabric", {})
                finally:
                    conn.close()  # says goodbye without waiting for the host to answer
            except asyncssh.HostKeyNotVerifiable:
                key = await self._host_key(name, target)
                return Collected({}, {}, key.reason, host_key=key.fact), Collected(
                    {}, {}, f"scan host {name}: {key.reason}"
                )
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                lost = _unreachable(exc, target, self.options)
                return Collected({}, {}, lost), Collected({}, {}, f"scan host {name}: {lost}")
            except Exception as exc:  # a bug: this host only, exit 3
                bug = f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}"
                return Collected({}, {}, crashed=bug), Collected({}, {}, crashed=bug)
        return own, scanned

    async def _host_key(self, name: str, target: Target) -> _HostKey:
        """Why a host key was rejected: none known for the host, or another one known (a
        reinstalled host, or a machine in the middle). Asks the host for its key again, over
        a connection that logs in to nothing, to name its fingerprint."""
        known = list(self._known_hosts.match(name, target.address, target.port)[0])
        algs = sorted({k.get_algorithm() for k in known}) or ()
        try:
            async with asyncio.timeout(min(self.options.timeout, _KEY_FETCH_S)):
                offered = await asyncssh.get_server_host_key(
                    target.address, target.port, server_host_key_algs=algs, config=[]
                )
        except (OSError, asyncssh.Error, TimeoutError):
            offered = None
        seen = offered.get_fingerprint() if offered is not None else None
        prints = sorted(k.get_fingerprint() for k in known)
        if not known:
            why = (
                f"ssh: host key unknown: {self.options.known_hosts} has no key for {name} "
                f"or {target}; it offers {seen or 'no key we could read'}"
            )
            return _HostKey(why, HostKeyFact(state="unknown", known=[], offered=seen))
        why = (
            f"ssh: host key CHANGED at {target}: {self.options.known_hosts} has "
            f"{', '.join(prints)} for {name}, the host offers {seen or 'another key'}; "
            "a reinstalled host, or a machine in the middle: not logged in"
        )
        return _HostKey(why, HostKeyFact(state="changed", known=prints, offered=seen))


_KEY_FETCH_S = 10.0  # at most this long to read a rejected host's key, to name it


@dataclass(frozen=True)
class _HostKey:
    reason: str
    fact: HostKeyFact


def _private_key(options: SshOptions) -> asyncssh.SSHKey:
    """The private key, decrypted with the passphrase when one is given; raises AuditError."""
    passphrase = None
    if options.key is None:
        raise AuditError("no SSH key given (--ssh-key FILE), and no agent (--ssh-agent)")
    try:
        if options.passphrase_file is not None:
            passphrase = options.passphrase_file.read_text(encoding="utf-8").rstrip("\n")
        elif options.passphrase_env is not None:
            passphrase = os.environ.get(options.passphrase_env)
            if passphrase is None:
                raise AuditError(f"${options.passphrase_env} (the key's passphrase) is not set")
        return asyncssh.read_private_key(options.key, passphrase)
    except (OSError, ValueError, asyncssh.Error) as exc:
        hint = "" if passphrase is not None else " (encrypted? give --key-passphrase-env/-file)"
        raise AuditError(f"cannot use the SSH key {options.key}: {exc}{hint}") from None


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _Runner:
    """Runs probes on one connection, each output streamed to its file, cut at `cap` bytes,
    each bounded by its own limit within the host's deadline and told (`--within`) how long
    that is, so the host ends it too."""

    def __init__(
        self, conn: asyncssh.SSHClientConnection, deadline: float, options: SshOptions
    ) -> None:
        self.conn = conn
        self.deadline = deadline
        self.cap = options.max_output
        self.options = options
        self.hung: str | None = None  # the probe key that ran out of time, if one did

    async def all(
        self, keys: Sequence[str], folder: Path, arguments: Mapping[str, tuple[str, ...]]
    ) -> Collected:
        failed: dict[str, str] = {}
        folder.mkdir(parents=True, exist_ok=True)
        for key in sorted(keys):
            try:
                words = probe_words(key, arguments.get(key, ()))
            except ProbeError as exc:
                failed[key] = f"not run: {exc}"
                continue
            now = asyncio.get_running_loop().time()
            if self.deadline - now < 1:
                after = f" after {self.hung} hung" if self.hung else ""
                failed[key] = f"not run: the host's {self.options.timeout:g}s ran out{after}"
                continue
            until = min(self.deadline, now + self.options.probe_timeout)
            command = probe_command(key, words, max(1, math.ceil(until - now)))
            ok = probes.PROBES[probe_of(key)].spec.ok_exits
            path = folder / f"{key}.txt"
            cap = min(self.cap, output_cap(key))
            try:
                async with asyncio.timeout_at(until):
                    why = await self.one(command, path, ok, cap)
            except TimeoutError:
                # Half an output is never a reading; timeout(1) on the host ends the command.
                path.unlink(missing_ok=True)
                self.hung = key
                why = (
                    f"timed out after {until - now:.0f}s: the host answered, this probe did "
                    "not finish (ended on the host)"
                )
            if why is not None:
                failed[key] = why
        return Collected({}, failed)

    async def one(self, command: str, path: Path, ok: tuple[int, ...], cap: int) -> str | None:
        """Run `command`, its stdout into `path` (at most `cap` bytes); None when it
        succeeded, else why not."""
        process = await self.conn.create_process(command, encoding=None)
        process.stdin.write_eof()
        stderr = asyncio.ensure_future(_tail(process.stderr))
        size = 0
        try:
            with path.open("wb") as out:
                while chunk := await process.stdout.read(_CHUNK):
                    if size + len(chunk) > cap:
                        out.write(chunk[: cap - size])
                        out.write(TRUNCATED.format(cap=cap).encode())
                        process.close()  # the host's probe gets EPIPE, or timeout(1) ends it
                        return over_cap(cap)
                    out.write(chunk)
                    size += len(chunk)
            done = await process.wait(check=False)
            # The channel is closed once wait returns: stderr is at its end, and read to it
            # before it counts (cancelled there, a loaded host's last line was lost).
            said = await stderr
        finally:
            stderr.cancel()  # a no-op once it is done; else the probe failed half-way
            if not process.is_closing():
                process.close()  # a probe cut short: the channel goes, the connection stays
        if done.exit_status in ok:
            return None
        path.unlink()
        return _failure(done.exit_status, done.exit_signal, said)


_CHUNK = 64 * 1024
TRUNCATED = "\n[clusterforge: output cut here, at {cap} bytes]\n"


async def _tail(stream: asyncssh.SSHReader[bytes]) -> bytes:
    """A stream's last bytes (enough for its last line), read to its end."""
    kept = b""
    while chunk := await stream.read(_CHUNK):
        kept = (kept + chunk)[-_CHUNK:]
    return kept


def probe_words(key: str, arguments: tuple[str, ...] = ()) -> list[str]:
    """What the audit sends for a probe key: the probe's name and its arguments (the forced
    command of generated/access/ runs it), or for an EOS CLI command the command's own words
    (EOS's CLI runs it: no forced command there); raises ProbeError."""
    entry = probes.PROBES.get(probe_of(key))
    if entry is None:
        known = sorted(probes.PROBES)
        raise ProbeError(f"{key!r} is not an allowlisted probe (known: {known})")
    probe = entry.spec
    iface = key.split("@", 1)[1] if "@" in key else None
    probe.argv_for(iface, arguments)  # checks the arguments, as the host will
    if probe.scope == "eos":
        return list(probe.argv)
    return [probe.name, *([iface] if iface is not None else []), *arguments]


def probe_command(key: str, words: list[str], within: int) -> str:
    """The SSH command line of a probe key's `words`: to the forced command, told it has
    `within` seconds; to EOS's CLI, the words alone, which it parses as it would typed (it
    has no shell quoting and no --within: the collector's own timeout bounds the probe)."""
    if probes.PROBES[probe_of(key)].spec.scope == "eos":
        return " ".join(words)
    return shlex.join(["--within", str(within), *words])


def _failure(status: int | None, signal: tuple[str, bool, str, str] | None, said: bytes) -> str:
    lines = [ln.strip() for ln in said.decode("utf-8", "replace").splitlines() if ln.strip()]
    how = (
        f"exit {status}"
        if status is not None and status >= 0
        else f"killed by signal {signal[0] if signal else 'unknown'}"
    )
    return f"{how}: {lines[-1][:_REASON_MAX]}" if lines else how


def _unreachable(exc: BaseException, target: Target, options: SshOptions) -> str:
    if isinstance(exc, TimeoutError):
        return f"ssh: timed out after {options.timeout:g}s connecting and logging in at {target}"
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"ssh: authentication as {options.user!r} refused at {target} ({exc.reason})"
    if isinstance(exc, asyncssh.Error):
        return f"ssh: {target}: {exc.reason}"
    # asyncio words a refusal as "Connect call failed (addr, port)": the errno says which.
    errno = getattr(exc, "errno", None)
    return f"ssh: connect to {target}: {os.strerror(errno) if errno else exc}"


def audit_live(
    repo: Path,
    options: SshOptions,
    inventory: Path | None,
    fabric_from: str | None,
    record: Path,
    out: Path,
    metrics: Path | None,
    now: datetime | None,
    part: tuple[tuple[int, int] | None, str | None] = (None, None),
    progress: Progress | None = None,
    previous: Path | None = None,
    *,
    renderer: pipeline.Renderer,
) -> Report:
    """Collect over SSH into the recording `record`, audit it against `repo`'s
    generated/expected/ (and the `previous` report), and write the report; raises AuditError
    when it cannot run. `part` is the (--shard, --hosts) selection (`audits.shard`), if any;
    `progress(done, total)` is called as each host is finished."""
    last = pipeline.read_previous(previous)
    expectations = expected.read(repo)
    selection = shard.select(expectations, *part) if part != (None, None) else None
    machines = expectations.machines
    addresses = targets(machines, read_inventory(inventory) if inventory else {})
    arguments = {name: probe_arguments(c) for name, c in machines.items()}
    collector = SshCollector(
        addresses, options, fabric_host(expectations.hosts, fabric_from), arguments, progress
    )
    report = pipeline.audit(expectations, Recorder(collector, record), now, last, selection)
    pipeline.write(report, out, renderer, metrics)
    return report
