"""One request/response exchange over HTTPS/SSE.

The body is POSTed, the event stream decoded (``SseDecoder``) and fed through the same
sans-IO ``ResponseAccumulator`` as the WebSocket. There is no socket to drain, so a
preempting steer simply closes the stream: the items finished so far are kept,
nothing chains on the abandoned response, and the turn continues with the steer
(SPEC sec. 4).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._config import Transport
from .._errors import ConnectionLost, ProtocolError
from .._wire.sse import SseDecoder
from .._wire.stream import ResponseOutcome
from ._exchange_base import ExchangeBase

if TYPE_CHECKING:
    from .._transport.https import HttpsTransport
    from ._turn import Preemption

__all__ = ["HttpsExchange"]

_DRAIN_GRACE = 1.0


async def _drain(chunks: Any) -> None:
    """Read the rest of the body (``[DONE]`` and EOF follow the terminal frame), so the
    connection ends cleanly; bounded, in case a server keeps the stream open."""
    with trio.move_on_after(_DRAIN_GRACE):
        async for _ in chunks:
            pass


class HttpsExchange(ExchangeBase):
    def __init__(
        self,
        transport: HttpsTransport,
        *,
        emit: Callable[..., Any],
        on_stream_event: Callable[[Any], None],
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        preemption: Preemption | None,
    ) -> None:
        super().__init__(
            transport=Transport.HTTPS.value, emit=emit, on_stream_event=on_stream_event, phase=phase,
            call_index=call_index, turn_id=turn_id, preemption=preemption,
        )
        self._transport = transport

    async def run(self, body: dict[str, Any], headers: Sequence[tuple[str, str]]) -> ResponseOutcome:
        self._outbound(body)
        self._sent()
        with trio.CancelScope() as read_scope:

            async def close_stream() -> None:
                read_scope.cancel()

            if self._preemption is None:
                return await self._stream(body, headers)
            with self._preemption.hook(close_stream):
                return await self._stream(body, headers)
        return self.accumulator.abandoned_outcome()  # preempted: the stream was closed

    async def _stream(self, body: dict[str, Any], headers: Sequence[tuple[str, str]]) -> ResponseOutcome:
        decoder = SseDecoder()
        async with self._transport.open_stream(body, headers) as chunks:
            async for chunk in chunks:
                for data in decoder.feed(chunk):
                    outcome = self._frame(data)
                    if outcome is not None:
                        await _drain(chunks)
                        return outcome
        for data in decoder.close():
            outcome = self._frame(data)
            if outcome is not None:
                return outcome
        raise ConnectionLost(
            "the Responses event stream ended before the response completed", error_class="premature_close"
        )

    def _frame(self, data: str) -> ResponseOutcome | None:
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise ProtocolError(
                f"the Responses event stream sent data that is not JSON: {data[:200]!r}", error_class="invalid_json"
            ) from exc
        if not isinstance(raw, dict):
            raise ProtocolError("the Responses event stream sent a JSON value that is not an object")
        outcome, _ = self._feed(raw, trio.current_time())
        return outcome
