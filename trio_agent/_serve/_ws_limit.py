"""A WebSocket client's oversized messages, discarded below trio-websocket so the
connection goes on, as stdio does with an overlong line (docs/app-server.md, "Framing
and errors").

Why here. trio-websocket 0.12 answers a message over its ``max_message_size`` by
closing the connection with 1009, and offers no way to skip one instead: the check
and the close sit in ``WebSocketConnection._handle_message_event``, a private method
that also joins the parts into one string. Overriding it would tie the server to
four private names (the handler, the parts buffer, the size counter, the message
channel) and to how ``wrap_server_stream`` builds the connection and starts its
reader. What this module relies on instead is the frame format (RFC 6455 sec. 5.2),
which does not change, and one fact of trio-websocket's server side: it accepts no
extension (``AcceptConnection`` without ``extensions``), so a frame's payload length
*is* the message's size on the wire (no ``permessage-deflate``).

Theory of operation. ``MessageLimit`` is the byte stream trio-websocket reads: the
connection's HTTP request head, passed on as it is, then the client's frames, each
judged by its header alone (its payload is never looked at, nor unmasked):

- a control frame (close, ping, pong) passes at once, also between the fragments of
  a message;
- a data frame with FIN set that starts a message passes as it arrives when its
  length is within the limit (the common case: no copy is held back);
- a message in several fragments is held back, frame by frame, until its last
  fragment arrives (then it passes whole), or until its total outgrows the limit;
- a message over the limit is dropped -- what was held, and every later fragment
  of it, as it arrives -- and once its last byte is read, one *placeholder* takes
  its place: an empty-looking binary message whose 16 payload bytes are this
  connection's random nonce (``Discards.nonce``). ``WebSocketChannel`` turns the
  placeholder into ``MessageTooLarge`` (the connection's ``warning``), so the warning
  is ordered with the messages around it; a client cannot forge it (it never sees
  the nonce), and a binary message of its own that happens to be 16 bytes long
  costs one comparison.

Memory stays bounded: at most one message within the limit is held (as
trio-websocket itself would hold it) plus one read; a dropped message costs nothing
however long it is. Anything that is not a well-formed frame sequence (reserved
bits, an unknown opcode, an unmasked frame, a continuation without a start...)
switches the filter off for the rest of the connection: from there trio-websocket
reads exactly what the client sent and fails the connection as it always did.
"""

from __future__ import annotations

import collections
import os
import re

import trio

__all__ = ["Discards", "MessageLimit", "split_head"]

READ_SIZE = 64 << 10
_OPCODE_CONTINUATION = 0x0
_OPCODE_TEXT, _OPCODE_BINARY = 0x1, 0x2
_HEAD_END = re.compile(rb"\n\r?\n")  # where h11 (and so wsproto) ends a request head


def split_head(data: bytes) -> tuple[bytes, bytes]:
    """``data`` (what the front door read: a whole request head, maybe frames after it)
    split after the head's blank line; all of it is head if there is none."""
    found = _HEAD_END.search(data)
    if found is None:
        return data, b""
    return data[: found.end()], data[found.end():]


