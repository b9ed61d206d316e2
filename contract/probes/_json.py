"""Reading shared by the `ip -j` parsers: the output must be one JSON array of objects."""

from __future__ import annotations

import json
from typing import Any

from contract.probes.base import ParseError


def json_objects(probe: str, text: str) -> list[dict[str, Any]]:
    """Decode `text` as a JSON array of objects; a cut-off or non-JSON output is an error."""
    if not text.strip():
        raise ParseError(probe, 0, "empty output: `ip -j` prints at least '[]'")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(probe, error.lineno, f"not JSON ({error.msg}); cut off?") from None
    except RecursionError:
        raise ParseError(probe, 0, "JSON nested too deep to decode") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ParseError(probe, 0, "expected a JSON array of objects")
    return data
