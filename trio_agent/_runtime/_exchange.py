"""One request/response exchange on a WebSocket, including the interrupt-and-drain.

Theory of operation: send the body, then read frames until the terminal frame,
feeding each through the attempt's sans-IO ``ResponseAccumulator`` (via the
``ExchangeRecorder``). One cancel scope bounds the read (the idle timeout); a frame
only records its arrival time, and when the deadline expires with frames received
since, the read goes on under a new scope due at the latest frame plus the idle
timeout -- so the per-frame cost is one clock read, and a silent server times out at
exactly its last frame plus ``idle_timeout``. Until the first output of a response
the socket's reader hands over each frame in a round of its own (the first token is not
held up behind the parsing of a whole burst); from then on a burst comes in one round,
and frames that already wait are taken without a schedule point each. The first output
is followed by one, so the application sees it before the rest of a burst is processed.

A preempting steer (``Preemption``) only *signals* this exchange; the exchange's own
side does the socket I/O. The signal is registered before the request is sent, so
no steer can slip between sending and listening. The accumulator decides when the
``response.interrupt`` frame is due (as soon as the response id is known, once); a
sender task in the exchange's nursery then sends it shielded and bounded, and only
after the send succeeded does the exchange drain toward the terminal frame (within
``INTERRUPT_GRACE``) -- the steer's wait ends at that moment. If the interrupt cannot
be sent, the socket is abandoned and the reader's failure is an ordinary retryable
connection loss. If the grace runs out, the items received so far are returned
unchained (the next request replays in full).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .._errors import ResponsesError, ResponseTimeout
from .._jsontext import dumps
from .._wire.frames import decode_frame
from .._wire.stream import Phase, ResponseOutcome
from ._recorder import ExchangeRecorder

if TYPE_CHECKING:
    from .._transport.websocket import WebSocketLink
    from ._turn import Preemption

__all__ = ["INTERRUPT_GRACE", "INTERRUPT_SEND_TIMEOUT", "Exchange"]

INTERRUPT_GRACE = 10.0  # from the interrupt on the wire to the terminal frame
INTERRUPT_SEND_TIMEOUT = 5.0  # sending the interrupt frame itself


_dumps = dumps  # compact JSON that always encodes as UTF-8


class Exchange:
    def __init__(
        self,
        link: WebSocketLink,
        recorder: ExchangeRecorder,
        *,
        idle_timeout: float,
        preemption: Preemption | None,
    ) -> None:
        self._link = link
        self.recorder = recorder
        self._idle = idle_timeout
        self._preemption = preemption
        self._scope = trio.CancelScope()
        self._interrupt_deadline = float("inf")
        self._nursery: trio.Nursery | None = None
        self._sender_started = False
        self._settled = trio.Event()  # set once a wanted interrupt is on the wire, or not needed
        self._done = False

    async def run(self, body: dict[str, Any]) -> ResponseOutcome:
        """Send ``body`` and return the outcome; raises ``ResponsesError`` on failure."""
        if self._preemption is None:
            await self._send(body)
            return await self._read()
        failure: ResponsesError | None = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            with self._preemption.hook(self._signal):
                if self._preemption.pending:
                    self.recorder.accumulator.want_interrupt()
                try:
                    await self._send(body)
                    return await self._read()
                except ResponsesError as exc:
                    failure = exc  # raised below, outside the nursery (not as a group)
                finally:
                    self._done = True
                    self._settled.set()
        assert failure is not None
        raise failure

    async def _send(self, body: dict[str, Any]) -> None:
        text = _dumps(body)
        self.recorder.outbound(body)
        self.recorder.sent()
        self._link.deliver_bursts(False)  # frame by frame until the first output (see _read)
        await self._link.send_text(text)

    async def _read(self) -> ResponseOutcome:
        link = self._link
        recorder = self.recorder
        accumulator = recorder.accumulator
        last = trio.current_time()  # when the latest frame arrived (or the read began)
        first_pending = recorder.first_output is None
        while True:
            # The deadline is not pushed forward on every frame (a cancel scope's deadline
            # is a heap update): when it expires, a frame that came since re-arms it at
            # that frame's time plus the idle timeout, so it fires exactly as if it had.
            self._scope = trio.CancelScope(deadline=min(last + self._idle, self._interrupt_deadline))
            with self._scope:
                while True:
                    text = await link.receive_text()
                    last = trio.current_time()
                    outcome = recorder.feed(decode_frame(text), last)
                    if outcome is not None:
                        return outcome
                    if accumulator.interrupt_due:
                        self._start_sender()
                    if first_pending and recorder.first_output is not None:
                        # Frames that wait are read without a schedule point (see
                        # WebSocketLink.receive_text); the first output of a response goes
                        # to the consumer before the rest of a burst is processed.
                        first_pending = False
                        await trio.lowlevel.checkpoint()
                        # after the round in which the consumer takes the first output: a
                        # reader in that same round still hands over one frame, not a burst
                        link.deliver_bursts(True)
            if trio.current_time() >= min(last + self._idle, self._interrupt_deadline):
                break
        if accumulator.phase is Phase.DRAINING:
            return accumulator.abandoned_outcome()
        raise ResponseTimeout(f"no Responses WebSocket frame arrived for {self._idle:g} s")

    # -- preemption (signalled from the steering task) -----------------------------

    def _signal(self) -> trio.Event | None:
        if self._done:
            return None
        accumulator = self.recorder.accumulator
        accumulator.want_interrupt()
        if accumulator.interrupt_due:
            self._start_sender()
        return self._settled

    def _start_sender(self) -> None:
        if self._sender_started or self._nursery is None:
            return
        self._sender_started = True
        self._nursery.start_soon(self._send_interrupt)

    async def _send_interrupt(self) -> None:
        accumulator = self.recorder.accumulator
        try:
            frame = accumulator.interrupt_frame()
            self.recorder.outbound(frame)
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
            self._scope.deadline = min(self._scope.deadline, self._interrupt_deadline)
        finally:
            self._settled.set()
