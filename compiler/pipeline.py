"""The compile pipeline end to end: load -> model -> checks -> plan -> targets (no IO after load).

`compile_source` is what the CLI, `diff` and the tests call; writing is `compiler.output`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from hashlib import sha256
from pathlib import Path
from typing import Any

from common import memo
from common.errors import Diagnostic, Location, SourceError, quote
from common.rules import Rule
from compiler import deploy, output, roce, targets
from compiler.load import Path_, Source, load
from compiler.model import Cluster, SecretSource
from compiler.output import read_tree
from compiler.plan import Plan, build, oversized
from compiler.targets import access
from compiler.targets.alertmanager import WEBHOOK
from compiler.targets.monitoring import IPMI_PASSWORD
from compiler.targets.render import CONTROL, UnsafeValue
from compiler.targets.shared import SNMP_COMMUNITY
from compiler.validation import check
from contract import Deploy
from contract import manifest as contract_manifest

MANIFEST = output.MANIFEST
CARRIED = ("dns/",)  # generated/ files whose next version depends on the last (SOA serials)


@dataclass(frozen=True)
class Compiled:
    source: Source
    cluster: Cluster
    plan: Plan
    files: dict[str, bytes]  # path under generated/ -> content, MANIFEST.json included
    deploys: dict[str, Deploy]  # host -> its generated/deploy/<host>.json
    notices: list[str] = field(default_factory=list)  # for the operator: the CLI prints them
    # Each secret left as its placeholder, and how to provide it: installable output refuses
    # them (`compile --out`, `bundle`) unless told otherwise.
    placeholders: list[str] = field(default_factory=list)


def compile_source(
    source: Source,
    environ: Mapping[str, str] | None = None,
    previous: Mapping[str, bytes] | None = None,
) -> Compiled:
    """Compile `source`; secrets come from `environ` and the files cluster/ names, and only
    when `environ` is given (the CLI passes os.environ), else the targets use placeholders.
    `previous` is the generated/ this compile replaces: DNS serials continue from its zones."""
    cluster = check(source)
    secrets, notices, placeholders = read_secrets(source, cluster, environ)
    carried = {
        path: data.decode() for path, data in (previous or {}).items() if path.startswith(CARRIED)
    }
    notices += [f"warning: {w}" for w in oversized(cluster)]
    plan = replace(build(cluster), secrets=secrets, previous=carried)
    try:
        files = targets.render_all(plan)
    except UnsafeValue as exc:
        raise SourceError([unsafe_value(source, exc)]) from None
    disagree = roce_disagreements(source, plan, files)
    if disagree:
        raise SourceError(disagree)
    digests = {path: _digest(data) for path, data in files.items()}
    # The audit account's per-role files allow exactly the paths of the deploy map, which
    # places them too: named first, filled from the map, their digests put in after.
    named = dict.fromkeys(access.role_sources(plan), "")
    deploys = deploy.deploy_map(plan, digests | named, source)
    per_role = {p: t.encode() for p, t in access.role_files(plan, deploys).items()}
    role_digests = {path: _digest(data) for path, data in per_role.items()}
    files |= per_role
    digests |= role_digests
    deploys = deploy.with_digests(deploys, role_digests)
    files |= {path: text.encode() for path, text in deploy.deploy_files(deploys).items()}
    files = dict(sorted(files.items()))
    files[MANIFEST] = manifest(files, source.digest(), digests)
    return Compiled(source, cluster, plan, files, deploys, notices, placeholders)


@memo.by_object  # a file both sides of a diff share is one object (`targets._encoded`)
def _digest(data: bytes) -> str:
    return sha256(data).hexdigest()


def roce_disagreements(source: Source, plan: Plan, files: Mapping[str, bytes]) -> list[Diagnostic]:
    """Every RoCE link whose rendered ends (switch QoS file, host roce.conf) disagree, located
    at the network's `rdma:`, the one setting both ends derive from: a target that sets one
    end its own way would break the network's flow control where no ping notices."""
    return [
        Diagnostic(source.where(("networks", network, "rdma")), Rule.ROCE_MISMATCH, message)
        for network, message in roce.verify(plan.roce, plan.ethernet, plan.cables, files)
    ]


