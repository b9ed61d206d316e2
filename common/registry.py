"""The one registry of clusterforge: names to entries, a name given twice refused.

Parsers, probes, checks, audit checks and targets are each a table built once at import; every
one is built here, so a duplicate name is an error at import time (never a silent override) and
a missing one is a `RegistryError` naming what is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

from common.errors import RegistryError, closest

T = TypeVar("T")


class Registry(Mapping[str, T]):
    """An immutable mapping of names to entries, built once; `what` names the kind in errors."""

    def __init__(self, what: str, entries: Iterable[tuple[str, T]]) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        for name, entry in entries:
            if name in self._entries:
                raise RegistryError(f"{what} {name!r} is registered twice")
            self._entries[name] = entry

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            hint = closest(name, self._entries)
            known = f"; did you mean {hint!r}?" if hint else ""
            raise RegistryError(f"no {self.what} named {name!r}{known}") from None

    # Mapping's own `in` and `get` look a name up and catch KeyError, which `__getitem__`
    # does not raise: asked whether it holds a name, the registry answers without raising.
    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str, default: T | None = None) -> T | None:  # type: ignore[override]
        return self._entries.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self)} entries)"
