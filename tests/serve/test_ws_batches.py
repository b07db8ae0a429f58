"""WebSocket batches framed by the server and written at once (``_ws_writes``; issue 23,
item 5): a real trio-websocket client on the other end of the stream reads every
message whole -- payloads at each length boundary of RFC 6455 (125/126 bytes,
65535/65536), empty, multi-byte UTF-8 -- and the batch cost one socket write, where a
``send_message`` per message cost one write each (the path kept for a channel without
the shared stream, asserted too). After the peer's close the channel refuses to write:
no message follows a close frame.

Fails before this change: ``WebSocketChannel`` took no stream and wrote each message of
a batch with its own ``send_message`` (one write per message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
import trio_websocket

from trio_agent._serve._channel import WebSocketChannel
from trio_agent._serve._ws_writes import SharedSendStream, text_frames

TEXTS = ["", "x", "é" * 62 + "a", "a" * 125, "b" * 126, "c" * 127, "d" * 65535, "e" * 65536, "ü" * 40_000,
         '{"method":"thread/started","params":{"thread":{"id":"t-1","preview":"\\u2028 ☃ 🚀"}}}']


class RecordingStream(trio.abc.Stream):
    """A stream that keeps each ``send_all``'s bytes (the server's socket writes)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def connected(
) -> AsyncIterator[tuple[trio_websocket.WebSocketConnection, trio_websocket.WebSocketConnection, RecordingStream,
                         SharedSendStream]]:
    """(server side, client side, the server's recorded writes, the shared stream)."""
    client_end, server_end = trio.testing.memory_stream_pair()
    recorder = RecordingStream(server_end)
    shared = SharedSendStream(recorder)
    async with trio.open_nursery() as nursery:
        accepted: list[trio_websocket.WebSocketConnection] = []

        async def accept() -> None:
            request = await trio_websocket.wrap_server_stream(nursery, shared, max_message_size=1 << 24)
            accepted.append(await request.accept())

        nursery.start_soon(accept)
        client = await trio_websocket.wrap_client_stream(nursery, client_end, "127.0.0.1", "/",
                                                         message_queue_size=len(TEXTS), max_message_size=1 << 24)
        await trio.testing.wait_all_tasks_blocked()
        yield accepted[0], client, recorder, shared
        nursery.cancel_scope.cancel()


async def test_a_batch_is_one_write_and_a_real_client_reads_every_message_whole() -> None:
    async with connected() as (server, client, recorder, shared):
        before = len(recorder.writes)
        await WebSocketChannel(server, shared).send_batch(TEXTS)
        assert len(recorder.writes) == before + 1
        assert recorder.writes[-1] == text_frames(TEXTS)
        assert [await client.get_message() for _ in TEXTS] == TEXTS
        # Without the shared stream (the old path): one send_message, one write, per message.
        before = len(recorder.writes)
        await WebSocketChannel(server).send_batch(TEXTS)
        assert len(recorder.writes) == before + len(TEXTS)
        assert [await client.get_message() for _ in TEXTS] == TEXTS


async def test_after_the_peers_close_nothing_more_is_written() -> None:
    async with connected() as (server, client, recorder, shared):
        channel = WebSocketChannel(server, shared)
        await channel.send_batch(["before the close"])  # the positive control
        assert await client.get_message() == "before the close"
        await client.aclose()  # close frame out; trio-websocket answers it
        await trio.testing.wait_all_tasks_blocked()
        assert server.closed is not None
        writes = len(recorder.writes)
        assert recorder.writes[-1][0] == 0x88  # the server's last write was its close frame
        with pytest.raises(trio.BrokenResourceError):
            await channel.send_batch(["after the close"])
        assert len(recorder.writes) == writes


@pytest.mark.parametrize("closes", [False, True])
async def test_the_shared_stream_checks_closed_once_it_is_the_writers_turn(closes: bool) -> None:
    sent, received = trio.testing.memory_stream_pair()
    shared = SharedSendStream(sent)
    state = {"closed": False}
    refused: list[trio.BrokenResourceError] = []

    async def write() -> None:
        try:
            await shared.send_frames(text_frames(["late"]), lambda: state["closed"])
        except trio.BrokenResourceError as exc:
            refused.append(exc)

    async with trio.open_nursery() as nursery:
        async with shared._lock:  # another writer (trio-websocket, about to send its close frame) holds it
            nursery.start_soon(write)
            await trio.testing.wait_all_tasks_blocked()
            state["closed"] = closes  # trio-websocket marks the connection closed before that frame
    await sent.aclose()
    data = b""
    while chunk := await received.receive_some():
        data += chunk
    assert (data, bool(refused)) == ((b"", True) if closes else (text_frames(["late"]), False))
