"""Bursts of WebSocket frames in one scheduler round (``WebSocketLink``'s queue and lock).

Bursts cost one scheduler round, not one per frame: trio-websocket's reader hands each
message to its queue with ``await send()`` -- a schedule point per message, so the
frames of one ``receive_some`` would reach the model call one round at a time -- and
``get_message()`` is a schedule point even when a message waits. Once the handshake is
done ``eager_queue`` swaps the reader's end of the queue for ``EagerSend`` (delivers
at once while the queue has room, the ordinary ``send`` when it is full; while
``deliver_bursts(False)`` -- a response until its first output -- a schedule point after
each frame that may be output, the frames leading up to it at once), and
``receive_text`` takes a waiting message with ``receive_nowait``; its send lock, free in
the usual case, is taken without the schedule point that would hold the request back a
round (``EagerLock``; the send is still one, after the bytes left). Neither loop can run
unbounded: the queue holds at most ``message_queue_size`` messages, and the reader yields
on every ``receive_some``. These touch trio-websocket internals (``_send_channel``,
``_recv_channel``, ``_stream_lock``), looked up once per connection; if a release renames them the socket
works exactly as before, one round per frame.
"""

from __future__ import annotations

import trio
import trio_websocket

__all__ = ["EagerLock", "EagerSend", "eager_queue"]


# A frame of the Responses API that is not a response's output, recognised by how its
# JSON starts (``type`` first, as OpenAI's server and the test kit write it). Anything else
# -- an output frame, another layout, a binary message -- counts as possibly output.
_RESPONSE_FRAME = '{"type":"response.'
_OUTPUT_FRAMES = ('{"type":"response.output_text.delta"', '{"type":"response.output_item.done"')


def _before_output(value: str | bytes) -> bool:
    """Surely not a response's output (``ResponseFeed.first_output``): a frame such as
    ``response.created`` that only leads up to it."""
    return type(value) is str and value.startswith(_RESPONSE_FRAME) and not value.startswith(_OUTPUT_FRAMES)


class EagerSend:
    """The reader's end of trio-websocket's message queue, without a schedule point per
    message while the queue has room (see the module docstring). The reader uses
    ``send`` and ``aclose`` only; both keep the channel's exceptions."""

    def __init__(self, inner: trio.MemorySendChannel[str | bytes]) -> None:
        self._inner = inner
        # False (until a response's first output): a schedule point after each message
        # that may be output, so the model call takes the first output before the reader
        # parses the rest of a burst; the frames leading up to it go along at once.
        self.eager = True

    async def send(self, value: str | bytes) -> None:
        if self.eager or _before_output(value):
            try:
                self._inner.send_nowait(value)
                return
            except trio.WouldBlock:
                pass
        await self._inner.send(value)

    async def aclose(self) -> None:
        await self._inner.aclose()


class EagerLock:
    """trio-websocket's send lock, without a schedule point before a send that finds it
    free (the send itself is still one, after the bytes went out: ``send_all``)."""

    def __init__(self, inner: trio.StrictFIFOLock) -> None:
        self._inner = inner

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._inner.acquire_nowait()
        except trio.WouldBlock:
            await self._inner.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._inner.release()


def eager_queue(
    ws: trio_websocket.WebSocketConnection,
) -> tuple[EagerSend, trio.MemoryReceiveChannel[str | bytes]] | None:
    """Make the reader deliver bursts without a round per message; returns its new end of
    the queue and the receiving end for ``receive_nowait`` (None: this trio-websocket is
    laid out otherwise)."""
    send = getattr(ws, "_send_channel", None)
    receive = getattr(ws, "_recv_channel", None)
    if not isinstance(send, trio.MemorySendChannel) or not isinstance(receive, trio.MemoryReceiveChannel):
        return None
    eager = EagerSend(send)
    ws._send_channel = eager  # type: ignore[assignment]  # duck-typed: send/aclose
    lock = getattr(ws, "_stream_lock", None)
    if isinstance(lock, trio.StrictFIFOLock):
        ws._stream_lock = EagerLock(lock)  # type: ignore[assignment]  # duck-typed: async with
    return eager, receive
