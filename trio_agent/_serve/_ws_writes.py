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

Writing now (issue 30). Even batched, a write cost the connection's writer task a wakeup
and three scheduler passes (the lock, the socket stream's two checkpoints); under a
broadcast, that times every connection was most of the server's CPU per turn at 50
clients. ``write_now`` writes from the calling task, without waiting: when no writer
holds the stream, it hands the bytes to the socket at once (a nonblocking ``os.write``
on its descriptor); what the socket does not take stays as the ``backlog``, which the
next locked write sends first, so bytes never reorder. It declines (writes nothing)
when a writer holds the stream or the socket is full: the caller then queues for the
writer as before. The descriptor is forgotten before the stream closes, so a write
never reaches a descriptor number the system gave to another file.
"""

from __future__ import annotations

import os
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
    """The frames of ``texts``, concatenated (``text_frame``'s, inline: a broadcast puts one
    message per turn of any client into every connection's batch)."""
    frames = []
    for text in texts:
        if type(text) is SharedText:
            frame = text.frame
            if frame is None:
                frame = text.frame = _frame(text)
        else:
            frame = _frame(text)
        frames.append(frame)
    return b"".join(frames)


class SharedSendStream(trio.abc.Stream):
    """``inner`` written by more than one task (trio-websocket and the batch writer):
    each ``send_all`` is whole, in the order the writers got the lock. ``socket``: the
    socket under ``inner``, for ``write_now`` (without it, ``write_now`` declines)."""

    def __init__(self, inner: trio.abc.Stream, socket: trio.socket.SocketType | None = None) -> None:
        self.inner = inner
        self._lock = trio.StrictFIFOLock()
        self._fd = socket.fileno() if socket is not None and os.name == "posix" else -1
        self.backlog = b""  # what write_now's socket did not take: the next locked write sends it first

    def write_now(self, data: bytes) -> bool:
        """Write ``data`` without waiting (see the module docstring): True once the socket
        took it (what it did not take is the ``backlog``), False when nothing was written."""
        if self._fd < 0 or self.backlog or self._lock.locked():
            return False
        try:
            written = os.write(self._fd, data)
        except OSError:  # full (nothing written), or broken: the locked write meets it and says so
            return False
        if written < len(data):
            self.backlog = data[written:]
        return True

    async def _send(self, data: bytes | bytearray | memoryview) -> None:
        """Under the lock: the backlog, then ``data``."""
        if self.backlog:
            data, self.backlog = self.backlog + data, b""
        if data:
            await self.inner.send_all(data)

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        async with self._lock:
            await self._send(data)

    async def send_frames(self, data: bytes, closed: Callable[[], bool]) -> None:
        """Write ``data`` (frames) unless ``closed()`` holds once it is this writer's
        turn: trio-websocket marks the connection closed before it queues its close
        frame, so no message ever follows a close frame."""
        async with self._lock:
            if closed():
                raise trio.BrokenResourceError("the WebSocket is closed")
            await self._send(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        self._fd = -1  # before the descriptor can be closed and its number reused
        await self.inner.aclose()
