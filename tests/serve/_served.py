"""A real ``trio-agent serve`` subprocess with one client, on either transport: stdio
(the client on its stdin/stdout) or ``--listen ws://127.0.0.1:0`` (the port read from
its stderr, the client over a WebSocket). Its stderr is collected (``Served.stderr``). The
WebSocket's TCP stream is the helper's own: trio-websocket does not close it when the
peer dies (its abort path only marks the connection closed), so the helper does.

Leaving the block stops a server still running -- its stdin closed (stdio) or SIGTERM
(WebSocket) -- and expects exit status 0; a server the test killed is only reaped. If
the block failed first, the server is killed. Either way nothing is left running."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio_websocket

from trio_agent.testing import AppServerClient, LineChannel, WebSocketChannel

from ._live import STEP
from ._schema import validate_server_message

TRANSPORTS = ["stdio", "websocket"]


class Served:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stderr = ""
        self._changed = trio.Condition()

    async def _collect(self, stream: trio.abc.ReceiveStream) -> None:
        while data := await stream.receive_some(65536):
            self.stderr += data.decode(errors="replace")
            async with self._changed:
                self._changed.notify_all()

    async def wait_stderr(self, pattern: str) -> re.Match[str]:
        with trio.fail_after(STEP):
            async with self._changed:
                while (found := re.search(pattern, self.stderr)) is None:
                    await self._changed.wait()
        return found

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        self.process.kill()


@asynccontextmanager
async def served(transport: str, args: list[str], *, cwd: Path, env: dict[str, str],
                 ) -> AsyncIterator[tuple[Served, AppServerClient]]:
    """``trio-agent serve *args`` on ``transport`` ("stdio" or "websocket")."""
    command = [sys.executable, "-m", "trio_agent", "serve", *args]
    if transport == "websocket":
        command += ["--listen", "ws://127.0.0.1:0"]
    process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, cwd=cwd, env=env)
    server = Served(process)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server._collect, process.stderr)
            if transport == "stdio":
                yield server, AppServerClient(LineChannel(trio.StapledStream(process.stdin, process.stdout)),
                                              validate=validate_server_message)
            else:
                port = int((await server.wait_stderr(r"listening on ws://127\.0\.0\.1:(\d+)")).group(1))
                async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                    ws = await trio_websocket.wrap_client_stream(nursery, stream, "127.0.0.1", "/")
                    try:
                        yield server, AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
                    finally:
                        await ws.aclose()
            await _stop(server, transport)
    finally:
        if process.returncode is None:  # the test failed first
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            await stream.aclose()


async def _stop(server: Served, transport: str) -> None:
    process = server.process
    if process.poll() is not None:  # killed by the test
        return
    assert process.stdin is not None
    if transport == "stdio":
        await process.stdin.aclose()
    else:
        process.send_signal(signal.SIGTERM)
    with trio.fail_after(STEP):
        assert await process.wait() == 0, server.stderr
