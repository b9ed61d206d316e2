"""Stage 1, load: read `cluster/` into plain data, remembering where every value came from.

The model stage sees only plain Python values (dict, tuple, str, int, bool, None); every
later stage asks `Source.where(path)` for a `file:line:col` when it has something to report.
A path is the tuple of keys and indexes that leads to a value, e.g.
`("racks", 3, "nodes", 1, "mac", "eno1")`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
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

# One file per concern, the way an operator thinks of the site; racks get a folder because
# racks are added one at a time and each pull request should touch only its own rack file.
SECTIONS = ("site", "networks", "hardware", "fabric", "firmware", "provisioning", "services")
# Sections a tree may leave out (older trees, small test clusters): the model's defaults apply.
OPTIONAL = ("acceptance", "slurm", "ethernet")
RACKS_DIR = "racks"


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


# Bounds on what a YAML file may be, checked before composing: cluster/ is data typed by
# people, never deeper than a dozen levels nor larger than a few tens of kilobytes a file.
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_SCALAR = 64  # characters of a number, a boolean or a date: an int of 5,000 digits is noise
_YAML_SUFFIXES = (".yaml", ".yml")
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


Files = Mapping[str, "bytes | Refused"]


def read_dir(cluster_dir: Path) -> dict[str, bytes | Refused]:
    """Every YAML file below `cluster_dir`, by its path as diagnostics print it (cluster/...).

    Only regular files are read, through `lstat` and `O_NOFOLLOW`: a symbolic link (even to a
    file inside the repository: git keeps the link, not what it points to, so the review and
    the compile would read different things), a FIFO, a device, a folder named like a YAML
    file or a file over MAX_FILE_BYTES is `Refused`, its content never opened."""
    try:
        top = os.lstat(cluster_dir)
    except OSError:
        top = None
    if top is None or not stat.S_ISDIR(top.st_mode):
        linked = top is not None and stat.S_ISLNK(top.st_mode)
        raise SourceError(
            [
                Diagnostic(
                    Location(str(cluster_dir)),
                    Rule.NOT_A_FILE if linked else Rule.MISSING_SOURCE,
                    "cluster/ is a symbolic link; it must be a folder of the repository"
                    if linked
                    else "no cluster/ folder here or in any folder above; start one with "
                    "`clusterforge init DIR`, or name the repository with -C DIR",
                )
            ]
        )
    out: dict[str, bytes | Refused] = {}
    folders = [(os.fspath(cluster_dir), "cluster/")]
    while folders:
        folder, prefix = folders.pop()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            name = prefix + entry.name
            if not entry.name.isprintable():
                out[escaped(name)] = NAME_REFUSAL
            elif entry.name.startswith(".#") and entry.is_symlink():
                # Emacs marks a file being edited with a dangling link `.#<name>` beside it
                # (its lock, never committed): neither followed nor a cluster/ file.
                continue
            elif entry.is_symlink():
                out[name] = read_link_refusal()
            elif entry.is_dir(follow_symlinks=False):
                if entry.name.endswith(_YAML_SUFFIXES):
                    out[name] = Refused(Rule.NOT_A_FILE, "a folder, where a YAML file is expected")
                else:
                    folders.append((entry.path, f"{name}/"))
            elif entry.name.endswith(_YAML_SUFFIXES):
                out[name] = _read_regular(entry.path)
    return dict(sorted(out.items()))


def _read_regular(path: str) -> bytes | Refused:
    """The bytes of the regular file at `path`, or why not: opened without following a link
    and without blocking on a FIFO, checked on the open descriptor (no race with a rename)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return Refused(Rule.NOT_A_FILE, f"cannot be opened: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Refused(Rule.NOT_A_FILE, "not a regular file (a FIFO, socket or device)")
        if info.st_size > MAX_FILE_BYTES:
            return too_large(info.st_size)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_FILE_BYTES:  # it grew while read
                return too_large(size)
        return b"".join(chunks)
    except OSError as exc:
        return Refused(Rule.NOT_A_FILE, f"cannot be read: {exc.strerror}")
    finally:
        os.close(fd)


# A diagnostic starts with the file's name: one holding a line break or a terminal escape
# would forge or hide lines of the output, so such a file is named escaped and never read.
NAME_REFUSAL = Refused(Rule.FILE_NAME, "a file name with control characters; rename the file")


def escaped(name: str) -> str:
    """`name` with its unprintable characters as backslash escapes, safe to print."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in name)


def read_link_refusal() -> Refused:
    """Why a symbolic link in cluster/ is not followed (on disk and in a git tree alike)."""
    return Refused(
        Rule.NOT_A_FILE,
        "a symbolic link: cluster/ is read from regular files only (git keeps the link, "
        "not what it points to); copy the file in instead",
    )


def too_large(size: int) -> Refused:
    return Refused(
        Rule.YAML_TOO_LARGE,
        f"{size} bytes; a cluster/ file may hold at most {MAX_FILE_BYTES} "
        "(split racks into their own files)",
    )


def load(cluster_dir: Path) -> Source:
    """Read and parse `cluster_dir`; see `parse`."""
    return parse(read_dir(cluster_dir))


def parse(files: Files) -> Source:
    """Parse `{"cluster/<name>.yaml": bytes}` (from disk or from a git tree) into a Source;
    raise SourceError listing every file that is missing, unknown, refused or not valid YAML."""
    data: dict[str, Any] = {}
    locations: dict[Path_, Location] = {}
    texts: dict[Path_, str] = {}
    diagnostics: list[Diagnostic] = []

    def read(name: str, at: Path_) -> Any:
        tree = _compose(name, files[name], diagnostics)
        if tree is None:
            locations[at] = Location(name, 1, 1)
            return None
        return _plain(tree, at, name, locations, texts, diagnostics)

    known = {f"cluster/{s}.yaml" for s in (*SECTIONS, *OPTIONAL)}
    racks_prefix = f"cluster/{RACKS_DIR}/"
    for name in sorted(files):
        refused = files[name]
        if isinstance(refused, Refused) and name not in known and not _is_rack_file(name):
            # A link or a FIFO by any name: say what it is, not that the name is unknown.
            diagnostics.append(Diagnostic(Location(name, 1, 1), refused.rule, refused.message))
        elif name not in known and not _is_rack_file(name):
            diagnostics.append(
                Diagnostic(
                    Location(name, 1, 1),
                    Rule.UNKNOWN_FILE,
                    f"{quote(name)} is not one of {', '.join(sorted(known))} or "
                    f"{racks_prefix}*.yaml",
                )
            )
    for section in SECTIONS:
        name = f"cluster/{section}.yaml"
        if name not in files:
            diagnostics.append(Diagnostic(Location(name), Rule.MISSING_FILE, f"{name} is required"))
            continue
        data[section] = read(name, (section,))
    for section in OPTIONAL:
        name = f"cluster/{section}.yaml"
        if name in files:
            data[section] = read(name, (section,))

    rack_files = sorted(n for n in files if _is_rack_file(n))
    data["racks"] = tuple(read(name, ("racks", i)) for i, name in enumerate(rack_files))
    # A rack is its file: cable IDs and messages take the name, reviewers go by the file name.
    for i, name in enumerate(rack_files):
        rack, stem = data["racks"][i], name.rsplit("/", 1)[-1].removesuffix(".yaml")
        if isinstance(rack, dict) and isinstance(rack.get("name"), str) and rack["name"] != stem:
            diagnostics.append(
                Diagnostic(
                    locations[("racks", i, "name")],
                    Rule.RACK_FILE_NAME,
                    f"rack {quote(rack['name'])} is in {stem}.yaml; name the file after the rack",
                )
            )
    locations[("racks",)] = Location(racks_prefix)

    if diagnostics:
        raise SourceError(diagnostics)
    return Source(data, locations, texts)


# What sends a file down the careful path (`_scan`) before composing: an anchor or alias
# (`&a`, `*a` where a node starts), a tag (`!x`), a merge key, more flow brackets than the
# composer can nest safely, or a line indented past MAX_DEPTH (block nesting needs a column
# per level, or two for `- - `). A file without any of them cannot hold an alias, a tag or a
# merge key and is nested at most about MAX_DEPTH + its brackets deep, which the composer
# (C, recursive) and `_plain` (which bounds depth itself) take safely. The reference's files
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


# YAML's printable characters (1.2, 5.1): where the reader stopped, found again to locate it.
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _compose(name: str, data: bytes | Refused, problems: list[Diagnostic]) -> Node | None:
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


def _is_rack_file(name: str) -> bool:
    """`cluster/racks/<name>.yaml`, directly in the folder: a file in a subfolder is not a
    rack (the messages say racks/*.yaml, and a parked copy must not be compiled in)."""
    folder, _, base = name.rpartition("/")
    return folder == f"cluster/{RACKS_DIR}" and base.endswith(".yaml")


def parse_document(name: str, text: bytes) -> Source:
    """Parse one YAML file outside `cluster/` (a lab's faults file) into a Source whose paths
    start at the document's root; raise SourceError when it is not valid YAML."""
    problems: list[Diagnostic] = []
    locations: dict[Path_, Location] = {}
    texts: dict[Path_, str] = {}
    tree = _compose(name, text, problems)
    data = None if tree is None else _plain(tree, (), name, locations, texts, problems)
    if problems:
        raise SourceError(problems)
    locations.setdefault((), Location(name, 1, 1))
    return Source(
        {"document": data},
        {("document", *k): v for k, v in locations.items()},
        {("document", *k): v for k, v in texts.items()},
    )


def _plain(
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
            out[key] = _plain(value_node, (*at, key), name, locations, texts, problems)
        return out
    if isinstance(node, SequenceNode):
        if len(at) > MAX_DEPTH:
            problems.append(_too_deep(locations[at]))
            return None
        return tuple(
            _plain(item, (*at, i), name, locations, texts, problems)
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
