"""Stage 1, load: read `cluster/` into plain data, remembering where every value came from.

This is cluster/'s layout (its sections, its racks folder, how its files are read from disk);
each file is read by the hardened YAML reader of `common/yaml.py`.

The model stage sees only plain Python values (dict, tuple, str, int, bool, None); every
later stage asks `Source.where(path)` for a `file:line:col` when it has something to report.
A path is the tuple of keys and indexes that leads to a value, e.g.
`("racks", 3, "nodes", 1, "mac", "eno1")`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common import memo
from common.errors import Diagnostic, Location, SourceError, quote
from common.rules import Rule

# The hardened YAML reader is common's (a lab's faults file is read with it too); these are
# re-exported for the compiler's stages, which know it as part of loading cluster/.
from common.yaml import MAX_FILE_BYTES as MAX_FILE_BYTES
from common.yaml import Path_ as Path_
from common.yaml import Refused as Refused
from common.yaml import Source as Source
from common.yaml import compose, plain
from common.yaml import parse_document as parse_document
from common.yaml import too_large as too_large

# One file per concern, the way an operator thinks of the site; racks get a folder because
# racks are added one at a time and each pull request should touch only its own rack file.
SECTIONS = ("site", "networks", "hardware", "fabric", "firmware", "provisioning", "services")
# Sections a tree may leave out (older trees, small test clusters): the model's defaults apply.
OPTIONAL = ("acceptance", "slurm", "ethernet")
RACKS_DIR = "racks"
_YAML_SUFFIXES = (".yaml", ".yml")

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
        value, found, typed, problems = _read(name, at, files[name])
        locations.update(found)
        texts.update(typed)
        diagnostics.extend(problems)
        return value

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


@memo.by_value  # a diff's two sides parse each file they hold byte for byte once
def _read(name: str, at: Path_, data: bytes | Refused) -> _Parsed:
    """One file's data at `at`, with the positions and text of its values and its problems
    (read by the caller, never changed: a diff's two sides share them)."""
    locations: dict[Path_, Location] = {}
    texts: dict[Path_, str] = {}
    problems: list[Diagnostic] = []
    tree = compose(name, data, problems)
    if tree is None:
        return None, {at: Location(name, 1, 1)}, texts, problems
    return plain(tree, at, name, locations, texts, problems), locations, texts, problems


_Parsed = tuple[Any, dict[Path_, Location], dict[Path_, str], list[Diagnostic]]


def _is_rack_file(name: str) -> bool:
    """`cluster/racks/<name>.yaml`, directly in the folder: a file in a subfolder is not a
    rack (the messages say racks/*.yaml, and a parked copy must not be compiled in)."""
    folder, _, base = name.rpartition("/")
    return folder == f"cluster/{RACKS_DIR}" and base.endswith(".yaml")
