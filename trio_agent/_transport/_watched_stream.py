"""The byte stream under a WebSocket while its handshake runs (``websocket._connection_task``).

trio-websocket waits for its connect timeout when the stream ends (EOF, or a broken TLS
handshake) before the WebSocket handshake completed; ``WatchedStream`` raises
``HandshakeEof`` at once instead. After the handshake it is a plain pass-through, and the
connection task hands trio-websocket the stream beneath it (one layer less on every send
and every read of the socket's life).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["HandshakeEof", "WatchedStream"]


class HandshakeEof(Exception):
    """The server closed TCP (or TLS failed) before the WebSocket handshake completed."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(str(cause) if cause else "the server closed the connection")
        self.cause = cause


class WatchedStream(trio.abc.Stream):
    """Raises ``HandshakeEof`` on EOF or a broken stream (a failed TLS handshake, say)
    before the WebSocket handshake: trio-websocket would otherwise wait for the connect
    timeout. A plain pass-through afterwards."""

    def __init__(self, inner: trio.abc.Stream, sent: Callable[[], object] | None = None) -> None:
        self.inner = inner
        self.handshake_done = False
        self.sent = sent  # called after the first send (WebSocketOptions.sent)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self.inner.send_all(data)
        except trio.BrokenResourceError as exc:
            if self.handshake_done:
                raise
            raise HandshakeEof(exc.__cause__ or exc) from exc
        if self.sent is not None:
            sent, self.sent = self.sent, None
            sent()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            data = await self.inner.receive_some(max_bytes)
        except trio.BrokenResourceError as exc:
            if self.handshake_done:
                raise
            raise HandshakeEof(exc.__cause__ or exc) from exc
        if not data and not self.handshake_done:
            raise HandshakeEof
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()
