"""What the response accumulator (``stream.ResponseAccumulator``) says: the stream events
a frame implies and the outcome of a response (pure values).

A frame yields zero or more *stream events*: ``ResponseStarted`` (the response id is
known), ``TextDelta`` and ``ReasoningDelta`` (streamed text), ``AssistantMessageDone``
(a finished assistant message), ``ToolCallReady`` (a finished tool call the turn may
start now, while the rest of the response streams), ``CallDiscarded`` (a tool call item
that is not kept: no usable ``call_id``, or one this response already used),
``TurnStateSeen`` (the sticky turn-state header), ``ForeignFrame`` (a frame of another
response, never taken as this one's answer) and, last, ``ResponseFinished`` with the
``ResponseOutcome``: what the turn planner and history need. ``stream`` re-exports
every name here, so its readers import from one place.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from .._record import Record
from .usage import TokenUsage

__all__ = [
    "HISTORY_TYPES",
    "TOOL_CALL_TYPES",
    "AssistantMessageDone",
    "CallDiscarded",
    "ForeignFrame",
    "ReasoningDelta",
    "ResponseFinished",
    "ResponseOutcome",
    "ResponseStarted",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "TurnStateSeen",
    "message_text",
    "usable_call_id",
]

TOOL_CALL_TYPES = frozenset({"custom_tool_call", "function_call"})
# Item types recorded into history; anything else the server sends is not replayed.
HISTORY_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "custom_tool_call",
        "function_call",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "compaction",
        "agent_message",
    }
)




class ResponseStarted(Record):
    __slots__ = ("response_id",)
    __match_args__ = ("response_id",)

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id


class TextDelta(Record):
    __slots__ = ("text", "item_id", "phase")  # noqa: RUF023  # field order
    __match_args__ = ("text", "item_id", "phase")

    def __init__(self, text: str, item_id: str | None, phase: str | None) -> None:
        self.text = text
        self.item_id = item_id
        self.phase = phase


class ReasoningDelta(Record):
    __slots__ = ("text",)
    __match_args__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class AssistantMessageDone(Record):
    __slots__ = ("text", "item_id", "phase")  # noqa: RUF023  # field order
    __match_args__ = ("text", "item_id", "phase")

    def __init__(self, text: str, item_id: str | None, phase: str | None) -> None:
        self.text = text
        self.item_id = item_id
        self.phase = phase


class ToolCallReady(Record):
    """A tool call item finished (``response.output_item.done``) and is kept: the turn may
    start it now, while the rest of its response streams (codex.md 3.4). Never said of a
    call that arrives after a mail cut or once a preempting steer wants the response
    stopped: such a call is lost with the preempted response."""

    __slots__ = ("item",)
    __match_args__ = ("item",)

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item


class CallDiscarded(Record):
    """A tool call item the response is not kept with (reported, never run): its
    ``call_id`` is missing or not a non-empty string, so no output could answer it, or
    it repeats the ``call_id`` of an earlier call of the same response, which history
    could not tell apart."""

    __slots__ = ("call_id", "reason")
    __match_args__ = ("call_id", "reason")

    def __init__(self, call_id: str, reason: str) -> None:
        self.call_id = call_id  # as shown (repr of a value that is not a string)
        self.reason = reason


class TurnStateSeen(Record):
    __slots__ = ("value",)
    __match_args__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value


class ResponseOutcome(Record):
    """A completed response: what the turn planner and history need.

    ``chained`` is False when the response never reached a terminal frame (an interrupt
    the server did not answer in time): its received items are history, but nothing
    chains on it. ``clean_end`` is False when the connection may still carry frames of
    this response (no terminal frame was read): the socket must not be reused.
    """

    __slots__ = (  # noqa: RUF023  # field order
        "response_id", "status", "end_turn", "output", "usage_raw", "usage", "chained", "clean_end"
    )
    __match_args__ = (
        "response_id", "status", "end_turn", "output", "usage_raw", "usage", "chained", "clean_end"
    )

    def __init__(
        self,
        response_id: str,
        status: str,
        end_turn: bool | None,
        output: tuple[dict[str, Any], ...],
        usage_raw: dict[str, Any] | None,
        usage: TokenUsage,
        chained: bool = True,
        clean_end: bool = True,
    ) -> None:
        self.response_id = response_id
        self.status = status
        self.end_turn = end_turn
        self.output = output
        self.usage_raw = usage_raw
        self.usage = usage
        self.chained = chained
        self.clean_end = clean_end

    # Loops, not generator expressions: each of those is a code object of its own, and
    # every turn reads these once its response is in (a cold cache pays per code object).
    @property
    def tool_calls(self) -> tuple[dict[str, Any], ...]:
        return _of_types(self.output, TOOL_CALL_TYPES)

    @property
    def history_items(self) -> tuple[dict[str, Any], ...]:
        return _of_types(self.output, HISTORY_TYPES)

    @property
    def final_message(self) -> str | None:
        """Text of the last assistant ``message`` item, or None when there is none."""
        for item in reversed(self.output):
            if item.get("type") == "message" and item.get("role", "assistant") == "assistant":
                return message_text(item)
        return None


class ForeignFrame(Record):
    """A frame of another response (a duplicate ``response.completed``, a late reply to
    an earlier request): reported, never taken as this response's answer."""

    __slots__ = ("frame_type", "response_id", "live_response_id")  # noqa: RUF023  # field order
    __match_args__ = ("frame_type", "response_id", "live_response_id")

    def __init__(self, frame_type: str, response_id: str, live_response_id: str | None) -> None:
        self.frame_type = frame_type
        self.response_id = response_id
        self.live_response_id = live_response_id


class ResponseFinished(Record):
    __slots__ = ("outcome",)
    __match_args__ = ("outcome",)

    def __init__(self, outcome: ResponseOutcome) -> None:
        self.outcome = outcome


StreamEvent = (
    ResponseStarted | TextDelta | ReasoningDelta | AssistantMessageDone | ToolCallReady | CallDiscarded
    | TurnStateSeen | ForeignFrame | ResponseFinished
)


def usable_call_id(item: dict[str, Any]) -> str | None:
    """The item's ``call_id`` when an output can answer it (a non-empty string)."""
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None



def _of_types(output: tuple[dict[str, Any], ...], types: Container[object]) -> tuple[dict[str, Any], ...]:
    kept = []
    for item in output:
        if item.get("type") in types:
            kept.append(item)
    return tuple(kept)


def message_text(item: dict[str, Any]) -> str:
    texts = []
    for part in item.get("content") or []:
        if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
            texts.append(part.get("text", ""))
    return "".join(texts)
