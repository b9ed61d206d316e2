"""What a host check writes into: its findings, the versions it judged, what a rollout allowed.

Shared by the host checks of `audits/compare.py` and `audits/admission.py`. `version` is the
one place a version is judged: semantically (`audits.versions`), optionally at the precision
a tool prints, and against the contract's `accept` window of a rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from audits.model import Accepted, Finding, VersionPair, VersionState
from audits.sanitize import VALUE_LIMIT, text
from audits.versions import leading, same
from contract import Host, Kind, Severity

Facts = Mapping[str, Any]  # probe key -> parsed output

_CRITICAL_VERSIONS = {"ofed", "gpu_driver", "cuda", "kernel"}
_STATES: tuple[VersionState, ...] = ("match", "accepted", "drift")  # from best to worst


@dataclass
class Sink:
    """Collects what one check finds on one host."""

    host: str
    check: str
    kind: Kind
    today: date
    findings: list[Finding] = field(default_factory=list)
    accepted: list[Accepted] = field(default_factory=list)
    versions: dict[str, VersionPair] = field(default_factory=dict)

    def drift(
        self, path: str, expected: Any, observed: Any, severity: Severity, message: str
    ) -> None:
        self.findings.append(
            Finding(
                kind=self.kind.value,
                host=self.host,
                check=self.check,
                path=path,
                expected=expected,
                observed=observed,
                severity=severity.value,
                message=message,
            )
        )

    def drift_on(
        self, host: str, path: str, expected: Any, observed: Any, severity: Severity, message: str
    ) -> None:
        """A finding this check saw about another host (the controller sees each node's
        state in Slurm): named by that host, so the report places it at its rack and U."""
        self.drift(path, expected, observed, severity, message)
        self.findings[-1]["host"] = host

    def version(self, c: Host, key: str, observed: str | None) -> None:
        """Compare version `key` in full, or at the precision the contract's `mask` gives
        it, honouring a rollout's `accept` window."""
        if observed is not None:
            # Short enough to leave the sentence it goes into its expected value.
            observed = text(observed, VALUE_LIMIT)
        expected = c.versions[key]
        parts = c.mask.get(key, 0)
        state = self._judge(c, key, expected, observed, parts)
        pair = self.versions.setdefault(
            key, VersionPair(expected=expected, observed=observed, state=state)
        )
        if parts and expected != leading(expected, parts):
            pair["masked"] = expected[len(leading(expected, parts)) :]
        if pair["observed"] != observed:  # a second GPU or HCA that differs from the first
            pair["observed"] = f"{pair['observed']},{observed}"
            pair["state"] = max(pair["state"], state, key=_STATES.index)

    def _judge(
        self, c: Host, key: str, expected: str, observed: str | None, parts: int
    ) -> VersionState:
        def matches(version: str) -> bool:
            return observed is not None and same(
                leading(version, parts) if parts else version, observed
            )

        if matches(expected):
            return "match"
        severity = Severity.CRITICAL if key in _CRITICAL_VERSIONS else Severity.WARNING
        message = f"{key} {observed or 'not reported'}, expected {expected}"
        if parts and expected != leading(expected, parts):
            message += f" (compared as {leading(expected, parts)}: the baseline masks the rest)"
        accept = (c.accept or {}).get(key)
        if accept is not None and observed is not None and matches(accept.previous):
            until = accept.until.isoformat()
            if self.today <= accept.until:
                self.accepted.append(
                    Accepted(key=key, observed=observed, expected=expected, until=until)
                )
                return "accepted"
            message += f" (rollout window for {accept.previous} ended {until})"
        self.drift(f"versions.{key}", expected, observed, severity, message)
        return "drift"
