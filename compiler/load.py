"""Stage 1, load: read `cluster/` into plain data, remembering where every value came from.

The model stage sees only plain Python values (dict, tuple, str, int, bool, None); every
later stage asks `Source.where(path)` for a `file:line:col` when it has something to report.
A path is the tuple of keys and indexes that leads to a value, e.g.
`("racks", 3, "nodes", 1, "mac", "eno1")`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import Resolver
from ruamel.yaml.tag import Tag

from compiler.errors import Diagnostic, Location, SourceError

Path_ = tuple[str | int, ...]

# One file per concern, the way an operator thinks of the site; racks get a folder because
# racks are added one at a time and each pull request should touch only its own rack file.
SECTIONS = ("site", "networks", "hardware", "fabric", "firmware", "provisioning", "services")
# Sections a tree may leave out (older trees, small test clusters): the model's defaults apply.
OPTIONAL = ("acceptance", "slurm")
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


def read_dir(cluster_dir: Path) -> dict[str, bytes]:
    """Every YAML file below `cluster_dir`, by its path as diagnostics print it (cluster/...)."""
    if not cluster_dir.is_dir():
        raise SourceError(
            [
                Diagnostic(
                    Location(str(cluster_dir)),
                    "missing-source",
                    "no cluster/ folder here or in any folder above; start one with "
                    "`clusterforge init DIR`, or name the repository with -C DIR",
                )
            ]
        )
    return {
        f"cluster/{p.relative_to(cluster_dir).as_posix()}": p.read_bytes()
        for p in sorted(cluster_dir.rglob("*"))
        if p.is_file() and p.suffix in (".yaml", ".yml")
    }


def load(cluster_dir: Path) -> Source:
    """Read and parse `cluster_dir`; see `parse`."""
    return parse(read_dir(cluster_dir))


def parse(files: dict[str, bytes]) -> Source:
    """Parse `{"cluster/<name>.yaml": bytes}` (from disk or from a git tree) into a Source;
    raise SourceError listing every file that is missing, unknown or not valid YAML."""
    data: dict[str, Any] = {}
    locations: dict[Path_, Location] = {}
    texts: dict[Path_, str] = {}
    diagnostics: list[Diagnostic] = []

    def read(name: str, at: Path_) -> Any:
        try:
            tree = _YAML.compose(files[name])
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
            problem = exc.problem or exc.context or "cannot parse"
            diagnostics.append(Diagnostic(Location(name, line, col), "yaml-syntax", problem))
            return None
        if tree is None:
            locations[at] = Location(name, 1, 1)
            return None
        return _plain(tree, at, name, locations, texts, diagnostics)

    known = {f"cluster/{s}.yaml" for s in (*SECTIONS, *OPTIONAL)}
    racks_prefix = f"cluster/{RACKS_DIR}/"
    for name in sorted(files):
        if name not in known and not _is_rack_file(name):
            diagnostics.append(
                Diagnostic(
                    Location(name, 1, 1),
                    "unknown-file",
                    f"{name!r} is not one of {', '.join(sorted(known))} or {racks_prefix}*.yaml",
                )
            )
    for section in SECTIONS:
        name = f"cluster/{section}.yaml"
        if name not in files:
            diagnostics.append(Diagnostic(Location(name), "missing-file", f"{name} is required"))
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
                    "rack-file-name",
                    f"rack {rack['name']!r} is in {stem}.yaml; name the file after the rack",
                )
            )
    locations[("racks",)] = Location(racks_prefix)

    if diagnostics:
        raise SourceError(diagnostics)
    return Source(data, locations, texts)


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
    try:
        tree = _YAML.compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "cannot parse"
        raise SourceError([Diagnostic(Location(name, line, col), "yaml-syntax", problem)]) from None
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
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.ctag is _TEXT and isinstance(key_node, ScalarNode):
                key = key_node.value  # nearly every key: no need to go round _plain
            else:
                key = _plain(key_node, (*at, "<key>"), name, locations, texts, problems)
                locations.pop((*at, "<key>"), None)
            where = Location(name, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in out:
                problems.append(Diagnostic(where, "duplicate-key", f"key {key!r} appears twice"))
                continue
            # Point at the key, not the value: a nested block's value starts on the next line.
            locations[(*at, key)] = where
            out[key] = _plain(value_node, (*at, key), name, locations, texts, problems)
        return out
    if isinstance(node, SequenceNode):
        return tuple(
            _plain(item, (*at, i), name, locations, texts, problems)
            for i, item in enumerate(node.value)
        )
    if node.ctag is _TEXT or node.tag == _STR:  # most scalars: the text is the value
        return node.value
    value = _SCALARS.construct_object(node)
    if not isinstance(value, str):
        texts[at] = node.value
    return value
