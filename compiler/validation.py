"""The source checked: its model built (pydantic's errors told in the operator's words, where
they were typed) and every check run. `validate` stops here; `compiler.pipeline` goes on to
the plan and the targets, whose imports (Jinja, every target, the probes) a validation does not
pay for.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from common.errors import Diagnostic, SourceError, closest, quote
from common.rules import Rule
from compiler import checks
from compiler.load import Path_, Source
from compiler.model import Cluster, model_at, validate

# pydantic error types -> our rule names, so a reader can look a rule up in one vocabulary.
_RULES: dict[str, Rule] = {
    "missing": Rule.MISSING_FIELD,
    "extra_forbidden": Rule.UNKNOWN_KEY,
    "value_error": Rule.INVALID_VALUE,
    "enum": Rule.INVALID_VALUE,
    "literal_error": Rule.INVALID_VALUE,
    "greater_than": Rule.INVALID_VALUE,
    "greater_than_equal": Rule.INVALID_VALUE,
    "less_than_equal": Rule.INVALID_VALUE,
    "too_short": Rule.INVALID_VALUE,
}


def model_diagnostics(source: Source, error: ValidationError) -> list[Diagnostic]:
    """pydantic's errors as located diagnostics in the operator's words: what is wrong, the
    value as typed in the file, and how to fix it. A key that is missing because it was
    misspelled is folded under the misspelling."""
    out: dict[Path_, Diagnostic] = {}
    misspelt: dict[Path_, Path_] = {}  # the missing key's path -> the unknown key's
    for err in error.errors(include_url=False):
        path = tuple(err["loc"])
        rule = _RULES.get(err["type"], Rule.WRONG_TYPE)
        message = _message(source, err, path)
        if err["type"] == "extra_forbidden":
            model = model_at(path[:-1])
            close = closest(str(path[-1]), model.model_fields if model else ())
            if close:
                message = f"unknown key {quote(path[-1])}; did you mean {close!r}?"
                misspelt[(*path[:-1], close)] = path
        out[path] = Diagnostic(source.where(path), rule, message)
    for missing, typo in misspelt.items():
        if missing in out and typo in out:
            folded = out.pop(missing)
            out[typo] = replace(out[typo], consequences=(folded,))
    return list(out.values())


def _keys(model: type[BaseModel] | None, required: bool = False) -> str:
    if model is None:
        return ""
    return ", ".join(k for k, f in model.model_fields.items() if f.is_required() or not required)


def _message(source: Source, err: ErrorDetails, path: Path_) -> str:
    kind, value = err["type"], err["input"]
    key = next((str(k) for k in reversed(path) if isinstance(k, str)), "value")
    typed = source.text(path, value)
    ctx = err.get("ctx", {})
    if kind == "extra_forbidden":
        return f"unknown key {quote(path[-1])} (this place takes: {_keys(model_at(path[:-1]))})"
    if kind == "missing":
        return f"required key {path[-1]!r} is missing"
    if kind == "value_error":  # our own validators' words, without pydantic's prefix
        return str(ctx.get("error", err["msg"]))
    if kind == "string_type" and value is not None and not isinstance(value, str):
        # YAML reads 2.6 as a number, yes as true and 2026-06-30 as a date: quotes keep text.
        reads = {bool: "true or false", date: "a date", datetime: "a date and time"}
        what = reads.get(type(value), "a number")
        return f'{key}: {typed} reads as {what}, not text: quote it, {key}: "{typed}"'
    if kind in ("model_type", "dict_type"):
        needs = _keys(model_at(path), required=True)
        needs = f"; it needs the keys {needs}" if needs else ""
        if value is None:
            whole = len(path) == 1 or (path[0] == "racks" and len(path) == 2)
            return f"{'this file' if whole else key} is empty{needs}"
        return f"{key}: expected keys and values, found {quote(typed)}{needs}"
    if kind in ("enum", "literal_error"):
        return f"{key}: {quote(typed)} is not one of {ctx.get('expected', '')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{key}: {quote(typed)} is not a whole number"
    if kind in ("float_type", "float_parsing"):
        return f"{key}: {quote(typed)} is not a number"
    if kind in ("bool_type", "bool_parsing"):
        return f"{key}: {quote(typed)} is not true or false"
    if kind in ("tuple_type", "list_type"):
        return f"{key}: expected a list, found {quote(typed)}"
    if kind in ("string_type",):
        return f"{key}: expected text, found {quote(typed)}"
    bounds = {
        "greater_than": "more than {gt}",
        "greater_than_equal": "at least {ge}",
        "less_than": "less than {lt}",
        "less_than_equal": "at most {le}",
        "too_short": "at least {min_length} entries",
        "too_long": "at most {max_length} entries",
    }
    if kind in bounds:
        shown = "that" if kind.startswith("too_") else typed
        return f"{key}: {shown} is out of range; it must be {bounds[kind].format(**ctx)}"
    return f"{key}: {err['msg']} (typed {quote(typed)})"


def check(source: Source) -> Cluster:
    """Model and check `source`; raise SourceError with every problem found."""
    try:
        cluster = validate(source.data)
    except ValidationError as exc:
        raise SourceError(model_diagnostics(source, exc)) from None
    problems = checks.run(cluster, source)
    if problems:
        raise SourceError(problems)
    return cluster
