"""One request/response exchange over HTTPS/SSE (the HTTPS ``ResponseExchange``, and
its ``Route``: ``_exchange.py``).

The body is POSTed, the event stream decoded (``SseDecoder``), and each event's data
goes through the same frame decoder and ``ResponseAccumulator`` as the WebSocket
(``ResponseFeed``); the first output of a response is followed by a schedule
point, so the application sees it before the rest of its chunk is processed. There
is no socket to drain, so a preempting steer simply closes the stream: the items
finished so far are kept, nothing chains on the abandoned response, and the turn
continues with the steer (SPEC sec. 4).

Once the terminal frame has produced the outcome, the response is paid for and is
never thrown away: preemption no longer applies, and reading the rest of the body
(``[DONE]`` and EOF) is best effort -- a transport error there is ignored, since a
retry would replay a completed response. That rest is read, and the connection handed
back to its pool, by ``finish``: the model client calls it after the turn's result is
out (before the next request, at the latest), so a turn does not wait for the close.
A transport that reads whole responses (a tapped one: ``HttpsTransport.whole_responses``)
still finishes before it returns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import trio

from ..._config import Transport
from ..._errors import ConnectionLost, ResponsesError
from ..._wire.frames import decode_frame
from ..._wire.sse import SseDecoder
from ..._wire.stream import ResponseOutcome
from ._response_feed import ResponseFeed

if TYPE_CHECKING:
    from ..._transport.https import HttpsTransport
    from .._turns._turn import Preemption
    from ._https_auth import Credentials, HttpsAuth

__all__ = ["HttpsExchange", "HttpsRoute"]

DRAIN_GRACE = 1.0
Stream = AbstractAsyncContextManager[AsyncIterator[bytes]]  # an open response's body (open_stream)


class HttpsRoute:
    """An attempt over HTTPS, with its headers (``HttpsAuth``); a 401 to a ChatGPT
    snapshot's request is recovered once (``recovered``), then the attempt sends again."""

    transport = Transport.HTTPS
    transport_name = Transport.HTTPS.value
    websocket = False
    stale: Collection[str] = ()  # every response has a connection of its own

    def __init__(self, https: HttpsTransport, auth: HttpsAuth, credentials: Credentials) -> None:
        self._https = https
        self._auth = auth
        self._credentials = credentials
        self._recovered = False

    def exchange(self, feed: ResponseFeed, preemption: Preemption | None) -> HttpsExchange:
        return HttpsExchange(self._https, feed, self._credentials[0], preemption=preemption)

    async def recovered(self, error: ResponsesError) -> bool:
        rejected = self._credentials[1]
        if error.status != 401 or rejected is None or self._recovered:
            return False
        self._recovered = True
        self._credentials = await self._auth.recover(rejected)
        return True

    def ended(self, outcome: ResponseOutcome) -> None:
        pass


class HttpsExchange:
    def __init__(
        self, transport: HttpsTransport, feed: ResponseFeed, headers: Sequence[tuple[str, str]], *,
        preemption: Preemption | None,
    ) -> None:
        self._transport = transport
        self.feed = feed
        self._headers = headers
        self._preemption = preemption
        self._read_scope = trio.CancelScope()  # preemption's; its deadline also bounds the head
        self._preempted = False
        self._outcome: ResponseOutcome | None = None
        # The open response once the outcome is known, while the rest of it is unread (finish).
        self._rest: tuple[Stream, AsyncIterator[bytes]] | None = None

    @property
    def unfinished(self) -> bool:
        """The response is still open: ``finish`` reads its rest and closes it."""
        return self._rest is not None

    async def finish(self) -> None:
        """Read the rest of the body (``[DONE]``, EOF; within ``DRAIN_GRACE``) and close the
        response, so its connection goes back to the pool. Best effort: a transport
        error here is ignored (the outcome is already known)."""
        if self._rest is None:
            return
        stream, chunks = self._rest
        self._rest = None
        try:
            await _drained(stream, chunks)  # the transport maps what the drain raises
        except ResponsesError:
            pass

    async def run(self, body: dict[str, Any], text: str | None = None) -> ResponseOutcome:
        """POST ``body`` (whose JSON is ``text``, when known) and return the outcome."""
        headers = self._headers
        if self._preemption is None:
            return await self._exchange(body, headers, text)
        preemption = self._preemption
        preemption.attach(self._signal)
        try:
            if preemption.pending:
                self._signal()
            with self._read_scope:
                return await self._exchange(body, headers, text, self._read_scope)
        finally:
            preemption.detach(self._signal)
        if not self._preempted:  # the only other way out: the head's deadline (open_stream's head_scope)
            raise self._transport.head_timeout()
        # Preempted before the terminal frame: the stream was closed.
        return self._outcome or self.feed.accumulator.abandoned_outcome()

    def _signal(self) -> trio.Event | None:
        if self._outcome is None:
            self._preempted = True
            self._read_scope.cancel()
        return None

    async def _exchange(
        self, body: dict[str, Any], headers: Sequence[tuple[str, str]], text: str | None,
        head_scope: trio.CancelScope | None = None,
    ) -> ResponseOutcome:
        feed = self.feed
        feed.request(body)
        feed.sent()
        later = not self._transport.whole_responses  # a tap sees each response whole first
        # ``async with`` the stream, spelt out: the stream stays open past this block when
        # the rest of the response is read later (finish), without an exit stack.
        stream = self._transport.open_stream(body, headers, text, feed.flush, head_scope)
        try:
            chunks = await stream.__aenter__()
            try:
                # The events announcing the request are emitted once its body is written
                # (on_sent), while the server works; at the latest here, or by the next emit.
                feed.flush()
                self._outcome = await self._read(chunks)
            except BaseException as exc:
                if not await stream.__aexit__(type(exc), exc, exc.__traceback__):
                    raise
            else:
                if later:
                    self._rest = (stream, chunks)  # finish() reads the rest
                else:
                    await _drained(stream, chunks)
        except ResponsesError:
            if self._outcome is None:
                raise
        assert self._outcome is not None
        return self._outcome

    async def _read(self, chunks: AsyncIterator[bytes]) -> ResponseOutcome:
        decoder = SseDecoder()
        feed = self.feed
        accumulator = feed.accumulator
        first_pending = feed.first_output is None
        # trio.current_time(), read only while the feed still wants the time (its first
        # event, its first output): nothing on HTTPS times the frames after that.
        clock = trio.lowlevel.current_clock().current_time
        async for chunk in chunks:
            for data in decoder.feed(chunk):
                outcome = feed.feed(decode_frame(data), clock() if feed.first_output is None else 0.0)
                if outcome is not None:
                    return outcome
                # mail cut it: what follows is discarded anyway (a cut always wants the
                # interrupt: the plain attribute first, per frame)
                if accumulator.interrupt_wanted and accumulator.was_cut:
                    return accumulator.abandoned_outcome()
                if first_pending and feed.first_output is not None:
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


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    with trio.move_on_after(DRAIN_GRACE):
        async for _ in chunks:
            pass


async def _drained(stream: Stream, chunks: AsyncIterator[bytes]) -> None:
    """``async with`` the open ``stream`` (entered already): its rest read, then closed."""
    try:
        await _drain(chunks)
    except BaseException as exc:
        if not await stream.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await stream.__aexit__(None, None, None)
