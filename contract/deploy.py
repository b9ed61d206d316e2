"""`generated/deploy/<host>.json`: which generated files a host holds, where, with which mode
and owner, and which units and kernel modules must run. Named tuples, not pydantic models: the
compiler makes one `Placed` for every file of every host, and edits them with `_replace`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from contract.record import SCHEMA, dumps, parsed


class Placed(NamedTuple):
    """One generated file at its home on a host: `source` under generated/, `path` on the host.

    `sha256` is of the file as generated; None where the deployed bytes legitimately differ
    from generated/ (files that carry the root password hash, which git never holds), so the
    audit checks only that the file is there. `reload` is the unit to reload-or-restart when
    the file changes."""

    path: str
    source: str
    mode: str
    owner: str
    sha256: str | None
    reload: str | None = None
    # The audit keeps its text in the device's snapshot (contract/snapshot.py); written only
    # where true, so the maps of devices without a snapshot read as before.
    snapshot: bool = False

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "source": self.source,
            "mode": self.mode,
            "owner": self.owner,
            "sha256": self.sha256,
            "reload": self.reload,
        }
        if self.snapshot:
            out["snapshot"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Placed:
        return cls(
            str(data["path"]),
            str(data["source"]),
            str(data["mode"]),
            str(data["owner"]),
            None if data.get("sha256") is None else str(data["sha256"]),
            None if data.get("reload") is None else str(data["reload"]),
            data.get("snapshot") is True,
        )


# The probes whose arguments are a device's deployed files, read as root: what the forced
# command allows (compiler/targets/access.py) and what the audit asks (audits/compare.py) are
# both `file_arguments` of the device's deploy map, so the two never disagree.
FILE_PROBES = ("sha256sum", "file_exists", "file_texts")


def file_arguments(files: Iterable[Placed]) -> dict[str, tuple[str, ...]]:
    """The paths each file probe takes on a device: the planned files' to hash, the
    secret-bearing ones' to stat (never read), the snapshotted ones' to read whole."""
    files = tuple(files)
    lists = (
        tuple(f.path for f in files if f.sha256 is not None),
        tuple(f.path for f in files if f.sha256 is None),
        tuple(f.path for f in files if f.snapshot),
    )
    return {p: v for p, v in zip(FILE_PROBES, lists, strict=True) if v}


class Deploy(NamedTuple):
    """`generated/deploy/<host>.json`: everything the host's bundle places and runs."""

    host: str
    files: tuple[Placed, ...]  # sorted by path
    units: tuple[str, ...]  # enabled at boot and active
    kernel_modules: tuple[str, ...]  # loaded (modules-load.d) and built for the pinned kernel

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "host": self.host,
            "files": [f.as_json() for f in self.files],
            "units": list(self.units),
            "kernel_modules": list(self.kernel_modules),
        }

    def to_json(self) -> str:
        """The file's text, as the compiler writes it."""
        return dumps(self.as_dict())

    @classmethod
    def from_json(cls, data: str | bytes | dict[str, Any], source: str | Path = "<json>") -> Deploy:
        """The record of a file's text or parsed value; raises ContractError, located in
        `source`, for a file of another schema version."""
        value, _ = parsed(data, source)
        return cls(
            str(value["host"]),
            tuple(Placed.from_json(f) for f in value.get("files", ())),
            tuple(str(u) for u in value.get("units", ())),
            tuple(str(m) for m in value.get("kernel_modules", ())),
        )
