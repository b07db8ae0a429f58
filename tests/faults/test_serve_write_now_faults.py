"""Fault matrix: hostile WebSocket clients of the write-now path (issue 30, item 3;
``_ws_writes``, ``_connection.Flusher``), on a live server (real loopback sockets, the
built-in local model):

- a client that resets its connection (RST, no close frame) while the server has
  messages for it: the flusher's write fails, the connection is dropped, and a
  bystander's turn and requests go on;
- a bug met writing one connection's queue (from the pump's burst): that connection
  is dropped, the others are written, nothing leaves the pump;
- a client that stops reading while its own turn streams a command's output: its
  socket fills, what the socket did not take waits as the backlog and the rest in the
  queue (until the queue is full and the connection is dropped) -- the bystander's
  turns complete and the server answers it throughout.
"""

from __future__ import annotations

import socket
import struct
from functools import partial
from pathlib import Path
from typing import Any, cast

import trio
import trio_websocket

from trio_agent._serve._connection import Connection, Flusher
from trio_agent.testing import AppServerClient, WebSocketChannel

from ..serve._harness import text_input
from ..serve._live import STEP, websocket_server
from ..serve._schema import validate_server_message

Json = dict[str, Any]
FLOOD = "run: head -c 30000000 /dev/zero | tr '\\\\0' x"


def _is_turn(turn_id: str, params: Json) -> bool:
    return bool(params["turn"]["id"] == turn_id)


async def _bystander_turn(client: AppServerClient, workspace: Path, text: str) -> None:
    thread_id = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
    turn_id = (await client.request("turn/start", {"threadId": thread_id, "input": text_input(text)}))["turn"]["id"]
    done = await client.read_notification("turn/completed", partial(_is_turn, turn_id))
    assert done["turn"]["status"] == "completed", done


async def test_a_client_that_resets_its_connection_is_dropped_and_the_others_go_on(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        url = f"ws://127.0.0.1:{port}"
        async with trio_websocket.open_websocket_url(url) as by_ws:
            bystander = AppServerClient(WebSocketChannel(by_ws), validate=validate_server_message)
            with trio.fail_after(STEP):
                await bystander.initialize(name="bystander")
                for round_ in range(3):
                    async with trio_websocket.open_websocket_url(url) as ws:
                        hostile = AppServerClient(WebSocketChannel(ws))
                        await hostile.initialize(name="hostile")
                        # RST: linger 0, then close the socket under the WebSocket (no close frame).
                        raw = ws._stream.socket  # type: ignore[attr-defined]
                        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        raw.close()
                        # Broadcasts (thread/started, status changes) the server now has for it.
                        await _bystander_turn(bystander, workspace, f"hello {round_}")
                assert await bystander.request("thread/loaded/list")


async def test_a_client_that_stops_reading_its_flooding_turn_is_dropped_and_the_others_go_on(
    tmp_path: Path
) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        url = f"ws://127.0.0.1:{port}"
        async with trio_websocket.open_websocket_url(url) as by_ws, \
                trio_websocket.open_websocket_url(url, message_queue_size=1) as ws:
            bystander = AppServerClient(WebSocketChannel(by_ws), validate=validate_server_message)
            with trio.fail_after(STEP * 3):
                await bystander.initialize(name="bystander")
                stalled = AppServerClient(WebSocketChannel(ws))
                await stalled.initialize(name="stalled")
                thread_id = (await stalled.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
                await stalled.request("turn/start", {"threadId": thread_id, "input": text_input(FLOOD)})
                # From here the stalled client reads nothing: trio-websocket's reader stops
                # once one message waits (message_queue_size=1), and the socket fills.
                for round_ in range(3):
                    await _bystander_turn(bystander, workspace, f"hello {round_} while another client floods")
                assert await bystander.request("thread/loaded/list")


class _Failing:
    """A due connection whose write meets a bug."""

    def __init__(self, log: list[str], name: str, fails: bool) -> None:
        self.log, self.name, self.fails = log, name, fails

    def flush_now(self) -> None:
        if self.fails:
            raise RuntimeError("a bug in this connection's write")
        self.log.append(f"wrote {self.name}")

    def drop(self, reason: str) -> None:
        self.log.append(f"dropped {self.name}: {reason}")


def test_a_bug_writing_one_connection_drops_it_alone_and_never_leaves_the_pumps_burst() -> None:
    flusher = Flusher()
    log: list[str] = []
    with flusher.held():  # as the pump's burst
        for name, fails in (("first", False), ("broken", True), ("last", False)):
            flusher.due(cast(Connection, _Failing(log, name, fails)))
    assert log == ["wrote first", "dropped broken: internal error writing to it: RuntimeError: a bug in this "
                   "connection's write", "wrote last"]
