"""One request/response exchange on a WebSocket, including the interrupt-and-drain
(the WebSocket ``ResponseExchange`` and its ``Route``: ``_exchange.py``).

Theory of operation: send the body, then read frames until the terminal frame, feeding
each through the attempt's sans-IO ``ResponseAccumulator`` (via the ``ResponseFeed``).
The events announcing the request (``run.started``, ``model.call.started``,
``model.attempt.started``, its ``api.event``) are built and emitted right after the
send (``feed.flush``; ``EventSink.defer`` keeps their place in the stream), so the body
leaves without waiting for them. One cancel scope bounds the
send (the link's send timeout) and then the read (its deadline moved to the idle timeout
once the body is on the wire): a frame only records its arrival time, and when the
deadline expires with frames received since, the read goes on under a new scope due at
the latest frame plus the idle timeout -- so the per-frame cost is one clock read, and a
silent server times out at exactly its last frame plus ``idle_timeout``. Until the first
output of a response the socket's reader yields after each frame that may be output
(the first token is not held up behind the parsing of a whole burst; the frames leading
up to it come along in one round); from then on a
burst comes in one round, and frames that already wait are taken without a schedule
point each. The first output is followed by one, so the application sees it before the
rest of a burst is processed.

A preempting steer (``Preemption``) only *signals* this exchange; the exchange's own
task does the socket I/O (no nursery, no task of its own: a warm turn pays for
neither). The signal is registered before the request is sent, so no steer can slip
between sending and listening. The accumulator decides when the ``response.interrupt``
frame is due (as soon as the response id is known, once); the reading task then sends
it shielded and bounded -- at once when the frame that made it due was just read, or,
when the steer comes while the reader waits for a frame, after the signal cancelled
that wait (a queued frame is never lost) -- and only after the send succeeded does the
exchange drain toward the terminal frame (within ``INTERRUPT_GRACE``); the steer's wait
ends at that moment. If the interrupt cannot be sent, the socket is abandoned and the
reader's failure is an ordinary retryable connection loss. If the grace runs out, the
items received so far are returned unchained (the next request replays in full).
"""

from __future__ import annotations

import collections
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import trio

from ..._config import Transport
from ..._errors import ResponsesError, ResponseTimeout
from ..._jsontext import dumps
from ..._wire.frames import decode_frame
from ..._wire.stream import Phase, ResponseOutcome
from ._response_feed import ResponseFeed

if TYPE_CHECKING:
    from ..._transport.websocket import WebSocketLink
    from .._turns._turn import Preemption

__all__ = ["INTERRUPT_GRACE", "INTERRUPT_SEND_TIMEOUT", "WebSocketExchange", "WebSocketRoute"]

INTERRUPT_GRACE = 10.0  # from the interrupt on the wire to the terminal frame
INTERRUPT_SEND_TIMEOUT = 5.0  # sending the interrupt frame itself


_dumps = dumps  # compact JSON that always encodes as UTF-8


class WebSocketRoute:
    """An attempt on the agent's live WebSocket. ``stale``: the responses that ended on
    this socket (a frame naming one later is a leftover); ``finished`` is the socket's
    list of them, which ``ended`` extends (``Connections`` clears it with each socket)."""

    transport = Transport.WEBSOCKET
    transport_name = Transport.WEBSOCKET.value
    websocket = True

    def __init__(self, link: WebSocketLink, idle_timeout: float, finished: collections.deque[str]) -> None:
        self._link = link
        self._idle_timeout = idle_timeout
        self._finished = finished
        self.stale: Collection[str] = tuple(finished)

    def exchange(self, feed: ResponseFeed, preemption: Preemption | None) -> WebSocketExchange:
        return WebSocketExchange(self._link, feed, idle_timeout=self._idle_timeout, preemption=preemption)

    async def recovered(self, error: ResponsesError) -> bool:
        return False  # the socket's own recovery (a 401 at the handshake) is the connection's

    def ended(self, outcome: ResponseOutcome) -> None:
        if outcome.response_id:
            self._finished.append(outcome.response_id)


