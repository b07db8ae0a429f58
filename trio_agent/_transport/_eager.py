"""Bursts of WebSocket frames in one scheduler round (``WebSocketLink``'s queue and lock).

Bursts cost one scheduler round, not one per frame: trio-websocket's reader hands each
message to its queue with ``await send()`` -- a schedule point per message, so the
frames of one ``receive_some`` would reach the model call one round at a time -- and
``get_message()`` is a schedule point even when a message waits. Once the handshake is
done ``eager_queue`` swaps the reader's end of the queue for ``EagerSend`` (delivers
at once while the queue has room, the ordinary ``send`` when it is full; while
``deliver_bursts(False)`` -- a response until its first output -- a schedule point after
each frame that may mean an event for the application, the frames leading up to one at
once), and
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

from ._quick_lock import QuickLock
from ._websocket_lean import trio_websocket  # without importlib.metadata (_websocket_lean)

__all__ = ["EagerLock", "EagerSend", "eager_queue"]


# The frames that only lead up to what the application sees (no event of their own:
# ``ResponseAccumulator`` notes them, or ignores them), recognised by how their JSON
# starts -- ``type`` first, as OpenAI's server and the test kit write it. Anything else (a
# text or reasoning delta, a finished item, the end of the response, a frame of another
# layout or of an unknown type, a binary message) may mean an event: the reader yields
# after it while ``eager`` is False.
_LEADING = tuple(f'{{"type":"response.{kind}"' for kind in (
    "created", "in_progress", "metadata", "output_item.added", "content_part.added", "content_part.done",
    "output_text.done", "reasoning_summary_part.added", "reasoning_summary_part.done",
    "reasoning_summary_text.done", "function_call_arguments.delta", "function_call_arguments.done",
    "custom_tool_call_input.delta", "custom_tool_call_input.done",
))


def _before_output(value: str | bytes) -> bool:
    """Surely no event for the application: a frame such as ``response.created`` that
    only leads up to one (see ``_LEADING``)."""
    return type(value) is str and value.startswith(_LEADING)


class EagerSend:
    """The reader's end of trio-websocket's message queue, without a schedule point per
    message while the queue has room (see the module docstring). The reader uses
    ``send`` and ``aclose`` only; both keep the channel's exceptions."""

    def __init__(self, inner: trio.MemorySendChannel[str | bytes]) -> None:
        self._inner = inner
        # False (until a response's first output): a schedule point after each message
        # that may mean an event, so the model call takes it before the reader parses the
        # rest of a burst; the frames leading up to it go along at once.
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
    free (the send itself is still one, after the bytes went out: ``send_all``). It
    replaces the connection's ``StrictFIFOLock`` (FIFO too: ``QuickLock``); trio-websocket
    only ever enters it with ``async with``."""

    def __init__(self) -> None:
        self._inner = QuickLock()

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
    if isinstance(lock, trio.StrictFIFOLock) and not lock.locked():
        ws._stream_lock = EagerLock()  # type: ignore[assignment]  # duck-typed: async with
    return eager, receive
