"""Committed history as a persistent (immutable, structure-sharing) sequence.

Why persistent: forks and ``TurnResult.snapshot()`` need the history *as of a
boundary* while the live turn keeps appending. Each ``History`` is a node holding a
tuple segment and a pointer to the older part, so ``extend`` never copies what is
already committed and a snapshot is just a reference: O(1). Iteration walks the
chain once (what a full replay has to do anyway); ``since(n)`` walks back only over
the newest segments, which is what an incremental request needs. The chain is
flattened every ``_MAX_DEPTH`` segments, so reading stays O(length).

Each node also keeps, once asked for either, two things derived from its items
(which are never mutated, so a segment is measured once, not at every model call;
flattening carries both over):

- the compact JSON text of its items *as sent* (``wire_item``: ids stripped where the
  request builder strips them; ``ensure_ascii=False``, not yet scrubbed of lone
  surrogates), comma-joined: what a full replay splices into the request body
  (``replay``; ``_jsontext.EncodedList``) instead of encoding every item again;
- the compact-JSON size of its items (``json_size_since``, the auto-compaction
  estimate, ``ensure_ascii=True``). It comes from the same encoding: for a segment whose
  wire items are its items, the ASCII-escaped length follows from the text by counting
  (``_ascii_size``); only a segment with a stripped id is encoded a second time.

So the first turn of a resumed session -- the estimate, then a full replay of every
item -- encodes each item once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._jsontext import EncodedList
from .._wire.request import wire_item

__all__ = ["History", "Replay"]

Item = dict[str, Any]
_MAX_DEPTH = 32
# ``json.dumps(value, separators=(",", ":"))`` without building an encoder per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode
# What a request body is encoded with (``_jsontext.dumps``, before its scrubbing).
_encode_wire = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _json_size(items: tuple[Item, ...]) -> int:
    """``sum(len(json.dumps(item, separators=(",", ":"))) for item in items)``, in one
    encoding: ``[a,b,c]`` is the items' texts plus two brackets and ``len - 1`` commas."""
    if not items:
        return 0
    return len(_encode(items)) - 1 - len(items)


def _wire_items(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """``tuple(wire_item(item) for item in items)``, ``items`` itself when no item
    changes (the common case: every id is prefixed). Inlined: a resumed history runs
    this over every item before its first request."""
    changed: list[int] = []
    for index, item in enumerate(items):
        if "id" not in item:
            continue
        ident = item["id"]
        if type(ident) is str and item.get("type") != "additional_tools":
            cut = ident.find("_")  # is_prefixed_id: "<non-empty>_<non-empty>"
            if 0 < cut < len(ident) - 1:
                continue
        changed.append(index)
    if not changed:
        return items
    wired = list(items)
    for index in changed:
        wired[index] = wire_item(items[index])
    return tuple(wired)


def _ascii_size(text: str) -> int:
    """``len`` of the ``ensure_ascii=True`` encoding of what encoded to ``text`` with
    ``ensure_ascii=False`` (same separators). The two differ only in characters outside
    ``' '..'~'`` that the latter writes as they are: DEL and every non-ASCII code point
    become ``\\uXXXX`` (6 characters), an astral one a surrogate pair of them (12);
    lone surrogates count as BMP code points."""
    if text.isascii():
        return len(text) + 5 * text.count("\x7f")
    length = len(text)
    non_ascii = length - len(text.encode("ascii", "ignore"))
    astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - length
    return length + 5 * non_ascii + 6 * astral + 5 * text.count("\x7f")


class History:
    """An immutable sequence of Responses items (dicts that are never mutated)."""

    __slots__ = ("_depth", "_items", "_length", "_parent", "_size", "_text", "_wired")

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
        self._text: str | None = None  # their wire items' JSON, comma-joined, once measured
        self._wired: tuple[Item, ...] | None = None  # their wire items (``_items`` when the same)

    def extend(self, items: Iterable[Item]) -> History:
        """A new history with ``items`` appended; ``self`` is unchanged."""
        new = tuple(items)
        if not new:
            return self
        if self._depth >= _MAX_DEPTH:
            flat = History((*self, *new))
            known = self._known()
            if known is not None:  # carry the measurements over (the new items measured too)
                extra = History(new)
                extra._measure()
                assert extra._text is not None and extra._size is not None and extra._wired is not None
                size, text, wired = known
                flat._size = size + extra._size
                flat._text = f"{text},{extra._text}" if text and extra._text else text or extra._text
                flat._wired = (*wired, *extra._wired)
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
        items: list[Item] = []
        for segment in collected:
            items.extend(segment)
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
            self._measure()
        assert self._size is not None
        return self._size

    def _measured_text(self) -> str:
        if self._text is None:
            self._measure()
        assert self._text is not None
        return self._text

    def _measure(self) -> None:
        """The node's wire text and size, from one encoding when no id is stripped."""
        items = self._items
        if not items:
            self._text, self._size, self._wired = "", 0, items
            return
        wired = _wire_items(items)
        text = _encode_wire(wired)[1:-1]
        self._text, self._wired = text, wired
        if wired is items:  # the text is of the items themselves: count, don't encode
            self._size = _ascii_size(text) - (len(items) - 1)  # less the commas
        else:
            self._size = _json_size(items)

    def _known(self) -> tuple[int, str, tuple[Item, ...]] | None:
        """The size, the comma-joined wire text and the wire items of every item, when
        every segment has been measured."""
        nodes = self._nodes()
        if any(node._size is None for node in nodes):
            return None
        total = sum(node._size or 0 for node in nodes)
        text = ",".join(node._text for node in nodes if node._text)
        wired = tuple(item for node in nodes for item in node._wired or ())
        return total, text, wired

    def replay(self, prefix: Sequence[Item]) -> Replay:
        """``[*prefix, *self]`` (what a full replay sends, before ``wire_item``), which
        also knows its request form -- ``Replay.wire()`` -- from the segments' kept
        texts."""
        return Replay(prefix, self)

    def wire_texts(self) -> list[str]:
        """The JSON text of every item's wire form, one comma-joined text per non-empty
        segment (each segment measured once)."""
        return [text for text in (node._measured_text() for node in self._nodes()) if text]

    def wire_items(self) -> list[Item]:
        """``[wire_item(item) for item in self]``."""
        wired: list[Item] = []
        for node in self._nodes():
            if node._wired is None:
                node._measure()
            assert node._wired is not None
            wired += node._wired
        return wired

    def _nodes(self) -> list[History]:
        nodes: list[History] = []
        node: History | None = self
        while node is not None:
            nodes.append(node)
            node = node._parent
        nodes.reverse()
        return nodes

    def to_list(self) -> list[Item]:
        items: list[Item] = []
        for segment in self._segments():
            items += segment  # segment by segment, not item by item
        return items

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


class Replay(list[Item]):
    """The input of a full replay: ``[*prefix, *history]`` as a list (what tests and
    callers compare), plus ``wire()``, its request form with the JSON text already
    known (``EncodedList``), so the request body splices the history's kept segment
    texts instead of encoding every item again."""

    __slots__ = ("_history", "_prefix")

    def __init__(self, prefix: Sequence[Item], history: History) -> None:
        super().__init__(prefix)
        for segment in history._segments():
            self += segment
        self._prefix = tuple(prefix)
        self._history = history

    def wire(self) -> EncodedList:
        prefix = [wire_item(item) for item in self._prefix]
        texts = self._history.wire_texts()
        if prefix:
            texts.insert(0, _encode_wire(prefix)[1:-1])
        return EncodedList((*prefix, *self._history.wire_items()), f"[{','.join(texts)}]")
