"""Committed history as a persistent (immutable, structure-sharing) sequence.

Why persistent: forks and ``TurnResult.snapshot()`` need the history *as of a
boundary* while the live turn keeps appending. Each ``History`` is a node holding a
tuple segment and a pointer to the older part, so ``extend`` never copies what is
already committed and a snapshot is just a reference: O(1). Iteration walks the
chain once (what a full replay has to do anyway); ``since(n)`` walks back only over
the newest segments, which is what an incremental request needs. The chain is
flattened every ``_MAX_DEPTH`` segments, so reading stays O(length).

Each node also keeps the compact-JSON size of its items once asked for it
(``json_size_since``, the auto-compaction estimate): items are never mutated, so a
segment is measured once -- one encoding of the segment as a list, whose length less
its brackets and commas is the sum of its items' lengths -- not at every model call;
flattening carries the sizes over.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["History"]

Item = dict[str, Any]
_MAX_DEPTH = 32
# ``json.dumps(value, separators=(",", ":"))`` without building an encoder per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _json_size(items: tuple[Item, ...]) -> int:
    """``sum(len(json.dumps(item, separators=(",", ":"))) for item in items)``, in one
    encoding: ``[a,b,c]`` is the items' texts plus two brackets and ``len - 1`` commas."""
    if not items:
        return 0
    return len(_encode(items)) - 1 - len(items)


class History:
    """An immutable sequence of Responses items (dicts that are never mutated)."""

    __slots__ = ("_depth", "_items", "_length", "_parent", "_size")

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
        self._size: int | None = None  # the compact-JSON size of the node's items, once measured

    def extend(self, items: Iterable[Item]) -> History:
        """A new history with ``items`` appended; ``self`` is unchanged."""
        new = tuple(items)
        if not new:
            return self
        if self._depth >= _MAX_DEPTH:
            flat = History((*self, *new))
            known = self._known_size()
            if known is not None:
                flat._size = known + _json_size(new)
            return flat
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

    def json_size_since(self, start: int) -> int:
        """The summed length of ``json.dumps(item, separators=(",", ":"))`` over the items
        at positions ``start`` and later (``since(start)``). Whole segments are measured
        once and remembered; the part of a segment that ``start`` cuts is measured anew."""
        if start < 0:
            start = max(self._length + start, 0)
        total = 0
        node: History | None = self
        while node is not None:
            node_start = node._length - len(node._items)
            if node_start < start:
                return total + _json_size(node._items[start - node_start:])
            total += node._measured()
            if node_start == start:
                return total
            node = node._parent
        return total

    def _measured(self) -> int:
        if self._size is None:
            self._size = _json_size(self._items)
        return self._size

    def _known_size(self) -> int | None:
        """The size of every item, when every segment has been measured."""
        total = 0
        node: History | None = self
        while node is not None:
            if node._size is None:
                return None
            total += node._size
            node = node._parent
        return total

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
