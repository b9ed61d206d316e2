"""Benchmarks (`nox -s bench`): speed and memory of compile, validate and diff, as medians and
ratios. Nothing here asserts a timing: the machines are shared and noisy. It prints, and writes
as JSON (`--json`, default build/bench.json):
- the import floor (`import pydantic, ruamel.yaml, jinja2, netaddr` in a fresh interpreter)
  and cold starts of the CLI (`--help`, `validate`, `compile --check` of the reference
  cluster) as multiples of it;
- per size of a generated cluster (`compiler/generate.py`: two-tier up to one fabric's reach,
  three-tier above): a first compile, a recompile after a one-node change (only changed files
  written), validate and diff of that change, each with the ratio to the size before,
  normalised per doubling, and its peak memory; the same for eight-rail clusters
  (`compiler/generate_rails.py`, `--rails-sizes`: 32 to 256 servers, one to eight units,
  two-tier; 512 to 4,096 three-tier, by request);
- the drift audit of the reference fleet replayed from a recording;
- the live drift audit of a generated cluster (`--lab-servers`, default 1,024; 0 skips it)
  played by the loopback lab, and the replay of its recording (`audit_live` in the JSON);
  then, side by side at one fanout (16), the audit and ClusterShell (`clush`'s library, the
  `ClusterShell` package, over OpenSSH) running the same command lines, one session each,
  and their ratio (`versus_clush`).
Every figure comes from a fresh process: its time is measured inside it, after the imports
(the cold-start rows measure those), and its peak memory is its own VmHWM. Ratios are of CPU
seconds (user + system), which a shared, loaded machine disturbs far less than wall time; the
system part is printed beside them, since a first compile's is mostly the kernel creating every
file. A first compile's old tree is moved aside, not deleted, and every tree is deleted only when
the bench ends: ext4 without a journal (as on some CI and VM disks) skips inodes freed in the
last minutes when it makes a file, one by one, so a burst of files made just after as many were
deleted costs the kernel time that grows with the square of the count (perf: `recently_deleted`
under `__ext4_new_inode`); a 2,048-server first compile took 4-10 s of system time after
`rm -rf generated`, 0.7 s without. That needs disk for every first compile's tree (about 10 GB
for the default sizes and rounds). Held trees are dropped from the page cache (`uncache`): kept,
they filled this 24 GB machine's memory by the last rounds, and with the kernel reclaiming pages
a 4,096-server first compile's system time took a median of 3.1 s (page cache filled on purpose
to 0.4-1.8 GB free), against 1.8 to 2.6 s with memory to spare (docs/scale.md). A child's
`ru_maxrss` is not used: Linux carries the parent's high-water mark across fork and exec.
Measurements are taken in turns: each run of a step goes through every size, smallest first
(and each cold start follows a run of the floor), so the two sides of a ratio are taken back to
back, and a ratio is the median of these pairs' own ratios. On a shared machine a run is slowed
by a neighbour or not (of 15 runs of one validate here, 6 took 1.3 to 2 times the other 9's
CPU): its times fall into two heaps. A median of a few runs jumps from one heap to the other
with a run or two, and a ratio of two such medians with it; among pairs, one side slowed and
the other not is as likely either way round, so their median stays on the ratio the program
has (simulated with such heaps, 15 runs a size put a true 2.0x above 2.2x one time in twenty,
the ratio of per-round medians of three one time in ten). Figures are medians of every run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SIZES = (124, 256, 512, 1024, 2048, 4096)
# Eight-rail servers: one to eight units of 32, all a two-tier fabric of 64-port spines holds
# (one link from each of 64 leaves); 512 to 4,096 (16 to 128 units) are three-tier, asked for
# with --rails-sizes: a 1,024 compile takes some ten CPU seconds a run, a shared machine's
# default run should not.
RAIL_SIZES = (32, 64, 128, 256)
RAIL_SIZES_THREE_TIER = (512, 1024, 2048, 4096)
FLOOR = "import pydantic, ruamel.yaml, jinja2, netaddr"
LAB_SERVERS = 1024
LAB_CONCURRENCY = 32  # the audit's default
CLUSH_PLAIN_MAX_HOSTS = 256  # clush without multiplexing, only on labs up to this size
CLUSH_FANOUT = 16  # ClusterShell's comparison: one fanout for both, clush's usual setting
# The lab logs in through the audit account, which generated clusters have only when asked.
AUDIT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMkD0LRYwYL3yRGeueMOJgv++Palp7O9dNIJ5nt3pjM bench"


# Runs in the child: imports first, then one CLI call timed; prints seconds and VmHWM (KiB).
CHILD = """
import json, os, sys, time
from compiler import diff, gitsource, output, pipeline
from clusterforge.cli import main
start, cpu, before = time.perf_counter(), time.process_time(), os.times()
code = main(sys.argv[1:])
wall, cpu, after = time.perf_counter() - start, time.process_time() - cpu, os.times()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
sys_s = after.system - before.system
print(json.dumps({"code": code, "seconds": cpu, "sys": sys_s, "wall": wall, "peak_kib": hwm}),
      file=sys.stderr)
