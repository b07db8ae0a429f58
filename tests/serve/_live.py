"""A live ``trio-agent serve`` on real descriptors: in process, the app server with the
built-in local model (over a real loopback WebSocket), served on a WebSocket listener
on 127.0.0.1:0 (``websocket_server``) or on the stdio transport over two pipes
(``stdio_client``); the command itself on stdio (``serve_subprocess``); and
``http_exchange`` for handshakes written byte by byte."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

import trio_agent as ta
from trio_agent._local_model import serve_local_model
from trio_agent._serve import AppServer, ListenerPolicy, open_app_server, serve_stdio, serve_websocket
from trio_agent.testing import AppServerClient, LineChannel

from ._schema import validate_server_message

STEP = 20  # seconds for any one step (real sockets and processes)
Pipes = trio.StapledStream[trio.lowlevel.FdStream, trio.lowlevel.FdStream]
HANDSHAKE = (b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             b"Sec-WebSocket-Version: 13\r\n")


@asynccontextmanager
async def live_app(home: Path, workspace: Path) -> AsyncIterator[AppServer]:
    """The app server whose threads talk to the built-in local model."""
    async with trio.open_nursery() as nursery:
        model = await nursery.start(serve_local_model)
        config = ta.AgentConfig(auth="local-key", workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                              websocket_url=model.url))
        async with open_app_server(config, home=home, unload_delay=0, model_provider="trio-agent-local") as app:
            yield app
            await app.aclose()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def websocket_server(home: Path, workspace: Path, policy: ListenerPolicy | None = None,
                           max_connections: int = 64) -> AsyncIterator[int]:
    """``live_app`` on a WebSocket listener on 127.0.0.1:0 under ``policy``; yields the port."""
    async with live_app(home, workspace) as app, trio.open_nursery() as nursery:
        listener = await nursery.start(lambda task_status: serve_websocket(
            app, "127.0.0.1", 0, policy=policy, max_connections=max_connections, task_status=task_status))
        yield listener.port
        await app.aclose()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def stdio_client(app: AppServer) -> AsyncIterator[Pipes]:
    """The stdio transport (``serve_stdio``) on two pipes; yields the client's end (a
    stream: wrap it in a ``LineChannel``). Leaving the block closes the server's stdin
    and waits for it to finish."""
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    done = trio.Event()

    async def serve() -> None:
        try:
            await serve_stdio(app, stdin_fd=to_server_r, stdout_fd=from_server_w)
        finally:
            done.set()

    stream = trio.StapledStream(trio.lowlevel.FdStream(to_server_w), trio.lowlevel.FdStream(from_server_r))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            try:
                yield stream
            finally:
                await stream.aclose()  # the server's stdin ends: it finishes
                with trio.fail_after(STEP):
                    await done.wait()
    finally:
        os.close(to_server_r)  # (serve_stdio served on duplicates)
        os.close(from_server_w)


@asynccontextmanager
async def serve_subprocess(command: list[str], *, cwd: Path, env: dict[str, str], stderr: int | None = None,
                           ) -> AsyncIterator[tuple[trio.Process, AppServerClient]]:
    """``command`` (a ``trio-agent serve`` on stdio) with a client on its stdin/stdout;
    leaving the block closes its stdin and expects exit status 0 (it is killed if the
    block failed first)."""
    process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=stderr, cwd=cwd, env=env)
    try:
        assert process.stdin is not None and process.stdout is not None
        yield process, AppServerClient(LineChannel(trio.StapledStream(process.stdin, process.stdout)),
                                       validate=validate_server_message)
        await process.stdin.aclose()  # the client goes away: the server shuts down
        with trio.fail_after(STEP):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


@attrs.frozen
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


async def http_exchange(port: int, request: bytes) -> HttpAnswer | None:
    """Send ``request`` (raw bytes) to 127.0.0.1:``port`` and read the answer until the
    server closes (a refusal) or its head is complete (101: the WebSocket is open);
    None when the server closed without an answer."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        data = b""
        with trio.fail_after(STEP):
            while chunk := await stream.receive_some(65536):
                data += chunk
                if data.startswith(b"HTTP/1.1 101 ") and b"\r\n\r\n" in data:
                    break
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return HttpAnswer(int(status_line.split()[1]), headers, body)


def handshake(path: str = "/", *headers: str) -> bytes:
    """A WebSocket (RFC 6455) opening handshake with ``headers`` (``"Name: value"``) added."""
    extra = "".join(f"{header}\r\n" for header in headers).encode()
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + HANDSHAKE + extra + b"\r\n"
