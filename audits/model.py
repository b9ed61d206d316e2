"""The audit's contracts: the closed vocabularies and the JSON shapes every stage shares.

A finding is one difference between `generated/expected/` and what was observed, always in the
same shape (NAPALM's compliance reports are the model): `kind` says what drifted, `host` where
(`fabric` for cables), `check` which check saw it, `path` the fact inside the contract,
`expected` and `observed` the two values as JSON, `severity` how bad, `message` a sentence for
people. A check either complies, finds drift, or is skipped with a reason (it could not run).
Every host ends as exactly one `Status`. The words of `kind` and `severity` are the contract's
(`contract.Kind`, `contract.Severity`): the alerts and the metrics speak them too.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, NotRequired, TypedDict

from common.errors import SetupError

FABRIC = "fabric"  # the `host` of cable findings: the fabric is audited as one subject


class AuditError(SetupError):
    """Raised when the audit cannot run at all: no expectations, an unreadable recording."""


class Status(StrEnum):
    """What became of a host. `unreachable` and `error` mean "could not collect": never drift,
    never clean. A connection that failed (refused, timeout, auth) is unreachable; a host that
    answered but whose output could not be used (parse failure, command missing) is error."""

    OK = "ok"
    DRIFT = "drift"
    UNREACHABLE = "unreachable"
    ERROR = "error"


Outcome = Literal["complies", "drift", "skipped"]


class Finding(TypedDict):
    kind: str
    host: str
    check: str
    path: str
    expected: Any
    observed: Any
    severity: str
    message: str


class CheckResult(TypedDict):
    check: str
    kind: str
    outcome: Outcome
    reason: str | None  # why it was skipped


class Accepted(TypedDict):
    """A version a rollout still allows: observed the previous one, before the window ends."""

    key: str
    observed: str
    expected: str
    until: str


class HostKeyFact(TypedDict):
    """Why a host's SSH key was not accepted: none known for it (`unknown`), or the host
    offers another key than the known ones (`changed`). Fingerprints are OpenSSH's SHA256."""

    state: Literal["unknown", "changed"]
    known: list[str]
    offered: str | None  # None when the host's key could not be read a second time


class ProbeFailure(TypedDict):
    probe: str
    message: str


def finding_order(f: Finding) -> tuple[str, str, str, str]:
    """Sort key of findings: by host, check, path (then message, for equal paths)."""
    return (f["host"], f["check"], f["path"], f["message"])


VersionState = Literal["match", "accepted", "drift"]  # accepted: a rollout's previous version


class VersionPair(TypedDict):
    expected: str
    observed: str | None  # several values (one per GPU or HCA) are joined with ","
    state: VersionState  # as the audit judged it (semantically, in full or as masked)
    masked: NotRequired[str]  # the part of `expected` the baseline's mask left uncompared


class HostEntry(TypedDict):
    """One host in the report: its status, and what each check made of it."""

    host: str
    role: str
    model: str
    rack: str
    u: int | None  # its lowest rack unit; None from a contract that predates it
    ring: str
    status: str
    reason: str | None  # why it is unreachable or error
    failures: list[ProbeFailure]
    checks: list[CheckResult]
    versions: dict[str, VersionPair]  # by version key, for checks that ran: Markdown folds them
    accepted: list[Accepted]
