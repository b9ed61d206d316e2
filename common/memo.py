"""What the two compiles of one comparison have in common, computed once.

`diff` and `change-plan` compile two revisions that mostly agree: a pull request changes a
rack file or a MAC, and the pair plan of 32,768 HCAs, the parse of a thousand unchanged YAML
files come out the same on both sides. Inside `shared()`, a function marked `by_value`
returns the result it returned before for arguments of equal value; outside it (every single
compile, every test that does not open one) it simply computes.

Only pure functions of plain values are marked: the result is handed to both sides, so it
must be immutable (tuples, NamedTuples, text) and depend on nothing but the arguments. An
argument's value is the argument itself, with its type, where it hashes (text, bytes, tuples
of NamedTuples: hashed and compared in C, hundredths of a second for 110,000 cables), else its
pickle (dicts; equal bytes unpickle to equal values, and two equal values that pickle apart,
an object shared inside one side's only, miss). Hashed values match as Python compares them
(1 == 1.0 inside a tuple): the marked functions take the plan's typed records, whose fields
are of one type on both sides.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from functools import wraps
from hashlib import sha256
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_results: dict[Hashable, Any] | None = None  # None: no comparison open, nothing kept


@contextmanager
def shared() -> Iterator[None]:
    """Keep marked results until the block ends (one comparison's two compiles)."""
    global _results
    outer, _results = _results, {} if _results is None else _results
    try:
        yield
    finally:
        _results = outer


def by_value(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` computed once per value of its arguments in a `shared()` block."""

    @wraps(fn)
    def memo(*args: P.args, **kwargs: P.kwargs) -> R:
        if _results is None:
            return fn(*args, **kwargs)
        key = _Key(fn, (*args, *sorted(kwargs.items())))
        found = _results.get(key, _MISSING)
        if found is _MISSING:
            found = _results[key] = fn(*args, **kwargs)
        result: R = found
        return result

    return memo


_MISSING = object()


class _Key:
    """A call's key: the function and its arguments' values, hashed once. A tuple of them
    would hash its items anew at each lookup, and a cable plan's 110,000 records hash by a
    Python method each: three lookups a call cost more than the hash that keyed it."""

    __slots__ = ("_hash", "_parts")

    def __init__(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        values = [_value(arg) for arg in args]
        self._parts = (fn.__module__, fn.__qualname__, *(part for part, _ in values))
        self._hash = hash((fn.__module__, fn.__qualname__, *(h for _, h in values)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self._parts == other._parts


def _value(arg: object) -> tuple[Hashable, int]:
    """An argument's value and its hash: itself, with its type, where it hashes, else its
    pickle's digest."""
    # An object hashed by identity (a plain class) would only ever match itself: pickled too.
    if type(arg).__hash__ not in (None, object.__hash__):
        try:
            return (type(arg), arg), hash(arg)
        except TypeError:  # a tuple or a frozen record holding a dict
            pass
    # Each argument pickled on its own: objects shared between two arguments on one side
    # only (a host name in BASE's pair plan and in HEAD's own map) would make one pickle of
    # them all differ. The digest is kept: the pair plan's arguments are megabytes.
    digest = sha256(pickle.dumps(arg, pickle.HIGHEST_PROTOCOL)).digest()
    return digest, hash(digest)
