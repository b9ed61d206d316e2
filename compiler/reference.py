"""The field reference of `cluster/` (docs/reference.md), generated from the model itself.

Pure: the model classes in, Markdown out. Each file of `cluster/` gets a table of its keys:
type, whether it is required, its default, and the comment beside the field in
`compiler/model.py`; nested shapes get a table of their own, once. A test keeps
docs/reference.md equal to `markdown()`: regenerate with `python -m compiler.reference`.
"""

from __future__ import annotations

import inspect
import re
import sys
from enum import Enum
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from compiler import model

# Where each top-level key of the model lives in cluster/.
FILES = {
    "racks": "cluster/racks/*.yaml (one rack per file)",
    **{name: f"cluster/{name}.yaml" for name in model.Cluster.model_fields if name != "racks"},
}
_COMMENT = re.compile(r"^    (\w+):[^#]*#\s*(.+)$")


def markdown() -> str:
    """docs/reference.md."""
    out = [
        "# Reference: every key of cluster/",
        "",
        "Generated from `compiler/model.py` by `python -m compiler.reference`; a test fails",
        "when this file and the model disagree. Unknown keys are errors. Quote every version,",
        'date and identifier (`bios: "2.6"`): unquoted, YAML reads 2.6 as a number. Files are',
        "read by YAML 1.2's rules (`yes` and `on` are text, `0755` a decimal number), whatever",
        "a `%YAML` directive says.",
        "",
        "YAML is read as data only. Refused where written (rule in brackets): anchors and",
        "aliases (`&a`, `*a`) and the merge key `<<` [`yaml-anchor`, `yaml-merge-key`]; tags",
        "other than the core schema's (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`,",
        "`!!seq`, `!!map`) [`yaml-tag`]; keys that are not text (`42:`, a mapping as a key)",
        "[`yaml-key-type`]; a number or date longer than 64 characters [`yaml-scalar`];",
        "nesting deeper than 64 levels [`yaml-too-deep`]; a file over 4 MiB",
        "[`yaml-too-large`]; bytes that are not UTF-8, a NUL or another control character",
        "[`yaml-encoding`]. Only regular files are read: a symbolic link (even one inside the",
        "repository: git keeps the link, not the file), a FIFO, a device or a folder named",
        "`*.yaml` is `not-a-file`, never followed nor printed; a file name with control",
        "characters is `file-name`. Every key and value is one line of text: a line break",
        "(a `|` or `>` block included), a tab or another control character is",
        "`control-character`, as it would write lines of its own into a generated file.",
        "",
    ]
    done: set[type[BaseModel]] = set()
    queue: list[type[BaseModel]] = []
    for key, info in model.Cluster.model_fields.items():
        out += [f"## {FILES[key]}", ""]
        shape = _type(info.annotation, queue)
        # An optional file's model (ethernet.yaml: `EthernetFabric | None`) is its table.
        top = model._unwrap(info.annotation)
        if get_origin(top) is dict:
            out += [f"A mapping: {shape}.", ""]
        elif get_origin(top) is tuple:
            out += [f"Each file: {shape.removeprefix('list of ')}.", ""]
        else:
            out += _table(top, queue)
            done.add(top)
    while queue:
        cls = queue.pop(0)
        if cls in done:
            continue
        done.add(cls)
        out += [f"### {cls.__name__}", "", *_table(cls, queue)]
    return "\n".join(out).rstrip() + "\n"


def _table(cls: type[BaseModel], queue: list[type[BaseModel]]) -> list[str]:
    doc = inspect.getdoc(cls)
    lines = [" ".join(doc.split()), ""] if doc and cls.__doc__ else []
    comments = _comments(cls)
    lines += ["| key | type | required | default | notes |", "| --- | --- | --- | --- | --- |"]
    for name, info in cls.model_fields.items():
        # pydantic lifts a field's own Annotated[...] metadata out of its annotation.
        lifted = [m for m in info.metadata if isinstance(m, AfterValidator)]
        full = Annotated[info.annotation, *lifted] if lifted else info.annotation
        shape = _type(full, queue)
        cells = (
            f"`{name}`",
            shape + _bounds(info),
            "yes" if info.is_required() else "",
            _default(info),
            comments.get(name, ""),
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return [*lines, ""]


def _comments(cls: type[BaseModel]) -> dict[str, str]:
    """The comment after each field in the class's source: the model's own words."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    return {m[1]: m[2] for line in source.splitlines() if (m := _COMMENT.match(line))}


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _type(tp: Any, queue: list[type[BaseModel]]) -> str:
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        what = [m.func.__doc__ for m in meta if isinstance(m, AfterValidator) and m.func.__doc__]
        return what[-1] if what else _type(base, queue)
    if origin in (Union, UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        shown = " or ".join(_type(a, queue) for a in rest)
        return shown + (" or null" if len(rest) < len(get_args(tp)) else "")
    if origin is tuple:
        return f"list of {_type(get_args(tp)[0], queue)}"
    if origin is dict:
        key, value = get_args(tp)
        return f"mapping of {_type(key, queue)} to {_type(value, queue)}"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        queue.append(tp)
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    names = {str: "text", int: "integer", float: "number", bool: "true/false"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _bounds(info: FieldInfo) -> str:
    words = {
        Gt: ("gt", "> {}"),
        Ge: ("ge", ">= {}"),
        Lt: ("lt", "< {}"),
        Le: ("le", "<= {}"),
        MinLen: ("min_length", "at least {} long"),
        MaxLen: ("max_length", "at most {} long"),
    }
    found = [
        text.format(getattr(meta, attr))
        for meta in info.metadata
        for kind, (attr, text) in words.items()
        if isinstance(meta, kind)
    ]
    return f" ({', '.join(found)})" if found else ""


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return ""
    value = info.default if info.default is not PydanticUndefined else info.default_factory
    if value in (dict, list, tuple):  # an empty container made fresh for each record
        value = value()
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, BaseModel):
        return "its defaults"
    empty = {"()": "[]", "{}": "{}", "None": "null", "''": '""'}
    return empty.get(repr(value), f"`{value}`")


if __name__ == "__main__":
    sys.stdout.write(markdown())
