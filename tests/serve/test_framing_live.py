"""Framing edges of a real ``trio-agent serve`` (issue 23, item 1), on stdio and on
``--listen ws://127.0.0.1:0`` alike (docs/app-server.md, "Framing and errors"):

- a 17 MiB message is discarded with a ``warning`` and the connection goes on (over
  WebSocket trio-websocket used to close it with 1009);
- a client that closes normally -- EOF (stdio), a close handshake with 1000 or 1001
  (WebSocket) -- while answers are still on their way is no failure: nothing about it
  on stderr (it used to say "its transport failed");
- positive controls: a transport that does break is still reported -- a stdout that
  cannot be written (``/dev/full``), a WebSocket dropped without a close frame (1006).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio_websocket
from wsproto import ConnectionType, WSConnection
from wsproto.events import Message, Request

from trio_agent.testing import AppServerClient, WebSocketChannel

from ..cli._cli import RunningCli, cli_env, open_cli
from ._live import STEP, serve_subprocess
from ._schema import validate_server_message

BIG = 17 << 20  # over the 16 MiB limit
BROKEN = "its transport failed"


def oversized() -> str:
    return json.dumps({"id": 99, "method": "thread/loaded/list", "params": {"pad": "x" * BIG}})


def serve_command(home: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "trio_agent", "serve", "--local", "--home", str(home), *more]


async def goes_on_after_the_oversized_message(client: AppServerClient) -> None:
    await client.initialize(name="framing")
    await client.send_raw(oversized())
    warning = await client.read_notification("warning")
    assert f"more than {16 << 20} bytes was discarded" in warning["message"], warning
    assert await client.request("thread/loaded/list") == {"data": [], "nextCursor": None}
    assert not [m for m in client.pending() if m.get("id") == 99]  # the discarded request is never answered


@asynccontextmanager
async def listening(tmp_path: Path) -> AsyncIterator[tuple[RunningCli, str]]:
    """``trio-agent serve --listen ws://127.0.0.1:0``; yields it and its URL. Leaving
    the block stops it with SIGTERM and waits for its exit (status 0)."""
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
                        cwd=tmp_path, env=cli_env()) as cli:
        await cli.wait_for(lambda c: "listening on ws://" in c.stderr, STEP)
        found = re.search(r"listening on (ws://127\.0\.0\.1:\d+)", cli.stderr)
        assert found is not None, cli.stderr
        yield cli, found.group(1)
        cli.signal(signal.SIGTERM)
        assert await cli.wait(STEP) == 0


async def test_a_17_mib_message_on_stdio_is_a_warning_and_the_connection_goes_on(tmp_path: Path) -> None:
    async with serve_subprocess(serve_command(tmp_path / "home"), cwd=tmp_path, env=cli_env(),
                                stderr=subprocess.DEVNULL) as (_, client):
        with trio.fail_after(STEP * 2):
            await goes_on_after_the_oversized_message(client)


async def test_a_17_mib_message_over_websocket_is_a_warning_and_the_connection_goes_on(tmp_path: Path) -> None:
    async with listening(tmp_path) as (cli, url):
        with trio.fail_after(STEP * 2):
            async with trio_websocket.open_websocket_url(url) as ws:
                await goes_on_after_the_oversized_message(
                    AppServerClient(WebSocketChannel(ws), validate=validate_server_message))
    assert BROKEN not in cli.stderr and "1009" not in cli.stderr


async def send_requests_without_reading(client: AppServerClient) -> None:
    """Requests whose answers (and the ``thread/started`` that follow) are written after
    the client has gone."""
    for number in range(3):
        await client.send_raw(json.dumps({"id": 100 + number, "method": "thread/start", "params": {}}))


async def test_a_stdio_client_that_closes_is_no_failure(tmp_path: Path) -> None:
    with (tmp_path / "stderr").open("wb") as stderr:
        async with serve_subprocess(serve_command(tmp_path / "home"), cwd=tmp_path, env=cli_env(),
                                    stderr=stderr.fileno()) as (process, client):
            assert process.stdout is not None
            with trio.fail_after(STEP):
                await client.initialize(name="leaves")
                await send_requests_without_reading(client)
                await process.stdout.aclose()  # the client goes: it reads nothing more (then its stdin ends)
    said = (tmp_path / "stderr").read_text()
    assert "serving the Codex app-server protocol on stdio" in said
    assert BROKEN not in said and "dropping" not in said, said


async def test_a_stdout_that_cannot_be_written_is_reported(tmp_path: Path) -> None:
    # Positive control: /dev/full fails every write with ENOSPC, a broken transport.
    with (tmp_path / "stderr").open("wb") as stderr, open("/dev/full", "wb") as full:
        process = await trio.lowlevel.open_process(serve_command(tmp_path / "home"), stdin=subprocess.PIPE,
                                                   stdout=full, stderr=stderr, cwd=tmp_path, env=cli_env())
    try:
        assert process.stdin is not None
        with trio.fail_after(STEP):
            await process.stdin.send_all(b'{"id": 1, "method": "initialize", "params": {"clientInfo": '
                                         b'{"name": "x", "version": "1"}}}\n')
            assert await process.wait() == 0  # the one client's connection ended: the server exits
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    said = (tmp_path / "stderr").read_text()
    assert f"dropping the stdio client (connection 1): {BROKEN}" in said, said


@pytest.mark.parametrize("code", [1000, 1001])
async def test_a_websocket_client_that_closes_normally_is_no_failure(tmp_path: Path, code: int) -> None:
    async with listening(tmp_path) as (cli, url):
        with trio.fail_after(STEP):
            async with trio_websocket.open_websocket_url(url) as ws:
                client = AppServerClient(WebSocketChannel(ws))
                await client.initialize(name="leaves")
                await send_requests_without_reading(client)
                await ws.aclose(code=code)  # the close handshake, then EOF
            # The server is still up and serves the next client.
            async with trio_websocket.open_websocket_url(url) as ws:
                client = AppServerClient(WebSocketChannel(ws))
                await client.initialize(name="next")
                assert len((await client.request("thread/loaded/list"))["data"]) == 3
    assert BROKEN not in cli.stderr and "dropping" not in cli.stderr, cli.stderr


async def test_a_websocket_dropped_without_a_close_frame_is_reported(tmp_path: Path) -> None:
    # Positive control: the TCP connection ends with no close handshake (1006).
    async with listening(tmp_path) as (cli, url):
        with trio.fail_after(STEP):
            port = int(url.rsplit(":", 1)[1])
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            client = WSConnection(ConnectionType.CLIENT)
            await stream.send_all(client.send(Request(host="127.0.0.1", target="/")))
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += await stream.receive_some(4096)
            assert answer.startswith(b"HTTP/1.1 101 ")
            client.receive_data(answer)
            assert [type(event).__name__ for event in client.events()] == ["AcceptConnection"]
            await stream.send_all(client.send(Message(data=json.dumps({"id": 1, "method": "thread/loaded/list"}))))
            await stream.aclose()
            await cli.wait_for(lambda c: BROKEN in c.stderr, STEP)
    assert re.search(r"dropping WebSocket client 127\.0\.0\.1:\d+ \(connection \d+\): its transport failed "
                     r"\(the WebSocket closed with 1006 \(ABNORMAL_CLOSURE", cli.stderr), cli.stderr
