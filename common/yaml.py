"""Hardened YAML: one document of plain data read with every value's location, or located
diagnostics, never an exception nor a surprise.

Data typed by people (`cluster/`'s files, a lab's faults file) is read as plain Python values
(dict, tuple, str, int, float, bool, None) and a `Source` that knows the `file:line:col` of
every key and item, so each later stage can say where a problem is. What is not plain data is
refused before anything is built from it: bytes that are not UTF-8 text or hold control
characters, anchors and aliases, tags outside the core schema, merge keys, nesting deeper
than MAX_DEPTH, a file over MAX_FILE_BYTES, keys that are not text. `compiler/load.py` reads
`cluster/`'s layout of such files; `parse_document` reads one on its own.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    NodeEvent,
    ScalarEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import Resolver
from ruamel.yaml.tag import Tag

from common.errors import Diagnostic, Location, SourceError, quote
from common.rules import Rule

Path_ = tuple[str | int, ...]


class _Resolver(Resolver):
    """The YAML 1.2 rules, fixed: ruamel's default resolver looks the version up again for
    every scalar (a %YAML directive could change it), a tenth of loading a cluster. Takes
    the arguments ruamel's loader passes that one."""

    def __init__(self, version: Any = None, loader: Any = None, loadumper: Any = None) -> None:
        super().__init__(loader or loadumper)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """A plain scalar's tag by the implicit rules for its first character, as ruamel's does
        (this resolver has no path rules), handing out one tag object per tag rather than a
        new one for every number in the cluster."""
        if kind is ScalarNode and implicit[0]:
            for tag, regexp in self.yaml_implicit_resolvers.get(value[:1], ()):
                if regexp.match(value):
                    return _tag(tag)
            return self.DEFAULT_SCALAR_TAG
        return super().resolve(kind, value, implicit)


@cache
def _tag(name: str) -> Tag:
    return Tag(suffix=name)


# Compose with ruamel's libyaml-based parser (ten times faster than the round-trip loader on
# the reference cluster) and keep each node's start mark ourselves; YAML 1.2 scalar rules.
_YAML = YAML(typ="safe", pure=False)
_YAML.Resolver = _Resolver
_SCALARS = _YAML.constructor
_STR = "tag:yaml.org,2002:str"
# The one tag object the resolver gives every scalar it reads as text: spotted by identity,
# without turning each node's tag into a string (a third of composing); `_STR` for the rest.
_TEXT = _Resolver.DEFAULT_SCALAR_TAG


@dataclass(frozen=True)
class Source:
    """The whole of `cluster/` as plain data, with the location of every key and item."""

    data: dict[str, Any]
    locations: dict[Path_, Location] = field(repr=False)
    # The text of every scalar that did not load as a string (`12.20` is the float 12.2), so
    # a message can quote what the operator typed.
    texts: dict[Path_, str] = field(default_factory=dict, repr=False)

    def text(self, path: Path_, value: object) -> str:
        """`value` at `path` as written in the file, where known."""
        return self.texts.get(path, value if isinstance(value, str) else repr(value))

    def where(self, path: Path_) -> Location:
        """Location of `path`, or of its nearest ancestor that has one (a missing key)."""
        for end in range(len(path), 0, -1):
            loc = self.locations.get(path[:end])
            if loc is not None:
                return loc
        return Location("cluster")

    def digest(self) -> str:
        """sha256 of the source's content: blind to comments, layout and mapping key order."""
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# Bounds on what a YAML file may be, checked before composing: the data is typed by
# people, never deeper than a dozen levels nor larger than a few tens of kilobytes a file.
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_SCALAR = 64  # characters of a number, a boolean or a date: an int of 5,000 digits is noise
# The core schema's tags, the only ones an explicit `!!tag` may name; anything else
# (`!evil`, `!!python/name:os.system`, `!!binary`, `!!set`) is refused, never constructed.
_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")
)
_MERGE = "<<"


