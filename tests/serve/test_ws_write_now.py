"""Writing now (issue 30, item 3; ``_ws_writes``, ``_connection.Flusher``): a WebSocket
connection's queue is written from the flusher task, without waking the connection's
writer, when no writer holds the stream; what the socket does not take stays as the
backlog, written before anything else; nothing is written once the stream closes.

Checked without the change: ``SharedSendStream`` had no ``write_now`` (these tests
fail at it), and every queued message woke the connection's writer, which wrote it
with ``send_batch`` (the count below was one or more per message batch).
"""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing
import trio_websocket

from trio_agent._serve._channel import WebSocketChannel
from trio_agent._serve._connection import Connection, Flusher
from trio_agent._serve._ws_writes import SharedSendStream
from trio_agent.testing import AppServerClient

from ._harness import Json, text_input
from ._live import STEP, websocket_server
from ._schema import validate_server_message


def _is_turn(turn_id: str, params: Json) -> bool:
    return bool(params["turn"]["id"] == turn_id)


async def _read_exactly(stream: trio.SocketStream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = await stream.receive_some(1 << 16)
        assert chunk, "the stream ended early"
        data += chunk
    return bytes(data)


async def test_write_now_writes_at_once_declines_while_a_writer_holds_the_stream_and_keeps_order() -> None:
    server_sock, client_sock = trio.socket.socketpair()
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    shared = SharedSendStream(trio.SocketStream(server_sock), server_sock)
    reader = trio.SocketStream(client_sock)
    with trio.fail_after(STEP):
        assert shared.write_now(b"first")
        assert await _read_exactly(reader, 5) == b"first"
        async with shared._lock:  # a writer (trio-websocket, the connection's writer) holds the stream
            assert not shared.write_now(b"never")
        # More than the socket takes: the rest is the backlog, which the next locked write
        # sends before its own bytes; write_now declines while there is a backlog.
        big = bytes(range(256)) * 4096
        assert shared.write_now(big)
        assert shared.backlog and len(shared.backlog) < len(big)
        assert not shared.write_now(b"x")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shared.send_all, b"tail")
            assert await _read_exactly(reader, len(big) + 4) == big + b"tail"
        assert shared.backlog == b""
        await shared.aclose()
        assert not shared.write_now(b"after close")  # its descriptor number may be another file's now
        await reader.aclose()


async def test_a_shared_stream_without_its_socket_never_writes_now() -> None:
    server_sock, client_sock = trio.socket.socketpair()
    shared = SharedSendStream(trio.SocketStream(server_sock))
    assert not shared.write_now(b"x")
    await shared.aclose()
    client_sock.close()


async def test_turns_over_a_websocket_are_written_by_the_flusher_not_the_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients, one running a turn: every message reaches them whole and in order,
    and no message needed a connection's writer task (``send_batch``)."""
    batches: list[int] = []
    send_batch = WebSocketChannel.send_batch

    async def counted(self: WebSocketChannel, texts: list[str]) -> None:
        if texts and self._stream is not None:  # the server's side (a client's channel has no stream)
            batches.append(len(texts))
        await send_batch(self, texts)

    monkeypatch.setattr(WebSocketChannel, "send_batch", counted)
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as owner_ws, \
                trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as other_ws:
            owner = AppServerClient(WebSocketChannel(owner_ws), validate=validate_server_message)
            other = AppServerClient(WebSocketChannel(other_ws), validate=validate_server_message)
            with trio.fail_after(STEP):
                await owner.initialize(name="owner")
                await other.initialize(name="other")
                batches.clear()  # the clients' own sends (no stream of theirs: send_batch) are over
                thread_id = (await owner.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
                for text in ("one", "two"):
                    turn_id = (await owner.request("turn/start", {"threadId": thread_id,
                                                                  "input": text_input(text)}))["turn"]["id"]
                    done = await owner.read_notification("turn/completed", partial(_is_turn, turn_id))
                    assert done["turn"]["status"] == "completed"
                    await other.read_notification("thread/status/changed",
                                                  lambda p: p["status"]["type"] == "idle")
                methods = [message.get("method") for message in owner.take_pending()]
                assert methods.count("turn/started") == 2
                assert methods.index("turn/started") < methods.index("item/agentMessage/delta")
                assert other.take_pending("turn/started") == []  # not subscribed: none of the turn
    assert batches == []


class _Due:
    """Stands in for a connection: records when the flusher writes its queue."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def flush_now(self) -> None:
        self.log.append(self.name)


async def test_a_pump_burst_is_written_when_it_ends_without_the_flusher_task() -> None:
    """The pump holds the flusher over its burst: what the burst made due is written at
    its end, from the pump's own step (no wakeup of the flusher's task); outside a held
    block (a server request a handler sends while it waits), the flusher's task writes it."""
    flusher = Flusher()
    log: list[str] = []
    one, two = _Due(log, "one"), _Due(log, "two")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(flusher.run)
        await trio.testing.wait_all_tasks_blocked()
        with flusher.held():
            flusher.due(cast(Connection, one))
            flusher.due(cast(Connection, two))
            await trio.testing.wait_all_tasks_blocked()  # the flusher's task is not woken
            assert log == []
        assert log == ["one", "two"]  # at the burst's end, before any checkpoint
        flusher.due(cast(Connection, one))
        assert log == ["one", "two"]
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["one", "two", "one"]  # by the flusher's task
        flusher.close()


async def test_a_requests_answer_is_written_by_the_task_that_served_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's answer (and what its handler queues behind it: ``thread/started``) is
    written when the handler returns, from the dispatching task, holding the flusher
    over that step: not by a wakeup of the flusher's task per request (issue 30).
    Checked without the change: every answer was written from ``Flusher.run``."""
    writers: list[str] = []
    flush = Flusher.flush

    def recorded(self: Flusher) -> None:
        if self._due:
            writers.append(trio.lowlevel.current_task().name)
        flush(self)

    monkeypatch.setattr(Flusher, "flush", recorded)
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as ws:
            client = AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
            with trio.fail_after(STEP):
                await client.initialize(name="client")
                writers.clear()
                await client.request("model/list", {})
                await client.request("thread/start", {"cwd": str(workspace)})
                await client.read_notification("thread/started")
    assert writers and not [name for name in writers if "Flusher.run" in name], writers