class WebSocketExchange:
    def __init__(
        self,
        link: WebSocketLink,
        feed: ResponseFeed,
        *,
        idle_timeout: float,
        preemption: Preemption | None,
    ) -> None:
        self._link = link
        self.feed = feed
        self._idle = idle_timeout
        self._preemption = preemption
        self._scope: trio.CancelScope | None = None  # the send's, then the read's
        self._interrupt_deadline = float("inf")
        self._last = 0.0  # when the latest frame arrived (or the read began)
        self._now = trio.lowlevel.current_clock().current_time  # trio.current_time(), one call per frame
        self._first_pending = feed.first_output is None
        self._sender_started = False
        self._settled = trio.Event()  # set once a wanted interrupt is on the wire, or not needed
        self._done = False

    unfinished = False  # a response read to its terminal frame leaves nothing to finish

    async def finish(self) -> None:
        pass

    async def run(self, body: dict[str, Any], text: str | None = None) -> ResponseOutcome:
        """Send ``body`` (whose JSON is ``text``, when known) and return the outcome; raises
        ``ResponsesError`` on failure. One coroutine frame from here to the frame loop (every
        resume of the reading task passes through each frame of its stack)."""
        preemption = self._preemption
        if preemption is not None:
            preemption.attach(self._signal)
        try:
            if preemption is not None and preemption.pending:
                self.feed.accumulator.want_interrupt()
            link = self._link
            feed = self.feed
            if text is None:
                text = _dumps(body)
            clock = self._now
            feed.request(body)
            feed.sent(start := clock())
            link.deliver_bursts(False)  # a round per possible output until the first one (see _frames)
            # One cancel scope bounds the send (the link's send timeout) and then the first stretch
            # of the read (its deadline moved to the idle timeout once the request is on the wire).
            send_timeout = link.send_timeout
            scope = self._scope = trio.CancelScope(deadline=start + send_timeout)
            sent = False
            with scope:
                try:
                    await link.send_text(text)
                finally:
                    feed.flush()  # the events announcing the request (also when the send failed)
                sent = True
                self._last = now = clock()
                scope.deadline = min(now + self._idle, self._interrupt_deadline)
                return await self._frames()
            if not sent:
                raise ResponseTimeout(
                    f"sending a Responses WebSocket frame took over {send_timeout:g} s",
                    error_class="send_timeout",
                    failure_phase="send",
                )
            return await self._read()
        finally:
            if preemption is not None:
                self._done = True
                preemption.detach(self._signal)
                self._settled.set()

    async def _read(self) -> ResponseOutcome:
        """The read after its scope's deadline passed (or a steer woke it to send the
        interrupt): a frame that came since re-arms it at that frame's time plus the idle
        timeout, so it fires exactly as if the deadline had been pushed on every frame."""
        while True:
            if self.feed.accumulator.interrupt_due and not self._sender_started:
                await self._send_interrupt()
            deadline = min(self._last + self._idle, self._interrupt_deadline)
            if trio.current_time() >= deadline:
                break
            self._scope = trio.CancelScope(deadline=deadline)
            with self._scope:
                return await self._frames()
        if self.feed.accumulator.phase is Phase.DRAINING:
            return self.feed.accumulator.abandoned_outcome()
        raise ResponseTimeout(f"no Responses WebSocket frame arrived for {self._idle:g} s")

    async def _frames(self) -> ResponseOutcome:
        """Frames until the terminal one (left only by returning, or by a cancellation)."""
        link = self._link
        feed = self.feed
        accumulator = feed.accumulator
        clock = self._now
        waiting = link.waiting  # frames already read, taken without a coroutine each (None: ask the link)
        while True:
            if waiting is None:
                text = await link.receive_text()
            else:
                try:
                    text = waiting.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    text = await link.receive_text()  # waits; or says how the socket closed
            self._last = now = clock()
            outcome = feed.feed(decode_frame(text), now)
            if outcome is not None:
                return outcome
            # ``interrupt_wanted`` first: a plain attribute, False but for a preempted response
            # (``interrupt_due`` is a property, and this is per frame).
            if accumulator.interrupt_wanted and accumulator.interrupt_due and not self._sender_started:
                await self._send_interrupt()
            if self._first_pending and feed.first_output is not None:
                # Frames that wait are read without a schedule point (see
                # WebSocketLink.receive_text); the first output of a response goes
                # to the consumer before the rest of a burst is processed.
                self._first_pending = False
                try:
                    await trio.lowlevel.checkpoint()
                finally:
                    # after the round in which the consumer takes the first output: a
                    # reader in that same round still hands over one frame, not a burst
                    link.deliver_bursts(True)

    # -- preemption (signalled from the steering task) -----------------------------

    def _signal(self) -> trio.Event | None:
        if self._done:
            return None
        accumulator = self.feed.accumulator
        accumulator.want_interrupt()
        if accumulator.interrupt_due and not self._sender_started:
            # The reader sends it: wake it from its wait for the next frame (nothing is
            # lost; the frame stays queued), and its loop sends the interrupt first.
            if self._scope is not None:
                self._scope.cancel()
        return self._settled

    async def _send_interrupt(self) -> None:
        """Send ``response.interrupt`` from the exchange's own task, shielded and bounded."""
        self._sender_started = True
        accumulator = self.feed.accumulator
        try:
            frame = accumulator.interrupt_frame()
            self.feed.outbound(frame)
            sent = False
            with trio.CancelScope(shield=True), trio.move_on_after(INTERRUPT_SEND_TIMEOUT):
                try:
                    await self._link.send_text(_dumps(frame))
                    sent = True
                except ResponsesError:
                    pass  # the reader sees the same dead socket and fails the attempt
            if not sent:
                self._link.abandon()  # never trust a socket whose interrupt may be half-written
                return
            accumulator.interrupt_sent()
            self._interrupt_deadline = trio.current_time() + INTERRUPT_GRACE
            if self._scope is not None:
                self._scope.deadline = min(self._scope.deadline, self._interrupt_deadline)
        finally:
            self._settled.set()