"""


# A cold start as an operator's is: a new process, with Python's bytecode caches as any run
# leaves them (pip compiled the libraries' at install; ours are written by the first run).
# Without them (PYTHONDONTWRITEBYTECODE, set on some CI images) every start would compile
# our sources while the floor's libraries load from their caches.
COLD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of a fresh process running `argv`."""
    proc = subprocess.Popen(
        argv, cwd=REPO, env=COLD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def cold_rows(py: str, runs: int) -> dict[str, Any]:
    """The import floor and the CLI's cold starts, each run right after a run of the floor;
    each as the median of its runs, its multiple of the floor as the median of the pairs'."""
    argvs = {
        "floor": [py, "-c", FLOOR],
        "help": [py, "-m", "clusterforge.cli", "--help"],
        "validate": [py, "-m", "clusterforge.cli", "validate"],
        "compile --check": [py, "-m", "clusterforge.cli", "compile", "--check"],
    }
    floor = argvs.pop("floor")
    for argv in (floor, *argvs.values()):
        cpu(argv)  # leaves the bytecode caches in place
    seconds: dict[str, list[float]] = {name: [] for name in argvs}
    floors: dict[str, list[float]] = {name: [] for name in argvs}
    for _ in range(runs):
        for name, argv in argvs.items():
            floors[name].append(cpu(floor))
            seconds[name].append(cpu(argv))
    every = [f for runs_ in floors.values() for f in runs_]
    out: dict[str, Any] = {"floor_s": statistics.median(every)}
    print(f"cold  import floor ({FLOOR[7:]})  {out['floor_s'] * 1000:6.0f} ms CPU")
    for name, times in seconds.items():
        x = _ratio(times, floors[name])
        out[name] = {"seconds": statistics.median(times), "x_floor": x["median"], "spread": x}
        print(
            f"cold  {name:<41}{out[name]['seconds'] * 1000:6.0f} ms  {x['median']:5.2f}x floor"
            f"  (runs' middle half {x['q1']:.2f}-{x['q3']:.2f}x)"
        )
    return out


def _ratio(a: list[float], b: list[float]) -> dict[str, float]:
    """Median and quartiles of the pairs' ratios a[k] / b[k] (each pair taken back to back)."""
    q1, median, q3 = statistics.quantiles((x / y for x, y in zip(a, b, strict=True)), n=4)
    return {"median": median, "q1": q1, "q3": q3}


def child(repo: Path, argv: list[str], runs: int, ok: tuple[int, ...] = (0, 1)) -> dict[str, float]:
    """CPU and wall seconds (medians) and peak MiB of `clusterforge -C repo ARGV`, fresh."""
    seconds, kernel, walls, peaks = [], [], [], []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, "-C", str(repo), *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        result = json.loads(done.stderr.strip().splitlines()[-1])
        if result["code"] not in ok:
            raise SystemExit(f"clusterforge {' '.join(argv)} failed:\n{done.stderr}")
        seconds.append(result["seconds"])
        kernel.append(result["sys"])
        walls.append(result["wall"])
        peaks.append(result["peak_kib"] / 1024)
    return {
        "seconds": statistics.median(seconds),
        "sys": statistics.median(kernel),
        "wall": statistics.median(walls),
        "peak_mib": max(peaks),
    }


def merged(runs: list[dict[str, float]]) -> dict[str, float]:
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "sys": statistics.median(r["sys"] for r in runs),
        "wall": statistics.median(r["wall"] for r in runs),
        "peak_mib": max(r["peak_mib"] for r in runs),
    }


