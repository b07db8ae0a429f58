"""Fault matrix: a flood of connections to ``trio-agent serve --listen`` (this
session's review of issue 21's listener: nothing bounded them, so any local user could
open connections until the server ran out of descriptors, ending every client's
threads).

A hostile local program takes every served place left (``max_connections``), is
refused more (503 before the upgrade), and opens more silent TCP connections than the
front door holds. Meanwhile a bystander served before the flood runs a turn whose
command waits until the flood is at its height: the turn completes, and once the flood
is gone a new client is served again (the places were all given back).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import trio
import trio.testing
import trio_websocket

from trio_agent._serve._transports import FRONT_DOOR_LIMIT
from trio_agent.testing import AppServerClient, WebSocketChannel

from ..serve._live import STEP, websocket_server
from ..serve._schema import validate_server_message
from ..serve.test_listener_connections import served_client
from ..serve.test_listener_security import refused
from .test_serve_hostile_clients import finish_turn, start_gated_turn


async def test_a_connection_flood_leaves_a_bystanders_turn_and_gives_back_every_place(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace, max_connections=3) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as by_ws:
            bystander = AppServerClient(WebSocketChannel(by_ws), validate=validate_server_message)
            with trio.fail_after(STEP):
                turn_id = await start_gated_turn(bystander, workspace)
            async with AsyncExitStack() as flood:
                for index in range(2):  # every place left
                    await served_client(flood, port, f"hostile-{index}")
                for _ in range(5):
                    assert (await refused(port, [])).status == 503
                for _ in range(FRONT_DOOR_LIMIT + 8):  # the last ones wait in the kernel's queue
                    await flood.enter_async_context(await trio.open_tcp_stream("127.0.0.1", port))
                with trio.fail_after(STEP):
                    await finish_turn(bystander, workspace, turn_id)  # served throughout
        await trio.testing.wait_all_tasks_blocked()  # the server has seen the flood and the bystander go
        async with AsyncExitStack() as after:
            for index in range(3):  # every place is free again
                client = await served_client(after, port, f"after-{index}")
            with trio.fail_after(STEP):
                assert (await client.request("thread/loaded/list"))["data"] == []  # answered (threads unloaded)
