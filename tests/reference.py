"""The tests' compiled reference: a repository's cluster/ compiled into a folder of its own."""

from __future__ import annotations

from pathlib import Path

from compiler import output, pipeline


def compile_reference(repo: Path, into: Path) -> Path:
    """Compile `repo`'s cluster/ into `into/generated/` (never into the repository itself);
    returns `into`, a folder to pass as `-C` to the audit."""
    output.write(into / "generated", pipeline.compile_repo(repo).files)
    return into
