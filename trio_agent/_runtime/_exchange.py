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
from .._errors import ResponsesError, ResponseTimeout
from .._wire.frames import decode_frame
from .._wire.stream import ResponseOutcome
from ._exchange_base import ExchangeBase

if TYPE_CHECKING:
    from .._transport.websocket import WebSocketLink
    from ._turn import Preemption

__all__ = ["INTERRUPT_GRACE", "Exchange"]

INTERRUPT_GRACE = 10.0


class Exchange(ExchangeBase):
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
        super().__init__(
            transport=Transport.WEBSOCKET.value, emit=emit, on_stream_event=on_stream_event, phase=phase,
            call_index=call_index, turn_id=turn_id, preemption=preemption,
        )
        self._link = link
        self._idle = idle_timeout
        self._scope = trio.CancelScope()
        self._interrupt_sent = False
        self._interrupt_deadline = float("inf")
        self._done = False

    async def run(self, body: dict[str, Any]) -> ResponseOutcome:
        """Send ``body`` and return the outcome; raises ``ResponsesError`` on failure."""
        self._outbound(body)
        self._sent()
        await self._link.send_text(json.dumps(body, separators=(",", ":"), ensure_ascii=False))
        if self._preemption is None:
            return await self._read()
        with self._preemption.hook(self._on_preempt):
            return await self._read()

    async def _read(self) -> ResponseOutcome:
        link = self._link
        self._scope.deadline = trio.current_time() + self._idle
        with self._scope:
            while True:
                text = await link.receive_text()
                now = trio.current_time()
                self._scope.deadline = min(now + self._idle, self._interrupt_deadline)
                outcome, started = self._feed(decode_frame(text), now)
                if outcome is not None:
                    self._done = True
                    return outcome
                if started and self._preemption is not None and self._preemption.pending:
                    await self._send_interrupt()
        self._done = True
        if self._interrupt_sent:
            return self.accumulator.abandoned_outcome()
        raise ResponseTimeout(f"no Responses WebSocket frame arrived for {self._idle:g} s")

    async def _on_preempt(self) -> None:
        # Runs in the steering task: a socket that fails here is the reader's business
        # (it sees the same failure and retries), never an error of ``steer()``.
        if not self._done and self.accumulator.response_id is not None:
            try:
                await self._send_interrupt()
            except ResponsesError:
                pass

    async def _send_interrupt(self) -> None:
        if self._interrupt_sent:
            return
        self._interrupt_sent = True
        frame = {
            "type": "response.interrupt",
            "response_id": self.accumulator.response_id,
            "mode": "discard_partial_items",
        }
        self._outbound(frame)
        self._interrupt_deadline = trio.current_time() + INTERRUPT_GRACE
        self._scope.deadline = min(self._scope.deadline, self._interrupt_deadline)
        await self._link.send_text(json.dumps(frame, separators=(",", ":")))
