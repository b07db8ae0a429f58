"""How many connections ``trio-agent serve --listen`` holds (this session's review of
issue 21's listener): without a bound, any local user -- or a page ``--allow-origin``
lets through -- opened connections until the server ran out of descriptors or memory,
ending every client's threads.

Served connections are bounded (``--max-connections``, ``serve_websocket(...,
max_connections=N)``): N are served, the next admissible handshake gets HTTP 503
before the upgrade, and a place is free again once a served connection closes (the
positive control). A connection that has not sent its head holds a front-door place
(at most ``FRONT_DOOR_LIMIT``) for at most ``HANDSHAKE_TIMEOUT``, never a served one:
checked on ``MockClock`` (no timer in the tests).
"""

from __future__ import annotations

import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing
import trio_websocket

from trio_agent._serve import AppServer, serve_websocket
from trio_agent._serve._transports import FRONT_DOOR_LIMIT, HANDSHAKE_TIMEOUT
from trio_agent.cli._serve_options import DEFAULT_MAX_CONNECTIONS
from trio_agent.testing import AppServerClient, WebSocketChannel

from ..cli._cli import open_cli, run_cli
from ._live import STEP, http_exchange, websocket_server
from .test_listener_security import dirs, port_of, refused


async def served_client(stack: AsyncExitStack, port: int, name: str) -> AppServerClient:
    """A client that was served (its ``initialize`` answered), held open by ``stack``."""
    ws = await stack.enter_async_context(trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}"))
    client = AppServerClient(WebSocketChannel(ws))
    with trio.fail_after(STEP):
        await client.initialize(name=name)
    return client


async def test_n_connections_are_served_the_next_is_refused_until_one_closes(tmp_path: Path) -> None:
    workspace, home = dirs(tmp_path)
    async with websocket_server(home, workspace, max_connections=2) as port:
        async with AsyncExitStack() as first:
            await served_client(first, port, "first")
            async with AsyncExitStack() as second:
                await served_client(second, port, "second")
                full = await refused(port, [])
                assert full.status == 503 and full.headers["retry-after"] == "1"
                assert b"at most 2 WebSocket connections" in full.body and b"--max-connections" in full.body
                assert b"jsonrpc" not in full.body
                health = await http_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert health is not None and health.status == 200  # not counted
                await trio.testing.wait_all_tasks_blocked()  # the refused ones left no place taken
                assert (await refused(port, [])).status == 503
            await trio.testing.wait_all_tasks_blocked()  # the server has seen the second one close
            # Positive control: its place is free again, for a client that is served in full.
            async with AsyncExitStack() as third:
                client = await served_client(third, port, "third")
                with trio.fail_after(STEP):
                    assert (await client.request("thread/loaded/list"))["data"] == []
                assert (await refused(port, [])).status == 503


class _Unused:
    """An app server no connection reaches (they stay at the front door)."""

    closing = False


def idle_server() -> AppServer:
    return cast(AppServer, _Unused())


async def test_a_connection_that_never_sends_its_head_is_closed_and_holds_no_served_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        listener = await nursery.start(lambda task_status: serve_websocket(
            idle_server(), "127.0.0.1", 0, max_connections=1, task_status=task_status))
        idle = await trio.open_tcp_stream("127.0.0.1", listener.port)
        start = trio.current_time()
        # Served places are not the idle one's: with max_connections=1, others still pass
        # the front door at once (a health check: the clock has not moved).
        health = await http_exchange(listener.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert health is not None and health.status == 200 and trio.current_time() == start
        assert await idle.receive_some(100) == b""  # closed by the server ...
        assert trio.current_time() - start >= HANDSHAKE_TIMEOUT  # ... once its time was up
        await idle.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("idle_count", [FRONT_DOOR_LIMIT - 1, FRONT_DOOR_LIMIT])
async def test_the_front_door_holds_a_bounded_number_of_silent_connections(
    autojump_clock: trio.testing.MockClock, idle_count: int,
) -> None:
    """With the front door full of silent connections the listener accepts nothing more
    (the next waits in the kernel's queue, costing no descriptor here) until the
    handshake bound frees a place; one place fewer, and it is answered at once."""
    async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
        listener = await nursery.start(lambda task_status: serve_websocket(
            idle_server(), "127.0.0.1", 0, task_status=task_status))
        for _ in range(idle_count):
            await stack.enter_async_context(await trio.open_tcp_stream("127.0.0.1", listener.port))
        start = trio.current_time()
        health = await http_exchange(listener.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert health is not None and health.status == 200
        waited = trio.current_time() - start
        if idle_count < FRONT_DOOR_LIMIT:
            assert waited == 0
        else:
            assert waited >= HANDSHAKE_TIMEOUT
        nursery.cancel_scope.cancel()


async def test_serve_websocket_refuses_a_bound_below_one() -> None:
    with pytest.raises(ValueError, match="max_connections must be at least 1"):
        await serve_websocket(idle_server(), "127.0.0.1", 0, max_connections=0)


# -- the command ----------------------------------------------------------------------------


async def test_the_command_serves_at_most_max_connections(tmp_path: Path) -> None:
    _, home = dirs(tmp_path)
    async with open_cli("serve", "--local", "--home", str(home), "--listen", "ws://127.0.0.1:0",
                        "--max-connections", "1", cwd=tmp_path) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        async with AsyncExitStack() as held:  # the positive control: one is served
            await served_client(held, port, "the one")
            full = await refused(port, [])
            assert full.status == 503 and b"at most 1 WebSocket connections" in full.body
        cli.signal(signal.SIGINT)
    assert cli.process.returncode == 0
    assert DEFAULT_MAX_CONNECTIONS == 64


@pytest.mark.parametrize(("options", "said"), [
    (["--listen", "ws://127.0.0.1:0", "--max-connections", "0"], "takes a number of connections >= 1"),
    (["--max-connections", "5"], "--max-connections applies to the WebSocket listener"),
])
async def test_the_command_says_what_is_wrong_with_max_connections(tmp_path: Path, options: list[str],
                                                                   said: str) -> None:
    done = await run_cli("serve", "--local", *options, cwd=tmp_path, seconds=STEP, stdin=b"")
    assert done.returncode == 2 and said in done.stderr.decode(), done.stderr.decode()
