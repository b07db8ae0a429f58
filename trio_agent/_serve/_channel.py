"""Message channels: one JSON-RPC message per newline-terminated line of a Trio stream
(stdio, an in-memory pair), or one per WebSocket text frame.

Both sides (the server and ``trio_agent.testing.AppServerClient``) use these. A
channel's ``receive`` returns the next message's text and raises ``trio.EndOfChannel``
when the peer has finished cleanly; a broken transport raises
``trio.BrokenResourceError``. A line longer than ``max_message_bytes`` is read to its
end and thrown away (memory stays bounded), then reported with ``MessageTooLarge``;
the channel stays usable. Over WebSocket the server's ``_ws_limit`` does the same below
trio-websocket, and the channel reports what it discarded at the same place in the
sequence of messages.

Finishing cleanly is the peer's to say, and a send after it raises ``PeerClosed``
(what was left to send has no reader, which is no failure): on stdio, EOF and a write
the peer no longer reads (``EPIPE``: it closed its end); over WebSocket, a close
handshake with 1000 (normal), 1001 (going away) or no code (1005). A connection that
ends any other way -- reset, dropped without a close frame (1006), closed with an error
code -- is ``trio.BrokenResourceError`` on both sides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import trio
import trio_websocket

from ._jsonrpc import SharedText
from ._ws_writes import SharedSendStream, text_frames

if TYPE_CHECKING:
    from ._ws_limit import Discards

__all__ = ["MAX_MESSAGE_BYTES", "LineChannel", "MessageChannel", "MessageTooLarge", "PeerClosed", "SendsNow",
           "WebSocketChannel"]

MAX_MESSAGE_BYTES = 16 << 20
_READ_SIZE = 64 << 10
NORMAL_CLOSE_CODES = frozenset({1000, 1001, 1005})  # normal, going away, a close frame without a code


class PeerClosed(trio.BrokenResourceError):
    """A send found the peer gone after it finished cleanly (see the module docstring)."""


class MessageTooLarge(Exception):
    """A message longer than the channel's limit arrived and was discarded."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of more than {limit} bytes was discarded ({size} bytes read)")
        self.size = size
        self.limit = limit


class MessageChannel(Protocol):
    async def send(self, text: str) -> None: ...

    async def send_batch(self, texts: list[str]) -> None:
        """Send several messages, in order (one write where the framing allows)."""
        ...

    async def receive(self) -> str: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class SendsNow(Protocol):
    """A channel that can also write without waiting (``_ws_writes``, "Writing now")."""

    def send_now(self, texts: list[str]) -> bool:
        """Send ``texts`` at once from the calling task: True once they are written (or
        handed over: ``pending``), False when nothing was (then ``send_batch`` them)."""
        ...

    @property
    def pending(self) -> bool:
        """Bytes ``send_now`` handed over are still unwritten: a ``send_batch`` (of no
        message, if need be) writes them."""
        ...


