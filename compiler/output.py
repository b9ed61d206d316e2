"""Stage 6, output: write `generated/` and compare it with a fresh compile.

Writing touches only the files whose bytes changed (a one-rack change rewrites a few dozen
files, not eighteen thousand), and a reader never sees a half-written tree:
  - a first write builds the whole tree beside `generated/` and renames it into place;
  - later writes remove `MANIFEST.json` first, replace each changed file whole by rename (a
    file is always its old or its new bytes), delete stale files, and rename the new manifest
    in last. A tree whose files match their manifest's sha256 is complete; no manifest means a
    write is under way (or was interrupted: compile again).
A write holds an exclusive `flock` on a lock file beside the tree (`.generated.lock`, which
git ignores) from its comparison to its manifest, so two compiles at once take turns: without
it each removes what the other has already removed and stops half way, the manifest gone.
Readers (`compare`, `verify`) take it shared, so they wait for a write under way to end.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from common import atomic
from common.errors import OutputError

# The manifest, the tree's lock and the check of a whole tree are the readers' too (the
# audit reads generated/ through the contract, never through the compiler).
from contract import manifest
from contract.manifest import MANIFEST, lock_path, verify

__all__ = ["MANIFEST", "Difference", "compare", "lock_path", "read_tree", "verify", "write"]


class Difference(NamedTuple):
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
    """Every file below `root` by its relative path, sorted; raises OutputError."""
    try:
        return {rel: manifest.get(path) for rel, path in sorted(manifest.walk(root).items())}
    except OSError as exc:
        raise OutputError(f"cannot read {root}: {exc}") from exc


def compare(root: Path, files: dict[str, bytes]) -> Difference:
    """What differs between `files` and the tree at `root`: a file on both sides is read only
    when its size matches, a stale one not at all. Raises OutputError: a file the operator may
    not read is the set-up's, like one that cannot be written."""
    with manifest.locked(root, exclusive=False):
        return _compare(root, files)


def _compare(root: Path, files: dict[str, bytes]) -> Difference:
    try:
        on_disk = manifest.walk(root)
        changed = [p for p in files if p in on_disk and not _holds(on_disk[p], files[p])]
    except OSError as exc:
        raise OutputError(f"cannot read {root}: {exc}") from exc
    return Difference(
        missing=tuple(sorted(set(files) - set(on_disk))),
        extra=tuple(sorted(set(on_disk) - set(files))),
        changed=tuple(sorted(changed)),
    )


def _holds(path: str, data: bytes) -> bool:
    """Whether the file at `path` holds exactly `data`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.fstat(fd).st_size == len(data) and manifest.read(fd, len(data)) == data
    finally:
        os.close(fd)


def write(root: Path, files: dict[str, bytes]) -> Difference:
    """Make `root` hold exactly `files`; returns what differed (empty: nothing touched)."""
    with manifest.locked(root, exclusive=True):
        return _write(root, files)


def _write(root: Path, files: dict[str, bytes]) -> Difference:
    difference = _compare(root, files)
    if not difference:
        return difference
    try:
        if not root.is_dir():
            _write_whole(root, files)
            return difference
        listing = files.get(MANIFEST)
        (root / MANIFEST).unlink(missing_ok=True)
        for rel in (*difference.missing, *difference.changed):
            if rel != MANIFEST:
                atomic.replace(root / rel, files[rel])
        for rel in difference.extra:
            (root / rel).unlink()
            _prune(root, (root / rel).parent)
        if listing is not None:
            atomic.replace(root / MANIFEST, listing)
    except OSError as exc:
        raise OutputError(f"cannot write {root}: {exc}") from exc
    return difference


def _put(path: str, data: bytes) -> None:
    """Write a new file: plain os calls, since a first compile writes thousands of files and
    Python's buffered open adds a stat, an isatty ioctl and a seek to each."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _prune(root: Path, folder: Path) -> None:
    """Remove `folder` and its parents up to `root` while they are empty."""
    while folder != root and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _write_whole(
    root: Path, files: Mapping[str, bytes], modes: Mapping[str, int] | None = None
) -> None:
    """A new tree, built beside `root` and swapped in (files with `modes` chmodded)."""

    def fill(staging: Path) -> None:
        # Paths as text: a Path made and split per file cost more than writing it (a first
        # compile writes tens of thousands).
        base = str(staging)
        made: set[str] = set()  # one mkdir per folder, not per file
        for rel, data in files.items():
            path = f"{base}/{rel}"
            folder = path.rpartition("/")[0]
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            _put(path, data)
            if modes and rel in modes:
                os.chmod(path, modes[rel])

    atomic.replace_folder(root, fill, 0o755)


def replace_tree(root: Path, files: Mapping[str, bytes], modes: Mapping[str, int]) -> None:
    """Replace the build folder `root` whole with `files` (a bundle): the new tree is built
    beside it and swapped in, so no reader sees a mix; raises OutputError."""
    try:
        _write_whole(root, files, modes)
    except OSError as exc:
        raise OutputError(f"cannot write {root}: {exc}") from exc
