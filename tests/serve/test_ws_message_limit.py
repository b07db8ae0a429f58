"""``_ws_limit.MessageLimit`` between a real WebSocket client's bytes (wsproto) and a
real WebSocket server's parser (wsproto, as trio-websocket uses it): a message over the
limit -- in one frame or in fragments, with any length encoding -- is replaced by one
placeholder once its last byte is read, everything else arrives as the client sent
it, at every way the bytes can be split into reads, and what is not a valid frame
sequence passes untouched (the parser then fails the connection as it always did)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    Request,
    TextMessage,
)

from trio_agent._serve._ws_limit import Discards, MessageLimit, split_head

LIMIT = 100


def client_bytes(*events: Any) -> tuple[bytes, bytes]:
    """The opening handshake's request head, and the frames of ``events`` (masked, as
    a client sends them), from a real wsproto client and server."""
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    head = client.send(Request(host="127.0.0.1", target="/"))
    server.receive_data(head)
    assert isinstance(next(server.events()), Request)
    client.receive_data(server.send(AcceptConnection()))
    assert isinstance(next(client.events()), AcceptConnection)
    return head, b"".join(client.send(event) for event in events)


def parsed(data: bytes, head: bytes) -> list[Any]:
    """What a wsproto server makes of ``data`` (``head``, then frames): whole messages
    (text or bytes, joined), ``("ping", payload)``, ``("close", code)``."""
    assert data.startswith(head)
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(head)
    assert isinstance(next(server.events()), Request)
    server.send(AcceptConnection())
    server.receive_data(data[len(head):])
    seen: list[Any] = []
    parts: list[Any] = []
    for event in server.events():
        if isinstance(event, TextMessage | BytesMessage):
            parts.append(event.data)
            if event.message_finished:
                seen.append("".join(parts) if isinstance(event, TextMessage) else b"".join(parts))
                parts = []
        elif isinstance(event, Ping):
            seen.append(("ping", bytes(event.payload)))
        elif isinstance(event, CloseConnection):
            seen.append(("close", event.code))
    return seen


async def through_filter(head: bytes, frames: bytes, chunk: int, *, limit: int = LIMIT,
                         first_read: int = 0) -> tuple[bytes, Discards]:
    """Everything ``MessageLimit`` passes on when the client's bytes arrive ``chunk``
    bytes at a time (``first_read`` of the frames read along with the head)."""
    discards = Discards(limit)
    ours, theirs = trio.testing.memory_stream_pair()
    limited = MessageLimit(ours, discards, head=head, rest=frames[:first_read])
    out = bytearray()
    async with trio.open_nursery() as nursery:

        async def send() -> None:
            rest = frames[first_read:]
            for start in range(0, len(rest), chunk):
                await theirs.send_all(rest[start:start + chunk])
            await theirs.aclose()

        nursery.start_soon(send)
        while data := await limited.receive_some(7 if chunk == 1 else None):
            out += data
    return bytes(out), discards


EVENTS = [
    Message(data="hello"),
    Ping(payload=b"p1"),
    Message(data="ab", message_finished=False), Ping(payload=b"p2"), Message(data="cd"),  # fragments, a ping between
    Message(data="x" * 150),  # one frame over the limit (16-bit length)
    Message(data="é" * 60),  # 60 characters, 120 bytes: the limit counts bytes, as on stdio
    Message(data="y" * 60, message_finished=False), Ping(payload=b"p3"), Message(data="y" * 60),  # fragments over it
    Message(data=b"\x00" * 16),  # a binary message of the nonce's size: passes
    Message(data="z" * LIMIT),  # exactly the limit: passes
    Message(data="w" * 70_000),  # 64-bit length
    Message(data="", message_finished=False), Message(data="v" * 101),  # an empty first fragment, then too much
    Message(data="after"),
    CloseConnection(code=1000),
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64, 4096, 1 << 20])
async def test_messages_over_the_limit_become_placeholders_at_every_read_split(chunk: int) -> None:
    head, frames = client_bytes(*EVENTS)
    out, discards = await through_filter(head, frames, chunk, first_read=3)
    nonce = discards.nonce
    assert parsed(out, head) == [
        "hello", ("ping", b"p1"), ("ping", b"p2"), "abcd", nonce, nonce, ("ping", b"p3"), nonce, b"\x00" * 16,
        "z" * LIMIT, nonce, nonce, "after", ("close", 1000)]
    assert list(discards.sizes) == [150, 120, 120, 70_000, 101]


async def test_without_anything_over_the_limit_the_bytes_pass_unchanged() -> None:
    head, frames = client_bytes(Message(data="a" * LIMIT), Ping(payload=b"x"), Message(data=b"\x01" * 10),
                                CloseConnection(code=1001))
    out, discards = await through_filter(head, frames, 9)
    assert out == head + frames and not discards.sizes


@pytest.mark.parametrize("bad", [
    bytes((0x80 | 0x40 | 0x1, 0x80 | 2, 0, 0, 0, 0)) + b"hi",  # a reserved bit (no extension was agreed)
    bytes((0x80 | 0x1, 2)) + b"hi",  # not masked
    bytes((0x80 | 0x0, 0x80 | 2, 0, 0, 0, 0)) + b"hi",  # a continuation without a start
    bytes((0x80 | 0x3, 0x80 | 2, 0, 0, 0, 0)) + b"hi",  # a reserved opcode
])
async def test_what_is_not_a_frame_sequence_passes_untouched(bad: bytes) -> None:
    head, frames = client_bytes(Message(data="first"))
    tail = bytes((0x80 | 0x1, 0x80 | 126, 0x10, 0, 0, 0, 0, 0)) + b"x" * 4096  # over the limit, after the error
    out, discards = await through_filter(head, frames + bad + tail, 5)
    assert out == head + frames + bad + tail and not discards.sizes


def test_the_head_ends_where_h11_ends_it() -> None:
    head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    assert split_head(head + b"\x81\x80") == (head, b"\x81\x80")
    assert split_head(b"GET / HTTP/1.1\nHost: a\n\nrest") == (b"GET / HTTP/1.1\nHost: a\n\n", b"rest")
    assert split_head(b"GET / HTTP/1.1\r\n") == (b"GET / HTTP/1.1\r\n", b"")
