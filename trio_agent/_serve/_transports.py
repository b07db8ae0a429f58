"""The two transports of ``trio-agent serve``: stdio (one client) and a WebSocket
listener (any number of clients, one connection task each).

Both only frame messages and hand each client to ``AppServer.serve_connection``; the
server owns the connection's nursery and its shutdown. The listener first passes each
TCP connection through its front door (``_http_gate``: Origin, capability token,
health checks) under its ``ListenerPolicy`` (``_listen_policy``), and refuses to open a
socket beyond loopback without a token. trio-websocket then reads the connection
through ``_ws_limit.MessageLimit``, which discards a message over ``MAX_MESSAGE_BYTES``
(the channel reports it, the connection goes on, as on stdio). Each connection runs in
a task of its own whose failure -- a hostile peer, or a bug met while serving it --
closes that connection alone.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

import attrs
import trio
import trio_websocket

from ._channel import MAX_MESSAGE_BYTES, LineChannel, WebSocketChannel
from ._http_gate import Head, judge, read_head, send_refusal
from ._listen_policy import ListenerPolicy, check_exposure
from ._server import AppServer
from ._ws_limit import READ_SIZE, Discards, MessageLimit, split_head
from ._ws_writes import SharedSendStream

__all__ = ["HANDSHAKE_TIMEOUT", "Listening", "serve_stdio", "serve_websocket"]

WEBSOCKET_CLOSE_TIMEOUT = 5.0
HANDSHAKE_TIMEOUT = 10.0  # seconds for a new connection to send its request head and finish the handshake


async def serve_stdio(server: AppServer, *, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Serve one client on ``stdin_fd``/``stdout_fd`` (newline-delimited JSON-RPC) until
    it closes its end of stdin. The descriptors are duplicated, so the process's own
    stdin and stdout are left open (and back in blocking mode) afterwards."""
    send = trio.lowlevel.FdStream(os.dup(stdout_fd))
    receive = trio.lowlevel.FdStream(os.dup(stdin_fd))
    await server.serve_connection(LineChannel(trio.StapledStream(send, receive)), label="the stdio client")


@attrs.frozen
class Listening:
    """A started listener: the ``port`` it is bound to (useful with port 0)."""

    port: int
    listeners: tuple[trio.SocketListener, ...]


async def serve_websocket(
    server: AppServer, host: str, port: int, *, policy: ListenerPolicy | None = None,
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``ws://host:port`` (any path) until cancelled; each client is one
    connection, one JSON-RPC message per text frame, admitted by ``policy`` (default:
    no browser origin, no token). Reports the started ``Listening`` (its ``.port``).

    Raises ``ValueError`` before opening any socket when ``host`` is beyond loopback
    and ``policy`` requires no token (``_listen_policy.check_exposure``)."""
    policy = policy if policy is not None else ListenerPolicy()
    check_exposure(host, policy)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]

    async def handle(stream: trio.SocketStream) -> None:
        try:
            await _serve_client(server, stream, policy)
        except Exception:  # one client's failure (or a bug it met) closes that client alone
            print("trio-agent serve: internal error on a WebSocket connection; closing it:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        task_status.started(Listening(bound, tuple(listeners)))


async def _serve_client(server: AppServer, stream: trio.SocketStream, policy: ListenerPolicy) -> None:
    head = await _admitted(server, stream, policy)
    if head is None:
        return  # refused, closed or too slow
    try:
        peer = stream.socket.getpeername()
        label = f"WebSocket client {peer[0]}:{peer[1]}"
    except OSError:
        label = "WebSocket client"
    async with trio.open_nursery() as nursery:  # the WebSocket's reader task
        ws: trio_websocket.WebSocketConnection | None = None
        discards = Discards(MAX_MESSAGE_BYTES)
        request_head, frames = split_head(head.data)
        limited = MessageLimit(stream, discards, head=request_head, rest=frames)
        shared = SharedSendStream(limited, stream.socket)  # trio-websocket's writes and the batches' (_ws_writes)
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            # trio-websocket's own limit (which closes with 1009) is never reached: nothing
            # longer than MAX_MESSAGE_BYTES gets through MessageLimit.
            request = await trio_websocket.wrap_server_stream(nursery, shared, max_message_size=MAX_MESSAGE_BYTES,
                                                              receive_buffer_size=READ_SIZE)
            with contextlib.suppress(trio_websocket.ConnectionClosed):  # the peer left during the handshake
                ws = await request.accept()
        if ws is None:  # too slow, or gone
            nursery.cancel_scope.cancel()
            return
        try:
            await server.serve_connection(WebSocketChannel(ws, shared, discards), label=label)
        finally:
            with trio.move_on_after(WEBSOCKET_CLOSE_TIMEOUT):
                await ws.aclose()


async def _admitted(server: AppServer, stream: trio.SocketStream, policy: ListenerPolicy) -> Head | None:
    """The request head of a connection the front door admits; None once it was
    refused (and answered), closed, reset or too slow to send its head."""
    with trio.move_on_after(HANDSHAKE_TIMEOUT):
        try:
            head = await read_head(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None  # the peer reset the connection
        verdict = judge(head, policy, ready=not server.closing) if isinstance(head, Head) else head
        if verdict is None:
            return head if isinstance(head, Head) else None  # admitted, or closed before a request
        await send_refusal(stream, verdict)
    return None
