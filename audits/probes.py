"""The audit's allowlist of probes: `compiler.probes`, the contract shared with the compiler,
which builds the audit account that runs exactly these (`compiler/targets/access.py`)."""

from __future__ import annotations

from compiler.probes import IFACE, PROBES, Probe, ProbeError, build_probes

__all__ = ["IFACE", "PROBES", "Probe", "ProbeError", "build_probes"]
