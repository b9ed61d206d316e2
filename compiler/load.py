"""Stage 1, load: read `cluster/` into plain data, remembering where every value came from.

The model stage sees only plain Python values (dict, tuple, str, int, bool, None); every
later stage asks `Source.where(path)` for a `file:line:col` when it has something to report.
A path is the tuple of keys and indexes that leads to a value, e.g.
`("racks", 3, "nodes", 1, "mac", "eno1")`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from compiler.errors import Diagnostic, Location, SourceError

Path_ = tuple[str | int, ...]

# One file per concern, the way an operator thinks of the site; racks get a folder because
# racks are added one at a time and each pull request should touch only its own rack file.
SECTIONS = ("site", "networks", "hardware", "fabric", "firmware", "provisioning")
RACKS_DIR = "racks"

# Compose with ruamel's libyaml-based parser (ten times faster than the round-trip loader on
# the reference cluster) and keep each node's start mark ourselves; YAML 1.2 scalar rules.
_YAML = YAML(typ="safe", pure=False)
_SCALARS = _YAML.constructor


@dataclass(frozen=True)
class Source:
    """The whole of `cluster/` as plain data, with the location of every key and item."""

    root: Path
    data: dict[str, Any]
    locations: dict[Path_, Location] = field(repr=False)

    def where(self, path: Path_) -> Location:
        """Location of `path`, or of its nearest ancestor that has one (a missing key)."""
        for end in range(len(path), 0, -1):
            loc = self.locations.get(path[:end])
            if loc is not None:
                return loc
        return Location(self.display(self.root))

    def display(self, path: Path) -> str:
        """A path as diagnostics print it: relative to the repository, when it is inside."""
        try:
            return str(path.relative_to(self.root.parent))
        except ValueError:
            return str(path)

    def digest(self) -> str:
        """sha256 of the source's content: blind to comments, layout and mapping key order."""
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def load(cluster_dir: Path) -> Source:
    """Read `cluster_dir`; raise SourceError listing every file that cannot be read as YAML."""
    cluster_dir = cluster_dir.resolve()
    data: dict[str, Any] = {}
    locations: dict[Path_, Location] = {}
    diagnostics: list[Diagnostic] = []
    source = Source(cluster_dir, data, locations)

    if not cluster_dir.is_dir():
        raise SourceError(
            [Diagnostic(Location(str(cluster_dir)), "missing-source", "no cluster/ folder here")]
        )

    def read(path: Path, at: Path_) -> Any:
        name = source.display(path)
        raw = path.read_bytes()
        try:
            tree = _YAML.compose(raw)
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
            problem = exc.problem or exc.context or "cannot parse"
            diagnostics.append(Diagnostic(Location(name, line, col), "yaml-syntax", problem))
            return None
        if tree is None:
            locations[at] = Location(name, 1, 1)
            return None
        return _plain(tree, at, name, locations, diagnostics)

    known = {f"{s}.yaml" for s in SECTIONS}
    for path in sorted(cluster_dir.iterdir()):
        if path.is_dir() and path.name == RACKS_DIR:
            continue
        if path.suffix in (".yaml", ".yml") and path.name not in known:
            diagnostics.append(
                Diagnostic(
                    Location(source.display(path), 1, 1),
                    "unknown-file",
                    f"{path.name!r} is not one of {', '.join(sorted(known))} or {RACKS_DIR}/",
                )
            )
    for section in SECTIONS:
        path = cluster_dir / f"{section}.yaml"
        if not path.is_file():
            diagnostics.append(
                Diagnostic(
                    Location(source.display(path)), "missing-file", f"{section}.yaml is required"
                )
            )
            continue
        data[section] = read(path, (section,))

    racks: list[Any] = []
    rack_files = sorted((cluster_dir / RACKS_DIR).glob("*.yaml"))
    for index, path in enumerate(rack_files):
        racks.append(read(path, ("racks", index)))
    locations[("racks",)] = Location(source.display(cluster_dir / RACKS_DIR))
    data["racks"] = tuple(racks)

    if diagnostics:
        raise SourceError(diagnostics)
    return source


def _plain(
    node: Node, at: Path_, name: str, locations: dict[Path_, Location], problems: list[Diagnostic]
) -> Any:
    """Turn a composed node into dicts, tuples and scalars, recording each value's position."""
    locations.setdefault(at, Location(name, node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _plain(key_node, (*at, "<key>"), name, locations, problems)
            where = Location(name, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in out:
                problems.append(Diagnostic(where, "duplicate-key", f"key {key!r} appears twice"))
                continue
            # Point at the key, not the value: a nested block's value starts on the next line.
            locations[(*at, key)] = where
            out[key] = _plain(value_node, (*at, key), name, locations, problems)
        locations.pop((*at, "<key>"), None)
        return out
    if isinstance(node, SequenceNode):
        return tuple(
            _plain(item, (*at, i), name, locations, problems) for i, item in enumerate(node.value)
        )
    return _SCALARS.construct_object(node)


def walk(value: Any, at: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) below `value`, depth first; used by checks that scan all values."""
    yield at, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from walk(child, (*at, key))
    elif isinstance(value, tuple):
        for index, child in enumerate(value):
            yield from walk(child, (*at, index))
