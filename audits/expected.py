"""Stage 1 of the audit: read what the compiler expects, `generated/expected/`, and name it.

The contract is `contract/`'s records (`Host`, `EthernetSwitch`, `Fabric`, `Deploy`), which
document every field; this module only reads them, each host (and each audited switch: a
Cumulus Linux or EOS one, `expected/switches/`) with its `generated/deploy/<name>.json` put
beside it (`Host.deploy`; an EOS switch's generated startup-config too, `intended`), and
names where they came from: the git commit checked out in the repository, if it is in one,
and `generated/MANIFEST.json`'s `source_sha256` (the digest of the `cluster/` it was
compiled from), so a report says which expectations it was measured
against. A tree whose manifest is missing or does not match its files is refused
(`contract.manifest.verify`), and so is a file of another schema version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import git

from audits.model import AuditError
from common.errors import OutputError
from contract import ContractError, Deploy, EthernetSwitch, Fabric, Host, eos, manifest


@dataclass(frozen=True)
class Expectations:
    hosts: dict[str, Host]  # host name -> its expected/hosts/<host>.json, with its deploy map
    fabric: Fabric  # expected/fabric.json
    commit: str | None  # the repository's HEAD, None outside git
    source_sha256: str | None  # from generated/MANIFEST.json
    # switch name -> its expected/switches/<switch>.json, with its deploy map: the audited ones
    switches: dict[str, EthernetSwitch] = field(default_factory=dict)

    @property
    def machines(self) -> dict[str, Host | EthernetSwitch]:
        """Every host and audited switch, by name: what the audit logs into."""
        return {**self.hosts, **self.switches}


def read(repo: Path) -> Expectations:
    """Read `repo/generated/expected/`; raises AuditError when it is missing or malformed."""
    generated = repo / "generated"
    folder = generated / "expected"
    if not (folder / "fabric.json").is_file():
        raise AuditError(f"no {folder}/fabric.json: run `clusterforge compile` first")
    try:
        manifest.verify(generated)  # a half-written or hand-edited tree is not the contract
        hosts = {}
        for path in sorted((folder / "hosts").glob("*.json")):
            contract = Host.from_json(_text(path), path)
            if contract.host != path.stem:
                raise AuditError(f"{path}: 'host' is {contract.host!r}, not {path.stem!r}")
            placed = generated / "deploy" / path.name
            deploy = Deploy.from_json(_text(placed), placed) if placed.is_file() else None
            hosts[path.stem] = contract.with_deploy(deploy)
        switches = {}
        for path in sorted((folder / "switches").glob("*.json")):
            switch = EthernetSwitch.from_json(_text(path), path)
            if switch.host != path.stem:
                raise AuditError(f"{path}: 'host' is {switch.host!r}, not {path.stem!r}")
            if not switch.audited:
                continue  # an OS without the audit's account: nothing to log into
            placed = generated / "deploy" / path.name
            deploy = Deploy.from_json(_text(placed), placed) if placed.is_file() else None
            switches[path.stem] = switch.with_deploy(deploy, _intended(generated, switch, deploy))
        fabric = Fabric.from_json(_text(folder / "fabric.json"), folder / "fabric.json")
        source = manifest.source_sha256(generated)
    except (OutputError, ContractError) as exc:
        raise AuditError(str(exc)) from None
    return Expectations(hosts, fabric, _commit(repo), source, switches)


def _intended(generated: Path, switch: EthernetSwitch, deploy: Deploy | None) -> str | None:
    """An EOS switch's generated startup-config (what its deploy map places on flash), which
    its running-config is compared with; None elsewhere, or where nothing is placed there."""
    if not switch.eos or deploy is None:
        return None
    placed = next((f for f in deploy.files if f.path == eos.STARTUP), None)
    return None if placed is None else _text(generated / placed.source)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise AuditError(f"cannot read {path}: {exc}") from None


def _commit(repo: Path) -> str | None:
    # Read-only on purpose: `is_dirty` would refresh the index of a checkout others share.
    try:
        with git.Repo(repo, search_parent_directories=True) as r:
            return r.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None  # not in git, or no commit yet
