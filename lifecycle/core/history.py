"""A bounded, list-like record: the newest entries, with a count of all of them.

:class:`History` keeps at most ``limit`` entries (``None`` keeps every one);
older entries are dropped as new ones arrive, so a long simulation holds a
fixed amount of memory. It reads like a list (indexing, slicing, ``len``,
iteration, ``==`` against a list), and :attr:`History.total` counts every
entry ever added, dropped ones included. The harness records its steps in
one, and the simulated cloud its call log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar, overload

__all__ = ["DEFAULT_LIMIT", "History"]

T = TypeVar("T")

#: How many entries a :class:`History` keeps unless told otherwise.
DEFAULT_LIMIT = 10_000


class History(Sequence[T], Generic[T]):
    """The newest ``limit`` entries (all of them when ``limit`` is ``None``), oldest first."""

    def __init__(self, limit: int | None = DEFAULT_LIMIT, entries: Iterable[T] = ()) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise ValueError(f"a history limit is a whole number >= 0 or None, not {limit!r}")
        self._entries: deque[T] = deque(maxlen=limit)
        self._total = 0
        for entry in entries:
            self.append(entry)

    @property
    def limit(self) -> int | None:
        """The most entries kept (``None``: unbounded)."""
        return self._entries.maxlen

    @property
    def total(self) -> int:
        """How many entries were ever added, including those dropped since."""
        return self._total

    @property
    def dropped(self) -> int:
        """How many of the oldest entries were dropped to respect :attr:`limit`."""
        return self._total - len(self._entries)

    def append(self, entry: T) -> None:
        """Add an entry, dropping the oldest one when the history is full."""
        self._total += 1
        self._entries.append(entry)

    def since(self, total: int) -> list[T]:
        """The entries added after the :attr:`total` was ``total`` (those still kept)."""
        return list(self._entries)[max(0, total - self.dropped):]

    def clear(self) -> None:
        """Drop every kept entry (:attr:`total` keeps counting)."""
        self._entries.clear()

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        """An entry by position among those kept, or a list for a slice."""
        if isinstance(index, slice):
            return list(self._entries)[index]
        return self._entries[index]

    def __len__(self) -> int:
        """How many entries are kept."""
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        """The kept entries, oldest first."""
        return iter(self._entries)

    def __eq__(self, other: object) -> bool:
        """Equal to another history or a list with the same kept entries."""
        if isinstance(other, History):
            return list(self._entries) == list(other._entries)
        if isinstance(other, list):
            return list(self._entries) == other
        return NotImplemented

    # Unhashable, as Python spells it; typeshed declares object.__hash__ a method only.
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History(limit={self.limit}, total={self.total}, kept={len(self)})"
