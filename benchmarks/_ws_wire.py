"""A lean WebSocket client for the serve benchmarks (``serve_load``, ``_serve_warm``):
RFC 6455 framing by hand, so that at 200 clients the load generator is not the
machine's bottleneck."""

from __future__ import annotations

import base64
import contextlib
import os

import trio

__all__ = ["Wire"]


class Wire:
    """A lean WebSocket client (RFC 6455 framing by hand: the server's frames are
    unmasked, ours masked): each read decodes every frame it holds in one pass. With
    trio-websocket (or wsproto) as the load generator, at 200 clients the clients'
    process, not the server, was the bottleneck of the 2-core machine."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._lock = trio.Lock()
        self._buffer = bytearray()
        self._parts: list[bytes] = []

    @classmethod
    async def connect(cls, url: str) -> Wire:
        host, port = url.removeprefix("ws://").rstrip("/").rsplit(":", 1)
        wire = cls(await trio.open_tcp_stream(host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        await wire.stream.send_all((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                                    "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        while b"\r\n\r\n" not in wire._buffer:
            data = await wire.stream.receive_some(1 << 16)
            if not data:
                raise RuntimeError("the server closed during the WebSocket handshake")
            wire._buffer += data
        head, _, rest = bytes(wire._buffer).partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"the server refused the WebSocket handshake: {head[:200]!r}")
        wire._buffer = bytearray(rest)
        return wire

    async def _send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        size = len(payload)
        head = bytes([0x80 | opcode]) + (bytes([0x80 | size]) if size < 126 else
                                         bytes([0x80 | 126]) + size.to_bytes(2, "big") if size < 65536 else
                                         bytes([0x80 | 127]) + size.to_bytes(8, "big"))
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(mask * (size // 4 + 1), "big") >> (
            8 * (4 - size % 4) if size % 4 else 32)).to_bytes(size, "big") if size else b""
        async with self._lock:
            await self.stream.send_all(head + mask + masked)

    async def send(self, text: str) -> None:
        await self._send_frame(0x1, text.encode())

    async def receive(self) -> list[str] | None:
        """The messages of the next read (``None`` once the server closed)."""
        data = await self.stream.receive_some(1 << 18)
        if not data:
            return None
        self._buffer += data
        messages = []
        while (frame := self._frame()) is not None:
            opcode, fin, payload = frame
            if opcode in (0x0, 0x1, 0x2):
                self._parts.append(payload)
                if fin:
                    messages.append(b"".join(self._parts).decode())
                    self._parts.clear()
            elif opcode == 0x9:
                await self._send_frame(0xA, payload)
            elif opcode == 0x8:
                return None
        return messages

    def _frame(self) -> tuple[int, bool, bytes] | None:
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        size, at = buffer[1] & 0x7F, 2
        if size == 126:
            size, at = int.from_bytes(buffer[2:4], "big"), 4
        elif size == 127:
            size, at = int.from_bytes(buffer[2:10], "big"), 10
        if len(buffer) < at + size:
            return None
        frame = (buffer[0] & 0x0F, bool(buffer[0] & 0x80), bytes(buffer[at:at + size]))
        del buffer[:at + size]
        return frame

    async def aclose(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._send_frame(0x8, (1000).to_bytes(2, "big"))
        await self.stream.aclose()
