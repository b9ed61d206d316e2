"""What the two compiles of one comparison have in common, computed once.

`diff` and `change-plan` compile two revisions that mostly agree: a pull request changes a
rack file or a MAC, and the pair plan of 32,768 HCAs, the parse of a thousand unchanged YAML
files come out the same on both sides. Inside `shared()`, a function marked `by_value`
returns the result it returned before for arguments of equal value; outside it (every single
compile, every test that does not open one) it simply computes.

Only pure functions of plain values are marked: the result is handed to both sides, so it
must be immutable (tuples, NamedTuples, text) and depend on nothing but the arguments. An
argument's value is the argument itself, with its type, where it hashes (text, bytes, tuples
of NamedTuples: hashed and compared in C, hundredths of a second for 110,000 cables); for a
tuple or a record holding dicts or lists (a planned host), the same with those made tuples of
their items; else its pickle (equal bytes unpickle to equal values, and two equal values that
pickle apart, an object shared inside one side's only, miss). Hashed values match as Python
compares them (1 == 1.0 inside a tuple): the marked functions take the plan's typed records,
whose fields are of one type on both sides.

`last` is the same idea within one compile: the answer kept for the last object asked.
"""

from __future__ import annotations

import pickle
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import wraps
from hashlib import sha256
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def last(make: Callable[[T], R]) -> Callable[[T], R]:
    """`make`, its answer kept for the last object asked and only while that object lives:
    for a frozen model or plan (the answer cannot go stale) that several stages ask the same
    question of, each of which made the answer anew (the checks, the plan and the size
    warning a cluster's wires; /etc/hosts, DNS and DHCP a plan's names). Every compile, not
    only a comparison's."""
    kept: list[tuple[weakref.ref[Any], R]] = []

    @wraps(make)
    def answer(of: T) -> R:
        if not kept or kept[0][0]() is not of:
            kept[:] = [(weakref.ref(of), make(of))]
        return kept[0][1]

    return answer


class _Block:
    """One comparison's memory: the results, and each argument's value made once.

    A value is made once per object (`seen`: the plan's cables go to seven marked functions
    a side) and kept once per value (`values`: HEAD's cables, compared once with BASE's,
    are BASE's value from then on), so keys compare by identity; hashing and comparing
    110,603 cables anew at each call cost more than some of the functions they keyed."""

    def __init__(self) -> None:
        self.results: dict[_Key, Any] = {}
        self.values: dict[_Value, _Value] = {}
        # id -> (the object, kept alive so its id is not reused; its value): only objects
        # that hash, which the marked functions' callers never change.
        self.seen: dict[int, tuple[object, _Value]] = {}
        # id -> (the object, its frozen value): a record many hosts share (their software)
        # made hashable once.
        self.frozen: dict[int, tuple[object, object]] = {}
        # The ids of the texts the results hold, and (function, id) -> `by_object`'s answer.
        self.held: set[int] = set()
        self.objects: dict[tuple[Callable[..., object], int], Any] = {}


_block: _Block | None = None  # None: no comparison open, nothing kept


def by_object(fn: Callable[[T], R]) -> Callable[[T], R]:
    """`fn` computed once per object in a `shared()` block, for the objects the block holds
    (a marked function's text, or a text in a plain tuple it returned; what this made of
    one), found by identity alone: a host's kickstart text, one object for both sides of a
    diff, is encoded and hashed once, where finding an equal value would hash it whole. Any
    other object is simply computed: kept, every text of a compile would outlive it."""

    @wraps(fn)
    def answer(of: T) -> R:
        block = _block
        if block is None or id(of) not in block.held:
            return fn(of)
        key = (fn, id(of))
        found = block.objects.get(key, _MISSING)
        if found is _MISSING:
            found = block.objects[key] = fn(of)
            _hold(block, found)
        result: R = found
        return result

    return answer


def _hold(block: _Block, result: object) -> None:
    """Note the ids of the text in `result` (itself, or in plain tuples): the block keeps the
    result, so they stay theirs while it lives (`by_object`)."""
    if type(result) in (str, bytes):
        block.held.add(id(result))
    elif type(result) is tuple:
        for item in result:
            if type(item) in (str, bytes, tuple):
                _hold(block, item)


@contextmanager
def shared() -> Iterator[None]:
    """Keep marked results until the block ends (one comparison's two compiles)."""
    global _block
    outer, _block = _block, _Block() if _block is None else _block
    try:
        yield
    finally:
        _block = outer


