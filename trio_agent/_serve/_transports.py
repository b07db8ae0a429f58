"""The two transports of ``trio-agent serve``: stdio (one client) and a WebSocket
listener (at most ``max_connections`` clients at once, one connection task each).

Both only frame messages and hand each client to ``AppServer.serve_connection``; the
server owns the connection's nursery and its shutdown. The listener first passes each
TCP connection through its front door (``_http_gate``: Origin, capability token,
health checks) under its ``ListenerPolicy`` (``_listen_policy``), and refuses to open a
socket beyond loopback without a token. trio-websocket then reads the connection
through ``_ws_limit.MessageLimit``, which discards a message over ``MAX_MESSAGE_BYTES``
(the channel reports it, the connection goes on, as on stdio). Each connection runs in
a task of its own whose failure -- a hostile peer, or a bug met while serving it --
closes that connection alone.

Bounds (issue 21's review: no unbounded buffer). Every descriptor and task the listener
holds is counted. A connection is *served* from its admission to its close: at most
``max_connections`` at once (``--max-connections``), the next admitted handshake is
answered 503 before the upgrade (``_http_gate.too_many``) and the count drops when a
served connection closes. Before admission a connection is at the *front door*
(its head being read and judged, or a refusal being sent): at most
:data:`FRONT_DOOR_LIMIT` at once, each for at most :data:`HANDSHAKE_TIMEOUT`; while the
front door is full the listener accepts nothing, so further connections wait in the
kernel's accept queue, holding no descriptor of this process. A client that opens TCP
and never sends its head holds a front-door place for ``HANDSHAKE_TIMEOUT``, never a
served one. Health checks pass the front door only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

import attrs
import trio
import trio_websocket

from ..cli._serve_options import DEFAULT_MAX_CONNECTIONS
from ._channel import MAX_MESSAGE_BYTES, LineChannel, WebSocketChannel
from ._http_gate import Head, judge, read_head, send_refusal, too_many
from ._listen_policy import ListenerPolicy, check_exposure
from ._server import AppServer
from ._ws_limit import READ_SIZE, Discards, MessageLimit, split_head
from ._ws_writes import SharedSendStream

__all__ = ["FRONT_DOOR_LIMIT", "HANDSHAKE_TIMEOUT", "Listening", "serve_stdio", "serve_websocket"]

WEBSOCKET_CLOSE_TIMEOUT = 5.0
HANDSHAKE_TIMEOUT = 10.0  # seconds for a new connection to send its request head and finish the handshake
FRONT_DOOR_LIMIT = 32  # connections whose request head is being read or refused, at once


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
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``ws://host:port`` (any path) until cancelled; each client is one
    connection, one JSON-RPC message per text frame, admitted by ``policy`` (default:
    no browser origin, no token), at most ``max_connections`` at once (the next gets
    HTTP 503). Reports the started ``Listening`` (its ``.port``).

    Raises ``ValueError`` before opening any socket when ``host`` is beyond loopback
    and ``policy`` requires no token (``_listen_policy.check_exposure``), or when
    ``max_connections`` is below 1."""
    policy = policy if policy is not None else ListenerPolicy()
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    check_exposure(host, policy)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    door = trio.Semaphore(FRONT_DOOR_LIMIT, max_value=FRONT_DOOR_LIMIT)
    served = trio.Semaphore(max_connections, max_value=max_connections)

    async def handle(stream: trio.SocketStream) -> None:
        try:
            await _serve_client(server, stream, policy, door, served)
        except Exception:  # one client's failure (or a bug it met) closes that client alone
            print("trio-agent serve: internal error on a WebSocket connection; closing it:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, [_FrontDoor(listener, door) for listener in listeners])
        task_status.started(Listening(bound, tuple(listeners)))


class _FrontDoor(trio.abc.Listener[trio.SocketStream]):
    """``listener`` that accepts only while the front door has room: each accepted
    stream holds a place of ``door`` until its handler releases it (``_serve_client``)."""

    def __init__(self, listener: trio.SocketListener, door: trio.Semaphore) -> None:
        self.listener, self.door = listener, door

    async def accept(self) -> trio.SocketStream:
        await self.door.acquire()
        try:
            return await self.listener.accept()
        except BaseException:  # no stream (EMFILE, cancelled): serve_listeners retries or ends
            self.door.release()
            raise

    async def aclose(self) -> None:
        await self.listener.aclose()


async def _serve_client(server: AppServer, stream: trio.SocketStream, policy: ListenerPolicy,
                        door: trio.Semaphore, served: trio.Semaphore) -> None:
    try:
        head = await _admitted(server, stream, policy, served)
    finally:
        door.release()
    if head is None:
        return  # refused, closed or too slow
    try:
        await _serve_admitted(server, stream, head)
    finally:
        served.release()


async def _serve_admitted(server: AppServer, stream: trio.SocketStream, head: Head) -> None:
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


async def _admitted(server: AppServer, stream: trio.SocketStream, policy: ListenerPolicy,
                    served: trio.Semaphore) -> Head | None:
    """The request head of a connection the front door admits, holding a place of
    ``served`` (the caller releases it); None once it was refused (and answered: 503
    when every place is taken), closed, reset or too slow to send its head."""
    with trio.move_on_after(HANDSHAKE_TIMEOUT):
        try:
            head = await read_head(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None  # the peer reset the connection
        verdict = judge(head, policy, ready=not server.closing) if isinstance(head, Head) else head
        if verdict is None and isinstance(head, Head):
            try:
                served.acquire_nowait()
            except trio.WouldBlock:
                verdict = too_many(served.max_value or 0)
            else:
                return head  # admitted
        if verdict is None:
            return None  # closed before a request
        await send_refusal(stream, verdict)
    return None