class Discards:
    """What a connection's ``MessageLimit`` dropped, for its ``WebSocketChannel``: the
    placeholder's ``nonce`` and, in order, the size of each message it stands for."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.nonce = os.urandom(16)
        self.sizes: collections.deque[int] = collections.deque()

    def placeholder(self) -> bytes:
        """A masked (key 0), final binary frame carrying the nonce."""
        return bytes((0x80 | _OPCODE_BINARY, 0x80 | len(self.nonce), 0, 0, 0, 0)) + self.nonce


class MessageLimit(trio.abc.Stream):
    """``stream`` as trio-websocket should read it: ``head`` first, then the client's
    frames (``rest``: those already read with the head) less every message over
    ``discards.limit`` bytes (see the module docstring). Sending goes straight through."""

    def __init__(self, stream: trio.abc.Stream, discards: Discards, *, head: bytes, rest: bytes = b"") -> None:
        self._stream = stream
        self._discards = discards
        self._limit = discards.limit
        self._out = bytearray(head)  # ready for trio-websocket
        self._header = bytearray()  # the start of a frame header not yet complete
        self._held = bytearray()  # the fragments of the message in progress, held back
        self._left = 0  # payload bytes of the current frame still to come
        self._sink: bytearray | None = None  # where they go (None: dropped)
        self._fragmented = False  # a message's first fragment passed without FIN
        self._size = 0  # that message's payload so far
        self._dropping = False  # that message is over the limit
        self._fin = False  # the current frame ends its message
        self._transparent = False
        self._eof = False
        self._feed(rest)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._out and not self._eof:
            data = await self._stream.receive_some(READ_SIZE)
            if not data:
                self._eof = True
                self._out += self._held  # a message cut short by EOF: as trio-websocket would see it
                self._held.clear()
            else:
                self._feed(data)
        if not self._out:
            await trio.lowlevel.checkpoint()
            return b""
        size = len(self._out) if max_bytes is None else min(max_bytes, len(self._out))
        chunk = bytes(self._out[:size])
        del self._out[:size]
        return chunk

    # -- framing -------------------------------------------------------------------------

    def _feed(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            if self._transparent:
                self._out += view
                return
            if self._left:
                taken, view = view[: self._left], view[self._left:]
                self._left -= len(taken)
                if self._sink is not None:
                    self._sink += taken
                if not self._left:
                    self._frame_done()
                continue
            view = self._read_header(view)

    def _read_header(self, view: memoryview) -> memoryview:
        """Take header bytes from ``view``; judge the frame once its header is whole."""
        header = self._header
        needed = 2
        while True:
            if len(header) < needed:
                want = needed - len(header)
                header += view[:want]
                view = view[want:]
                if len(header) < needed:
                    return view
            full = _header_size(header)
            if full == needed:
                break
            needed = full
        self._header = bytearray()
        self._judge(bytes(header))
        if not self._left and not self._transparent:
            self._frame_done()
        return view

    def _judge(self, header: bytes) -> None:
        first, second = header[0], header[1]
        fin, opcode, length = bool(first & 0x80), first & 0x0F, _payload_length(header)
        if first & 0x70 or not second & 0x80 or length >= 1 << 63 or opcode not in (0x0, 0x1, 0x2, 0x8, 0x9, 0xA):
            self._give_up(header)  # reserved bits, unmasked, or unknown: not ours to judge
            return
        self._left, self._fin = length, fin
        if opcode & 0x8:  # a control frame: straight through, even between fragments
            self._sink = self._out
        elif (opcode == _OPCODE_CONTINUATION) != self._fragmented:  # a continuation out of place
            self._give_up(header)
        elif opcode == _OPCODE_CONTINUATION:
            self._size += length
            self._continue(header)
        elif fin and length <= self._limit:  # a whole message within the limit: the common case
            self._sink = self._out
        else:
            self._fragmented, self._size = True, length
            self._continue(header)
        if self._sink is not None:
            self._sink += header

    def _continue(self, header: bytes) -> None:
        """A fragment of the message in progress (or a whole one over the limit)."""
        if not self._dropping and self._size > self._limit:
            self._dropping = True
            self._held.clear()
        self._sink = None if self._dropping else self._held

    def _frame_done(self) -> None:
        if self._sink is self._out or not self._fin:
            return
        if self._dropping:
            self._discards.sizes.append(self._size)
            self._out += self._discards.placeholder()
        else:
            self._out += self._held
            self._held.clear()
        self._fragmented, self._dropping, self._size = False, False, 0

    def _give_up(self, header: bytes) -> None:
        self._transparent = True
        self._out += self._held
        self._out += header
        self._held.clear()
        self._left, self._sink = 0, None

    # -- the rest of the stream ----------------------------------------------------------

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _header_size(header: bytearray) -> int:
    """The whole header's size, from its first two bytes."""
    code = header[1] & 0x7F
    extended = 2 if code == 126 else 8 if code == 127 else 0
    return 2 + extended + (4 if header[1] & 0x80 else 0)


def _payload_length(header: bytes) -> int:
    code = header[1] & 0x7F
    if code == 126:
        return int.from_bytes(header[2:4], "big")
    if code == 127:
        return int.from_bytes(header[2:10], "big")
    return code
