"""What the event mappers hand out and take in: ``Out`` (one notification to send) and
``DynamicOutcome`` (a client's answer to a dynamic tool call). They sit below the
mappers (``_items`` for a thread, ``_tool_turn`` for a turn's tool items) so that both
can name them without naming each other."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["DynamicOutcome", "Out"]

Json = dict[str, Any]


@attrs.frozen
class Out:
    """One notification; ``broadcast`` ones go to every initialized connection, the
    others to the thread's subscribers. ``params_text``: ``params`` already encoded
    (``_jsonrpc.encode_value``'s text, same bytes), when the mapper built it cheaper
    than encoding the dict -- a text delta, the most frequent notification."""

    method: str
    params: Json
    broadcast: bool = False
    params_text: str | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class DynamicOutcome:
    """The client's answer to an ``item/tool/call`` (or the failure standing in for it)."""

    content_items: tuple[Json, ...]
    success: bool
