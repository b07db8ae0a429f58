"""What both exchanges (WebSocket and HTTPS) do with one response attempt's frames.

A ``ResponseFeed`` is composed into each exchange: it emits the ``api.event``
of every outbound body and inbound frame (unless ``AgentConfig(api_events=False)``:
then nothing of the frame is built for an event), notes when the request went out and when
the first frame and the first output arrived (for ``model.call.completed``), and
feeds each decoded frame through the attempt's sans-IO ``ResponseAccumulator``,
passing the stream events it implies to the model client. Text deltas, most of the
frames of an answer, take a shorter road with the same result: their fields are read
straight from the decoded frame (``text_delta_fields``), the accumulator takes them
(``text_delta_ids``) and the ``assistant.delta`` is emitted here; any other frame, or
a delta with a field of the wrong type, goes through ``parse_frame`` and ``feed``.

A compaction request's text (a summary, or the answer of a server that declined a
remote compaction) is not the agent speaking: in the ``compaction`` phase no
``assistant.*`` or ``reasoning.*`` event is emitted (``api.event`` still carries
every frame).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import trio

from ..._events import EventKind
from ..._wire.frames import TEXT_DELTA, parse_frame, text_delta_fields
from ..._wire.stream import (
    AssistantMessageDone,
    ReasoningDelta,
    ResponseAccumulator,
    ResponseFinished,
    ResponseOutcome,
    StreamEvent,
    TextDelta,
)
from ._call_events import delta_payload

__all__ = ["ResponseFeed"]

Emit = Callable[..., Any]


# Module constants: reading ``EventKind.X`` is a descriptor call, on the per-frame path.
_API_EVENT, _ASSISTANT_DELTA = EventKind.API_EVENT, EventKind.ASSISTANT_DELTA


def _nothing() -> None:
    pass


class ResponseFeed:
    def __init__(
        self,
        *,
        transport: str,
        emit: Emit,
        on_stream_event: Callable[[StreamEvent], None],
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        stale: Collection[str] = (),
        api_events: bool = True,
        defer: Callable[[Callable[[], object]], None] | None = None,
        flush: Callable[[], None] | None = None,
    ) -> None:
        self._emit = emit
        # The request's api.event waits with the other events announcing it (EventSink.defer);
        # ``flush`` emits them: the exchange calls it once the body is on the wire (or
        # failed to get there).
        self._defer = defer
        self.flush: Callable[[], None] = flush or _nothing
        self._api_events = api_events
        self._on_stream_event = on_stream_event
        self._turn_id = turn_id
        self._call_index = call_index
        self._api_base: dict[str, Any] = {"direction": "inbound", "transport": transport, "phase": phase}
        if call_index is not None:
            self._api_base["model_call_index"] = call_index
        self._quiet = phase == "compaction"  # no assistant/reasoning events (module docstring)
        self.accumulator = ResponseAccumulator(stale)
        self.sent_at = 0.0
        self.first_event: float | None = None
        self.first_output: float | None = None

    def outbound(self, frame: dict[str, Any]) -> None:
        if self._api_events:
            self._emit(EventKind.API_EVENT, {**self._api_base, "direction": "outbound", "event": frame}, self._turn_id)

    def request(self, body: dict[str, Any]) -> None:
        """The request's ``outbound``, deferred until ``flush`` when a deferral is given."""
        if self._api_events:
            if self._defer is None:
                self.outbound(body)
            else:
                self._defer(lambda: self.outbound(body))

    def sent(self, now: float | None = None) -> None:
        """The request goes out now (``now``: the caller's clock reading, else read here)."""
        self.sent_at = trio.current_time() if now is None else now

    def feed(self, raw: dict[str, Any], now: float) -> ResponseOutcome | None:
        """Feed one decoded frame; returns the outcome once the response completed."""
        if self.first_event is None:
            self.first_event = now
        if self._api_events:
            self._emit(_API_EVENT, {**self._api_base, "event": raw}, self._turn_id)
        if raw.get("type") == TEXT_DELTA and (fields := text_delta_fields(raw)) is not None:
            ids = self.accumulator.text_delta_ids(fields[1], fields[2])
            if ids is not None:
                if self.first_output is None:
                    self.first_output = now
                if not self._quiet:
                    self._emit(_ASSISTANT_DELTA, delta_payload(self._call_index, ids[0], ids[1], fields[0]),
                               self._turn_id)
            return None
        for event in self.accumulator.feed(parse_frame(raw)):
            if isinstance(event, ResponseFinished):
                return event.outcome
            if isinstance(event, TextDelta | AssistantMessageDone):
                if self.first_output is None:
                    self.first_output = now
                if self._quiet:
                    continue
            elif self._quiet and isinstance(event, ReasoningDelta):
                continue
            self._on_stream_event(event)
        return None