STEPS = ("compile", "recompile", "validate", "diff")
# Runs of a step through every size per round: validate, the quickest, gets the most pairs;
# the first compile, whose kernel part (making every file) is the noisiest, more than the rest.
REPEATS = {"compile": 5, "recompile": 3, "validate": 7, "diff": 3}


def measure(step: str, repo: Path, held: Path) -> dict[str, float]:
    """One run of `step` on `repo` (its cluster at HEAD, one node changed since HEAD~1); a first
    compile moves the old tree into `held`, deleted when the bench ends (see above).
    Starts from clean page cache writeback: the kernel flushing the last step's thousands of
    files would otherwise take CPU from this one (validate after a 2,048-server compile ran a
    third slower)."""
    os.sync()
    if step == "compile":  # a first compile: every file written
        aside = Path(tempfile.mkdtemp(dir=held)) / "generated"
        (repo / "generated").rename(aside)
        os.sync()
        uncache(aside)
        return child(repo, ["compile"], 1)
    if step == "recompile":  # after the one-node change: only changed files written
        git(repo, "checkout", "-q", "HEAD~1", "--", "cluster")
        child(repo, ["compile"], 1)
        git(repo, "checkout", "-q", "HEAD", "--", "cluster")
        os.sync()
        return child(repo, ["compile"], 1)
    if step == "validate":
        return child(repo, ["validate"], 1)
    return child(repo, ["diff", "HEAD~1", "HEAD"], 1)


def uncache(tree: Path) -> None:
    """Drop a held tree's pages from the page cache (written back by the sync before): the
    trees a run holds, 9 GB by its end at the default sizes, would otherwise fill the memory,
    and a compile that needs pages while the kernel reclaims them paid for it (see the top)."""
    for folder, _, names in os.walk(tree):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def fat_tree(servers: int) -> dict[str, str]:
    """A one-HCA cluster of `servers` (two-tier up to one fabric's reach, three-tier above)."""
    from compiler import generate

    return generate.generate(servers)


