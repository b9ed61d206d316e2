"""Shared rendering helpers for targets: strict jinja2 templates, canonical JSON, YAML, CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import jinja2
from ruamel.yaml import YAML

from compiler.errors import TargetError


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("compiler.targets", "templates"),
        undefined=jinja2.StrictUndefined,  # a missing fact is a bug, never an empty string
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def template(name: str, **context: Any) -> str:
    """Render `templates/<name>`; an error names the template and its line."""
    try:
        return _env().get_template(name).render(**context)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise TargetError(f"{name}:{line or '?'}: {exc}") from exc


def to_json(data: Any) -> str:
    """JSON as every generated file writes it: sorted keys, two-space indent, final newline."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_yaml(data: Any) -> str:
    """Block-style YAML in the order `data` was built; strings that look like numbers quoted."""
    yaml = YAML(typ="safe", pure=False)  # libyaml emitter: same text, three times faster
    yaml.default_flow_style = False
    yaml.width = 4096  # a long value stays on its line
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.ignore_aliases = lambda _: True  # equal values are written out, not &id
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def to_csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A header row then `rows`; "\n" line ends keep committed tables diffable."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()
