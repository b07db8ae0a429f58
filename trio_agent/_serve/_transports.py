"""The two transports of ``trio-agent serve``: stdio (one client) and a WebSocket
listener (any number of clients, one connection task each).

Both only frame messages and hand each client to ``AppServer.serve_connection``; the
server owns the connection's nursery and its shutdown.
"""

from __future__ import annotations

import os

import trio
import trio_websocket

from ._channel import MAX_MESSAGE_BYTES, LineChannel, WebSocketChannel
from ._server import AppServer

__all__ = ["serve_stdio", "serve_websocket"]

WEBSOCKET_CLOSE_TIMEOUT = 5.0


async def serve_stdio(server: AppServer, *, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Serve one client on ``stdin_fd``/``stdout_fd`` (newline-delimited JSON-RPC) until
    it closes its end of stdin. The descriptors are duplicated, so the process's own
    stdin and stdout are left open (and back in blocking mode) afterwards."""
    send = trio.lowlevel.FdStream(os.dup(stdout_fd))
    receive = trio.lowlevel.FdStream(os.dup(stdin_fd))
    await server.serve_connection(LineChannel(trio.StapledStream(send, receive)), label="the stdio client")


async def serve_websocket(
    server: AppServer, host: str, port: int, *,
    task_status: trio.TaskStatus[trio_websocket.WebSocketServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``ws://host:port`` (any path) until cancelled; each client is one
    connection, one JSON-RPC message per text frame. Reports the listening server
    (``.port`` is the bound port, useful with port 0)."""

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept()
        remote = ws.remote
        label = f"WebSocket client {remote}" if isinstance(remote, str) else f"WebSocket client {remote.address}"
        await server.serve_connection(WebSocketChannel(ws), label=label)

    await trio_websocket.serve_websocket(
        handler, host, port, ssl_context=None, max_message_size=MAX_MESSAGE_BYTES,
        disconnect_timeout=WEBSOCKET_CLOSE_TIMEOUT, task_status=task_status,
    )
