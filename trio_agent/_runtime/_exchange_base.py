"""What both exchanges (WebSocket and HTTPS) share: api.event emission, first-event and
first-output timing, and feeding decoded frames through the ``ResponseAccumulator``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from .._events import EventKind
from .._wire.frames import parse_frame
from .._wire.stream import (
    AssistantMessageDone,
    ResponseAccumulator,
    ResponseFinished,
    ResponseOutcome,
    ResponseStarted,
    TextDelta,
)

if TYPE_CHECKING:
    from ._turn import Preemption

__all__ = ["ExchangeBase"]


class ExchangeBase:
    def __init__(
        self,
        *,
        transport: str,
        emit: Callable[..., Any],
        on_stream_event: Callable[[Any], None],
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        preemption: Preemption | None,
    ) -> None:
        self._emit = emit
        self._on_stream_event = on_stream_event
        self._turn_id = turn_id
        self._preemption = preemption
        self._api_base: dict[str, Any] = {"direction": "inbound", "transport": transport, "phase": phase}
        if call_index is not None:
            self._api_base["model_call_index"] = call_index
        self.accumulator = ResponseAccumulator()
        self.sent_at = 0.0
        self.first_event: float | None = None
        self.first_output: float | None = None

    def _outbound(self, frame: dict[str, Any]) -> None:
        self._emit(EventKind.API_EVENT, {**self._api_base, "direction": "outbound", "event": frame}, self._turn_id)

    def _feed(self, raw: dict[str, Any], now: float) -> tuple[ResponseOutcome | None, bool]:
        """Feed one decoded frame; returns the outcome once complete, and whether the
        response id just became known."""
        if self.first_event is None:
            self.first_event = now
        self._emit(EventKind.API_EVENT, {**self._api_base, "event": raw}, self._turn_id)
        started = False
        for event in self.accumulator.feed(parse_frame(raw)):
            if isinstance(event, ResponseFinished):
                return event.outcome, started
            if isinstance(event, ResponseStarted):
                started = True
            elif isinstance(event, TextDelta | AssistantMessageDone) and self.first_output is None:
                self.first_output = now
            self._on_stream_event(event)
        return None, started

    def _sent(self) -> None:
        self.sent_at = trio.current_time()