class Refused(NamedTuple):
    """A file cluster/ holds that is not read: why, as a diagnostic's rule and message."""

    rule: Rule
    message: str


def too_large(size: int) -> Refused:
    return Refused(
        Rule.YAML_TOO_LARGE,
        f"{size} bytes; a cluster/ file may hold at most {MAX_FILE_BYTES} "
        "(split racks into their own files)",
    )


# What sends a file down the careful path (`_scan`) before composing: an anchor or alias
# (`&a`, `*a` where a node starts), a tag (`!x`), a merge key, more flow brackets than the
# composer can nest safely, or a line indented past MAX_DEPTH (block nesting needs a column
# per level, or two for `- - `). A file without any of them cannot hold an alias, a tag or a
# merge key and is nested at most about MAX_DEPTH + its brackets deep, which the composer
# (C, recursive) and `plain` (which bounds depth itself) take safely. The reference's files
# are all of this kind, so the common path costs a few byte searches, in C (not a regular
# expression, which would try a match at every blank of every file).
# "Where a node starts" is where libyaml (a YAML 1.1 scanner) starts a token: at the start,
# after a blank or a line break (its breaks include NEL, LS and PS, seen here by their last
# byte), after a byte-order mark, or after a flow indicator; in flow context `:` and `?` are
# indicators even with no blank after them (`{"a":&x [..]}`), so they count too. A byte that
# merely ends some other character sends a file down the careful path for nothing, never the
# reverse.
_FLOW_SAFE = 2000  # brackets in a file the C composer nests without risk (10,000 tested)
_NODE_START = frozenset(b" \t\n\r\f\v[{,:?\x85\xa8\xa9\xbf")
_NAME_END = frozenset(b" \t\n\r\f\v[]{},")  # `! x`, `& x` name nothing: no tag or anchor
_MANY_MARKS = 1000  # more `&`, `*` and `!` than this: scanned rather than looked at one by one
# The bytes a block line's indentation is made of, each mapped to 1 and all others to 0, so
# "a line indented MAX_DEPTH deep" is one substring search in the translated file.
_INDENT = bytes(int(c in b" \t?:-") for c in range(256))
_DEEP = b"\x01" * MAX_DEPTH


def _suspect(data: bytes) -> bool:
    """Whether `data` may hold what `_scan` looks for (see above); False is certain."""
    if b"<<" in data or data.count(b"[") + data.count(b"{") > _FLOW_SAFE:
        return True
    if data.count(b"&") + data.count(b"*") + data.count(b"!") > _MANY_MARKS:
        return True
    for mark in b"&*!":
        at = data.find(mark)
        while at >= 0:
            after = data[at + 1 : at + 2]
            if (at == 0 or data[at - 1] in _NODE_START) and after and after[0] not in _NAME_END:
                return True
            at = data.find(mark, at + 1)
    return _DEEP in data.translate(_INDENT)


