"""A device's snapshot: what its placed files held when the audit last read them, as text.

The audit writes one per snapshotted device and run, into its recording and its report folder:

    snapshots/<device>/files/<path on the device, without the leading />
    snapshots/<device>/<name>          the output of a probe that is a snapshot (its
                                       `Probe.snapshot`: `running-config`, a switch's
                                       running configuration: FRR's on Cumulus, EOS's own)

(e.g. `snapshots/stor01/files/etc/frr/frr.conf`, `snapshots/stor01/running-config`). In
memory a snapshot maps each file's path on the device (`/etc/frr/frr.conf`) and each probe
snapshot's name (`running-config`, no leading `/`) to its bytes. The change plan
(`compiler.change`) reads the latest to refuse a device whose files are not what the base
commit generated, and `clusterforge audit history` shows what changed between two runs'
snapshots, device by device, the running configuration as one more text.
Lines that change without anyone changing anything (a timestamp a device writes into its
running configuration) are masked before comparing, as Oxidized does.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path

FOLDER = "snapshots"
FILES = "files"
RUNNING = "running-config"  # the snapshot name of a switch's running configuration (FRR's, EOS's)
MASKED = b"<masked>"

# Volatile lines, whole lines: EOS's and IOS-style running-config headers, which carry the
# time the config was shown or last changed (Oxidized's models drop the same lines); FRR's
# header lines too, which carry nothing (FRR 8.4 prints no timestamp; its `frr version` line
# is kept, a version change being a real one).
VOLATILE = re.compile(
    rb"^(! (Time|Command|device|Startup-config last modified at)\b.*"
    rb"|! Last configuration change at .*"
    rb"|Building configuration\.\.\."
    rb"|Current configuration ?:( \d+ bytes)?)$",
    re.MULTILINE,
)


def mask(text: bytes) -> bytes:
    """`text` with its volatile lines replaced by one marker each."""
    return VOLATILE.sub(MASKED, text)


def relative(device: str, path: str) -> str:
    """Where a device's file's snapshot (or a probe snapshot's, a name without `/`) lives,
    under a recording or report folder."""
    if not path.startswith("/"):
        return f"{FOLDER}/{device}/{path}"
    return f"{FOLDER}/{device}/{FILES}/{path.lstrip('/')}"


def read(folder: Path) -> dict[str, dict[str, bytes]]:
    """Every device's snapshot under `folder` (a report folder or recording, or the
    `snapshots/` folder itself), each by its path on the device."""
    root = folder / FOLDER if (folder / FOLDER).is_dir() else folder
    out: dict[str, dict[str, bytes]] = {}
    if not root.is_dir():
        return out
    for device in sorted(p for p in root.iterdir() if p.is_dir()):
        files = device / FILES
        out[device.name] = {
            "/" + f.relative_to(files).as_posix(): f.read_bytes()
            for f in sorted(files.rglob("*"))
            if f.is_file() and not f.is_symlink()
        } | {
            f.name: f.read_bytes()
            for f in sorted(device.iterdir())
            if f.is_file() and not f.is_symlink()
        }
    return out


def diff_lines(old: bytes, new: bytes, limit: int = 20) -> list[str]:
    """The lines that differ, volatile ones masked: `-line` as `old` has it, `+line` as
    `new` does; past `limit`, one line counting the rest."""
    lines = [
        line
        for line in difflib.unified_diff(
            mask(old).decode(errors="replace").splitlines(),
            mask(new).decode(errors="replace").splitlines(),
            lineterm="",
            n=0,
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    if len(lines) > limit:
        return [*lines[:limit], f"… {len(lines) - limit} more lines"]
    return lines


def changed(
    old: Mapping[str, bytes], new: Mapping[str, bytes]
) -> dict[str, tuple[bytes | None, bytes | None]]:
    """The files of one device that differ between two snapshots, masked: path -> (old, new),
    None where a side lacks the file."""
    return {
        p: (old.get(p), new.get(p))
        for p in sorted(old.keys() | new.keys())
        if (old.get(p) is None) != (new.get(p) is None)
        or mask(old.get(p) or b"") != mask(new.get(p) or b"")
    }
