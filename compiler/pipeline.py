"""The compile pipeline end to end: load -> model -> checks -> plan -> targets (no IO after load).

`compile_source` is what the CLI, `diff` and the tests call; writing is `compiler.output`'s job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from hashlib import sha256
from pathlib import Path

from pydantic import ValidationError

from compiler import checks, deploy, output, targets
from compiler.errors import Diagnostic, SourceError
from compiler.load import Source, load
from compiler.model import Cluster, validate
from compiler.output import read_tree
from compiler.plan import Plan, build
from contract import Deploy

MANIFEST = output.MANIFEST
CARRIED = ("dns/",)  # generated/ files whose next version depends on the last (SOA serials)

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
    deploys: dict[str, Deploy]  # host -> its generated/deploy/<host>.json
    notices: list[str] = field(default_factory=list)  # for the operator: the CLI prints them


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


def compile_source(
    source: Source,
    environ: Mapping[str, str] | None = None,
    previous: Mapping[str, bytes] | None = None,
) -> Compiled:
    """Compile `source`; secrets come from `environ` and the files cluster/ names, and only
    when `environ` is given (the CLI passes os.environ), else the targets use placeholders.
    `previous` is the generated/ this compile replaces: DNS serials continue from its zones."""
    cluster = check(source)
    secrets, notices = read_secrets(source, cluster, environ)
    carried = {
        path: data.decode() for path, data in (previous or {}).items() if path.startswith(CARRIED)
    }
    plan = replace(build(cluster), secrets=secrets, previous=carried)
    files = targets.render_all(plan)
    deploys = deploy.deploy_map(plan, files, source)
    files |= {path: text.encode() for path, text in deploy.deploy_files(deploys).items()}
    files = dict(sorted(files.items()))
    files[MANIFEST] = manifest(files, source.digest())
    return Compiled(source, cluster, plan, files, deploys, notices)


def compile_repo(repo: Path, environ: Mapping[str, str] | None = None) -> Compiled:
    """Compile `repo/cluster`, continuing from `repo/generated`; raises SourceError (bad
    input) or TargetError (a bug)."""
    generated = repo / "generated"
    # Only what a target continues from: reading all of generated/ would cost as much again.
    previous = {
        f"{folder}{path}": data
        for folder in CARRIED
        for path, data in read_tree(generated / folder).items()
    }
    return compile_source(load(repo / "cluster"), environ, previous)


# crypt(3): $id$[params$]salt$hash, the hash part 22 characters (MD5) or more.
_CRYPT = re.compile(r"\$[0-9a-z]+\$(?:[^$\s]+\$)+[./0-9A-Za-z]{22,}")


def read_secrets(
    source: Source, cluster: Cluster, environ: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """The root password hash from the environment variable, else the file, that
    provisioning.yaml names; raises SourceError when what is there is not a crypt(3) hash."""
    spec, at = cluster.provisioning.root_password_hash, ("provisioning", "root_password_hash")
    tried = " or ".join(x for x in (spec.env and f"${spec.env}", spec.file) if x)
    found: tuple[str, str, str] | None = None  # (value, where from, key in cluster/)
    if environ is not None and spec.env and environ.get(spec.env):
        found = environ[spec.env].strip(), f"${spec.env}", "env"
    elif environ is not None and spec.file and Path(spec.file).exists():
        try:
            found = Path(spec.file).read_text().strip(), spec.file, "file"
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(
                [Diagnostic(source.where((*at, "file")), "unreadable-secret", str(exc))]
            ) from None
    if found is None:
        return {}, [
            "root password hash: placeholder used (the tree in git never holds it); for "
            f"installable kickstarts set {tried} and compile --out DIR"
        ]
    value, origin, key = found
    if not _CRYPT.fullmatch(value):
        message = f"{origin} is not a crypt(3) hash like $6$salt$...; never a plain password"
        raise SourceError([Diagnostic(source.where((*at, key)), "invalid-value", message)])
    notice = f"root password hash read from {origin}: keep generated/kickstart/ out of git"
    return {"root_password_hash": value}, [notice]


def manifest(files: dict[str, bytes], source_digest: str) -> bytes:
    body = {
        "schema": 1,
        "source_sha256": source_digest,
        "files": {path: sha256(data).hexdigest() for path, data in sorted(files.items())},
    }
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
