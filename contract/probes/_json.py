"""Reading shared by the `ip -j` parsers: the output must be one JSON array of objects."""

from __future__ import annotations

import json
from typing import Any

from contract.probes.base import ParseError


def decode(probe: str, text: str, least: str) -> Any:
    """`text` as JSON; empty, cut-off or non-JSON output is an error (`least`: what the
    command prints when it has nothing to say)."""
    if not text.strip():
        raise ParseError(probe, 0, f"empty output: it prints at least {least}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(probe, error.lineno, f"not JSON ({error.msg}); cut off?") from None
    except RecursionError:
        raise ParseError(probe, 0, "JSON nested too deep to decode") from None


def json_objects(probe: str, text: str) -> list[dict[str, Any]]:
    """Decode `text` as a JSON array of objects (`ip -j`'s form)."""
    data = decode(probe, text, "'[]'")
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ParseError(probe, 0, "expected a JSON array of objects")
    return data
