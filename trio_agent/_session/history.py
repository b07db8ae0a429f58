"""Committed history as a persistent (immutable, structure-sharing) sequence.

Why persistent: forks and ``TurnResult.snapshot()`` need the history *as of a
boundary* while the live turn keeps appending. Each ``History`` is a node holding a
tuple segment and a pointer to the older part, so ``extend`` never copies what is
already committed and a snapshot is just a reference: O(1). Iteration walks the
chain once (what a full replay has to do anyway); ``since(n)`` walks back only over
the newest segments, which is what an incremental request needs. The chain is
flattened every ``_MAX_DEPTH`` segments, so reading stays O(length).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["History"]

Item = dict[str, Any]
_MAX_DEPTH = 32


class History:
    """An immutable sequence of Responses items (dicts that are never mutated)."""

    __slots__ = ("_depth", "_items", "_length", "_parent")

    def __init__(
        self,
        items: Iterable[Item] = (),
        *,
        _parent: History | None = None,
    ) -> None:
        self._items: tuple[Item, ...] = tuple(items)
        self._parent = _parent
        parent_length = len(_parent) if _parent is not None else 0
        self._length = parent_length + len(self._items)
        self._depth: int = (_parent._depth + 1) if _parent is not None else 0

    def extend(self, items: Iterable[Item]) -> History:
        """A new history with ``items`` appended; ``self`` is unchanged."""
        new = tuple(items)
        if not new:
            return self
        if self._depth >= _MAX_DEPTH:
            return History((*self, *new))
        if not self._items and self._parent is None:
            return History(new)
        return History(new, _parent=self)

    def append(self, item: Item) -> History:
        return self.extend((item,))

    def __len__(self) -> int:
        return self._length

    def _segments(self) -> list[tuple[Item, ...]]:
        segments: list[tuple[Item, ...]] = []
        node: History | None = self
        while node is not None:
            segments.append(node._items)
            node = node._parent
        segments.reverse()
        return segments

    def __iter__(self) -> Iterator[Item]:
        for segment in self._segments():
            yield from segment

    def since(self, start: int) -> list[Item]:
        """The items at positions ``start`` and later (walking only the newest segments);
        a negative ``start`` counts from the end, as in slicing."""
        if start < 0:
            start = max(self._length + start, 0)
        if start >= self._length:
            return []
        collected: list[tuple[Item, ...]] = []
        node: History | None = self
        skip = 0
        while node is not None:
            node_start = node._length - len(node._items)
            collected.append(node._items)
            if node_start <= start:
                skip = start - node_start
                break
            node = node._parent
        collected.reverse()
        items = [item for segment in collected for item in segment]
        return items[skip:]

    def to_list(self) -> list[Item]:
        return list(self)

    def __getitem__(self, index: int) -> Item:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self.since(index)[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return len(self) == len(other) and self.to_list() == other.to_list()
        return NotImplemented

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"History(len={self._length}, segments={self._depth + 1})"