def eight_rails(servers: int, tiers: int | None = None) -> dict[str, str]:
    """An eight-rail cluster of `servers` (`init --rails 8`): units of 32, the last one's last
    position the service hosts'; two-tier while the spines hold it, or as `tiers` says."""
    from compiler import generate_rails

    return generate_rails.generate_rails(servers // 32, tiers=tiers)


def eight_rails_three_tier(servers: int) -> dict[str, str]:
    """The same, three-tier from two spine groups (256 servers) on: so every doubling up to
    4,096 compares one shape, not a two-tier fabric with a three-tier one."""
    return eight_rails(servers, tiers=3)


def sized_rows(sizes: list[int], runs: int, scratch: Path, tree: Any = fat_tree) -> dict[str, Any]:
    """Every step at every size, in rounds (each round runs each step at each size once, so
    sizes next to each other are measured seconds, not an hour, apart); figures are medians of
    the rounds, and the ratio to the size before is the median of the rounds' own ratios. The
    repositories and every tree compiled stay in `scratch` until the bench ends."""
    held = Path(tempfile.mkdtemp(prefix="held-", dir=scratch))
    repos = {servers: sized(tree, servers, scratch) for servers in sizes}
    for repo in repos.values():
        change(repo)
        child(repo, ["compile"], 1)  # the tree the first round's first compile moves aside
    # samples[servers][step][k]: the k-th run, taken right after the k-th of the size before
    samples: dict[int, dict[str, list[dict[str, float]]]] = {
        servers: {step: [] for step in STEPS} for servers in sizes
    }
    for n in range(runs):
        for step in STEPS:
            for _ in range(REPEATS[step]):
                for servers, repo in repos.items():
                    samples[servers][step].append(measure(step, repo, held))
        print(f"  round {n + 1} of {runs} done", file=sys.stderr, flush=True)
    built = {servers: contents(repo) for servers, repo in repos.items()}
    print(
        f"\n{'servers':>7}  {'step':<10}{'CPU s':>8}{'of it sys':>10}{'wall s':>8}{'peak MiB':>10}"
        f"{'ratio':>8}{'/doubling':>10}  (pairs' middle half)"
    )
    out: dict[str, Any] = {}
    for i, servers in enumerate(sizes):
        out[str(servers)] = {"cluster": built[servers]}
        print(f"{servers:>7}  ({', '.join(f'{n:,} {what}' for what, n in built[servers].items())})")
        for step in STEPS:
            figure: dict[str, Any] = merged(samples[servers][step])
            text = f"{servers:>7}  {step:<10}{figure['seconds']:8.2f}{figure['sys']:10.2f}"
            text += f"{figure['wall']:8.2f}"
            text += f"{figure['peak_mib']:10.1f}"
            if i:
                before = sizes[i - 1]
                spread = _ratio(
                    [run["seconds"] for run in samples[servers][step]],
                    [run["seconds"] for run in samples[before][step]],
                )
                ratio, per = spread["median"], spread["median"] ** (1 / math.log2(servers / before))
                figure |= {"ratio": ratio, "per_doubling": per, "ratio_spread": spread}
                text += f"{ratio:7.2f}x{per:9.2f}x  ({spread['q1']:.2f}-{spread['q3']:.2f}x)"
            out[str(servers)][step] = figure
            print(text, flush=True)
    return out


def contents(repo: Path) -> dict[str, int]:
    """What a size's compile works through: hosts, switches and cables (the fabric grows faster
    than the servers where it turns three-tier)."""
    generated = repo / "generated"
    inventory = json.loads((generated / "inventory.json").read_text())
    with (generated / "fabric" / "cables.csv").open() as table:
        cables = sum(1 for _ in table) - 1
    return {
        "hosts": len(inventory["hosts"]),
        "switches": len(inventory["switches"]),
        "cables": cables,
    }


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def sized(tree: Any, servers: int, root: Path) -> Path:
    """A repository holding the generated cluster at HEAD~1 and one node's MAC changed at HEAD."""
    repo = Path(tempfile.mkdtemp(prefix=f"c{servers}-", dir=root))
    for rel, text in tree(servers).items():
        path = repo / "cluster" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "add", ".")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "a")
    return repo


def change(repo: Path) -> None:
    """One node's storage MAC replaced, as when a NIC is swapped."""
    rack = repo / "cluster" / "racks" / "r001.yaml"
    text = rack.read_text()
    old = text.split('ens2f0: "', 1)[1].split('"', 1)[0]
    rack.write_text(text.replace(old, "02:ee:ee:ee:ee:01", 1))
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qam", "b")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument(
        "--rails-sizes",
        default=",".join(map(str, RAIL_SIZES)),
        help="eight-rail servers (32 a unit, up to 256: two-tier; "
        f"{', '.join(map(str, RAIL_SIZES_THREE_TIER))}: three-tier); empty: skip",
    )
    ap.add_argument(
        "--rails-tiers",
        type=int,
        choices=(3,),
        help="3: every eight-rail size three-tier (256 servers, two spine groups, and up)",
    )
    ap.add_argument("--cold-runs", type=int, default=40, help="0: skip the cold starts")
    # Five rounds: with three, one busy spell on the shared machine moved a ratio by a fifth.
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, default=REPO / "build" / "bench.json")
    ap.add_argument(
        "--lab-servers", type=int, default=LAB_SERVERS, help="live audit on the lab; 0: skip"
    )
    opts = ap.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    rail_sizes = [int(s) for s in opts.rails_sizes.split(",") if s]
    py = sys.executable
    out: dict[str, Any] = {}

    # One scratch folder for the whole run, deleted last: see the note on deleting above.
    with tempfile.TemporaryDirectory(prefix="cf-bench-") as scratch:
        if opts.cold_runs:  # a second or two a run: many pairs are cheap
            out["cold"] = cold_rows(py, opts.cold_runs)
        if sizes:
            out["sizes"] = sized_rows(sizes, opts.runs, Path(scratch))
        if rail_sizes:
            print("\neight-rail servers (compiler/generate_rails.py, init --rails 8)")
            shape = eight_rails_three_tier if opts.rails_tiers == 3 else eight_rails
            out["rails"] = sized_rows(rail_sizes, opts.runs, Path(scratch), shape)
        out["audit_replay"] = audit_replay()
        if opts.lab_servers:
            out["audit_live"] = audit_live(opts.lab_servers)
    opts.json.parent.mkdir(parents=True, exist_ok=True)
    opts.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(f"\nwritten {opts.json}")


