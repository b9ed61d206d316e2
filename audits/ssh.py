"""Stage 2, live: the probes run over SSH on every host, with asyncssh.

`SshCollector` is a `Collector`: it connects to every host it is asked about, at most
`concurrency` at a time, runs the probe keys asked for, one allowlisted command each
(`audits.probes.PROBES`; nothing else is ever sent), one after the other on one connection,
and runs the fabric probes on the connection of the one host named to scan the fabric from.
It never interprets an output. `audit_live` is what `clusterforge audit` runs without
`--replay`: it records what the collector saw (`audits.collect.Recorder`) and reports from
that recording, so a live run and the replay of its recording give the same report.

Where a host is: its contract's `mgmt` interface address, port 22, unless an inventory file
(`--inventory`) says otherwise. That file is a JSON object mapping host names to
`address[:port]` (`"gpu001": "10.60.2.11"`, `"sm01": "127.0.0.6:2222"`, `"[::1]:2222"`); a
name that is not in generated/expected/ is an error, not a silent no-op.

What becomes of a host (see `audits.collect` for how it is recorded):
- unreachable, with the reason: no address, connection refused or failed, authentication
  refused, the host key unknown or changed, or the per-host `timeout` (connect and every
  probe, the fabric scan included on the scan host) ran out;
- otherwise each probe key has its stdout, or is failed with the reason: the command exited
  non-zero (127: not installed there) or was killed by a signal.

Host keys are checked strictly against the given known_hosts file and nothing else (no
~/.ssh/known_hosts, no ~/.ssh/config, no agent): a host whose key is not there, or differs,
is unreachable, and no key is ever accepted or added. An entry may name the host by its name
(as with OpenSSH's HostKeyAlias) or by the address it is reached at.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncssh

from audits import expected, pipeline, shard
from audits.collect import Collected, Collection, Recorder, probe_of, read_object
from audits.compare import probe_arguments
from audits.model import AuditError
from audits.probes import PROBES, ProbeError
from audits.report import Report

SSH_PORT = 22
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
        return cls(address, int(port))

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class SshOptions:
    """How to log in: the private key, the known_hosts file, the user, and the bounds."""

    key: Path
    known_hosts: Path
    user: str = "root"
    concurrency: int = 32  # hosts connected at once
    timeout: float = 120.0  # seconds per host: connect and all its probes


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
    contracts: Mapping[str, Mapping[str, Any]], inventory: Mapping[str, Target]
) -> dict[str, Target]:
    """Every host's address: the inventory's, else its contract's `mgmt` interface address;
    a host with neither is left out (the collector reports it unreachable)."""
    unknown = sorted(inventory.keys() - contracts.keys())
    if unknown:
        raise AuditError(f"the inventory names hosts not in generated/expected/: {unknown}")
    found = {}
    for host, contract in sorted(contracts.items()):
        mgmt = [i["address"] for i in contract["interfaces"] if i["network"] == "mgmt"]
        if host in inventory:
            found[host] = inventory[host]
        elif mgmt:
            found[host] = Target(str(ipaddress.ip_interface(mgmt[0]).ip))
    return found


def fabric_host(contracts: Mapping[str, Mapping[str, Any]], chosen: str | None) -> str | None:
    """The host to scan the fabric from: `chosen`, else the first subnet-manager host by
    name, else None (no scan)."""
    if chosen is not None:
        if chosen not in contracts:
            raise AuditError(f"--fabric-from {chosen!r} is not a host in generated/expected/")
        return chosen
    managers = sorted(h for h, c in contracts.items() if c["role"] == SUBNET_MANAGER)
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
        if options.concurrency < 1 or options.timeout <= 0:
            raise AuditError("concurrency must be at least 1 and the timeout above 0 seconds")
        self.targets = dict(targets)
        self.arguments = dict(arguments or {})  # host -> probe key -> its arguments
        self.options = options
        self.fabric_from = fabric_from
        self.progress = progress
        try:
            self._key = asyncssh.read_private_key(options.key)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise AuditError(f"cannot use the SSH key {options.key}: {exc}") from None
        try:
            # Loaded once, and passed as an object: given a path asyncssh would re-read it for
            # every host, and given nothing it would fall back to ~/.ssh/known_hosts.
            self._known_hosts = asyncssh.read_known_hosts(str(options.known_hosts))
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise AuditError(f"cannot use known_hosts {options.known_hosts}: {exc}") from None

    def collect(self, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]) -> Collection:
        collected_at = datetime.now(UTC).replace(microsecond=0)
        return asyncio.run(self._collect(collected_at, hosts, fabric))

    async def _collect(
        self, collected_at: datetime, hosts: Mapping[str, Sequence[str]], fabric: Sequence[str]
    ) -> Collection:
        gate = asyncio.Semaphore(self.options.concurrency)
        names = sorted(hosts)
        scan = self.fabric_from if fabric else None
        done = 0

        async def counted(name: str) -> tuple[Collected, Collected]:
            nonlocal done
            result = await self._host(gate, name, hosts[name], fabric if name == scan else ())
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
        return Collection(collected_at, {h: r[0] for h, r in by_host.items()}, scanned)

    async def _host(
        self, gate: asyncio.Semaphore, name: str, keys: Sequence[str], fabric: Sequence[str]
    ) -> tuple[Collected, Collected]:
        """The host's probes and, on the scan host, the fabric's: each a value, never raised."""
        target = self.targets.get(name)
        if target is None:
            lost = "no address: no mgmt interface in its contract and no inventory entry"
            return Collected({}, {}, lost), Collected({}, {}, f"scan host {name}: {lost}")
        async with gate:  # the per-host clock starts once the host's turn has come
            try:
                async with asyncio.timeout(self.options.timeout):
                    conn = await asyncssh.connect(
                        target.address,
                        target.port,
                        username=self.options.user,
                        client_keys=[self._key],
                        known_hosts=self._known_hosts,
                        host_key_alias=name,
                        # Nothing from the environment decides whom we trust or how we log in.
                        config=[],
                        agent_path=None,
                        preferred_auth="publickey",
                        x509_trusted_certs=None,
                        x509_trusted_cert_paths=[],
                    )
                    try:
                        own = await _run_all(conn, keys, self.arguments.get(name, {}))
                        scanned = await _run_all(conn, fabric, {})
                    finally:
                        conn.close()  # says goodbye without waiting for the host to answer
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                lost = _unreachable(exc, target, self.options)
                return Collected({}, {}, lost), Collected({}, {}, f"scan host {name}: {lost}")
        return own, scanned


async def _run_all(
    conn: asyncssh.SSHClientConnection,
    keys: Sequence[str],
    arguments: Mapping[str, tuple[str, ...]],
) -> Collected:
    outputs: dict[str, str] = {}
    failed: dict[str, str] = {}
    for key in sorted(keys):
        try:
            command = _command(key, arguments.get(key, ()))
        except ProbeError as exc:
            failed[key] = f"not run: {exc}"
            continue
        done = await conn.run(command, check=False, encoding="utf-8", errors="replace")
        if done.exit_status in PROBES[probe_of(key)].ok_exits:
            outputs[key] = str(done.stdout or "")
        else:
            failed[key] = _failure(done)
    return Collected(outputs, failed)


def _command(key: str, arguments: tuple[str, ...] = ()) -> str:
    """The command line of a probe key, from the allowlist only; raises ProbeError."""
    probe = PROBES.get(probe_of(key))
    if probe is None:
        raise ProbeError(f"{key!r} is not an allowlisted probe (known: {sorted(PROBES)})")
    iface = key.split("@", 1)[1] if "@" in key else None
    # Quoted for the remote shell: it must see exactly these words.
    return shlex.join(probe.argv_for(iface, arguments))


def _failure(done: asyncssh.SSHCompletedProcess) -> str:
    said = [line.strip() for line in str(done.stderr or "").splitlines() if line.strip()]
    how = (
        f"exit {done.exit_status}"
        if done.exit_status is not None and done.exit_status >= 0
        else f"killed by signal {done.exit_signal[0] if done.exit_signal else 'unknown'}"
    )
    return f"{how}: {said[-1][:_REASON_MAX]}" if said else how


def _unreachable(exc: BaseException, target: Target, options: SshOptions) -> str:
    if isinstance(exc, TimeoutError):
        return f"ssh: timed out after {options.timeout:g}s (connect and probes) at {target}"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return (
            f"ssh: host key of {target} rejected: unknown or changed, not as in "
            f"{options.known_hosts} ({exc.reason})"
        )
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
) -> Report:
    """Collect over SSH into the recording `record`, audit it against `repo`'s
    generated/expected/, and write the report; raises AuditError when it cannot run. `part`
    is the (--shard, --hosts) selection (`audits.shard`), if any; `progress(done, total)` is
    called as each host is finished."""
    expectations = expected.read(repo)
    selection = shard.select(expectations, *part) if part != (None, None) else None
    hosts = expectations.hosts
    addresses = targets(hosts, read_inventory(inventory) if inventory else {})
    arguments = {name: probe_arguments(c) for name, c in hosts.items()}
    collector = SshCollector(
        addresses, options, fabric_host(hosts, fabric_from), arguments, progress
    )
    report = pipeline.audit(expectations, Recorder(collector, record), now, selection)
    pipeline.write(report, out, metrics)
    return report
