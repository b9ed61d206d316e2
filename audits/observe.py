"""Stage 3 of the audit: parse each collected output with its probe's parser.

Pure: text in, facts out. A subject's probes end up either as facts (the parser's result, by
probe key) or as failures (the command gave nothing usable, or its output could not be
parsed); a failure makes its subject an `error`, and the checks that need it are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audits.collect import Collected, probe_of
from audits.model import ProbeFailure
from contract import probes
from contract.probes import ParseError


@dataclass(frozen=True)
class Observed:
    facts: dict[str, Any]  # probe key -> parsed result (JSON-shaped, per the parser docstring)
    failures: list[ProbeFailure]  # sorted by probe key

    def failed(self, key: str) -> bool:
        return key not in self.facts


def observe(subject: str, collected: Collected) -> Observed:
    """Parse every output of `subject` (a host name, or `fabric`)."""
    facts: dict[str, Any] = {}
    failures = [ProbeFailure(probe=k, message=v) for k, v in collected.failed.items()]
    for key, text in collected.outputs.items():
        try:
            facts[key] = probes.PROBES[probe_of(key)].parse(text)
        except ParseError as exc:
            failures.append(ProbeFailure(probe=key, message=str(exc.at_host(subject))))
        except RecursionError:
            # Output nested deeper than a parser can follow (100,000 '[' as `ip -j` output):
            # the host's output is at fault, not the audit.
            message = f"{subject}: {probe_of(key)}: output nested too deep to parse"
            failures.append(ProbeFailure(probe=key, message=message))
    return Observed(facts, sorted(failures, key=lambda f: f["probe"]))