def audit_replay() -> dict[str, float]:
    from audits import expected
    from audits import pipeline as audit
    from audits.collect import ReplayCollector
    from clusterforge.lab.fleet import Fleet

    with tempfile.TemporaryDirectory() as tmp:
        recording = Fleet.load(REPO / "generated").record(Path(tmp) / "recording")
        expectations = expected.read(REPO)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            audit.audit(expectations, ReplayCollector(recording), None)
            times.append(time.perf_counter() - start)
    replay = statistics.median(times)
    print(f"audit replay of the reference fleet ({len(expectations.hosts)} hosts)  {replay:.2f} s")
    return {"hosts": len(expectations.hosts), "seconds": replay}


def audit_live(servers: int) -> dict[str, Any]:
    """The live audit of a generated cluster of `servers` played by the loopback lab (real
    sshd, ibsim), in a fresh process as the rows above; then the replay of its recording."""
    from clusterforge.lab import lab as twin
    from compiler import generate

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / f"lab{servers}"
        for rel, text in generate.generate(servers, audit_key=AUDIT_KEY).items():
            path = repo / "cluster" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        child(repo, ["compile"], 1)
        # Not below the TemporaryDirectory (mode 0700): run as root, the lab's own user must
        # reach its state folder.
        state = Path(tempfile.mkdtemp(prefix="cf-bench-lab-"))
        start = time.perf_counter()
        try:
            lab = twin.up(repo, state, linger=False)
            up = time.perf_counter() - start
            hosts = len(lab.hosts)
            report = Path(tmp) / "report"
            argv = [*lab.audit_args()[2:], "--out", str(report)]
            argv += ["--concurrency", str(LAB_CONCURRENCY)]
            live = child(repo, argv, 1, ok=(0, 1, 2))
            # Side by side with ClusterShell at one fanout: the audit at that concurrency,
            # then clush running the same command lines, taken back to back.
            versus = [*lab.audit_args()[2:], "--out", f"{tmp}/versus"]
            versus += ["--concurrency", str(CLUSH_FANOUT)]
            same = child(repo, versus, 1, ok=(0, 1, 2))
            clush = clush_run(lab, repo, CLUSH_FANOUT, Path(tmp), multiplex=True)
            # A connection a session costs clush about 2 s a host here: past a few hundred
            # hosts that run alone would take longer than the rest of the bench.
            clush_plain = (
                clush_run(lab, repo, CLUSH_FANOUT, Path(tmp), multiplex=False)
                if hosts <= CLUSH_PLAIN_MAX_HOSTS
                else None
            )
        finally:
            twin.down(state)
        summary = json.loads((report / "report.json").read_text())["summary"]["status"]
        replay = child(
            repo, ["audit", "--replay", str(report / "recording"), "--out", f"{tmp}/again"], 1
        )
    sshds = math.ceil(hosts / twin.PER_SSHD)
    live |= {"hosts_per_s": hosts / live["wall"]}
    ratio = clush["wall"] / same["wall"] if clush else None  # over the multiplexed clush
    figures = {
        "versus_clush": {
            "fanout": CLUSH_FANOUT,
            "audit": same,
            "clush": clush,
            "ratio": ratio,
            "clush_one_connection_a_session": clush_plain,
        },
        "servers": servers,
        "hosts": hosts,
        "sshd": sshds,
        "concurrency": LAB_CONCURRENCY,
        "lab_up_s": up,
        "status": summary,
        "live": live,
        "replay": replay,
    }
    print(
        f"audit live on the lab: {hosts} hosts ({servers} servers, {sshds} sshd, concurrency "
        f"{LAB_CONCURRENCY}; lab up in {up:.0f} s)  {live['wall']:.1f} s wall, "
        f"{live['seconds']:.1f} s CPU, {live['hosts_per_s']:.1f} hosts/s, "
        f"peak {live['peak_mib']:.1f} MiB; replay {replay['wall']:.1f} s, "
        f"peak {replay['peak_mib']:.1f} MiB; {summary}"
    )
    if clush:
        print(
            f"audit vs ClusterShell at fanout {CLUSH_FANOUT}, {clush['commands']} command lines "
            f"({clush['sessions']} sessions, {clush['failed']} failed): audit "
            f"{same['wall']:.1f} s, clush {clush['wall']:.1f} s (one connection a host, "
            f"OpenSSH multiplexing): the audit {ratio:.2f}x faster"
        )
    if clush_plain:
        print(
            f"  clush with a connection a session, as it runs by default: "
            f"{clush_plain['wall']:.1f} s ({clush_plain['failed']} failed), "
            f"{clush_plain['wall'] / same['wall']:.2f}x the audit's time"
        )
    return figures


