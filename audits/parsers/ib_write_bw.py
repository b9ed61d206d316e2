"""Parser for the client side of `ib_write_bw` (perftest): the RDMA write bandwidth of a pair.

Output: a banner (`RDMA_Write BW Test`, `Device : mlx5_0`, ...), the two ends' addresses as
`local address: LID 0x1041 QPN ...` and `remote address: LID 0x1082 ...`, then a table whose
header names the unit, `BW peak[Gb/sec] BW average[Gb/sec]` with `--report_gbits` (decimal,
as links are rated) or `[MB/sec]` without (perftest's MB is 2^20 bytes), and one row per
message size (newer perftest says `[MiB/sec]`, the same unit). The LIDs say which ports ran
the test: with the plan's static LIDs, which hosts. Over RoCE there are no LIDs: perftest
prints `LID 0000` (its `%#04x` of 0), read as 0, and the GIDs name the ends instead.
Output without a result row (a failed connection: `Couldn't connect to ...`, `Failed to
modify QP ...`) is an error naming the first line that says why.

Schema (bandwidths in GB/s, 10^9 bytes per second, of the largest message size):

    {"device": str, "local_lid": int, "remote_lid": int, "bytes": int,
     "peak_gb_s": float, "average_gb_s": float}

Example:

    $ ib_write_bw -d mlx5_0 -i 1 -F --report_gbits -D 10 10.80.2.11
     ...
     local address: LID 0x1041 QPN 0x0129 PSN 0x6e3b5c RKey 0x1fffbd VAddr 0x007f5e3c1f2000
     remote address: LID 0x1082 QPN 0x012a PSN 0x4e0a0a RKey 0x1fffbd VAddr 0x007fa7e1ac0000
     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536      3742812          196.21             196.19               0.374207

    {"device": "mlx5_0", "local_lid": 4161, "remote_lid": 4226, "bytes": 65536,
     "peak_gb_s": 24.526, "average_gb_s": 24.524}
"""

from __future__ import annotations

import re
from typing import TypedDict

from contract.probes.base import ParseError

PROBE = "ib_write_bw"

_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
# perftest prints a LID with %#04x: 0 (RoCE has no LIDs) comes out as `0000`, without `0x`.
_ADDRESS = re.compile(r"(local|remote) address: LID (0x[0-9a-fA-F]+|0+)\b")
_HEADER = re.compile(
    r"#bytes\s+#iterations\s+BW peak\[(Gb|MB|MiB)/sec\]\s+BW average\[(Gb|MB|MiB)/sec\]"
)
_ROW = re.compile(r"(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)(?:\s+\S+)?")
_FAILURE = re.compile(r"(?i)(couldn't|failed|unable|error)")
_TO_GB_S = {"Gb": 1 / 8, "MB": 2**20 / 1e9, "MiB": 2**20 / 1e9}  # perftest's MB is MiB


class WriteBw(TypedDict):
    device: str
    local_lid: int
    remote_lid: int
    bytes: int
    peak_gb_s: float
    average_gb_s: float


def parse(text: str) -> WriteBw:
    """Parse the client's output of one `ib_write_bw` run."""
    if not text.strip():
        raise ParseError(PROBE, 0, "empty output: the test did not run")
    device = None
    lids: dict[str, int] = {}
    unit = None
    row: tuple[int, re.Match[str]] | None = None
    failure: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if (m := _DEVICE.search(line)) and device is None:
            device = m[1]
        for end, lid in _ADDRESS.findall(line):
            lids[end] = int(lid, 16)
        if m := _HEADER.search(line):
            unit = m[2]
        elif unit is not None and (m := _ROW.fullmatch(line)):
            row = (number, m)
        elif failure is None and _FAILURE.search(line):
            failure = (number, line)
    if row is None:
        if failure is not None:
            raise ParseError(PROBE, failure[0], f"no result: {failure[1]}")
        raise ParseError(PROBE, 0, "no result row (cut off?)")
    if device is None or set(lids) != {"local", "remote"}:
        raise ParseError(PROBE, 0, "no device or no local and remote LID in the banner")
    assert unit is not None
    scale = _TO_GB_S[unit]
    match = row[1]
    return {
        "device": device,
        "local_lid": lids["local"],
        "remote_lid": lids["remote"],
        "bytes": int(match[1]),
        "peak_gb_s": round(float(match[3]) * scale, 3),
        "average_gb_s": round(float(match[4]) * scale, 3),
    }
