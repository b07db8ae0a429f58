"""Server-to-client WebSocket messages written in batches: one socket write for
everything a connection's writer has queued.

Theory of operation. trio-websocket sends one message per ``send_message``: a lock, a
wsproto frame and a socket write each, two scheduler passes per message. Under a
broadcast (``thread/started``, ``thread/status/changed`` to every client) that per
message cost, times every connection, was most of the server's CPU at 200 clients
(issue 23). So the connection's writer frames its batch itself -- RFC 6455 sec. 5.2:
a server's text frame is ``FIN|text``, the payload length (7 bits, or 126 and 16 bits,
or 127 and 64 bits) and the unmasked UTF-8 payload; trio-websocket negotiates no
extension, so nothing else applies -- and writes them in one ``send_all``.
trio-websocket keeps everything else: the handshake, reading, pings and pongs, the
close handshake. Both write to the same ``SharedSendStream``, whose lock keeps their
writes whole and in order (a frame is never split by another writer's bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from ._jsonrpc import SharedText

__all__ = ["SharedSendStream", "text_frame", "text_frames"]


def text_frame(text: str) -> bytes:
    """The server-side (unmasked) WebSocket text frame of ``text``; a ``SharedText``'s
    is built once and kept on it, for every other connection it goes to."""
    if type(text) is SharedText:
        frame = text.frame
        if frame is None:
            frame = text.frame = _frame(text)
        return frame
    return _frame(text)


def _frame(text: str) -> bytes:
    payload = text.encode("utf-8")
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 1 << 16:
        return b"\x81\x7e" + size.to_bytes(2, "big") + payload
    return b"\x81\x7f" + size.to_bytes(8, "big") + payload


def text_frames(texts: Sequence[str]) -> bytes:
    """The frames of ``texts``, concatenated."""
    return b"".join([text_frame(text) for text in texts])


class SharedSendStream(trio.abc.Stream):
    """``inner`` written by more than one task (trio-websocket and the batch writer):
    each ``send_all`` is whole, in the order the writers got the lock."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self._lock = trio.StrictFIFOLock()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        async with self._lock:
            await self.inner.send_all(data)

    async def send_frames(self, data: bytes, closed: Callable[[], bool]) -> None:
        """Write ``data`` (frames) unless ``closed()`` holds once it is this writer's
        turn: trio-websocket marks the connection closed before it queues its close
        frame, so no message ever follows a close frame."""
        async with self._lock:
            if closed():
                raise trio.BrokenResourceError("the WebSocket is closed")
            await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()
