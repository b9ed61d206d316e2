"""The compile pipeline end to end: load -> model -> checks -> plan -> targets (no IO after load).

`compile_source` is what the CLI, `diff` and the tests call; writing is `compiler.output`'s job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path

from pydantic import ValidationError

from compiler import checks, targets
from compiler.errors import Diagnostic, SourceError
from compiler.load import Source, load
from compiler.model import Cluster, validate
from compiler.plan import Plan, build

MANIFEST = "MANIFEST.json"

# pydantic error types -> our rule names, so a reader can look a rule up in one vocabulary.
_RULES = {
    "missing": "missing-field",
    "extra_forbidden": "unknown-key",
    "value_error": "invalid-value",
    "enum": "invalid-value",
    "literal_error": "invalid-value",
    "greater_than": "invalid-value",
    "greater_than_equal": "invalid-value",
    "less_than_equal": "invalid-value",
    "too_short": "invalid-value",
}


@dataclass(frozen=True)
class Compiled:
    source: Source
    cluster: Cluster
    plan: Plan
    files: dict[str, bytes]  # path under generated/ -> content, MANIFEST.json included


def model_diagnostics(source: Source, error: ValidationError) -> list[Diagnostic]:
    """pydantic's errors as located diagnostics, one per error."""
    out = []
    for err in error.errors(include_url=False):
        path = tuple(err["loc"])
        rule = _RULES.get(err["type"], "wrong-type")
        if err["type"] == "extra_forbidden":
            message = f"unknown key {path[-1]!r}"
        elif err["type"] == "missing":
            message = f"required key {path[-1]!r} is missing"
        else:
            message = f"{'.'.join(map(str, path))}: {err['msg']} (got {err['input']!r})"
        out.append(Diagnostic(source.where(path), rule, message))
    return out


def check(source: Source) -> Cluster:
    """Model and check `source`; raise SourceError with every problem found."""
    try:
        cluster = validate(source.data)
    except ValidationError as exc:
        raise SourceError(model_diagnostics(source, exc)) from None
    problems = checks.run(cluster, source)
    if problems:
        raise SourceError(problems)
    return cluster


def compile_source(source: Source) -> Compiled:
    cluster = check(source)
    plan = build(cluster)
    files = targets.render_all(plan)
    files[MANIFEST] = manifest(files, source.digest())
    return Compiled(source, cluster, plan, files)


def compile_repo(repo: Path) -> Compiled:
    """Compile `repo/cluster`; raises SourceError (bad input) or TargetError (a bug)."""
    return compile_source(load(repo / "cluster"))


def manifest(files: dict[str, bytes], source_digest: str) -> bytes:
    body = {
        "schema": 1,
        "source_sha256": source_digest,
        "files": {path: sha256(data).hexdigest() for path, data in sorted(files.items())},
    }
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
