"""What every record of the contract shares: one schema version, one way to the bytes of a
file and back, and the located error a file that is not the contract gets.

A record is a frozen, strict pydantic model refusing unknown keys, so a field the compiler
writes and the audit does not know (or the other way round) fails loudly at the edge instead
of reading as a missing fact. A field whose default is None is left out of the file when it is
None (a section that does not apply, like `slurm` on a host without slurmd); a field without
a default is always written, null included (`gpus` of a host without GPUs).
"""

from __future__ import annotations

import re
from enum import StrEnum, unique
from pathlib import Path
from typing import Any, Self

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
)
from pydantic.json_schema import SkipJsonSchema

from common.errors import Diagnostic, Location, SetupError, quote

SCHEMA = 1  # the version of everything under generated/expected/ and generated/deploy/

# A field typed `X | Absent = absent(...)` is left out of the file when None, never written
# null: its JSON Schema says X, not required.
Absent = SkipJsonSchema[None]

# Sorted keys, two-space indent: the bytes of `json.dumps(indent=2, sort_keys=True,
# ensure_ascii=False)`, encoded in C. Every JSON file the compiler writes is in this form.
_JSON = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def dumps(data: Any) -> str:
    """`data` as a generated JSON file holds it, final newline included."""
    return orjson.dumps(data, option=_JSON).decode() + "\n"


@unique
class Rule(StrEnum):
    """The rule ids of a contract file's diagnostics (its own vocabulary, like the lab's
    faults file: these are about generated/, not about cluster/)."""

    NOT_JSON = "not-json"
    SCHEMA_VERSION = "schema-version"
    WRONG_SHAPE = "wrong-shape"


class ContractError(SetupError):
    """Raised for a file that is not the contract this version reads: the compile that wrote
    it is another version's, or the file was edited. A set-up problem: compile again."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic
        super().__init__(str(diagnostic))


def _line_of(text: str, key: str) -> int | None:
    """The line of the top-level `key` in a generated file: files are written indented, one
    key a line, so a top-level key is the line that opens with it at two spaces (column 3)."""
    found = re.search(rf'^  "{re.escape(key)}":', text, re.MULTILINE)
    return None if found is None else text.count("\n", 0, found.start()) + 1


class Record(BaseModel):
    """A part of the contract."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for name, f in cls.model_fields.items():
            if not f.is_required() and f.default is None and not f.exclude and f.exclude_if is None:
                # Left as it is, an absent section would be written as null.
                raise TypeError(f"{cls.__name__}.{name} defaults to None: make it an absent()")

    def as_dict(self) -> dict[str, Any]:
        """The record as the JSON value it is written as, keys sorted as in its file: a
        record's value in a finding reads as the file (junit.xml prints it as it is)."""
        found: dict[str, Any] = _sorted(self._as_json())
        return found

    def _as_json(self) -> dict[str, Any]:
        """The JSON value, keys in field order: for `dumps`, which sorts them itself."""
        return self.model_dump(mode="json", by_alias=True)


def _is_none(value: object) -> bool:
    return value is None


def absent(description: str) -> Any:
    """A field typed `X | Absent`, left out of the file when None. Its own test per field, not
    one serializer over the record: pydantic calls that back in Python for every record it
    writes, which cost a third of writing generated/expected/."""
    return Field(default=None, exclude_if=_is_none, description=description)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _schema_required(schema: dict[str, Any]) -> None:
    schema["required"] = ["schema", *schema.get("required", [])]


class File(Record):
    """A record that is a whole file: it carries the schema version, and reads and writes
    itself. `from_json` takes the file's text (or its parsed value) and where it came from."""

    # Every file says its version: the reader refuses one that does not (a JSON Schema too).
    model_config = ConfigDict(json_schema_extra=_schema_required)

    version: int = Field(
        default=SCHEMA,
        alias="schema",
        description="The contract's version; a reader refuses a file of another.",
        json_schema_extra={"const": SCHEMA},
    )

    def to_json(self) -> str:
        """The file's text, byte for byte as the compiler writes it."""
        return dumps(self._as_json())

    @classmethod
    def from_json(cls, data: str | bytes | dict[str, Any], source: str | Path = "<json>") -> Self:
        """The record of a file's text (or of its parsed JSON value); raises ContractError,
        located in `source`, for a file of another schema version or of another shape."""
        value, text = parsed(data, source)
        try:
            # JSON-mode validation: arrays become tuples, strings dates, as the file means.
            return cls.model_validate_json(text or orjson.dumps(value))
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"])
            top = str(first["loc"][0]) if first["loc"] else None
            raise refusal(text, source, Rule.WRONG_SHAPE, top, f"{path}: {first['msg']}") from None


def refusal(
    text: str, source: str | Path, rule: Rule, key: str | None, message: str
) -> ContractError:
    """The error for a contract file, at the line of its top-level `key` where that is known."""
    line = _line_of(text, key) if key else None
    at = Location(str(source), line, 3) if line else Location(str(source), 1, 1)
    return ContractError(Diagnostic(at, rule, message))


def parsed(data: str | bytes | dict[str, Any], source: str | Path) -> tuple[dict[str, Any], str]:
    """A contract file's JSON object and its text ("" when it came parsed); raises
    ContractError for what is not JSON, not an object, or of another schema version."""
    text = data.decode() if isinstance(data, bytes) else data if isinstance(data, str) else ""
    try:
        value = data if isinstance(data, dict) else orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise refusal(text, source, Rule.NOT_JSON, None, f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise refusal(text, source, Rule.WRONG_SHAPE, None, "not a JSON object")
    if value.get("schema") != SCHEMA:
        message = f"schema {quote(value.get('schema'))}, this clusterforge reads {SCHEMA}"
        raise refusal(text, source, Rule.SCHEMA_VERSION, "schema", f"{message}: compile again")
    return value, text
