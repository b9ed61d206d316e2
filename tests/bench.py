"""Benchmarks (`nox -s bench`): speed and memory of the compile, as medians and ratios.

Nothing here asserts a timing: the machines are shared and noisy. It prints
- cold start: `clusterforge validate` and `compile --check` vs a bare `python -c pass`;
- the in-process stages on the reference cluster (load, model+checks, plan, targets);
- scaling: the same on a cluster grown to about 1000 GPU servers, with the ratio;
- peak memory of a compile (ru_maxrss of a child process);
- the drift audit of the reference fleet replayed from a recording (collect, parse, compare,
  render), the part of an audit that is ours rather than the network's.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from audits import expected  # noqa: E402
from audits import pipeline as audit  # noqa: E402
from audits.collect import ReplayCollector  # noqa: E402
from clusterforge.lab.fleet import Fleet  # noqa: E402
from compiler import pipeline, targets  # noqa: E402
from compiler.load import Source, load  # noqa: E402
from compiler.plan import build  # noqa: E402


def median_s(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold(argv: list[str], runs: int = 5) -> float:
    return median_s(lambda: subprocess.run(argv, cwd=REPO, check=True, capture_output=True), runs)


def grown(source: Source, racks: int, per_rack: int = 20) -> Source:
    """The reference cluster plus `racks` GPU racks of `per_rack` servers (2U, so they fit a
    48U rack) with their switches, fresh identities, and a 3:1 oversubscription allowance."""
    template = next(r for r in source.data["racks"] if r["name"] == "r01")
    node0 = template["nodes"][0]
    extra = []
    for i in range(racks):
        rid = 26 + i

        def ident(kind: int, n: int, rid: int = rid) -> str:
            return f"02:{kind:02x}:00:{rid:02x}:{n // 256:02x}:{n % 256:02x}"

        switches = tuple(
            {**sw, "name": f"{sw['name'][:4]}{rid:03d}", "u": 48 - k,
             "serial": f"BSW{rid:04d}{k}", "mac": ident(9, k),
             **({"guid": f"0x0300000000{rid:04x}{k:02x}"} if "guid" in sw else {})}
            for k, sw in enumerate(template["switches"])
        )  # fmt: skip
        nodes = tuple(
            {**node0, "name": f"x{rid:03d}n{slot:02d}", "slot": slot, "u": 2 + (slot - 1) * 2,
             "serial": f"BENCH{rid:04d}{slot:02d}",
             "mac": {k: ident(j, slot) for j, k in enumerate(node0["mac"])},
             "guid": f"0x02000000{rid:04x}{slot:04x}"}
            for slot in range(1, per_rack + 1)
        )  # fmt: skip
        extra.append(
            {"name": f"x{rid:03d}", "id": rid, "row": "D", "col": rid, "height_u": 48,
             "switches": switches, "nodes": nodes}
        )  # fmt: skip
    hardware = dict(source.data["hardware"])
    servers = dict(hardware["servers"])
    servers["hgx-a100"] = {**servers["hgx-a100"], "height_u": 2}
    hardware["servers"] = servers
    fabric = {**source.data["fabric"], "max_oversubscription": 3.0}
    data = {**source.data, "hardware": hardware, "fabric": fabric}
    return Source({**data, "racks": (*source.data["racks"], *extra)}, source.locations)


def stages(source: Source, runs: int) -> dict[str, float]:
    cluster = pipeline.check(source)
    plan = build(cluster)
    return {
        "model+checks": median_s(lambda: pipeline.check(source), runs),
        "plan": median_s(lambda: build(cluster), runs),
        "targets": median_s(lambda: targets.render_all(plan), runs),
    }


def main() -> None:
    py = sys.executable
    cli = [py, "-m", "clusterforge.cli"]
    bare = cold([py, "-c", "pass"])
    validate = cold([*cli, "validate"])
    check = cold([*cli, "compile", "--check"], runs=3)
    print(f"cold start  python -c pass      {bare * 1000:8.0f} ms")
    print(
        f"cold start  validate            {validate * 1000:8.0f} ms  ({validate / bare:.1f}x bare)"
    )
    print(f"cold start  compile --check     {check * 1000:8.0f} ms  ({check / bare:.1f}x bare)")

    load_s = median_s(lambda: load(REPO / "cluster"), 5)
    source = load(REPO / "cluster")
    ref = stages(source, 5)
    print(f"reference   load                {load_s * 1000:8.1f} ms")
    for name, s in ref.items():
        print(f"reference   {name:<20}{s * 1000:8.1f} ms")

    big = grown(source, 39)  # rack ids 26-64 (a spine has 64 ports): 124 + 39 * 20 servers
    hosts = len(build(pipeline.check(big)).hosts)
    scaled = stages(big, 3)
    for name, s in scaled.items():
        print(f"{hosts} hosts {name:<20}{s * 1000:8.1f} ms  ({s / ref[name]:.1f}x reference)")

    child = subprocess.run(
        [py, "-c", "import resource, sys; from clusterforge.cli import main; "
         "main(['compile', '--check']); "
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    peak_kib = int(child.stdout.strip().splitlines()[-1])
    print(f"peak memory compile --check      {peak_kib / 1024:8.1f} MiB")

    with tempfile.TemporaryDirectory() as tmp:
        recording = Fleet.load(REPO / "generated").record(Path(tmp) / "recording")
        expectations = expected.read(REPO)
        hosts = len(expectations.hosts)
        replay = median_s(lambda: audit.audit(expectations, ReplayCollector(recording), None), 3)
        print(f"audit replay ({hosts} hosts)       {replay * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
