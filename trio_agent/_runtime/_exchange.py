"""One request/response exchange on a WebSocket, including the interrupt-and-drain.

Theory of operation: send the body, then read frames until the terminal frame,
feeding each through the sans-IO ``ResponseAccumulator``. One cancel scope bounds the
whole read; its deadline moves forward on every frame (the idle timeout), so the
per-frame cost is one attribute store. A preempting steer (``Preemption``) makes the
exchange send ``{"type":"response.interrupt","response_id":...,"mode":
"discard_partial_items"}`` as soon as the response id is known -- from the steering
task if the id is already known, else from this loop when ``response.created``
arrives -- and then keep draining until the terminal frame, within a bounded grace.
If the grace runs out the socket is given up and the items received so far are
returned unchained (the next request replays in full).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from .._config import Transport
from .._errors import ResponseTimeout
from .._events import EventKind
from .._wire.frames import decode_frame, parse_frame
from .._wire.stream import (
    AssistantMessageDone,
    ResponseAccumulator,
    ResponseFinished,
    ResponseOutcome,
    ResponseStarted,
    TextDelta,
)

if TYPE_CHECKING:
    from .._transport.websocket import WebSocketLink
    from ._turn import Preemption

__all__ = ["INTERRUPT_GRACE", "Exchange"]

INTERRUPT_GRACE = 10.0


class Exchange:
    def __init__(
        self,
        link: WebSocketLink,
        *,
        emit: Callable[..., Any],
        on_stream_event: Callable[[Any], None],
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        idle_timeout: float,
        preemption: Preemption | None,
    ) -> None:
        self._link = link
        self._emit = emit
        self._on_stream_event = on_stream_event
        self._turn_id = turn_id
        self._idle = idle_timeout
        self._preemption = preemption
        self._api_base: dict[str, Any] = {"direction": "inbound", "transport": Transport.WEBSOCKET.value,
                                          "phase": phase}
        if call_index is not None:
            self._api_base["model_call_index"] = call_index
        self.accumulator = ResponseAccumulator()
        self.sent_at = 0.0
        self.first_event: float | None = None
        self.first_output: float | None = None
        self._scope = trio.CancelScope()
        self._interrupt_sent = False
        self._interrupt_deadline = float("inf")
        self._done = False

    async def run(self, body: dict[str, Any]) -> ResponseOutcome:
        """Send ``body`` and return the outcome; raises ``ResponsesError`` on failure."""
        self._emit(EventKind.API_EVENT, {**self._api_base, "direction": "outbound", "event": body}, self._turn_id)
        self.sent_at = trio.current_time()
        await self._link.send_text(json.dumps(body, separators=(",", ":"), ensure_ascii=False))
        if self._preemption is None:
            return await self._read()
        with self._preemption.hook(self._on_preempt):
            return await self._read()

    async def _read(self) -> ResponseOutcome:
        link, accumulator = self._link, self.accumulator
        self._scope.deadline = trio.current_time() + self._idle
        with self._scope:
            while True:
                text = await link.receive_text()
                now = trio.current_time()
                self._scope.deadline = min(now + self._idle, self._interrupt_deadline)
                if self.first_event is None:
                    self.first_event = now
                raw = decode_frame(text)
                self._emit(EventKind.API_EVENT, {**self._api_base, "event": raw}, self._turn_id)
                for event in accumulator.feed(parse_frame(raw)):
                    if isinstance(event, ResponseFinished):
                        self._done = True
                        return event.outcome
                    if isinstance(event, TextDelta | AssistantMessageDone) and self.first_output is None:
                        self.first_output = now
                    if isinstance(event, ResponseStarted) and self._preemption and self._preemption.pending:
                        await self._send_interrupt()
                    self._on_stream_event(event)
        self._done = True
        if self._interrupt_sent:
            return accumulator.abandoned_outcome()
        raise ResponseTimeout(f"no Responses WebSocket frame arrived for {self._idle:g} s")

    async def _on_preempt(self) -> None:
        if not self._done and self.accumulator.response_id is not None:
            await self._send_interrupt()

    async def _send_interrupt(self) -> None:
        if self._interrupt_sent:
            return
        self._interrupt_sent = True
        frame = {
            "type": "response.interrupt",
            "response_id": self.accumulator.response_id,
            "mode": "discard_partial_items",
        }
        self._emit(EventKind.API_EVENT, {**self._api_base, "direction": "outbound", "event": frame}, self._turn_id)
        self._interrupt_deadline = trio.current_time() + INTERRUPT_GRACE
        self._scope.deadline = min(self._scope.deadline, self._interrupt_deadline)
        await self._link.send_text(json.dumps(frame, separators=(",", ":")))
