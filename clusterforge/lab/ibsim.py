"""A simulated InfiniBand fabric for the lab and the tests: ibsim, plus the real diagnostics
and opensm on it.

``SimFabric(net_file, workdir)`` starts ``ibsim -s net_file`` on a private socket name, waits
until its console answers, and kills it when the ``with`` block ends. Programs that use
libibumad (ibnetdiscover, iblinkinfo, ibstat, opensm, ...) reach it through
``LD_PRELOAD=libumad2sim.so``; :meth:`SimFabric.run` and :meth:`SimFabric.run_opensm_once`
set that up and put a hard timeout on every call.

Net file rules for Debian's ibsim 0.10 (read from ``ibsim/sim_net.c`` and checked by running it):

- GUIDs never come from the quoted id. ``switchguid=0x..`` / ``caguid=0x..`` set the GUID of the
  *next* node; without them ibsim counts up from 0x100000 (switches) and 0x200000 (CAs).
- A switch has one GUID for the node and all ports. A CA's port N GUID is always node GUID + N
  (``do_nodeinfo`` computes it; the console ``Guid`` command cannot change what NodeInfo
  reports). So a planned port GUID P needs ``caguid=P-1``.
- ``vendid=``, ``sysimgguid=`` apply to the next node only; ``devid=`` sticks until changed.
- Header: ``Switch 40 "S-<guid>" # "leaf01" enhanced port 0 lid 0 lmc 0``; the quoted text
  after ``#`` is the NodeDescription. Ports 1..255 work (a 64-port switch is fine).
- Port line: ``[1] "H-<guid>"[1] # "gpu001 mlx5_0" lid 0 4xHDR``. The trailing
  ``lid N <w>x<SPEED>`` sets the enabled width and speed of the port (SDR..HDR; 0.10 does not
  know NDR). Without it ibsim warns ``cannot parse remote lid and connection type`` and uses
  the defaults, or ``width=``/``speed=``/``extspeed=`` lines (e.g. 2/7/4 for 4x HDR).
- Every link must be listed from both ends, and GUIDs must be unique, or ibsim exits at start.
- Limits: 2048 nodes, 256 switches, 13312 ports, LFT 30720 (raise with -N/-S/-P/-L), and at
  most 10 attached clients at a time (``IBSIM_MAX_CLIENTS``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from common.errors import SetupError

__all__ = [
    "Endpoint",
    "LabError",
    "OpenSMResult",
    "SimFabric",
    "SimFabricError",
    "ToolTimeout",
    "find_umad2sim",
    "opensm_conf_lint",
    "opensm_problems",
    "opensm_reference_options",
    "reached_master",
    "routing_engine",
]

Endpoint = tuple[str, int]
"""One end of a cable: (ibsim node id such as ``"S-b8cef60300b00001"``, port number)."""

# opensm reports a bad config in these words but keeps running with defaults, so a check has
# to read its output. The first six are FORMATS.md section 1; the rest were seen on 3.3.23.
_PROBLEM_RE = re.compile(
    "|".join(
        [
            r"Unrecognized token",
            r"Parsing error",
            r"PARSE ERROR",
            r"\bERR [0-9A-F]{4}\b",
            r"falling back",  # "Falling back to default routing", "- falling back to ..."
            r"failed to parse",  # node name map: "WARNING failed to parse node name map"
            r"WARNING failed line",
            r"cannot find or setup routing engine",
            r"Failed to setup routing engine",
            r"cannot build lid matrices",  # ftree gave up; the next engine (minhop) runs
            r"Partition configuration in error",
            r"is not supported by fat-tree routing",
            r"Fabric rank is \d+ \(should be",
            r"^-E- ",
            r"\] 0x01 -> ",  # any ERROR-level log line, including ones without an ERR code
        ]
    ),
    re.IGNORECASE,
)
_MASTER_RE = re.compile(r"Entering MASTER state")
_TABLES_RE = re.compile(r"osm_ucast_mgr_process: (\S+) tables configured on all switches")
_PROMPT_RE = re.compile(rb"sim(?: \(inactive\))?> ")
_DUMP_PORT_RE = re.compile(r'^[0-9a-f]+\t\[(\d+)\]\t"([^"]*)"\[(\d+)\]', re.MULTILINE)
_ATTACHED_RE = re.compile(r"^Client (\d+): pid (\d+) ", re.MULTILINE)
_CONSOLE_ERROR_RE = re.compile(
    r"not found|bad param|bad port|can't|cannot|is not linked|unknown|missing|no (local|remote)"
)

# Keys whose value is a file opensm reads. A missing one is silent at log_flags 0x03.
_INPUT_FILE_KEYS = frozenset(
    {
        "partition_config_file",
        "root_guid_file",
        "cn_guid_file",
        "io_guid_file",
        "ids_guid_file",
        "guid_routing_order_file",
        "node_name_map_name",
        "qos_policy_file",
        "prefix_routes_file",
        "per_module_logging_file",
        "port_prof_ignore_file",
        "hop_weights_file",
        "port_search_ordering_file",
        "lid_matrix_dump_file",
        "lfts_file",
        "torus_config",
    }
)
# Keys whose value is a path opensm writes; the lab points them into the run directory.
_OUTPUT_PATH_KEYS = frozenset({"log_file", "dump_files_dir", "event_db_dump_file"})

# ibsim prints the "ready" prompt before it binds its sockets, so a prompt alone does not
# prove clients can attach; the answer to this command does (the console is read only in
# the loop that also serves the sockets).
_READY_PROBE = "Attached"
_CONSOLE_LINE_MAX = 126  # ibsim reads console lines into char[128]; longer ones get split


class LabError(SetupError):
    """Root of the lab errors: raised when the lab (its sshd, its simulated fabric, its user)
    cannot do what it was asked."""


class SimFabricError(LabError):
    """Raised when ibsim fails to start, dies, or rejects a console command."""


class ToolTimeout(LabError):
    """Raised when a program run on the fabric exceeds its timeout (it was killed).

    The lab then frees the program's ibsim client slot. A kill that lands between the
    client's connect request and ibsim's answer makes ibsim itself exit (``can't connect to in
    socket``); the next call then raises :class:`SimFabricError` with ibsim's stderr.
    """

    def __init__(self, argv: Sequence[str], timeout: float, output: str) -> None:
        super().__init__(f"{' '.join(argv)!r} killed after {timeout:g}s; output so far:\n{output}")
        self.argv = list(argv)
        self.timeout = timeout
        self.output = output


@dataclass(frozen=True)
class OpenSMResult:
    """One ``opensm -o`` run: exit status, combined stdout+stderr, log text, and the files used."""

    returncode: int
    output: str
    log: str
    conf: Path
    """The private copy of the config that opensm read (see run_opensm_once)."""
    run_dir: Path
    lint: tuple[str, ...] = field(default=())
    """Config problems opensm itself stays silent about (see :func:`opensm_conf_lint`)."""

    @property
    def problems(self) -> list[str]:
        """Lint findings, then problem lines from the output and the log, without repeats."""
        found = [*self.lint, *opensm_problems(self.output), *opensm_problems(self.log)]
        return list(dict.fromkeys(found))

    @property
    def master(self) -> bool:
        """True when this opensm became MASTER."""
        return reached_master(self.log) or reached_master(self.output)

    @property
    def routing_engine(self) -> str | None:
        """The engine that last configured the switch tables (``ftree``, ``minhop``, ...)."""
        return routing_engine(self.log)

    @property
    def dump_dir(self) -> Path:
        """Where opensm wrote its dumps (``opensm-subnet.lst``, ``opensm-ftree-ca-order.dump``)."""
        return self.run_dir / "dump"


def opensm_problems(text: str) -> list[str]:
    """Return every line of opensm output or log text that reports a config or routing problem."""
    return [line.rstrip() for line in text.splitlines() if _PROBLEM_RE.search(line)]


def reached_master(text: str) -> bool:
    """True when the opensm log (or stdout) says it entered the MASTER state."""
    return bool(_MASTER_RE.search(text))


def routing_engine(log: str) -> str | None:
    """Name of the engine in the last ``<engine> tables configured on all switches`` log line."""
    engines = _TABLES_RE.findall(log)
    return str(engines[-1]) if engines else None


@functools.lru_cache(maxsize=1)
def opensm_reference_options(timeout: float = 30.0) -> dict[str, str]:
    """Every option the installed opensm knows, with its default (``opensm -c``)."""
    with tempfile.TemporaryDirectory(prefix="opensm-c-") as tmp:
        path = Path(tmp, "defaults.conf")
        _run_killable([require("opensm"), "-c", str(path)], env=None, cwd=tmp, timeout=timeout)
        return dict(_conf_items(path.read_text(encoding="utf-8", errors="replace")))


def opensm_conf_lint(
    text: str, *, source: str = "opensm.conf", reference: Mapping[str, str] | None = None
) -> list[str]:
    """Problems in an opensm config that opensm accepts without a word.

    Found by running opensm 3.3.23 on ibsim: a missing input file (partitions, cn/root GUID
    files, ...) is logged only at VERBOSE or not at all, a boolean written other than ``TRUE``
    silently means FALSE, and a repeated key silently keeps the last value. Relative paths
    must already be resolved. ``reference`` (from :func:`opensm_reference_options`) enables
    the boolean check.
    """
    problems: list[str] = []
    seen: dict[str, int] = {}
    for lineno, key, value in _conf_lines(text):
        where = f"{source}:{lineno}"
        if key in seen:
            problems.append(f"{where}: {key} repeats line {seen[key]}; opensm keeps the last")
        seen[key] = lineno
        if key in _INPUT_FILE_KEYS and value != "(null)" and not Path(value).is_file():
            problems.append(f"{where}: {key} {value!r} does not exist; opensm goes on without it")
        default = (reference or {}).get(key)
        if default in ("TRUE", "FALSE") and value not in ("TRUE", "FALSE"):
            problems.append(f"{where}: {key} {value!r} reads as FALSE; booleans are TRUE/FALSE")
    return problems


def find_umad2sim() -> Path:
    """Path of libumad2sim.so (Debian puts it under the multiarch lib dir)."""
    for pattern in ("/usr/lib/*/umad2sim/libumad2sim.so", "/usr/lib*/umad2sim/libumad2sim.so"):
        for hit in sorted(Path("/").glob(pattern.lstrip("/"))):
            return hit
    raise LabError("libumad2sim.so not found (package libumad2sim0; tests/install-tools)")


class SimFabric:
    """ibsim running one net file, for the duration of a ``with`` block.

    ``sim_host`` is where programs attach (SIM_HOST): an ibsim node id or a node description
    such as ``"sm01 mlx5_0"``; the default is the first node in the file. Work files go to
    ``workdir``: ``ibsim.out``/``ibsim.err`` and one ``opensm-N/`` folder per opensm run.

    ibsim and every program started here get SIGKILL if the test process dies
    (``setpriv --pdeathsig``), because an orphaned ibsim with a closed console spins at full
    CPU and a client without ibsim retries for ever. The signal follows the *thread* that
    started the process, so create and use a fabric from one long-lived thread.
    """

    def __init__(
        self,
        net_file: Path,
        workdir: Path,
        *,
        sim_host: str | None = None,
        start_timeout: float = 30.0,
        ibsim_args: Sequence[str] = (),
    ) -> None:
        self.net_file = Path(net_file).resolve()
        self.workdir = Path(workdir).resolve()
        self.sim_host = sim_host
        self.start_timeout = start_timeout
        self.ibsim_args = list(ibsim_args)
        # Abstract-namespace socket names; unique per instance so parallel tests never meet.
        self.sockname = f"cf{os.getpid()}x{uuid.uuid4().hex[:8]}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._out = bytearray()
        self._out_cond = threading.Condition()
        self._reader: threading.Thread | None = None
        self._console_lock = threading.Lock()
        self._opensm_runs = itertools.count(1)  # next() is atomic; runs may overlap
        self._umad2sim = find_umad2sim()

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> SimFabric:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start ibsim and return once its console answers (its sockets are bound then)."""
        if self._proc is not None:
            raise SimFabricError(f"ibsim for {self.net_file} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [require("ibsim"), *self.ibsim_args, "-s", str(self.net_file)]
        env = {**_clean_env(), "IBSIM_SOCKNAME": self.sockname}
        with open(self.workdir / "ibsim.err", "wb") as err:
            self._proc = subprocess.Popen(
                _with_pdeathsig(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=self.workdir,
                start_new_session=True,  # own process group, so stop() can kill all of it
            )
        self._reader = threading.Thread(target=self._read_stdout, name="ibsim-stdout", daemon=True)
        self._reader.start()
        try:
            # The first prompt means the net file parsed; it comes before the sockets exist.
            with self._out_cond:
                self._wait_prompt(0, "startup", self.start_timeout)
            self.console(_READY_PROBE, timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill ibsim's process group and wait for it; safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    @property
    def alive(self) -> bool:
        """True while ibsim runs."""
        return self._proc is not None and self._proc.poll() is None

    def env(self, sim_host: str | None = None) -> dict[str, str]:
        """Environment that attaches a libibumad program to this fabric."""
        env = _clean_env()
        preload = [str(self._umad2sim), *filter(None, [env.get("LD_PRELOAD")])]
        env.update(LD_PRELOAD=":".join(preload), IBSIM_SOCKNAME=self.sockname)
        host = sim_host if sim_host is not None else self.sim_host
        if host:
            env["SIM_HOST"] = host
        return env

    # -- programs on the fabric ------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        sim_host: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a libibumad program (``["ibnetdiscover", "-p"]``) on the fabric.

        stdout and stderr are returned separately; ibsim's ``sim_connect: attached ...``
        banner goes to stderr. Raises :class:`ToolTimeout` when the program had to be killed.
        """
        self._check_alive()
        env = {**self.env(sim_host), **(extra_env or {})}
        full = [require(argv[0]), *argv[1:]]
        try:
            return _run_killable(full, env=env, cwd=cwd or self.workdir, timeout=timeout)
        finally:
            self._reap_clients()

    def run_opensm_once(
        self,
        conf: Path,
        *,
        extra_env: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        sim_host: str | None = None,
        seed_cache: Sequence[Path] = (),
        timeout: float = 120.0,
    ) -> OpenSMResult:
        """Run ``opensm -F <conf> -o`` once (one sweep, then exit) in a private directory.

        opensm reads a copy of ``conf`` in ``workdir/opensm-N/`` where: relative file
        values are resolved against ``conf``'s folder; ``overrides`` replace or add keys
        (e.g. map ``/etc/rdma/root_guids`` of a generated config to a test file); and the
        paths opensm writes (``log_file``, ``dump_files_dir``, ...) point into that folder,
        with ``log_flags`` given at least ERROR|INFO so the helpers can read the log. Cache
        and tmp dirs (``OSM_CACHE_DIR``, ``OSM_TMP_DIR``) are private too; ``extra_env`` wins.
        ``seed_cache`` files (e.g. a planned ``guid2lid``) are copied into the cache first.
        """
        self._check_alive()
        run_dir = self.workdir / f"opensm-{next(self._opensm_runs)}"
        (run_dir / "cache").mkdir(parents=True)
        (run_dir / "dump").mkdir()
        for seed in seed_cache:
            shutil.copyfile(seed, run_dir / "cache" / Path(seed).name)
        log = run_dir / "opensm.log"
        sandbox = {"log_file": str(log), "dump_files_dir": f"{run_dir / 'dump'}/"}
        source = Path(conf).resolve()
        text = _rewrite_conf(source, {**sandbox, **(overrides or {})}, run_dir / "dump")
        private = run_dir / "opensm.conf"
        private.write_text(text, encoding="utf-8")
        lint = opensm_conf_lint(text, source=str(private), reference=opensm_reference_options())
        env = {
            **self.env(sim_host),
            "OSM_CACHE_DIR": str(run_dir / "cache"),
            "OSM_TMP_DIR": str(run_dir / "dump"),
            **(extra_env or {}),
        }
        argv = [require("opensm"), "-F", str(private), "-o", "-f", str(log)]
        try:
            proc = _run_killable(argv, env=env, cwd=run_dir, timeout=timeout, merge_stderr=True)
        finally:
            self._reap_clients()
        return OpenSMResult(
            returncode=proc.returncode,
            output=proc.stdout,
            log=log.read_text(encoding="utf-8", errors="replace") if log.exists() else "",
            conf=private,
            run_dir=run_dir,
            lint=tuple(lint),
        )

    # -- console and faults ----------------------------------------------------------------

    def console(self, cmd: str, *, timeout: float = 10.0) -> str:
        """Send one console command and return its output once ibsim has applied it.

        ibsim handles the console in the same loop as the fabric and prints the next prompt
        only after the command is done, so the prompt is the acknowledgement.
        """
        if "\n" in cmd or len(cmd) > _CONSOLE_LINE_MAX:
            raise SimFabricError(f"console command must be one line under 127 chars: {cmd!r}")
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise SimFabricError("ibsim is not running")
        with self._console_lock:
            with self._out_cond:
                start = len(self._out)
            try:
                proc.stdin.write(cmd.encode() + b"\n")
                proc.stdin.flush()
            except OSError as exc:
                raise SimFabricError(f"ibsim console closed: {exc}{self._tail()}") from exc
            with self._out_cond:
                end = self._wait_prompt(start, repr(cmd), timeout)
                return bytes(self._out[start:end]).decode(errors="replace")

    def far_end(self, node_id: str, port: int) -> Endpoint | None:
        """The (node id, port) at the other end of a cable, or None when the port is down."""
        dump = self._checked(f'Dump "{node_id}"')
        for local, remote, rport in _DUMP_PORT_RE.findall(dump):
            if int(local) == port and int(rport) > 0:
                return remote, int(rport)
        return None

    def unplug(self, node_id: str, port: int) -> Endpoint:
        """Pull the cable at ``node_id[port]``; returns the end it was plugged into."""
        far = self.far_end(node_id, port)
        if far is None:
            raise SimFabricError(f'"{node_id}"[{port}] has no cable to unplug')
        self._checked(f'Unlink "{node_id}"[{port}]')
        return far

    def plug(self, a_end: Endpoint, b_end: Endpoint) -> None:
        """Connect two free ports with a cable."""
        self._checked(f'Link "{a_end[0]}"[{a_end[1]}] "{b_end[0]}"[{b_end[1]}]')

    def swap(self, a_end: Endpoint, b_end: Endpoint) -> None:
        """Swap the far ends of the cables at ``a_end`` and ``b_end`` (a classic miswiring).

        Before: a_end - A', b_end - B'. After: a_end - B', b_end - A'.
        """
        a_far, b_far = self.far_end(*a_end), self.far_end(*b_end)
        if a_far is None or b_far is None:
            raise SimFabricError(
                f"both ends must be cabled to swap: {a_end} -> {a_far}, {b_end} -> {b_far}"
            )
        if a_far == b_end:
            raise SimFabricError(f"{a_end} and {b_end} are the two ends of one cable")
        self._checked(f'Unlink "{a_end[0]}"[{a_end[1]}]')
        self._checked(f'Unlink "{b_end[0]}"[{b_end[1]}]')
        self.plug(a_end, b_far)
        self.plug(b_end, a_far)

    # -- internals -------------------------------------------------------------------------

    def _wait_prompt(self, start: int, what: str, timeout: float) -> int:
        """Offset of the first prompt at or after ``start``; call with ``_out_cond`` held."""
        proc = self._proc
        assert proc is not None

        def prompt_or_exit() -> bool:
            return _PROMPT_RE.search(self._out, start) is not None or proc.poll() is not None

        waited = self._out_cond.wait_for(prompt_or_exit, timeout=timeout)
        match = _PROMPT_RE.search(self._out, start)
        if match is None:
            why = "exited" if waited else f"gave no prompt within {timeout:g}s"
            raise SimFabricError(f"ibsim {why} after {what}{self._tail(locked=True)}")
        return match.start()

    def _checked(self, cmd: str) -> str:
        out = self.console(cmd)
        bad = [line for line in out.splitlines() if _CONSOLE_ERROR_RE.search(line)]
        if bad:
            raise SimFabricError(f"ibsim rejected {cmd!r}: {' / '.join(bad)}")
        return out

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        with open(self.workdir / "ibsim.out", "wb") as log:
            while chunk := os.read(fd, 65536):
                log.write(chunk)
                log.flush()
                with self._out_cond:
                    self._out += chunk
                    self._out_cond.notify_all()
        with self._out_cond:
            self._out_cond.notify_all()  # wake console() waiters so they see the exit

    def _check_alive(self) -> None:
        # A libibumad client facing a dead ibsim retries connect() every 2 s for ever.
        if not self.alive:
            raise SimFabricError(f"ibsim is not running{self._tail()}")

    def _reap_clients(self) -> None:
        # A client killed by a timeout never detaches, and ibsim has only 10 client slots.
        if not self.alive:
            return
        for slot, pid in _ATTACHED_RE.findall(self.console("Attached")):
            if not _pid_alive(int(pid)):
                self.console(f"X {slot}")

    def _tail(self, *, locked: bool = False) -> str:
        err = self.workdir / "ibsim.err"
        text = err.read_text(errors="replace") if err.exists() else ""
        with contextlib.nullcontext() if locked else self._out_cond:
            out = bytes(self._out[-2000:]).decode(errors="replace")
        return f"\n--- ibsim stdout (tail) ---\n{out}\n--- ibsim stderr (tail) ---\n{text[-2000:]}"


# -- module helpers --------------------------------------------------------------------------


def require(name: str) -> str:
    path = shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d, name)).exists()), None
    )
    if path is None:
        raise LabError(f"{name} is not installed (tests/install-tools installs it)")
    return path


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    # These switch umad2sim to TCP; the lab talks to its own local socket only.
    for key in ("IBSIM_SERVER_NAME", "IBSIM_SERVER_PORT", "SIM_HOST", "SIM_SET_ISSM"):
        env.pop(key, None)
    return env


def _with_pdeathsig(argv: list[str]) -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


def _run_killable(
    argv: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | str,
    timeout: float,
    merge_stderr: bool = False,
) -> subprocess.CompletedProcess[str]:
    # subprocess.run(timeout=) kills only the direct child; kill the whole group instead.
    proc = subprocess.Popen(
        _with_pdeathsig(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            text = (out or b"").decode(errors="replace") + (err or b"").decode(errors="replace")
            raise ToolTimeout(argv, timeout, text) from None
        raise
    return subprocess.CompletedProcess(
        argv,
        proc.returncode,
        (out or b"").decode(errors="replace"),
        (err or b"").decode(errors="replace") if not merge_stderr else "",
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); its /proc state says Z.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    return True


def _conf_lines(text: str) -> Iterator[tuple[int, str, str]]:
    # Same reading as osm_subn_parse_conf_file: "#" cuts the line, key and value split on
    # the first run of blanks.
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, *value = line.split(None, 1)
        yield lineno, key, value[0] if value else ""


def _conf_items(text: str) -> Iterator[tuple[str, str]]:
    for _, key, value in _conf_lines(text):
        yield key, value


def _rewrite_conf(source: Path, replace: Mapping[str, str], out_dir: Path) -> str:
    """The config text with ``replace`` applied, relative file values made absolute, and
    any other path opensm would write moved into ``out_dir``."""
    out = [f"# lab copy of {source} (clusterforge/lab/ibsim.py rewrote paths and log_flags)"]
    pending = dict(replace)
    for raw in source.read_text(encoding="utf-8", errors="replace").splitlines():
        code, hash_, comment = raw.partition("#")
        fields = code.split(None, 1)
        if len(fields) != 2:
            out.append(raw)
            continue
        key, value = fields[0], fields[1].strip()
        if key in pending:
            value = pending.pop(key)
        elif key in _OUTPUT_PATH_KEYS and value != "(null)":
            value = str(out_dir / Path(value).name)
        elif key in _INPUT_FILE_KEYS and value != "(null)":
            value = str(source.parent / value)  # an absolute value stays as it is
        if key == "log_flags":
            with contextlib.suppress(ValueError):
                value = f"0x{int(value, 0) | 0x03:02x}"  # ERROR|INFO carry the lines we read
        out.append(f"{key} {value}" + (f" {hash_}{comment}" if hash_ else ""))
    out += [f"{key} {value}" for key, value in pending.items()]
    return "\n".join(out) + "\n"
