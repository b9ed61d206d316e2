"""The one way clusterforge replaces a file: whole, so a reader never sees half of one.

A folder is replaced the same way (`replace_folder`): built beside the old one and renamed
into its place, so a reader finds the old tree or the new one, never a mix of the two.

A leaf of the standard library alone, beside the error root, so every layer (the compiler,
the audit, draw's callers, the command line) writes through it without importing anything
else of the compiler. A file is written to a temporary name in its own folder and renamed
over the old one: rename(2) within one file system is atomic, so a printer spooling a label
sheet, node_exporter reading a textfile or git reading a rack file sees the old file or the
new one. Errors are the system's (OSError), for the caller to name in its own terms; the
temporary file is never left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def replace(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Make `path` hold `data` (text as UTF-8), its folders made as needed. The new file gets
    `mode` exactly when given, else what a plain create gives (0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        # Plain os calls: a compile replaces thousands of files, and Python's buffered open
        # adds a stat, an isatty ioctl and a seek to each.
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        partial.replace(path)
    except OSError:
        with contextlib.suppress(OSError):  # the first error is the one to report
            partial.unlink()
        raise


def replace_folder(folder: Path, fill: Callable[[Path], T], mode: int | None = None) -> T:
    """Let `fill` write the new tree into a fresh folder beside `folder` (mode 0700, or
    `mode` once filled), then swap it in for `folder`, which may not exist yet; returns what
    `fill` returned. Until the swap `folder` stays as it was, and when anything fails the
    new tree is removed. Only a folder is moved aside: over a file, the rename fails."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent))
    try:
        result = fill(staging)
        if mode is not None:
            staging.chmod(mode)
        if folder.is_dir():
            # Two renames: between them `folder` is briefly absent, never half-written.
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
            folder.rename(old / folder.name)
            staging.rename(folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(folder)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already unless something failed
