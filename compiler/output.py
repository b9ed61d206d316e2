"""Stage 6, output: write `generated/` atomically and compare it with a fresh compile.

Writing builds the whole tree beside `generated/` and swaps it in with renames, so a reader
never sees a half-written tree and stale files vanish with the old one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from compiler.errors import OutputError


@dataclass(frozen=True)
class Difference:
    missing: tuple[str, ...]  # compiled, not on disk
    extra: tuple[str, ...]  # on disk, not compiled (stale)
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra or self.changed)

    def summary(self) -> str:
        """'3 files changed (1 added, 1 removed)': the counts an operator reads after a compile."""
        n = len(self.missing) + len(self.extra) + len(self.changed)
        parts = [
            f"{len(x)} {what}"
            for x, what in ((self.missing, "added"), (self.extra, "removed"))
            if x
        ]
        detail = f" ({', '.join(parts)})" if parts else ""
        return f"{n} file{'' if n == 1 else 's'} changed{detail}"

    def lines(self) -> list[str]:
        return (
            [f"missing  {p}" for p in self.missing]
            + [f"stale    {p}" for p in self.extra]
            + [f"differs  {p}" for p in self.changed]
        )


def read_tree(root: Path) -> dict[str, bytes]:
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def compare(root: Path, files: dict[str, bytes]) -> Difference:
    on_disk = read_tree(root)
    return Difference(
        missing=tuple(sorted(set(files) - set(on_disk))),
        extra=tuple(sorted(set(on_disk) - set(files))),
        changed=tuple(sorted(p for p in files if p in on_disk and on_disk[p] != files[p])),
    )


def write(root: Path, files: dict[str, bytes]) -> Difference:
    """Make `root` hold exactly `files`; returns what differed (empty: nothing touched)."""
    difference = compare(root, files)
    if not difference:
        return difference
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.new-", dir=root.parent))
    try:
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        staging.chmod(0o755)
        old = root.parent / f".{root.name}.old-{os.getpid()}"
        if root.exists():
            root.rename(old)
        staging.rename(root)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"cannot write {root}: {exc}") from exc
    return difference