# What is not one of YAML's printable characters (1.2, 5.1: tab, LF, CR, x20-x7E, x85,
# xA0-xD7FF, xE000-xFFFD, x10000-x10FFFF): where the reader stopped, found again to locate it.
# Written as the few ranges left out, not as the negation of those kept: a negated class
# reaching x10FFFF took 5 ms to compile, a tenth of a cold `validate`'s own time.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def compose(name: str, data: bytes | Refused, problems: list[Diagnostic]) -> Node | None:
    """The node tree of one file, or None with the reason added to `problems`: every way a
    file can fail to be plain YAML data is a located diagnostic, never an exception."""
    if isinstance(data, Refused):
        problems.append(Diagnostic(Location(name, 1, 1), data.rule, data.message))
        return None
    if len(data) > MAX_FILE_BYTES:  # from git, where the size is not known before reading
        refused = too_large(len(data))
        problems.append(Diagnostic(Location(name, 1, 1), refused.rule, refused.message))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = _at(name, data, exc.start)
        problems.append(
            Diagnostic(
                where,
                Rule.YAML_ENCODING,
                "not UTF-8 text (a byte that no "
                f"UTF-8 character starts with: {data[exc.start]:#04x})",
            )
        )
        return None
    bad = _UNPRINTABLE.search(text)
    if bad is not None:
        where = _at(name, text.encode(), len(text[: bad.start()].encode()))
        what = "a NUL" if bad.group() == "\0" else f"the control character {bad.group()!r}"
        problems.append(Diagnostic(where, Rule.YAML_ENCODING, f"{what}: YAML text may not hold it"))
        return None
    try:
        if _suspect(data):
            problem = _scan(name, data)
            if problem is not None:
                problems.append(problem)
                return None
        node: Node | None = _YAML.compose(data)
        return node
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem_text = exc.problem or exc.context or "cannot parse"
        problems.append(Diagnostic(Location(name, line, col), Rule.YAML_SYNTAX, problem_text))
    except YAMLError as exc:  # the reader's: a character class the checks above let through
        problems.append(Diagnostic(Location(name, 1, 1), Rule.YAML_SYNTAX, quote(str(exc), 200)))
    return None


def _at(name: str, data: bytes, offset: int) -> Location:
    """The line and column (in characters) of byte `offset` of `data`."""
    start = data.rfind(b"\n", 0, offset) + 1
    col = len(data[start:offset].decode("utf-8", "replace")) + 1
    return Location(name, data.count(b"\n", 0, offset) + 1, col)


def _scan(name: str, data: bytes) -> Diagnostic | None:
    """The first thing in `data` that is not plain data, from its events (libyaml's parser
    keeps its own stack, so a 100,000-deep nesting is read without recursing): an anchor or
    alias (expanding them is how ten lines grow to gigabytes), a tag outside the core schema,
    a merge key, or nesting deeper than MAX_DEPTH."""
    depth = 0
    for event in _YAML.parse(data):
        mark = event.start_mark
        where = Location(name, mark.line + 1, mark.column + 1)
        if isinstance(event, AliasEvent) or (
            isinstance(event, NodeEvent) and event.anchor is not None
        ):
            return Diagnostic(
                where,
                Rule.YAML_ANCHOR,
                "anchors and aliases (&name, *name) are not read: write each value out",
            )
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in _CORE_TAGS:
            return Diagnostic(
                where,
                Rule.YAML_TAG,
                f"the tag {quote(_short_tag(tag))} is not read: cluster/ takes plain values "
                "(text, numbers, true/false, null, lists, mappings)",
            )
        if isinstance(event, ScalarEvent) and event.value == _MERGE and event.implicit[0]:
            return Diagnostic(
                where, Rule.YAML_MERGE_KEY, "the merge key << is not read: write each key out"
            )
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return _too_deep(where)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
    return None


def _short_tag(tag: str) -> str:
    """A tag as it was typed: `!!python/name:x` rather than its expanded URI."""
    core = "tag:yaml.org,2002:"
    return f"!!{tag.removeprefix(core)}" if tag.startswith(core) else tag


def _too_deep(where: Location) -> Diagnostic:
    return Diagnostic(where, Rule.YAML_TOO_DEEP, f"nested deeper than {MAX_DEPTH} levels")


def parse_document(name: str, text: bytes) -> Source:
    """Parse one YAML file outside `cluster/` (a lab's faults file) into a Source whose paths
    start at the document's root; raise SourceError when it is not valid YAML."""
    problems: list[Diagnostic] = []
    locations: dict[Path_, Location] = {}
    texts: dict[Path_, str] = {}
    tree = compose(name, text, problems)
    data = None if tree is None else plain(tree, (), name, locations, texts, problems)
    if problems:
        raise SourceError(problems)
    locations.setdefault((), Location(name, 1, 1))
    return Source(
        {"document": data},
        {("document", *k): v for k, v in locations.items()},
        {("document", *k): v for k, v in texts.items()},
    )


