"""What a picture shows: racks on the floor, devices at their U, cables between ports, and the
marks a page puts on some of them (drift, a change). The compiler writes it, compiled from the
plan, as `generated/draw/scene.json`; `draw` lays it out, nothing recomputed, so a page drawn
at audit time shows the state the audit's expectations were compiled from.

`generated/draw/scene.json` (schema 1): one JSON object, one record a line so that a change
to the floor reads as a few changed lines in a pull request:
  schema: 1; site, room
  racks: [{name, row, col, height_u, grid}]  in floor order: by row, then position
  devices: [{name, switch, rack, u, height_u, model, role, ports, infiniband}]  by name;
           ports: a switch's port count, null on a host; infiniband: on the compute fabric
  links: [{id, network, infiniband, a: {device, port}, b: {device, port}, text, installed,
          rail}] by ID; a: the switch end; text: medium, length and rate, for hover text;
         rail (on a rail-optimised fabric only, absent elsewhere): the rail of a server's
         cable to its rail leaf and of that leaf's uplinks
Marks and notes are a page's, never compiled: the file holds none.

A `Scene` is the one input of every layout. Pages that compare two states (a diff) draw one
scene: HEAD's, plus what BASE had and HEAD removed, marked `removed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import cache, cached_property
from json.encoder import encode_basestring_ascii

from pydantic import ConfigDict, TypeAdapter, ValidationError

from common.errors import InputError

SCHEMA = 1
PATH = "draw/scene.json"  # under generated/

# A key the record does not have is an error, as in cluster/.
_RECORD = ConfigDict(extra="forbid")


class SceneError(InputError):
    """Raised when a scene file is not one: bad JSON, another schema, a field missing or of
    the wrong type."""


class Mark(StrEnum):
    """Why a device or cable stands out. Audit: drift, unreachable, error for hosts; missing,
    miswired, degraded for cables. Diff: added, removed, moved (re-patched), changed."""

    DRIFT = "drift"
    UNREACHABLE = "unreachable"
    ERROR = "error"
    MISSING = "missing"
    MISWIRED = "miswired"
    DEGRADED = "degraded"
    ADDED = "added"
    REMOVED = "removed"
    MOVED = "moved"
    CHANGED = "changed"


@dataclass(frozen=True)
class RackSpot:
    __pydantic_config__ = _RECORD

    name: str
    row: str
    col: int
    height_u: int
    grid: str  # the floor-grid name, A01


@dataclass(frozen=True)
class Device:
    __pydantic_config__ = _RECORD

    name: str
    switch: bool
    rack: str
    u: int
    height_u: int
    model: str
    role: str
    ports: int | None  # a switch's port count
    infiniband: bool  # on the compute fabric (an IB switch, or a host with an HCA)


@dataclass(frozen=True)
class End:
    __pydantic_config__ = _RECORD

    device: str
    port: str


@dataclass(frozen=True)
class Link:
    __pydantic_config__ = _RECORD

    id: str
    network: str
    infiniband: bool
    a: End  # the switch end
    b: End
    text: str  # medium, length and rate, for hover text
    installed: bool
    rail: int | None = None  # a rail leaf's cables (rail-optimised fabrics only)


@dataclass(frozen=True)
class Scene:
    __pydantic_config__ = _RECORD

    site: str
    room: str
    racks: tuple[RackSpot, ...]  # in floor order: by row, then position
    devices: tuple[Device, ...]  # by name
    links: tuple[Link, ...]  # by ID
    marks: Mapping[str, Mark] = field(default_factory=dict)  # device name or cable ID
    notes: Mapping[str, str] = field(default_factory=dict)  # extra hover text, same keys

    def rack_devices(self, rack: str) -> list[Device]:
        return self._by_rack.get(rack, [])

    def cables_of(self, device: str) -> list[Link]:
        """The cables with an end on `device`, by ID."""
        return self._by_device.get(device, [])

    # Indexes, so a picture of a thousand hosts is linear in its size, not quadratic.
    @cached_property
    def _by_rack(self) -> dict[str, list[Device]]:
        out: dict[str, list[Device]] = {}
        for d in self.devices:
            out.setdefault(d.rack, []).append(d)
        return out

    @cached_property
    def _by_device(self) -> dict[str, list[Link]]:
        out: dict[str, list[Link]] = {}
        for c in self.links:
            for name in dict.fromkeys((c.a.device, c.b.device)):
                out.setdefault(name, []).append(c)
        return out

    def hover(self, name: str, text: str) -> str:
        """`text`, with the mark and the note of `name` when it has them."""
        mark, note = self.marks.get(name), self.notes.get(name)
        return "\n".join(x for x in (text, mark and f"{mark.upper()}", note) if x)

    def to_json(self) -> str:
        """The scene file's text: the records, one a line, in the order the scene holds them."""
        return scene_text(self.site, self.room, self.racks, self.devices, map(_link, self.links))

    @classmethod
    def from_json(cls, text: str, name: str = PATH) -> Scene:
        """The scene of a scene file's text; raises SceneError naming `name`."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SceneError(f"{name}: not JSON ({exc})") from None
        found = data.pop("schema", None) if isinstance(data, dict) else None
        if found != SCHEMA:
            raise SceneError(f"{name}: a scene of schema {found!r}, not {SCHEMA}: recompile")
        try:
            # Strict, as every contract read: a string for a U or a list for a flag is refused.
            return _reader().validate_json(json.dumps(data), strict=True)
        except ValidationError as exc:
            raise SceneError(f"{name}: not a scene: {exc}") from None


_NAMES: dict[type, tuple[str, ...]] = {}  # a record class -> its fields' names


def _fields(record: RackSpot | Device) -> dict[str, object]:
    """A rack's or device's fields by name (links are `_link`'s)."""
    kind = type(record)
    names = _NAMES.get(kind) or _NAMES.setdefault(kind, tuple(f.name for f in fields(record)))
    return {name: getattr(record, name) for name in names}


# One record a line as `json.dumps(asdict(record), sort_keys=True)` writes it, byte for byte
# (the same C encoder, options and key order), without asdict's recursive deep copy of every
# value, which cost more than the rest of the scene: the encoder asks `_fields` for each
# rack and device and encodes the values as they are.
_RECORDS = json.JSONEncoder(sort_keys=True, default=_fields)


def scene_text(
    site: str,
    room: str,
    racks: Iterable[RackSpot],
    devices: Iterable[Device],
    links: Iterable[str],
) -> str:
    """A scene file's text from its records, the links as their lines (`link_line`): the
    compiler writes its links' lines from the plan's cables, without a Link each."""
    head = json.dumps({"schema": SCHEMA, "site": site, "room": room})
    lists = [
        f'"{key}": [\n' + ",\n".join(lines)
        for key, lines in (
            ("racks", map(_RECORDS.encode, racks)),
            ("devices", map(_RECORDS.encode, devices)),
            ("links", links),
        )
    ]
    return head[:-1] + ",\n" + ",\n".join(f"{x}\n]" for x in lists) + "}\n"


def _link(link: Link) -> str:
    a, b = link.a, link.b
    return link_line(
        link.id, link.network, link.infiniband, a.device, a.port, b.device, b.port, link.text,
        link.installed, link.rail,
    )  # fmt: skip


def link_line(
    cable: str,
    network: str,
    infiniband: bool,
    a_device: str,
    a_port: str,
    b_device: str,
    b_port: str,
    text: str,
    installed: bool,
    rail: int | None,
) -> str:
    """A link's line, as `_RECORDS` writes it (keys sorted, `", "` and `": "` between, text
    in ASCII with escapes), made here field by field: through the encoder, a dict and a
    fresh C encoder a link were most of the scene's time (a 4,096 x 8 site has 110,000
    links). A link on no rail has no `rail` key, so a site without rails writes the lines it
    did before rails were drawn. `tests/test_draw.py` holds every line to the encoder's and
    fails on a field of Link left out."""
    on = "" if rail is None else f'"rail": {rail:d}, '
    return (
        f'{{"a": {{"device": {_text(a_device)}, "port": {_text(a_port)}}}, '
        f'"b": {{"device": {_text(b_device)}, "port": {_text(b_port)}}}, "id": {_text(cable)}, '
        f'"infiniband": {_BOOL[infiniband]}, "installed": {_BOOL[installed]}, '
        f'"network": {_text(network)}, {on}"text": {_text(text)}}}'
    )


_text = encode_basestring_ascii  # a string as the encoder writes it: quoted, escaped, ASCII
_BOOL = {True: "true", False: "false"}


def floor_order(rack: RackSpot) -> tuple[int, str, int]:
    return (len(rack.row), rack.row, rack.col)


@cache
def _reader() -> TypeAdapter[Scene]:
    # Built on the first read, not at import: `compile` imports this module and never reads.
    return TypeAdapter(Scene)
