"""The one sanitizer of host-derived text: what a host printed, made safe to show anywhere.

Everything a host sends (probe outputs turned into facts, failure reasons, the SSH layer's
messages) reaches the report through here, once per host as soon as it is judged
(`audits.pipeline`), so report.json, report.md, report.html, junit.xml, the textfile and the
tracking issue all read the same safe strings:

- **controls shown escaped**: every C0 and C1 control (terminal escapes, NUL, line breaks,
  tabs), the Unicode line and paragraph separators and bidirectional overrides (text that
  reads differently from how it is stored), lone surrogates and the non-characters
  U+FFFE/U+FFFF become `\\x1b`, `\\u202e`, ... as Python writes them: visible, never acted
  on by a terminal, a browser or an XML parser. What is left is legal in XML 1.0 and means
  nothing to a terminal;
- **cut to a bound**: a string longer than `LIMIT` characters (once escaped) keeps its head
  and says how long the whole was and its sha256, so two reports can still tell whether two
  long values were the same (`VALUE_LIMIT` for a value put into a sentence).

Applied twice it changes nothing (a cut string fits the bound, an escaped one has no control
left), so a report read back and merged (`audit merge`) is not cut again.
"""

from __future__ import annotations

import re
from hashlib import sha256
from typing import Any, TypeVar

LIMIT = 1024  # characters of one string of a report: a sentence with two values in it
VALUE_LIMIT = 256  # characters of one observed value put into a sentence (a version string)

# C0, DEL and C1; U+061C, U+200E/F and U+202A-E, U+2066-9 (bidirectional marks and
# overrides); U+2028/9 (line and paragraph separators); surrogates; U+FFFE/F.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
T = TypeVar("T")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: str, limit: int = LIMIT) -> str:
    """`value` with its controls escaped, cut to `limit` characters with its length and sha256
    said at the cut."""
    shown = _UNSAFE.sub(_escape, value)
    if len(shown) <= limit:
        return shown
    digest = sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    note = f"... [cut: {len(value)} characters, sha256 {digest}]"
    return shown[: max(0, limit - len(note))] + note


DEPTH = 32  # levels of nesting kept of a value: no parser's schema goes deeper than a few


def clean(data: T, limit: int = LIMIT) -> T:
    """`data` (JSON-shaped: dicts, lists, strings, numbers) with every string, keys included,
    passed through `text`; anything nested deeper than `DEPTH` said so instead."""
    return _clean(data, limit, 0)  # type: ignore[no-any-return]


def _clean(data: Any, limit: int, depth: int) -> Any:
    if isinstance(data, str):
        return text(data, limit)
    if isinstance(data, dict | list | tuple) and depth >= DEPTH:
        return f"[cut: nested deeper than {DEPTH} levels]"
    if isinstance(data, dict):
        return {_clean(k, limit, depth + 1): _clean(v, limit, depth + 1) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_clean(v, limit, depth + 1) for v in data]
    return data


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_legal(value: str) -> str:
    """`value` without the characters XML 1.0 cannot hold at all (not even as a character
    reference): the last guard of an XML document, for text `text` has not seen."""
    return _XML_ILLEGAL.sub("", value)