class LineChannel:
    """Newline-delimited messages over a ``trio.abc.Stream`` (``\\r\\n`` accepted, blank
    lines skipped, invalid UTF-8 replaced with U+FFFD so it fails as bad JSON)."""

    def __init__(self, stream: trio.abc.Stream, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._stream = stream
        self._limit = max_message_bytes
        self._buffer = bytearray()
        self._scanned = 0  # the buffer's first bytes, known to hold no newline
        self._eof = False
        self._send_lock = trio.Lock()

    async def send(self, text: str) -> None:
        """Send one message (a line)."""
        await self.send_batch([text])

    async def send_batch(self, texts: list[str]) -> None:
        """Send several messages in one write."""
        data = b"".join([_line(text) for text in texts])
        async with self._send_lock:
            try:
                await self._stream.send_all(data)
            except trio.BrokenResourceError as exc:
                if isinstance(exc.__cause__, BrokenPipeError):  # the reader closed its end
                    raise PeerClosed("the peer closed its end of the stream") from exc
                raise

    async def receive(self) -> str:
        """The next message (``trio.EndOfChannel`` at EOF, ``MessageTooLarge`` for an
        overlong line, after which the channel goes on)."""
        while True:
            # Search only what was not searched yet: a long line costs one pass, not one per read.
            newline = self._buffer.find(b"\n", self._scanned)
            if newline > self._limit:
                del self._buffer[: newline + 1]
                self._scanned = 0
                raise MessageTooLarge(newline, self._limit)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._scanned = 0
                text = line.rstrip(b"\r").decode("utf-8", errors="replace")
                if text.strip():
                    return text
                continue
            self._scanned = len(self._buffer)
            if self._eof:
                return self._last_line()
            if len(self._buffer) > self._limit:
                await self._discard_line()
                continue
            await self._fill()

    def _last_line(self) -> str:
        """What is left at EOF: a last line without its newline, or ``EndOfChannel``."""
        line, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
        if len(line) > self._limit:
            raise MessageTooLarge(len(line), self._limit)
        if line.strip():
            return line.rstrip(b"\r").decode("utf-8", errors="replace")
        raise trio.EndOfChannel

    async def _fill(self) -> None:
        data = await self._stream.receive_some(_READ_SIZE)
        if not data:
            self._eof = True
        self._buffer += data

    async def _discard_line(self) -> None:
        size = len(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        while not self._eof:
            data = await self._stream.receive_some(_READ_SIZE)
            if not data:
                self._eof = True
                break
            newline = data.find(b"\n")
            if newline >= 0:
                size += newline
                self._buffer += data[newline + 1:]
                break
            size += len(data)
        raise MessageTooLarge(size, self._limit)

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()


def _line(text: str) -> bytes:
    """``text``'s line; a ``SharedText``'s is built once, for every connection."""
    if type(text) is SharedText:
        line = text.line
        if line is None:
            line = text.line = (text + "\n").encode("utf-8")
        return line
    return (text + "\n").encode("utf-8")


class WebSocketChannel:
    """One message per WebSocket text frame (a binary frame is decoded as UTF-8).
    Given the ``SharedSendStream`` under ``ws``, a batch is framed here and written at
    once (``_ws_writes``); without it, each message is a ``send_message``.
    ``discards``: the server's record of the messages its ``_ws_limit.MessageLimit``
    dropped, each then reported here as ``MessageTooLarge``."""

    def __init__(self, ws: trio_websocket.WebSocketConnection, stream: SharedSendStream | None = None,
                 discards: Discards | None = None) -> None:
        self._ws = ws
        self._stream = stream
        self._discards = discards

    async def send(self, text: str) -> None:
        """Send one message (a text frame); ``trio.BrokenResourceError`` once closed."""
        await self.send_batch([text])

    def send_now(self, texts: list[str]) -> bool:
        """``SendsNow.send_now``: never once the WebSocket is closed (nothing follows a close frame)."""
        stream = self._stream
        return stream is not None and self._ws.closed is None and stream.write_now(text_frames(texts))

    @property
    def pending(self) -> bool:
        """``SendsNow.pending``: the socket has not yet taken all that ``send_now`` wrote."""
        return self._stream is not None and bool(self._stream.backlog)

    async def send_batch(self, texts: list[str]) -> None:
        """Send several messages, one text frame each."""
        if self._stream is not None:
            try:
                await self._stream.send_frames(text_frames(texts), lambda: self._ws.closed is not None)
            except trio.BrokenResourceError as exc:
                reason = self._ws.closed
                if reason is None:
                    raise
                failure = PeerClosed if reason.code in NORMAL_CLOSE_CODES else trio.BrokenResourceError
                raise failure(_closed_with(reason)) from exc
            return
        try:
            for text in texts:
                await self._ws.send_message(text)
        except trio_websocket.ConnectionClosed as exc:
            failure = PeerClosed if _normal(exc) else trio.BrokenResourceError
            raise failure(_how_closed(exc)) from exc

    async def receive(self) -> str:
        """The next message (``trio.EndOfChannel`` once the peer closed cleanly,
        ``trio.BrokenResourceError`` when the connection ended otherwise,
        ``MessageTooLarge`` in place of a message the server discarded)."""
        try:
            message = await self._ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
            if _normal(exc):
                raise trio.EndOfChannel from None
            raise trio.BrokenResourceError(_how_closed(exc)) from None
        if isinstance(message, bytes):
            discards = self._discards
            if discards is not None and message == discards.nonce:
                raise MessageTooLarge(discards.sizes.popleft(), discards.limit)
            return message.decode("utf-8", errors="replace")
        return message

    async def aclose(self) -> None:
        """Close the WebSocket (with its close handshake)."""
        await self._ws.aclose()


def _normal(exc: trio_websocket.ConnectionClosed) -> bool:
    reason = exc.reason
    return reason is None or reason.code in NORMAL_CLOSE_CODES


def _how_closed(exc: trio_websocket.ConnectionClosed) -> str:
    return "the WebSocket is closed" if exc.reason is None else _closed_with(exc.reason)


def _closed_with(reason: trio_websocket.CloseReason) -> str:
    said = f": {reason.reason}" if reason.reason else ""
    return f"the WebSocket closed with {reason.code} ({reason.name}{said})"
