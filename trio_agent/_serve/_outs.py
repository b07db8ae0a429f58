"""What the event mappers hand out and take in: ``Out`` (one notification to send) and
``DynamicOutcome`` (a client's answer to a dynamic tool call). They sit below the
mappers (``_items`` for a thread, ``_tool_turn`` for a turn's tool items) so that both
can name them without naming each other."""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["DynamicOutcome", "Out"]

Json = dict[str, Any]


class Out:
    """One notification; ``broadcast`` ones go to every initialized connection, the
    others to the thread's subscribers. ``params_text``: ``params`` already encoded
    (``_jsonrpc.encode_value``'s text, same bytes), when the mapper built it cheaper
    than encoding the dict -- a text delta, the most frequent notification.

    A plain class with slots, its fields ``Final`` (immutable to the type checker, not
    at run time): an ``attrs.frozen`` instance is built through ``object.__setattr__``
    per field, ~0.64 us against ~0.16 us, and a turn makes ~20 (issue 30, item 3).
    Equal as the ``attrs`` class was: by method, params and broadcast (not by
    ``params_text``, a cache of params); unhashable (params is a dict)."""

    __slots__ = ("broadcast", "method", "params", "params_text")

    def __init__(self, method: str, params: Json, broadcast: bool = False, params_text: str | None = None) -> None:
        self.method: Final = method
        self.params: Final = params
        self.broadcast: Final = broadcast
        self.params_text: Final = params_text

    def __eq__(self, other: object) -> bool:
        if type(other) is not Out:
            return NotImplemented
        return (self.method, self.params, self.broadcast) == (other.method, other.params, other.broadcast)

    __hash__ = None  # type: ignore[assignment]  # (as the attrs class: its params, a dict, has none)

    def __repr__(self) -> str:
        return f"Out(method={self.method!r}, params={self.params!r}, broadcast={self.broadcast!r})"


@attrs.frozen
class DynamicOutcome:
    """The client's answer to an ``item/tool/call`` (or the failure standing in for it)."""

    content_items: tuple[Json, ...]
    success: bool
