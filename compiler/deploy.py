"""Stage 6, deploy: every generated file's home, from the services each host's role runs and
each configured Ethernet switch's OS runs.

`services.yaml` says, per service, which generated files it reads and where they live on a
machine; `roles:` names the services of each host role, `switch_os:` those of each switch OS
(a Cumulus Linux switch runs `cumulus`: ifupdown2, FRR and lldpd's files under /etc; an EOS
switch `eos`: its startup-config on flash). This stage expands those homes over the files the
targets produced and gives each host and each switch of `Plan.ethernet` its `Deploy`
(contract: files with path, mode, owner, sha256 and the unit to reload; units; kernel
modules), written as `generated/deploy/<name>.json`, read by `clusterforge bundle` and the
audit. Hosts and switches are alike here (`Plan.machines`): a switch file is placed by the
same rules as a host's, and one with no home is caught by the same rule. A generated file
with no home on any machine must be declared `review_only`; one that is neither, or a home
whose source was not generated, is bad input, located in services.yaml.

Source patterns: `{host}` is the host's or switch's name, `{role}` a host's role or a
switch's OS; a `*` in the last part matches the files of that one folder, and `{name}` in
`dest` is then the matched file's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from common.errors import Diagnostic, SourceError
from common.rules import Rule
from compiler.load import Source
from compiler.model import FileCheck, FileHome
from compiler.plan import Plan
from contract import Deploy, Placed
from contract.probes.spec import forbidden_path

DEPLOY_DIR = "deploy"
_WILD = re.compile(r"[*?[]")  # what makes a pattern part more than its text


def _matches(pattern: str, path: str) -> bool:
    """Part by part, so `*` never crosses a folder; a literal part by equality (fnmatch would
    compile a regex for each, and the host names make hundreds of them)."""
    want, have = pattern.split("/"), path.split("/")
    return len(want) == len(have) and all(
        fnmatchcase(h, w) if _WILD.search(w) else h == w for w, h in zip(want, have, strict=True)
    )


class _Folders:
    """The generated files by folder, so a pattern whose folder part is literal (most are:
    `routes/gpu001/*.nmconnection`) looks at that folder's files only, not at all of them:
    one host's lookups stay constant as the fleet grows."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = set(files)
        self.by_folder: dict[str, list[str]] = {}
        for f in sorted(self.files):
            self.by_folder.setdefault(f.rpartition("/")[0], []).append(f)

    def sources(self, pattern: str) -> list[str]:
        if "*" not in pattern:
            return [pattern] if pattern in self.files else []
        folder, _, name = pattern.rpartition("/")
        if _WILD.search(folder):
            return [f for f in sorted(self.files) if _matches(pattern, f)]
        # The folder's own files: only their names are left to match.
        start = len(folder) + 1 if folder else 0
        return [f for f in self.by_folder.get(folder, []) if fnmatchcase(f[start:], name)]


def deploy_map(plan: Plan, digests: Mapping[str, str], source: Source) -> dict[str, Deploy]:
    """Every host's and configured switch's Deploy, from the generated files' sha256 by path
    (the manifest's, hashed once); raises SourceError for homes without files, two files at
    one destination, and files with neither a home nor a review-only declaration."""
    problems: list[Diagnostic] = []
    homed: set[str] = set()
    out: dict[str, Deploy] = {}
    folders = _Folders(digests)
    # A home whose source and dest do not name {host} places the same files at the same
    # paths on every machine of a role (a service's homes are services.yaml's, one for all):
    # expanded once per role, its records shared. Most homes are such; at 4,096 servers the
    # map made 78,000 patterns, lookups and path checks, 0.33 s, now 0.20 s.
    alike: dict[tuple[str, str, int], tuple[str, list[tuple[str, Placed | None]]]] = {}

    def expand(
        name: str, role: str, service_name: str, home: FileHome
    ) -> tuple[str, list[tuple[str, Placed | None]]]:
        """The home's pattern, and each file it places: its path on the machine and its
        record (None where that path is forbidden)."""
        pattern = home.source.format(host=name, role=role)
        placed: list[tuple[str, Placed | None]] = []
        for src in folders.sources(pattern):
            dest = home.dest.format(host=name, role=role, name=src.rsplit("/", 1)[-1])
            if forbidden_path(dest):
                placed.append((dest, None))
                continue
            digest = digests[src] if home.check == FileCheck.CONTENT else None
            # A snapshot keeps the text of a service's files; a secret's is never read.
            keep = service_name in plan.snapshot and digest is not None
            placed.append(
                (dest, Placed(dest, src, home.mode, home.owner, digest, home.reload, keep))
            )
        return pattern, placed

    for machine in plan.machines():
        placed: dict[str, Placed] = {}
        name, role, software = machine
        for service_name, service in software.services:
            for i, home in enumerate(service.files):
                where = ("services", "services", service_name, "files", i)  # for a problem
                if "{host}" in home.source or "{host}" in home.dest:
                    pattern, found = expand(name, role, service_name, home)
                else:
                    key = (role, service_name, i)
                    if key not in alike:
                        alike[key] = expand(name, role, service_name, home)
                    pattern, found = alike[key]
                if not found and not home.optional:
                    message = f"{name} ({role}) needs generated/{pattern}: none"
                    problems.append(
                        Diagnostic(source.where((*where, "source")), Rule.MISSING_SOURCE, message)
                    )
                for dest, record in found:
                    if record is None:
                        # The audit reads every deployed file as root: never a device's.
                        message = f"{name}: {dest} is a device's or the kernel's file"
                        problems.append(
                            Diagnostic(
                                source.where((*where, "dest")), Rule.FILE_HOME_FORBIDDEN, message
                            )
                        )
                        continue
                    if dest in placed and placed[dest].source != record.source:
                        message = (
                            f"{name}: {dest} would hold both generated/"
                            f"{placed[dest].source} and generated/{record.source}"
                        )
                        problems.append(
                            Diagnostic(
                                source.where((*where, "source")), Rule.FILE_HOME_CONFLICT, message
                            )
                        )
                        continue
                    placed[dest] = record
                    homed.add(record.source)
        out[name] = Deploy(
            name, tuple(placed[p] for p in sorted(placed)), software.units, software.kernel_modules
        )
    at = source.where(("services", "review_only"))
    for path in sorted(digests):
        if path in homed or any(_matches(p, path) for p in plan.review_only):
            continue
        message = (
            f"generated/{path} has no home on any host or switch and is not declared review-only"
        )
        problems.append(Diagnostic(at, Rule.HOMELESS_FILE, message))
    if problems:
        raise SourceError(problems)
    return out


def with_digests(deploys: Mapping[str, Deploy], digests: Mapping[str, str]) -> dict[str, Deploy]:
    """`deploys` with the planned sha256 of the files in `digests` (by source) put in: the
    files rendered from the deploy map itself (the audit account's per-role files)."""
    out = {}
    for host, d in deploys.items():
        files = tuple(
            f._replace(sha256=digests[f.source])
            if f.source in digests and f.sha256 is not None
            else f
            for f in d.files
        )
        out[host] = d._replace(files=files)
    return out


def deploy_files(deploys: Mapping[str, Deploy]) -> dict[str, str]:
    """`deploy/<name>.json` for every host and configured switch."""
    return {f"{DEPLOY_DIR}/{h}.json": d.to_json() for h, d in sorted(deploys.items())}
