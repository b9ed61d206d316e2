"""What the two compiles of one comparison have in common, computed once.

`diff` and `change-plan` compile two revisions that mostly agree: a pull request changes a
rack file or a MAC, and the pair plan of 32,768 HCAs, the parse of a thousand unchanged YAML
files come out the same on both sides. Inside `shared()`, a function marked `by_value`
returns the result it returned before for arguments of equal value, and `keep` does the same
for a key its caller chose; outside it (every single compile, every test that does not open
one) both simply compute.

Only pure functions of plain values are marked: the result is handed to both sides, so it
must be immutable (tuples, NamedTuples, text) and depend on nothing but the arguments. An
argument's value is its pickle: equal bytes unpickle to equal values, so a hit is never
wrong; two equal values that pickle apart (an object shared inside one side's only) miss.
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


def keep(key: Hashable, compute: Callable[[], R]) -> R:
    """`compute()`, or what it returned for an equal `key` in this `shared()` block."""
    if _results is None:
        return compute()
    if key not in _results:
        _results[key] = compute()
    result: R = _results[key]
    return result


def by_value(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` computed once per value of its arguments in a `shared()` block."""

    @wraps(fn)
    def memo(*args: P.args, **kwargs: P.kwargs) -> R:
        if _results is None:
            return fn(*args, **kwargs)
        # Each argument pickled on its own (a pickle ends itself, so the concatenation reads
        # one way): objects shared between two arguments on one side only (a host name in
        # BASE's pair plan and in HEAD's own map) would make the whole pickle differ. The
        # digest is kept, not the pickles: the pair plan's arguments are megabytes.
        value = sha256()
        for arg in (*args, *sorted(kwargs.items())):
            value.update(pickle.dumps(arg, pickle.HIGHEST_PROTOCOL))
        key = (fn.__module__, fn.__qualname__, value.digest())
        return keep(key, lambda: fn(*args, **kwargs))

    return memo