def clush_run(
    lab: Any, repo: Path, fanout: int, tmp: Path, multiplex: bool
) -> dict[str, Any] | None:
    """ClusterShell (`clush`'s library, over OpenSSH) running the command lines the audit sends,
    one session each, `fanout` at once; each host's lines as the audit words them (its probes,
    its own arguments), the fabric scans on the scan host, without the audit's `--within`
    (ssh would take a command starting with `-` for an option; the host's default limit
    applies). With `multiplex`, OpenSSH's ControlMaster carries a host's sessions over one
    connection, as the audit does with its one connection a host; without, each session is a
    connection of its own, as clush runs by default. None without ClusterShell."""
    try:
        from ClusterShell.NodeSet import NodeSet
        from ClusterShell.Task import task_self
    except ImportError:
        print("ClusterShell is not installed (pip install ClusterShell): no comparison")
        return None
    from audits import expected
    from audits.compare import host_probes, probe_arguments
    from audits.fabric import fabric_probes
    from audits.ssh import fabric_host, probe_words

    found = expected.read(repo)
    by_line: dict[str, list[str]] = {}
    config = []
    for host, where in sorted(lab.hosts.items()):
        contract = found.hosts[host]
        arguments = probe_arguments(contract)
        for key in host_probes(contract):
            words = probe_words(key, arguments.get(key, ()))
            by_line.setdefault(shlex.join(words), []).append(host)
        address, port = where.rsplit(":", 1)
        config += [
            f"Host {host}",
            f"  HostName {address}",
            f"  Port {port}",
            f"  User {lab.user}",
            f"  IdentityFile {lab.client_key}",
            f"  UserKnownHostsFile {lab.known_hosts}",
            "  IdentitiesOnly yes",
            "  BatchMode yes",
            "  StrictHostKeyChecking yes",
        ]
        if multiplex:
            config += [
                "  ControlMaster auto",
                f"  ControlPath {tmp}/cm-%C",
                "  ControlPersist 120",
            ]
        else:
            config.append("  ControlMaster no")
    scan = fabric_host(found.hosts, None)
    if scan is not None and scan in lab.hosts:
        for key in fabric_probes(found.fabric):
            by_line.setdefault(shlex.join(probe_words(key)), []).append(scan)
    ssh_config = tmp / f"clush_ssh_config{'_mux' if multiplex else ''}"
    ssh_config.write_text("\n".join(config) + "\n")
    task = task_self()  # this thread's task: resume() runs it here, to its end
    task.set_info("fanout", fanout)
    task.set_info("ssh_options", f"-F {ssh_config}")
    start = time.perf_counter()
    for line, hosts in by_line.items():
        task.shell(line, nodes=NodeSet.fromlist(hosts))
    task.resume()
    wall = time.perf_counter() - start
    sessions = sum(len(h) for h in by_line.values())
    # 1 is a finding's exit for sha256sum and stat (a file missing), not a failure.
    failed = sum(len(nodes) for rc, nodes in task.iter_retcodes() if rc not in (0, 1))
    failed += task.num_timeout()
    ran = sum(len(nodes) for _, nodes in task.iter_retcodes())
    if ran != sessions:  # a comparison with sessions that never ran would flatter clush
        raise RuntimeError(f"clush ran {ran} of {sessions} sessions")
    return {"wall": wall, "commands": len(by_line), "sessions": sessions, "failed": failed}


if __name__ == "__main__":
    main()
