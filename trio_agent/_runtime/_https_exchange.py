"""One request/response exchange over HTTPS/SSE.

The body is POSTed, the event stream decoded (``SseDecoder``), and each event's data
goes through the same frame decoder and ``ResponseAccumulator`` as the WebSocket
(``ExchangeRecorder``); the first output of a response is followed by a schedule
point, so the application sees it before the rest of its chunk is processed. There
is no socket to drain, so a preempting steer simply closes the stream: the items
finished so far are kept, nothing chains on the abandoned response, and the turn
continues with the steer (SPEC sec. 4).

Once the terminal frame has produced the outcome, the response is paid for and is
never thrown away: preemption no longer applies, and reading the rest of the body
(``[DONE]`` and EOF) is best effort -- a transport error there is ignored, since a
retry would replay a completed response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._errors import ConnectionLost, ResponsesError
from .._wire.frames import decode_frame
from .._wire.sse import SseDecoder
from .._wire.stream import ResponseOutcome
from ._recorder import ExchangeRecorder

if TYPE_CHECKING:
    from .._transport.https import HttpsTransport
    from ._turn import Preemption

__all__ = ["HttpsExchange"]

DRAIN_GRACE = 1.0


class HttpsExchange:
    def __init__(
        self, transport: HttpsTransport, recorder: ExchangeRecorder, *, preemption: Preemption | None
    ) -> None:
        self._transport = transport
        self.recorder = recorder
        self._preemption = preemption
        self._read_scope = trio.CancelScope()
        self._outcome: ResponseOutcome | None = None

    async def run(self, body: dict[str, Any], headers: Sequence[tuple[str, str]]) -> ResponseOutcome:
        if self._preemption is None:
            return await self._exchange(body, headers)
        preemption = self._preemption
        preemption.attach(self._signal)
        try:
            if preemption.pending:
                self._read_scope.cancel()
            with self._read_scope:
                return await self._exchange(body, headers)
        finally:
            preemption.detach(self._signal)
        # Preempted before the terminal frame: the stream was closed.
        return self._outcome or self.recorder.accumulator.abandoned_outcome()

    def _signal(self) -> trio.Event | None:
        if self._outcome is None:
            self._read_scope.cancel()
        return None

    async def _exchange(self, body: dict[str, Any], headers: Sequence[tuple[str, str]]) -> ResponseOutcome:
        self.recorder.outbound(body)
        self.recorder.sent()
        try:
            async with self._transport.open_stream(body, headers) as chunks:
                self._outcome = await self._read(chunks)
                with trio.move_on_after(DRAIN_GRACE):
                    async for _ in chunks:
                        pass
        except ResponsesError:
            if self._outcome is None:
                raise
        assert self._outcome is not None
        return self._outcome

    async def _read(self, chunks: AsyncIterator[bytes]) -> ResponseOutcome:
        decoder = SseDecoder()
        recorder = self.recorder
        accumulator = recorder.accumulator
        first_pending = recorder.first_output is None
        async for chunk in chunks:
            for data in decoder.feed(chunk):
                outcome = recorder.feed(decode_frame(data), trio.current_time())
                if outcome is not None:
                    return outcome
                if accumulator.was_cut:  # mail cut it: what follows is discarded anyway
                    return accumulator.abandoned_outcome()
                if first_pending and recorder.first_output is not None:
                    # A chunk often holds many events: the first output goes to the
                    # application before the rest of the chunk is processed.
                    first_pending = False
                    await trio.lowlevel.checkpoint()
        decoder.close()  # an unterminated final event is discarded (the SSE standard)
        if decoder.truncated:
            raise ConnectionLost(
                "the Responses event stream was cut inside an event (its data was discarded) "
                "before the response completed",
                error_class="premature_close",
            )
        raise ConnectionLost(
            "the Responses event stream ended before the response completed", error_class="premature_close"
        )
