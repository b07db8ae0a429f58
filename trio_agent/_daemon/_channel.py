"""Lines over a Unix stream socket, with file descriptors (``SCM_RIGHTS``) beside them.

The warm daemon (``_server``) talks to its clients (``_trio_agent_launch``) and to its
workers (``_worker``) this way. Every read goes through ``recvmsg``, so a
descriptor that arrives is never dropped: it is collected in :attr:`LineSocket.fds`
until the reader takes it (:meth:`LineSocket.take_fds`), and :meth:`LineSocket.close`
closes any nobody took.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import socket
from typing import Any

import trio

__all__ = ["MAX_FDS", "LineSocket", "close_fds"]

MAX_FDS = 8  # the most descriptors one message may carry (a client sends 3)
MAX_LINE = 1 << 16  # bytes of one line (the longest real one is a worker's ready line)
_ANCILLARY = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)


class LineSocket:
    """A ``trio.socket`` stream socket read as lines (bytes, without the newline)."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.buffer = b""
        self.fds: list[int] = []
        self.eof = False

    async def _fill(self) -> bool:
        """Read once more; False at end of stream."""
        data, ancdata, _flags, _address = await self.sock.recvmsg(65536, _ANCILLARY)
        for level, kind, raw in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(raw[: len(raw) - len(raw) % fds.itemsize])
                self.fds.extend(fds)
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    async def line(self) -> bytes | None:
        """The next line, or None at end of stream (a partial last line is dropped)."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise ValueError(f"a line longer than {MAX_LINE} bytes")
            if self.eof or not await self._fill():
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    async def exactly(self, size: int) -> bytes | None:
        """The next ``size`` bytes, or None if the stream ends first."""
        while len(self.buffer) < size:
            if self.eof or not await self._fill():
                return None
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def message(self) -> dict[str, Any] | None:
        """The next line as a JSON object, or None at end of stream."""
        line = await self.line()
        if line is None:
            return None
        value: dict[str, Any] = json.loads(line)
        return value

    async def discard(self, limit: int) -> None:
        """Read and drop what the peer sends (closing any descriptors at once) until it
        closes its end or ``limit`` bytes went by: a peer that is refused still gets to
        send its request and read the answer (closing on it unread would fail its
        write with ``EPIPE`` before it reads why)."""
        dropped = len(self.buffer)
        self.buffer = b""
        while dropped <= limit and not self.eof and await self._fill():
            dropped += len(self.buffer)
            self.buffer = b""
            close_fds(self.take_fds())
        close_fds(self.take_fds())

    def take_fds(self) -> list[int]:
        fds, self.fds = self.fds, []
        return fds

    async def send(self, data: bytes, fds: list[int] | None = None) -> None:
        """Send all of ``data``; ``fds`` go with its first byte."""
        if fds:
            ancdata = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
            sent = await self.sock.sendmsg([data], ancdata)
            data = data[sent:]
        while data:
            sent = await self.sock.send(data)
            data = data[sent:]

    async def send_message(self, value: dict[str, Any], fds: list[int] | None = None) -> None:
        await self.send((json.dumps(value, separators=(",", ":")) + "\n").encode(), fds)

    def close(self) -> None:
        """Close the socket and every descriptor received and not taken."""
        close_fds(self.take_fds())
        self.sock.close()


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
