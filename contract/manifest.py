"""`generated/MANIFEST.json`: every file of a compiled tree with its sha256, and the digest of
the `cluster/` it was compiled from; written last, so its presence says the tree is whole.

    {"schema": 1, "source_sha256": "<hex>", "files": {"<path under generated/>": "<hex>"}}

The compiler writes it (`compiler/pipeline.py`, `compiler/output.py` checks a tree against
it); `read` is for the readers that need no compiler, and `seal` for a tree made of compiled
files (the lab's view of some hosts) to carry one as a compile makes it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from common import atomic

MANIFEST = "MANIFEST.json"
SCHEMA = 1


class Manifest(NamedTuple):
    source_sha256: str
    files: dict[str, str]  # path under the tree -> sha256


def read(root: Path) -> Manifest:
    """The manifest of the tree `root`; raises OSError or ValueError for one that is not."""
    data: Any = json.loads((root / MANIFEST).read_bytes())
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ValueError(f"{root / MANIFEST}: not a manifest of files")
    return Manifest(
        str(data.get("source_sha256", "")), {str(k): str(v) for k, v in data["files"].items()}
    )


def seal(root: Path, source_sha256: str) -> None:
    """Write the manifest of every file below `root` (MANIFEST.json itself aside)."""
    files = {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path != root / MANIFEST
    }
    body = {"schema": SCHEMA, "source_sha256": source_sha256, "files": dict(sorted(files.items()))}
    # The bytes of the compiler's own: sorted keys, two-space indent, a final newline.
    atomic.replace(root / MANIFEST, json.dumps(body, indent=2, sort_keys=True) + "\n")
