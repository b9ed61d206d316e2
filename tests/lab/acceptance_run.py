"""A synthetic acceptance run: the logs `generated/acceptance/plan.json` asks for, in the real
formats of `tests/fixtures/` (perftest, nccl-tests, dcgmi diag -j, the admission probes as
`clusterforge/lab/fleet.py` renders them), written under a RESULTS_DIR for `clusterforge accept`.

Faults: ``slow`` (cable ID -> GB/s that cable carries: every pair crossing it measures the
slowest cable on its path), ``burn_in_fail`` (host -> (GPU, message)), ``missing`` (log paths
left out); the fleet's own hooks (``unload``, ``pcie_path``, ...) change the probes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.lab.fleet import Fleet

# What a healthy run measures, as fractions of the plan's ceilings: a 4x HDR pair 24.5 of
# 25 GB/s (196 Gb/s), an all-reduce over one HDR HCA per node 23 of 25.
LINE = 0.98
BUS = 0.92


@dataclass
class Run:
    plan: dict[str, Any]
    fleet: Fleet
    slow: dict[str, float] = field(default_factory=dict)
    burn_in_fail: dict[str, tuple[int, str]] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, generated: Path) -> Run:
        plan = json.loads((generated / "acceptance" / "plan.json").read_text(encoding="utf-8"))
        return cls(plan, Fleet.load(generated))

    def logs(self) -> dict[str, str]:
        """Every log of the run, by its path under RESULTS_DIR."""
        out: dict[str, str] = {}
        ceiling = self.plan["ib_write_bw"]["ceiling_gb_s"]
        for round_ in self.plan["ib_write_bw"]["rounds"]:
            for p in round_["pairs"]:
                # A pair over an HCA planned narrower than the fabric runs at its own line.
                line = p.get("ceiling_gb_s", ceiling) * LINE
                gb_s = min([line, *(self.slow.get(c, line) for c in p["cables"])])
                out[p["log"]] = write_bw(p["lids"][0], p["lids"][1], gb_s)
        for step in self.plan["nccl_tests"]["steps"]:
            out[step["log"]] = all_reduce(step["hosts"], step["ceiling_gb_s"] * BUS)
        for node in self.plan["nodes"]:
            host = node["host"]
            out[node["burn_in"]] = dcgmi(node["gpus"], self.burn_in_fail.get(host))
            probes = self.fleet.outputs(host)
            for probe, path in node["probes"].items():
                out[path] = probes[probe]
        return {path: text for path, text in out.items() if path not in self.missing}

    def write(self, results: Path) -> Path:
        for path, text in self.logs().items():
            (results / path).parent.mkdir(parents=True, exist_ok=True)
            (results / path).write_text(text, encoding="utf-8")
        return results


def write_bw(local: int, remote: int, gb_s: float) -> str:
    gbits = gb_s * 8
    return (
        "---------------------------------------------------------------------------------------\n"
        "                    RDMA_Write BW Test\n"
        " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
        " Number of qps   : 1\t\tTransport type : IB\n"
        " Connection type : RC\t\tUsing SRQ      : OFF\n"
        " Link type       : IB\n"
        "---------------------------------------------------------------------------------------\n"
        f" local address: LID {local:#06x} QPN 0x0129 PSN 0x6e3b5c RKey 0x1fffbd VAddr "
        "0x007f5e3c1f2000\n"
        f" remote address: LID {remote:#06x} QPN 0x012a PSN 0x4e0a0a RKey 0x1fffbd VAddr "
        "0x007fa7e1ac0000\n"
        "---------------------------------------------------------------------------------------\n"
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        f" 65536      3742812          {gbits + 0.02:.2f}             {gbits:.2f}  \t\t   "
        "0.374207\n"
        "---------------------------------------------------------------------------------------\n"
    )


def all_reduce(hosts: list[str], busbw: float) -> str:
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: "
             "5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]  # fmt: skip
    rank = 0
    for host in hosts:
        for device in range(8):
            lines.append(
                f"#  Rank {rank:2d} Group  0 Pid {40000 + rank:6d} on {host:>10s} device  "
                f"{device} [0x07] NVIDIA A100-SXM4-80GB"
            )
            rank += 1
    algbw = busbw * rank / (2 * (rank - 1))
    lines += [
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "           8             2     float     sum      -1    45.21    0.00    0.00      0"
        "    44.87    0.00    0.00      0",
        f"  8589934592    2147483648     float     sum      -1   723610  {algbw:6.2f}  "
        f"{busbw:6.2f}      0   723590  {algbw:6.2f}  {busbw:6.2f}      0",
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {busbw / 2:.4f}",
        "#",
    ]
    return "\n".join(lines) + "\n"


def dcgmi(gpus: int, fail: tuple[int, str] | None) -> str:
    def results(test: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for gpu in range(gpus):
            entry: dict[str, Any] = {"gpu_ids": str(gpu), "status": "Pass"}
            if fail and fail[0] == gpu and test == "GPU Memory":
                entry = {"gpu_ids": str(gpu), "status": "Fail", "warnings": [
                    {"error_category": 4, "error_id": 44, "error_severity": 2, "warning": fail[1]}
                ]}  # fmt: skip
            out.append(entry)
        return out

    tests = {
        "Integration": ["PCIe"],
        "Hardware": ["GPU Memory"],
        "Stress": ["Targeted Stress", "Targeted Power", "Memory Bandwidth"],
    }
    body = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {"category": category, "tests": [{"name": n, "results": results(n)} for n in names]}
                for category, names in tests.items()
            ]
        },
        "version": "3.3.5",
    }
    return json.dumps(body, indent=4) + "\n"