def plain(
    node: Node,
    at: Path_,
    name: str,
    locations: dict[Path_, Location],
    texts: dict[Path_, str],
    problems: list[Diagnostic],
) -> Any:
    """Turn a composed node into dicts, tuples and scalars, recording each value's position."""
    if at not in locations:
        locations[at] = Location(name, node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, MappingNode):
        if len(at) > MAX_DEPTH:
            problems.append(_too_deep(locations[at]))
            return None
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            where = Location(name, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if isinstance(key_node, ScalarNode) and (
                key_node.ctag is _TEXT or key_node.tag == _STR
            ):
                key = key_node.value  # every key cluster/ takes
                if not key.isprintable() and _CONTROL.search(key):
                    problems.append(_control(where, key))
                    continue
            else:
                problems.append(_key_type(where, key_node))
                continue
            if key in out:
                problems.append(
                    Diagnostic(where, Rule.DUPLICATE_KEY, f"key {quote(key)} appears twice")
                )
                continue
            # Point at the key, not the value: a nested block's value starts on the next line.
            locations[(*at, key)] = where
            out[key] = plain(value_node, (*at, key), name, locations, texts, problems)
        return out
    if isinstance(node, SequenceNode):
        if len(at) > MAX_DEPTH:
            problems.append(_too_deep(locations[at]))
            return None
        return tuple(
            plain(item, (*at, i), name, locations, texts, problems)
            for i, item in enumerate(node.value)
        )
    if node.ctag is _TEXT or node.tag == _STR:  # most scalars: the text is the value
        text: str = node.value
        if not text.isprintable() and _CONTROL.search(text):  # the C test first: fast
            problems.append(_control(locations[at], text))
            return None
        return text
    where = locations[at]
    if len(node.value) > MAX_SCALAR:
        problems.append(
            Diagnostic(
                where,
                Rule.YAML_SCALAR,
                f"{quote(node.value)} reads as a number or a date of {len(node.value)} "
                f"characters, longer than any cluster/ takes ({MAX_SCALAR}); quote it if it "
                "is text",
            )
        )
        return None
    try:
        value = _SCALARS.construct_object(node)
    except (YAMLError, ValueError, OverflowError) as exc:  # `!!int x`, a date of month 13
        message = f"{quote(node.value)} cannot be read as {str(node.tag).rsplit(':', 1)[-1]}: {exc}"
        problems.append(Diagnostic(where, Rule.YAML_SCALAR, quote(message, 200)))
        return None
    if not isinstance(value, str):
        texts[at] = node.value
    return value


# Line breaks (a block scalar's included), tabs, other C0 and C1 controls, DEL and the line
# and paragraph separators: every value of cluster/ lands on one line of some generated
# file (a kickstart, dhcpd.conf, sshd_config, a CSV row), where such a character would start
# lines no one wrote or drive the terminal that shows it. Refused for every value here,
# whichever file it reaches and whoever writes it; templates check again as they render.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _control(where: Location, text: str) -> Diagnostic:
    return Diagnostic(
        where,
        Rule.CONTROL_CHARACTER,
        f"{quote(text)} holds a line break or a control character; every value is one line "
        "of text (write a list for several lines)",
    )


def _key_type(where: Location, node: Node) -> Diagnostic:
    """A key that is not text: a mapping, a list, a number or true/false."""
    if isinstance(node, ScalarNode):
        what = f"{quote(node.value)} reads as {str(node.tag).rsplit(':', 1)[-1]}"
        fix = f'; quote it, "{node.value}":' if len(node.value) <= MAX_SCALAR else ""
    else:
        what, fix = ("a mapping" if isinstance(node, MappingNode) else "a list"), ""
    return Diagnostic(where, Rule.YAML_KEY_TYPE, f"a key must be text; this one is {what}{fix}")
