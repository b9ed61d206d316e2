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
from compiler.model import Cluster, SecretSource, validate
from compiler.plan import Plan, build
from compiler.targets.alertmanager import WEBHOOK
from compiler.targets.monitoring import IPMI_PASSWORD
from contract import Deploy

MANIFEST = output.MANIFEST

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


def compile_source(source: Source, environ: Mapping[str, str] | None = None) -> Compiled:
    """Compile `source`; secrets come from `environ` and the files cluster/ names, and only
    when `environ` is given (the CLI passes os.environ), else the targets use placeholders."""
    cluster = check(source)
    secrets, notices = read_secrets(source, cluster, environ)
    plan = replace(build(cluster), secrets=secrets)
    files = targets.render_all(plan)
    deploys = deploy.deploy_map(plan, files, source)
    files |= {path: text.encode() for path, text in deploy.deploy_files(deploys).items()}
    files = dict(sorted(files.items()))
    files[MANIFEST] = manifest(files, source.digest())
    return Compiled(source, cluster, plan, files, deploys, notices)


def compile_repo(repo: Path, environ: Mapping[str, str] | None = None) -> Compiled:
    """Compile `repo/cluster`; raises SourceError (bad input) or TargetError (a bug)."""
    return compile_source(load(repo / "cluster"), environ)


# crypt(3): $id$[params$]salt$hash, the hash part 22 characters (MD5) or more.
_CRYPT = re.compile(r"\$[0-9a-z]+\$(?:[^$\s]+\$)+[./0-9A-Za-z]{22,}")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")
_LINE = re.compile(r"[^\r\n]+")


def read_secrets(
    source: Source, cluster: Cluster, environ: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str]]:
    """The secrets cluster/ names, each from its environment variable, else its file: the root
    password hash and every Alertmanager receiver's webhook URL. Raises SourceError when what
    is there has the wrong shape; a secret not found leaves the target's placeholder."""
    # (key in plan.secrets, where to read it, its place in cluster/, shape, shape named, advice)
    wanted: list[tuple[str, SecretSource, tuple[str, ...], re.Pattern[str], str, str]] = [
        (
            "root_password_hash",
            cluster.provisioning.root_password_hash,
            ("provisioning", "root_password_hash"),
            _CRYPT,
            "a crypt(3) hash like $6$salt$...; never a plain password",
            "keep generated/kickstart/ out of git",
        )
    ]
    wanted += [
        (
            f"{WEBHOOK}{name}",
            receiver.url,
            ("site", "monitoring", "receivers", name, "url"),
            _URL,
            "an http(s) URL",
            "keep generated/monitoring/alertmanager.yml out of git",
        )
        for name, receiver in cluster.site.monitoring.receivers.items()
    ]
    if cluster.site.monitoring.ipmi:
        wanted.append(
            (
                IPMI_PASSWORD,
                cluster.site.monitoring.ipmi.password,
                ("site", "monitoring", "ipmi", "password"),
                _LINE,
                "one line of text",
                "keep generated/monitoring/ipmi_exporter.yml out of git",
            )
        )
    secrets: dict[str, str] = {}
    placeholders: list[str] = []
    notices: list[str] = []
    for key, spec, at, shape, what, keep in wanted:
        found = _read_secret(source, spec, at, environ)
        if found is None:
            tried = " or ".join(x for x in (spec.env and f"${spec.env}", spec.file) if x)
            placeholders.append(f"{key} ({tried or 'no source named'})")
            continue
        value, origin, where = found
        if not shape.fullmatch(value):
            message = f"{origin} is not {what}"
            raise SourceError([Diagnostic(source.where((*at, where)), "invalid-value", message)])
        secrets[key] = value
        notices.append(f"{key} read from {origin}: {keep}")
    if placeholders:
        notices.insert(
            0,
            f"placeholder used for {', '.join(placeholders)}: the tree in git never holds "
            "them; for installable files set one and compile --out DIR",
        )
    return secrets, notices


def _read_secret(
    source: Source, spec: SecretSource, at: tuple[str, ...], environ: Mapping[str, str] | None
) -> tuple[str, str, str] | None:
    """(value, where from, key in cluster/) or None; only when `environ` is given."""
    if environ is not None and spec.env and environ.get(spec.env):
        return environ[spec.env].strip(), f"${spec.env}", "env"
    if environ is not None and spec.file and Path(spec.file).exists():
        try:
            return Path(spec.file).read_text().strip(), spec.file, "file"
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(
                [Diagnostic(source.where((*at, "file")), "unreadable-secret", str(exc))]
            ) from None
    return None


def manifest(files: dict[str, bytes], source_digest: str) -> bytes:
    body = {
        "schema": 1,
        "source_sha256": source_digest,
        "files": {path: sha256(data).hexdigest() for path, data in sorted(files.items())},
    }
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
