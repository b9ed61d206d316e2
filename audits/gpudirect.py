"""GPUDirect RDMA and NCCL on a GPU server: what makes NCCL fast, and its silent failures.

The contract's `gpudirect` gives the NCCL settings of /etc/nccl.conf and each GPU's nearest
HCA with the farthest PCIe path type the model allows; the deploy map gives the kernel
modules (nvidia-peermem). Drift (kind `gpudirect`):

- a setting of /etc/nccl.conf other than planned or missing: critical for NCCL_IB_HCA and
  NCCL_SOCKET_IFNAME (the wrong HCA, or a bootstrap over IPoIB or storage), else warning;
- an HCA port named in /etc/nccl.conf (as the host has it) absent from `ibstat` or not
  Active: NCCL would fall back to TCP sockets, the runbook's most expensive silent failure
  (unless the contract plans that port down: a spare's, whose cable is a spare);
- a planned kernel module not loaded (`lsmod`; `-` and `_` are one to modprobe): without
  nvidia-peermem, NCCL stages every transfer through host memory;
- a GPU whose path to its HCA in `nvidia-smi topo -m` is farther than the model allows, or
  whose HCA the matrix does not show (NCCL_NET_GDR_LEVEL turns GPUDirect off beyond it).
"""

from __future__ import annotations

from audits.sink import Facts, Sink
from contract import Host, Severity

# `nvidia-smi topo -m` path types, nearest first (NVML's topology levels).
_NEARNESS = ("PIX", "PXB", "PHB", "NODE", "SYS")
_DERIVED = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")


def hca_ports(value: str) -> list[tuple[str, int | None]]:
    """(device, port or None) of an NCCL_IB_HCA value: `=mlx5_0:1,mlx5_1`; an exclusion list
    (`^mlx5_2`) names no HCA to use, so none."""
    value = value.strip().lstrip("=")
    if not value or value.startswith("^"):
        return []
    out: list[tuple[str, int | None]] = []
    for entry in value.split(","):
        device, _, port = entry.strip().partition(":")
        out.append((device, int(port) if port.isdigit() else None))
    return out


def check(c: Host, facts: Facts, sink: Sink) -> None:
    """Check NCCL's config, its HCAs, the modules and the GPU<->HCA paths of one host."""
    plan = c.gpudirect
    if plan is None:
        return  # the check applies to hosts NCCL runs on only
    seen: dict[str, str] = facts["nccl_conf"]["settings"]
    for key, want in sorted(plan.nccl.items()):
        have = seen.get(key)
        if have != want:
            severity = Severity.CRITICAL if key in _DERIVED else Severity.WARNING
            text = f"/etc/nccl.conf sets {key}={have}, planned {want}"
            if have is None:
                text = f"/etc/nccl.conf does not set {key} (planned {want})"
            sink.drift(f"nccl[{key}]", want, have, severity, text)
    states = {(ca["name"], p["port"]): p["state"] for ca in facts["ibstat"] for p in ca["ports"]}
    named = seen.get("NCCL_IB_HCA", plan.nccl.get("NCCL_IB_HCA", ""))
    # A port the contract plans down (its cable a spare) carries no NCCL traffic by design.
    down = {(p.device, p.port) for p in c.ib_ports if p.state != "Active"}
    for device, port in hca_ports(named):
        if any(d == device and port in (None, p) for d, p in down):
            continue
        found = [s for (d, p), s in states.items() if d == device and port in (None, p)]
        where = f"nccl.hca[{device}{'' if port is None else f':{port}'}]"
        if not found:
            text = f"{device} named in /etc/nccl.conf is absent: NCCL falls back to TCP sockets"
            sink.drift(where, "Active", None, Severity.CRITICAL, text)
        elif "Active" not in found:
            text = (
                f"{device} named in /etc/nccl.conf is {', '.join(found)}, not Active: "
                "NCCL falls back to TCP sockets"
            )
            sink.drift(where, "Active", found[0], Severity.CRITICAL, text)
    loaded = {m["module"].replace("-", "_") for m in facts["lsmod"]}
    for module in c.deploy.kernel_modules if c.deploy else ():
        if module.replace("-", "_") not in loaded:
            text = f"kernel module {module} is not loaded"
            sink.drift(f"modules[{module}]", "loaded", None, Severity.CRITICAL, text)
    paths = {g["index"]: g["paths"] for g in facts["nvidia_smi_topo"]["gpus"]}
    for entry in plan.affinity:
        gpu, hca, want = entry.gpu, entry.hca, entry.path
        have = paths.get(gpu, {}).get(hca)
        where = f"affinity[GPU{gpu}].{hca}"
        if have is None:
            text = f"GPU {gpu}: nvidia-smi topo -m shows no path to {hca}"
            sink.drift(where, want, None, Severity.CRITICAL, text)
        elif have not in _NEARNESS or _NEARNESS.index(have) > _NEARNESS.index(want):
            text = f"GPU {gpu} reaches {hca} over {have}, planned {want} at worst"
            sink.drift(where, want, have, Severity.CRITICAL, text)
