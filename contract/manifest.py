"""`generated/MANIFEST.json`: the sha256 of every generated file, written last by a compile,
so that its presence and its digests say the tree is whole. The compiler writes it; every
reader of generated/ (the audit, the lab, a bundle) checks a tree against it here first.

A write holds an exclusive `flock` on a lock file beside the tree (`.generated.lock`, which
git ignores); a reader takes it shared, so it waits for a write under way to end.
`load` reads a tree's manifest for the readers that need no compiler, and `seal` writes one
for a tree made of compiled files (the lab's view of some hosts), as a compile makes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from common import atomic
from common.errors import OutputError
from contract.record import SCHEMA, dumps

MANIFEST = "MANIFEST.json"  # written last: its presence says the tree is whole


def lock_path(root: Path) -> Path:
    """The lock file of the tree at `root`: beside it, never inside (a tree holds exactly
    what was compiled), named so that the repository's .gitignore covers it."""
    return root.with_name(f".{root.name}.lock")


@contextmanager
def locked(root: Path, exclusive: bool) -> Iterator[None]:
    """Hold the tree's lock. A reader that cannot make the lock file (a read-only checkout)
    reads without it: no write can be under way there either."""
    try:
        if exclusive:
            root.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path(root), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exclusive:
            raise OutputError(f"cannot write {root}: {exc}") from exc  # nor beside it
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def walk(root: Path) -> dict[str, str]:
    """Every file below `root`: relative path -> path (os.scandir: a `compile --check` looks at
    every generated file, and pathlib's rglob with a stat each cost as much as the bytes)."""
    out: dict[str, str] = {}
    folders = [(os.fspath(root), "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append((entry.path, f"{prefix}{entry.name}/"))
            elif entry.is_file():
                out[prefix + entry.name] = entry.path
    return out


def get(path: str) -> bytes:
    """A file's bytes: plain os calls (Python's buffered open adds a stat, an isatty ioctl
    and a seek to each of thousands of files)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def read(fd: int, size: int) -> bytes:
    """The `size` bytes of an open file, in as many reads as its file system takes."""
    chunks: list[bytes] = []
    while size and (chunk := os.read(fd, size)):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def verify(root: Path) -> None:
    """Check that `root` is a whole compiled tree before reading it: its MANIFEST.json there,
    every file it lists holding the listed sha256, no file it does not list. Raises
    OutputError naming the first file that is not so: a reader (the audit, the lab, a bundle)
    must not take a half-written or hand-edited tree for the compiled one."""
    manifest = root / MANIFEST
    with locked(root, exclusive=False):
        try:
            listed = json.loads(get(os.fspath(manifest)))["files"]
            on_disk = walk(root)
        except FileNotFoundError:
            raise OutputError(
                f"{manifest} is missing: {root} is not a whole compiled tree (a compile was "
                "cut short); run `clusterforge compile`"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise OutputError(f"cannot read {manifest}: {exc}") from None
        if not isinstance(listed, dict):
            raise OutputError(f"{manifest}: 'files' is not a mapping of paths to sha256")
        for rel in sorted((set(listed) | set(on_disk)) - {MANIFEST}):
            if rel not in on_disk:
                problem = f"is missing; {MANIFEST} lists it"
            elif rel not in listed:
                problem = f"is not in {MANIFEST}"
            else:
                try:
                    digest = hashlib.sha256(get(on_disk[rel])).hexdigest()
                except OSError as exc:
                    raise OutputError(f"cannot read {root / rel}: {exc}") from None
                if digest == listed[rel]:
                    continue
                problem = f"does not match its sha256 in {MANIFEST}"
            raise OutputError(
                f"{root / rel} {problem}: {root} is not the tree `clusterforge compile` "
                "wrote; compile again (and commit), never edit generated files"
            )


def source_sha256(root: Path) -> str | None:
    """The manifest's digest of the `cluster/` the tree was compiled from; None without one."""
    try:
        value = json.loads(get(os.fspath(root / MANIFEST))).get("source_sha256")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        raise OutputError(f"cannot read {root / MANIFEST}: {exc}") from None
    return None if value is None else str(value)


class Manifest(NamedTuple):
    source_sha256: str
    files: dict[str, str]  # path under the tree -> sha256


def load(root: Path) -> Manifest:
    """The manifest of the tree `root`; raises OSError or ValueError for one that is not."""
    data: Any = json.loads((root / MANIFEST).read_bytes())
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ValueError(f"{root / MANIFEST}: not a manifest of files")
    return Manifest(
        str(data.get("source_sha256", "")), {str(k): str(v) for k, v in data["files"].items()}
    )


def render(digests: Mapping[str, str], source_sha256: str) -> bytes:
    """MANIFEST.json's bytes for a tree of files with these sha256s: the one writer of the
    format, for a compile and for a tree made of compiled files alike."""
    body = {
        "schema": SCHEMA,
        "source_sha256": source_sha256,
        "files": dict(sorted(digests.items())),
    }
    return dumps(body).encode()  # every path and digest is ASCII


def seal(root: Path, source_sha256: str) -> None:
    """Write the manifest of every file below `root` (MANIFEST.json itself aside)."""
    files = {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path != root / MANIFEST
    }
    atomic.replace(root / MANIFEST, render(files, source_sha256))