def unsafe_value(source: Source, exc: UnsafeValue) -> Diagnostic:
    """Where the value the rendering guard stopped was typed: the first key or value of
    cluster/ with a control character that the value holds (a value may be written inside a
    longer one); the template alone when no typed value explains it."""
    for path, text in _texts(source.data, ()):
        if CONTROL.search(text) and text in exc.value:
            where = ".".join(str(p) for p in path)
            return Diagnostic(
                source.where(path),
                Rule.UNSAFE_VALUE,
                f"{where}: {quote(text)} holds a line break or a control character; "
                f"it would write lines of its own into {exc.template}'s files",
            )
    return Diagnostic(
        Location("cluster"), Rule.UNSAFE_VALUE, f"{exc}; it would write lines of its own"
    )


def _texts(data: Any, at: Path_) -> Iterator[tuple[Path_, str]]:
    """Every key and text value below `data`, with its path (a key's path is its entry's)."""
    if isinstance(data, str):
        yield at, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield (*at, key), str(key)
            yield from _texts(value, (*at, key))
    elif isinstance(data, (list, tuple)):
        for i, item in enumerate(data):
            yield from _texts(item, (*at, i))


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
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")
_LINE = re.compile(r"[^\r\n]+")


def read_secrets(
    source: Source, cluster: Cluster, environ: Mapping[str, str] | None
) -> tuple[dict[str, str], list[str], list[str]]:
    """The secrets cluster/ names, each from its environment variable, else its file: the root
    password hash, every Alertmanager receiver's webhook URL, the BMC password, the switches'
    SNMP community. Returns them, the notices, and one line per secret left as its placeholder
    saying how to provide it.
    Raises SourceError when what is there has the wrong shape; a secret not found leaves the
    target's placeholder."""
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
    if cluster.site.monitoring.snmp:
        wanted.append(
            (
                SNMP_COMMUNITY,
                cluster.site.monitoring.snmp.community,
                ("site", "monitoring", "snmp", "community"),
                _LINE,
                "one line of text",
                "keep generated/monitoring/snmp.yml and generated/switches/*/etc/snmp/ out of git",
            )
        )
    secrets: dict[str, str] = {}
    placeholders: list[str] = []
    missing: list[str] = []
    notices: list[str] = []
    for key, spec, at, shape, what, keep in wanted:
        found = _read_secret(source, spec, at, environ)
        if found is None:
            tried = " or ".join(x for x in (spec.env and f"${spec.env}", spec.file) if x)
            placeholders.append(f"{key} ({tried or 'no source named'})")
            how = " or write ".join(
                x for x in (spec.env and f"set ${spec.env}", spec.file and spec.file) if x
            )
            place = f"{source.where(at)}: {'.'.join(at[1:])}"
            missing.append(f"{key}: {how or 'name an env or file for it'} ({what}; {place})")
            continue
        value, origin, where = found
        if not shape.fullmatch(value):
            message = f"{origin} is not {what}"
            raise SourceError([Diagnostic(source.where((*at, where)), Rule.INVALID_VALUE, message)])
        secrets[key] = value
        notices.append(f"{key} read from {origin}: {keep}")
    if placeholders:
        notices.insert(
            0,
            f"placeholder used for {', '.join(placeholders)}: the tree in git never holds "
            "them; for installable files set one and compile --out DIR",
        )
    return secrets, notices, missing


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
                [Diagnostic(source.where((*at, "file")), Rule.UNREADABLE_SECRET, str(exc))]
            ) from None
    return None


def manifest(
    files: dict[str, bytes], source_digest: str, known: Mapping[str, str] | None = None
) -> bytes:
    """MANIFEST.json: every file's sha256 (those in `known` already hashed) and the source's."""
    known = known or {}
    digests = {path: known.get(path) or _digest(data) for path, data in files.items()}
    return contract_manifest.render(digests, source_digest)
