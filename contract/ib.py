"""InfiniBand link rates as both sides of the contract name them: the plan's `4xHDR` is the
rate `ibstat` reports on a host (200 for 4 lanes of HDR)."""

from __future__ import annotations

# Per-lane data rate in Gb/s by IBTA speed name, as `ibstat`'s Rate is lanes times this.
LANE_GBPS = {"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100}


def link_gbps(width: str, speed: str) -> float:
    """The rate of one link of `width` lanes (`4x`) at `speed` (`HDR`): 200 for 4x HDR."""
    return LANE_GBPS[speed] * int(width.rstrip("x"))
