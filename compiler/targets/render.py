"""Shared rendering helpers for targets: strict jinja2 templates, canonical JSON, YAML, CSV."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import jinja2
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode

from common.errors import TargetError, quote
from contract import dumps


class Lines(str):
    """Text a target built as whole lines on purpose (a kickstart's network block, an
    embedded script): the one kind of value a template may interpolate with line breaks."""

    __slots__ = ()


class UnsafeValue(TargetError):
    """Raised when a template would write a value holding a line break or a control
    character: in a line-oriented file (a kickstart, dhcpd.conf, a GRUB menu, a keyfile)
    such a value starts lines of its own (`%pre`, a second `host` block), so the file says
    what no one wrote. `value` is the whole value, for the caller to find where it came from."""

    def __init__(self, template: str, value: str) -> None:
        self.template, self.value = template, value
        super().__init__(f"{template}: {quote(value)} holds a line break or a control character")


class _Unsafe(Exception):
    def __init__(self, value: str) -> None:
        self.value = value


# C0 and C1 controls (tab, line feed and carriage return among them), DEL, and the line and
# paragraph separators some readers break lines at; what `str.isprintable` refuses besides
# (a no-break space, a soft hyphen) is harmless on a line and written as it is.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _finalize(value: Any) -> Any:
    """Every `{{ ... }}` of every template goes through here before it is written (jinja's
    `finalize`): the one guard between a value and the lines of a generated file."""
    if type(value) is str:
        if not value.isprintable() and CONTROL.search(value):  # the C test first: fast
            raise _Unsafe(value)
    elif type(value) not in (int, bool, Lines) and value is not None:
        text = str(value)
        if not text.isprintable() and CONTROL.search(text):
            raise _Unsafe(text)
    return value


def guarded(name: str, *values: object) -> None:
    """The templates' guard (`_finalize`) for a file a target writes in Python: raises
    UnsafeValue, naming the file's kind `name`, for the first value holding a line break or
    a control character."""
    try:
        for value in values:
            _finalize(value)
    except _Unsafe as exc:
        raise UnsafeValue(name, exc.value) from None


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("compiler.targets", "templates"),
        undefined=jinja2.StrictUndefined,  # a missing fact is a bug, never an empty string
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates are package data: no stat per lookup
        # Compiling the templates was a sixth of a cold compile; jinja2 keys this cache (its
        # own private folder in the temp dir) by each template's source checksum.
        # The cache files are named apart from jinja's default: a template compiled without
        # `finalize` (by an older clusterforge, or any other jinja user on the machine) has
        # no call to it in its code, and loaded from a shared cache it would skip the guard.
        bytecode_cache=jinja2.FileSystemBytecodeCache(pattern="__clusterforge_guarded_%s.cache"),
    )
    # No template calls jinja's globals (range, dict, cycler, joiner, lipsum, namespace);
    # copying them into every render's fresh context was a fifth of rendering a small file
    # (a keyfile), of which a compile renders several per host.
    env.globals.clear()
    return env


@cache  # jinja's own lookup builds a ChainMap and a weak reference and walks an LRU list
def _template(name: str) -> jinja2.Template:  # for each of a compile's hundreds of renders
    return _env().get_template(name)


def template(name: str, **context: Any) -> str:
    """Render `templates/<name>`; an error names the template and its line. Raises
    UnsafeValue when a value (other than `Lines`) holds a line break or a control character."""
    try:
        return _template(name).render(**context)
    except _Unsafe as exc:
        raise UnsafeValue(name, exc.value) from None
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise TargetError(f"{name}:{line or '?'}: {exc}") from exc


def to_json(data: Any) -> str:
    """JSON as every generated file writes it: sorted keys, two-space indent, final newline
    (the contract's form: its records write themselves the same way)."""
    return dumps(data)


@cache  # one dumper for every document: making one costs more than most dumps
def _dumper() -> YAML:
    yaml = YAML(typ="safe", pure=False)  # libyaml emitter: same text, three times faster
    yaml.default_flow_style = False
    yaml.width = 4096  # a long value stays on its line
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.ignore_aliases = lambda _: True  # equal values are written out, not &id
    return yaml


def _ruamel_yaml(data: Any) -> str:
    out = io.StringIO()
    _dumper().dump(data, out)
    return out.getvalue()


class _Unusual(Exception):
    """A value the block writer leaves to ruamel: the whole document goes there."""


# Names like gpu0001, group_by or apiVersion are plain scalars in YAML 1.2 unless they spell
# a boolean or null (in any case; the 1.1 words too, which ruamel may or may not quote).
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}")
_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}
# Other text libyaml writes plain in block style (yaml_emitter_analyze_scalar): printable, on
# one line, no space at either end, no indicator first, no ": " or " #" inside, no ":" last,
# and short of the line width, past which it would fold a plain scalar at a space.
_PROSE = re.compile(r"(?!\.\.\.)[^-?:,\[\]{}#&*!|>'\"%@` ](?:(?!: | #).)*(?<![ :])", re.DOTALL)


def _scalar(value: str | int | bool | float | None) -> str:
    """One scalar as ruamel writes it in block style (quoted where YAML would misread it);
    the common ones without it (each call of ruamel costs as much as a small file)."""
    if value is None or type(value) is bool:
        return {None: "null", True: "true", False: "false"}[value]
    if type(value) is int:
        return str(value)
    if isinstance(value, str):
        return _text(value)
    return _ruamel_scalar(value)  # a float: rare, and 0.0 == -0.0 would confuse a cache


