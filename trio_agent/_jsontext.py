"""JSON text for everything that leaves the process: request bodies, rollout lines,
JSONL events and snapshots.

One policy for text that cannot be encoded: a Python string may hold *lone UTF-16
surrogates* (from a server's ``"\\ud800"`` escape, a JavaScript string, or a file name
decoded with ``os.fsdecode``), which UTF-8 cannot encode. History and events keep
what they were given; wherever JSON text is produced for the outside it is always
valid UTF-8, each lone surrogate replaced by U+FFFD (the replacement character). The
same history therefore always produces the same bytes (a full replay, a rollout
append and a JSONL line agree). Non-finite floats (``NaN``, ``Infinity``) are not
JSON; they never reach a request either: frames that contain them are refused when
decoded.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any, Self, SupportsIndex

__all__ = ["EncodedList", "dumps", "scrub_surrogates"]

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class EncodedList(list[Any]):
    """A list whose compact JSON text (``ensure_ascii=False``, not yet scrubbed) is
    already known: ``text`` is exactly what encoding the list would produce. ``dumps``
    splices it in where the list is the top-level object's ``input``, so a full-replay
    request body does not encode its history again (``_session.history``). Everything
    else sees an ordinary list. Changing the list in place forgets the text (``None``:
    ``dumps`` encodes it as it then is), e.g. the trigger a compaction request appends."""

    __slots__ = ("text",)

    def __init__(self, items: Any, text: str) -> None:
        super().__init__(items)
        self.text: str | None = text

    def _changed(self) -> None:
        self.text = None

    def append(self, item: Any) -> None:
        self._changed()
        super().append(item)

    def extend(self, items: Any) -> None:
        self._changed()
        super().extend(items)

    def insert(self, index: Any, item: Any) -> None:
        self._changed()
        super().insert(index, item)

    def pop(self, index: Any = -1) -> Any:
        self._changed()
        return super().pop(index)

    def remove(self, item: Any) -> None:
        self._changed()
        super().remove(item)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        super().reverse()

    def __setitem__(self, index: Any, item: Any) -> None:
        self._changed()
        super().__setitem__(index, item)

    def __delitem__(self, index: Any) -> None:
        self._changed()
        super().__delitem__(index)

    def __iadd__(self, items: Iterable[Any]) -> Self:  # type: ignore[misc]  # as list.__iadd__
        self._changed()
        return super().__iadd__(items)

    def __imul__(self, count: SupportsIndex) -> Self:
        self._changed()
        return super().__imul__(count)


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (ASCII text is returned as is)."""
    if text.isascii():
        return text
    return _lone_surrogate().sub("\ufffd", text)


# The patterns of this package are compiled on first use, not at import: sre compiles
# in Python, 0.1-0.5 ms a pattern, paid by every start of the CLI otherwise.
@functools.cache
def _lone_surrogate() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """Compact JSON (``ensure_ascii=False``) that always encodes as UTF-8."""
    if type(value) is dict and type(value.get("input")) is EncodedList:  # a full replay's body
        return scrub_surrogates(_spliced(value))
    return scrub_surrogates(_encode(value))


def _spliced(value: dict[Any, Any]) -> str:
    """``_encode(value)`` with every ``EncodedList`` value's known text spliced in (one
    join: the history's text is copied once)."""
    if not all(type(key) is str for key in value):
        return _encode(value)  # keys the encoder would convert: not worth splicing
    parts: list[str] = ["{"]
    plain: dict[str, Any] = {}
    for key, item in value.items():
        if type(item) is EncodedList and item.text is not None:
            if plain:
                parts += (_encode(plain)[1:-1], ",")
                plain = {}
            parts += (_encode(key), ":", item.text, ",")
        else:
            plain[key] = item
    if plain:
        parts.append(_encode(plain)[1:])  # with its closing brace
    else:
        parts[-1] = "}"  # the last comma
    return "".join(parts)
