"""The one way clusterforge replaces a file: whole, so a reader never sees half of one.

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
from pathlib import Path


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
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):  # the first error is the one to report
            partial.unlink()
        raise