@cache
def _text(value: str) -> str:
    if _NAME.fullmatch(value):
        plain = value.lower() not in _WORDS
    else:  # a number, a date or a merge key (2.6, 0x1F, 2026-11-30, <<) is quoted: ask YAML
        plain = len(value) <= 1024 and value.isprintable() and bool(_PROSE.fullmatch(value))
        plain = plain and _reads_as_text(value)
    return value if plain else _ruamel_scalar(value)


def _reads_as_text(value: str) -> bool:
    """Whether YAML reads `value`, written plain, as a string (what ruamel asks to choose)."""
    tag = _dumper().resolver.resolve(ScalarNode, value, (True, False))
    return bool(tag.suffix == "tag:yaml.org,2002:str")


def _ruamel_scalar(value: str | float) -> str:
    text = _ruamel_yaml([value])
    if not text.startswith("- ") or text.count("\n") != 1:
        raise _Unusual  # a multi-line or folded scalar
    return text[2:-1]


def _mapping(data: dict[Any, Any], indent: str, lead: str, out: list[str]) -> None:
    """The entries of `data` at `indent`, the first after `lead` (`indent`, or "- " in a list)."""
    for key, value in data.items():
        # Long keys and keys of more than one line take the "? " form: ruamel writes those.
        if not isinstance(key, str) or len(key) > 128 or not key.isprintable():
            raise _Unusual
        head = f"{lead}{_scalar(key)}:"
        lead = indent
        if isinstance(value, dict) and value:
            out.append(head + "\n")
            _mapping(value, indent + "  ", indent + "  ", out)
        elif isinstance(value, (list, tuple)) and value:
            out.append(head + "\n")
            _sequence(value, indent, out)
        elif isinstance(value, (dict, list, tuple)):
            out.append(f"{head} {'{}' if isinstance(value, dict) else '[]'}\n")
        elif value is None or isinstance(value, (str, int, float)):
            out.append(f"{head} {_scalar(value)}\n")
        else:
            raise _Unusual


def _sequence(items: Sequence[Any], indent: str, out: list[str]) -> None:
    """The items of a list under a key at `indent`: "- " at the key's own indent, as ruamel."""
    for item in items:
        if isinstance(item, dict) and item:
            _mapping(item, indent + "  ", indent + "- ", out)
        elif isinstance(item, (dict, list, tuple)):  # a list in a list, or an empty one
            raise _Unusual
        else:
            out.append(f"{indent}- {_scalar(item)}\n")


def to_yaml(data: Any) -> str:
    """Block-style YAML in the order `data` was built; strings that look like numbers quoted.

    Mappings of mappings, of scalars and of lists of either (manifests, Prometheus rules,
    Alertmanager routes) are written here, plain scalars as they are and each distinct other
    one rendered by ruamel once: the same text as ruamel writes, without its per-node
    representer cost (turning each node's tag into text was a third of writing the alert
    rules). Anything else goes to ruamel whole."""
    if isinstance(data, dict) and data:
        out: list[str] = []
        try:
            _mapping(data, "", "", out)
            return "".join(out)
        except _Unusual:
            pass
    return _ruamel_yaml(data)


# A text cell a spreadsheet would run as a formula: OWASP, "CSV Injection"
# (https://owasp.org/www-community/attacks/CSV_Injection): no cell may begin with = + - @,
# a tab or a carriage return; such a cell is prefixed with a single quote, which Excel,
# LibreOffice and Sheets read as "this is text" and the csv writer quotes as needed.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
# Where a cell starts in the written text (the text's start, or after a comma or a line end;
# quoted or not): a table without any such start is written once, with no per-cell cost. Two
# patterns, not one starting `(?:^|,)`: that alternation kept the regex engine from skipping
# ahead to the separators and doubled the scan of a large table.
_FORMULA_FIRST = re.compile(r'"?[=+\-@\t\r]')
_FORMULA_START = re.compile(r'[,\n]"?[=+\-@\t\r]')


def _plain_csv(rows: Sequence[Sequence[object]]) -> str | None:
    """The csv writer's text for a table of plain text, made by joining: the writer goes
    through every character in Python's C code one by one, which made the cable tables of a
    large fabric cost more than the rest of their targets. None when a cell is not text or
    the writer would quote one (a comma, a quote or a line break in it), or a row is a
    single cell (an empty one is written quoted): those take the writer."""
    try:
        text = "\n".join([",".join(row) for row in rows]) + "\n"  # type: ignore[arg-type]
    except TypeError:  # a number or None: the writer's str() of it, "" for None
        return None
    if min(map(len, rows)) < 2 or '"' in text or "\r" in text:
        return None
    # Every comma and line end is one the join put there: no cell holds one.
    if text.count(",") != sum(map(len, rows)) - len(rows) or text.count("\n") != len(rows):
        return None
    return text


def _neutral(row: Sequence[object]) -> list[object]:
    return [f"'{c}" if isinstance(c, str) and c.startswith(_FORMULA) else c for c in row]


def to_csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A header row then `rows`; "\n" line ends keep committed tables diffable. Text that a
    spreadsheet would run as a formula is written as text (see `_FORMULA`)."""
    rows = list(rows)
    text = _plain_csv([columns, *rows])
    if text is None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        text = buf.getvalue()
    if not (_FORMULA_FIRST.match(text) or _FORMULA_START.search(text)):
        return text
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(_neutral(columns))
    writer.writerows(_neutral(row) for row in rows)
    return buf.getvalue()
