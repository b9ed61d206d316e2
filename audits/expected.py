"""Stage 1 of the audit: read what the compiler expects, `generated/expected/`, and name it.

The contract itself is documented in `compiler/targets/expected.py` and `contract/`; this
module only reads it (schema 1), with each host's `generated/deploy/<host>.json` under the key
"deploy", and names where it came from: the git commit checked out in the repository, if
it is in one, and `generated/MANIFEST.json`'s `source_sha256` (the digest of the `cluster/`
it was compiled from), so a report says which expectations it was measured against. A tree
whose manifest is missing or does not match its files is refused (`compiler.output.verify`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from audits.model import AuditError
from common.errors import OutputError
from compiler import output

SCHEMA = 1


@dataclass(frozen=True)
class Expectations:
    hosts: dict[str, dict[str, Any]]  # host name -> its expected/hosts/<host>.json
    fabric: dict[str, Any]  # expected/fabric.json
    commit: str | None  # the repository's HEAD, None outside git
    source_sha256: str | None  # from generated/MANIFEST.json


def read(repo: Path) -> Expectations:
    """Read `repo/generated/expected/`; raises AuditError when it is missing or malformed."""
    generated = repo / "generated"
    folder = generated / "expected"
    if not (folder / "fabric.json").is_file():
        raise AuditError(f"no {folder}/fabric.json: run `clusterforge compile` first")
    try:
        output.verify(generated)  # a half-written or hand-edited tree is not the contract
    except OutputError as exc:
        raise AuditError(str(exc)) from None
    hosts = {}
    for path in sorted((folder / "hosts").glob("*.json")):
        contract = _json(path)
        if contract.get("host") != path.stem:
            raise AuditError(f"{path}: 'host' is {contract.get('host')!r}, not {path.stem!r}")
        # The host's deploy map (files and units its services need) rides along as "deploy".
        placed = generated / "deploy" / path.name
        hosts[path.stem] = contract | ({"deploy": _json(placed)} if placed.is_file() else {})
    manifest = generated / "MANIFEST.json"
    source = _json(manifest).get("source_sha256") if manifest.is_file() else None
    return Expectations(hosts, _json(folder / "fabric.json"), _commit(repo), source)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema", SCHEMA) != SCHEMA:
        raise AuditError(f"{path}: not a schema {SCHEMA} object")
    return data


def _commit(repo: Path) -> str | None:
    # Read-only on purpose: `is_dirty` would refresh the index of a checkout others share.
    try:
        with git.Repo(repo, search_parent_directories=True) as r:
            return r.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None  # not in git, or no commit yet