def by_value(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` computed once per value of its arguments in a `shared()` block."""

    @wraps(fn)
    def memo(*args: P.args, **kwargs: P.kwargs) -> R:
        block = _block
        if block is None:
            return fn(*args, **kwargs)
        key = _Key(fn, tuple(_value(block, a) for a in (*args, *sorted(kwargs.items()))))
        found = block.results.get(key, _MISSING)
        if found is _MISSING:
            found = block.results[key] = fn(*args, **kwargs)
            _hold(block, found)
        result: R = found
        return result

    return memo


_MISSING = object()


class _Value:
    """An argument's value with its hash, made once: the argument itself, with its type,
    where it hashes, else its pickle's digest."""

    __slots__ = ("_hash", "_value")

    def __init__(self, value: Hashable, hashed: int) -> None:
        self._value, self._hash = value, hashed

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Value) and self._value == other._value


class _Key:
    """A call's key: the function and its arguments' values (each the block's one object for
    that value, so two keys compare by identity), its hash worked out once."""

    __slots__ = ("_hash", "_parts")

    def __init__(self, fn: Callable[..., object], values: tuple[_Value, ...]) -> None:
        self._parts = (fn.__module__, fn.__qualname__, *values)
        self._hash = hash((fn.__module__, fn.__qualname__, *(v._hash for v in values)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self._parts == other._parts


def _value(block: _Block, arg: object) -> _Value:
    known = block.seen.get(id(arg))
    if known is not None and known[0] is arg:
        return known[1]
    # An object hashed by identity (a plain class) would only ever match itself: pickled too;
    # but None, whose class hashes it so, is one object (a keyfile's absent gateway).
    made: _Value | None = None
    if arg is None or type(arg).__hash__ not in (None, object.__hash__):
        try:
            made = _Value((type(arg), arg), hash(arg))
        except TypeError:  # a tuple or a frozen record holding a dict: frozen
            made = _frozen_value(block, arg) if _is_record(arg) else None
        if made is not None:
            value = block.values.setdefault(made, made)
            block.seen[id(arg)] = (arg, value)
            return value
    # Each argument pickled on its own: objects shared between two arguments on one side
    # only (a host name in BASE's pair plan and in HEAD's own map) would make one pickle of
    # them all differ. The digest is kept: the pair plan's arguments are megabytes. Not
    # remembered by object: a dict may change between two calls.
    digest = sha256(pickle.dumps(arg, pickle.HIGHEST_PROTOCOL)).digest()
    made = _Value(digest, hash(digest))
    return block.values.setdefault(made, made)


def _frozen_value(block: _Block, arg: object) -> _Value | None:
    """A tuple or a record holding a dict (a planned host: its versions) as a value: its dicts
    made tuples in Python, a fifth of what pickling it costs. None for what still does not
    hash (a set)."""
    try:
        return _made(block, arg, True)  # `_value` has just seen it fail to hash
    except TypeError:
        return None


# Most of a host's fields, kept as they are without a hash tried first.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _frozen(block: _Block, value: object) -> object:
    """`value` itself where it hashes, else its value made once (kept by object: a host's
    software, shared by hundreds, is made once a side, and once per value, so two hosts
    compare it by identity): a dict or a list as the tuple of its items in order (two equal
    dicts built in another order miss, never match wrongly), a tuple or a record as its
    fields', each with its type. Raises TypeError for what it cannot make hashable."""
    if type(value) in _ATOMS:
        return value
    record = _is_record(value)
    if record:
        known = block.frozen.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
    try:
        hash(value)
        return value  # hashed in C
    except TypeError:
        return _made(block, value, record)


def _made(block: _Block, value: object, record: bool) -> _Value:
    """`value`, which does not hash, made hashable and kept once per value."""
    if isinstance(value, dict):
        fields: tuple[object, ...] = tuple((k, _frozen(block, v)) for k, v in value.items())
    elif isinstance(value, list | tuple):
        fields = tuple(_frozen(block, v) for v in value)
    elif record:  # a pydantic model: its fields
        fields = tuple(_frozen(block, v) for v in value.__dict__.values())
    else:
        raise TypeError(f"{type(value).__name__} is not made hashable here")
    made = (type(value), fields)
    found = _Value(made, hash(made))
    found = block.values.setdefault(found, found)
    if record:  # a dict may change between two calls
        block.frozen[id(value)] = (value, found)
    return found


def _is_record(value: object) -> bool:
    """A tuple (a NamedTuple) or a pydantic model, told by its fields: importing pydantic
    here would load it for `--help`, which loads no model."""
    return isinstance(value, tuple) or hasattr(type(value), "model_fields")
