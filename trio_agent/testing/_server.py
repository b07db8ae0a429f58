"""``FakeResponsesServer``: a scripted Responses server (WebSocket and HTTP/SSE), on
127.0.0.1 or entirely in memory.

The test drives it step by step, over real loopback sockets, like the reference
suites do with their mock servers::

    server = FakeResponsesServer()
    await nursery.start(server.serve)          # binds 127.0.0.1:0
    cfg = AgentConfig(..., responses=Responses(websocket_url=server.url))
    conn = await server.accept()               # next TCP connection, handshake accepted
    warmup = await conn.next_request()         # the decoded JSON body
    await conn.send_warmup("resp-warmup")
    ...
    raw = await server.accept_raw()            # next TCP connection, not handshaken
    await raw.drop()                           # e.g. fail a connection

Every handshake (path and headers) and every request body is recorded
(``server.handshakes``, ``server.requests``, ``conn.requests``); ``server.connections``
lists the accepted WebSocket connections, newest last. It uses only Trio
primitives, so it runs under ``MockClock`` (bind to the numeric 127.0.0.1).

In memory (no socket, no listener; exact virtual times under
``MockClock(autojump_threshold=0)``)::

    server = FakeResponsesServer.in_memory()
    await nursery.start(server.serve)          # no listener: accepts what ``dial`` opens
    cfg = AgentConfig(..., responses=Responses(websocket_url=server.url, dialer=server.dial))

``server.dial(host, port)`` is a ``Responses(dialer=...)``: each call opens a
``trio.testing.memory_stream_pair`` and queues its server end exactly where a TCP
connection would be queued, so every script (``accept()``, ``accept_raw()``,
``accept_http()``, ``next_request()``, ``send_*``) works unchanged. Dialing another
address, or before ``serve`` started / after it ended, is refused with
``ConnectionRefusedError`` like a port nobody listens on. ``server.dialed`` records
each ``(host, port)``. For an ``http_client`` of your own, ``server.http_client()``
is an ``httpx.AsyncClient`` that dials the same way.
"""

from __future__ import annotations

import errno
import json
import math
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_websocket

from .._event_payloads._shared import JsonValue
from . import _frames as frames
from ._http import FakeHttpRequest, read_http_request

if TYPE_CHECKING:
    import httpx

__all__ = ["ClientDisconnected", "FakeConnection", "FakeResponsesServer", "Handshake", "RawConnection"]

MEMORY_HOST = "fake-responses.invalid"  # .invalid never resolves: nothing real is reachable


@attrs.frozen
class Handshake:
    """One WebSocket handshake the server saw: the request path and lower-cased headers."""

    path: str
    headers: dict[str, str]


class ClientDisconnected(Exception):
    """The client (the agent) went away: ``FakeConnection.next_request()`` and ``send()``
    raise it once the WebSocket is closed. ``code`` is the close code (1000 for a normal
    close, 1006 when the TCP connection ended without a close frame), ``reason`` the
    close reason (``None`` when none was given)."""

    def __init__(self, code: int, reason: str | None) -> None:
        super().__init__(f"the client closed the WebSocket (code {code}{f': {reason}' if reason else ''})")
        self.code = code
        self.reason = reason


def _disconnected(exc: trio_websocket.ConnectionClosed) -> ClientDisconnected:
    if exc.reason is None:
        return ClientDisconnected(1006, None)
    return ClientDisconnected(int(exc.reason.code), exc.reason.reason)


class _HandshakeWatch(trio.abc.Stream):
    """Turns EOF before the handshake into an error trio-websocket cannot swallow."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.done = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if not data and not self.done:
            raise ConnectionError("EOF before the WebSocket handshake")
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


class RawConnection:
    """An accepted TCP connection before any WebSocket handshake."""

    def __init__(self, server: FakeResponsesServer, stream: trio.abc.Stream) -> None:
        self._server = server
        self.stream = stream

    async def drop(self) -> None:
        """Close the TCP connection without a WebSocket handshake."""
        await self.stream.aclose()

    async def reject(self, status: int, body: str = "", headers: Sequence[tuple[str, str]] = ()) -> None:
        """Answer the WebSocket handshake with an HTTP error (e.g. 401, or 429 with Retry-After)."""
        request = await trio_websocket.wrap_server_stream(self._server._require_nursery(), self.stream)
        await request.reject(status, extra_headers=[(k.encode(), v.encode()) for k, v in headers], body=body.encode())

    async def accept(self, *, delay: float = 0.0, headers: Sequence[tuple[str, str]] = ()) -> FakeConnection:
        """Complete the WebSocket handshake (after ``delay`` seconds of Trio time)."""
        if delay:
            await trio.sleep(delay)
        return await self._server._handshake(self.stream, headers)


class FakeConnection:
    """One accepted WebSocket connection, scripted by the test."""

    def __init__(self, server: FakeResponsesServer, ws: trio_websocket.WebSocketConnection,
                 stream: trio.abc.Stream, handshake: Handshake) -> None:
        self._server = server
        self._ws = ws
        self._stream = stream
        self.handshake = handshake
        self.requests: list[dict[str, JsonValue]] = []

    async def next_request(self) -> dict[str, JsonValue]:
        """The next JSON text frame the client sent (``ClientDisconnected`` once it went away)."""
        while True:
            try:
                message = await self._ws.get_message()
            except trio_websocket.ConnectionClosed as exc:
                raise _disconnected(exc) from exc
            if isinstance(message, str):
                body: dict[str, JsonValue] = json.loads(message)  # the agent sends JSON objects
                self.requests.append(body)
                self._server.requests.append(body)
                return body

    async def send(self, frame: dict[str, Any]) -> None:
        """Send one frame as compact JSON text (``ClientDisconnected`` once the client went away)."""
        await self.send_text(json.dumps(frame, separators=(",", ":")))

    async def send_text(self, message: str | bytes) -> None:
        """Send one message exactly as given (a text frame, or a binary frame for bytes);
        ``ClientDisconnected`` once the client went away."""
        try:
            await self._ws.send_message(message)
        except trio_websocket.ConnectionClosed as exc:
            raise _disconnected(exc) from exc

    async def send_all(self, frames_: Sequence[dict[str, Any]]) -> None:
        """Send each frame in order."""
        for frame in frames_:
            await self.send(frame)

    async def send_warmup(self, response_id: str) -> None:
        """``response.completed`` with ``usage: null``, as a warmup reply."""
        await self.send({"type": "response.completed", "response": {"id": response_id, "usage": None}})

    async def send_final(self, response_id: str, text: str = "done") -> None:
        """A completed response whose output is one assistant message."""
        await self.send(frames.completed(response_id, [frames.assistant_message(text)]))

    async def send_completed(self, response_id: str, output: Sequence[dict[str, Any]] = (), **kw: Any) -> None:
        """``frames.completed(response_id, output, **kw)``."""
        await self.send(frames.completed(response_id, output, **kw))

    async def send_tool_call(
        self, response_id: str, call_id: str, name: str, input: str | dict[str, Any], *, item_id: str | None = None
    ) -> None:
        """A completed response with one tool call: a custom call when ``input`` is a
        string, a function call (JSON-encoded arguments) when it is a dict."""
        if isinstance(input, str):
            call = frames.custom_tool_call(call_id, name, input, item_id=item_id)
        else:
            call = frames.function_call(call_id, name, json.dumps(input), item_id=item_id)
        await self.send(frames.completed(response_id, [call]))

    async def send_assistant_output(self, output_index: int, item_id: str, phase: str, text: str) -> dict[str, Any]:
        """Stream one assistant message (added, one delta, done); returns the finished item."""
        done = frames.assistant_message(text, item_id=item_id, phase=phase)
        added = {**done, "status": "in_progress", "content": []}
        await self.send(frames.output_item_added(output_index, added))
        await self.send(frames.text_delta(output_index, text))
        await self.send(frames.output_item_done(output_index, done))
        return done

    async def send_compaction(
        self, response_id: str, encrypted_content: str = "opaque-summary", *,
        usage_block: dict[str, Any] | str | None = "default",
    ) -> None:
        """Answer a remote compaction request: one ``compaction`` item (``output_item.done``,
        then ``response.completed`` holding it)."""
        item = frames.compaction_item(encrypted_content)
        await self.send(frames.output_item_done(0, item))
        await self.send(frames.completed(response_id, [item], usage_block=usage_block))

    async def send_error(self, message: str, *, code: str | None = None, **extra: Any) -> None:
        """``frames.error_frame(message, code=code, **extra)``: fails the live response."""
        await self.send(frames.error_frame(message, code=code, **extra))

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        """Close with a WebSocket close handshake (``code`` and an optional ``reason``)."""
        await self._ws.aclose(code, reason)

    async def drop(self) -> None:
        """Close the TCP connection abruptly (no close frame)."""
        await self._stream.aclose()


class FakeResponsesServer:
    """See the module docstring. ``url`` is valid once ``serve`` has started."""

    def __init__(self, *, path: str = "/v1/responses", ssl_context: ssl.SSLContext | None = None) -> None:
        """``ssl_context`` (a server-side context) makes it speak ``wss://``/``https://``."""
        self.path = path
        self.ssl_context = ssl_context
        self.port: int | None = None
        self.handshakes: list[Handshake] = []
        self.connections: list[FakeConnection] = []
        self.requests: list[dict[str, JsonValue]] = []
        self.dialed: list[tuple[str, int]] = []
        self._memory_host: str | None = None
        self._serving = False
        self._incoming_send, self._incoming = trio.open_memory_channel[trio.abc.Stream](math.inf)
        self._nursery: trio.Nursery | None = None
        self._streams: list[trio.abc.Stream] = []

    @classmethod
    def in_memory(
        cls, *, path: str = "/v1/responses", ssl_context: ssl.SSLContext | None = None, host: str = MEMORY_HOST
    ) -> FakeResponsesServer:
        """A server reached only through ``dial`` (see the module docstring); ``url`` and
        ``http_base_url`` name ``host`` on the scheme's default port."""
        server = cls(path=path, ssl_context=ssl_context)
        server._memory_host = host
        return server

    @property
    def is_in_memory(self) -> bool:
        """Whether this server was made by ``in_memory()`` (reached only through ``dial``)."""
        return self._memory_host is not None

    def _authority(self) -> str:
        if self._memory_host is not None:
            return self._memory_host
        if self.port is None:
            raise RuntimeError("start the server first: await nursery.start(server.serve)")
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The ``websocket_url`` for the agent (``ws://`` or, with ``ssl_context``, ``wss://``)."""
        scheme = "wss" if self.ssl_context is not None else "ws"
        return f"{scheme}://{self._authority()}{self.path}"

    @property
    def http_base_url(self) -> str:
        """The ``api_base_url`` for the HTTPS transport (requests go to ``.../v1/responses``)."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self._authority()}/v1"

    async def serve(self, *, task_status: trio.TaskStatus[FakeResponsesServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on 127.0.0.1:0 (in memory: accept what ``dial`` opens) until cancelled."""
        listeners = [] if self.is_in_memory else await trio.open_tcp_listeners(0, host="127.0.0.1")
        if listeners:
            self.port = listeners[0].socket.getsockname()[1]
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._accept_loop, listeners)
                self._serving = True
                task_status.started(self)
        finally:
            self._serving = False
            # Every connection the server accepted is closed with it (shielded: the
            # server is usually being cancelled right now, and each close checkpoints).
            with trio.CancelScope(shield=True):
                for stream in self._streams:
                    await trio.aclose_forcefully(stream)

    def _admit(self, stream: trio.abc.Stream) -> None:
        if self.ssl_context is not None:
            stream = trio.SSLStream(stream, self.ssl_context, server_side=True)
        self._streams.append(stream)
        self._incoming_send.send_nowait(stream)

    async def _accept_loop(self, listeners: list[trio.SocketListener]) -> None:
        if not listeners:
            await trio.sleep_forever()  # in memory: ``dial`` admits the connections
        try:
            while True:
                self._admit(await listeners[0].accept())
        finally:
            for listener in listeners:
                with trio.CancelScope(shield=True):
                    await listener.aclose()

    async def dial(self, host: str, port: int) -> trio.abc.Stream:
        """A ``Responses(dialer=...)`` for an in-memory server: a new connection's client end.

        Raises ``ConnectionRefusedError`` for another address, and while the server is
        not serving (a port nobody listens on)."""
        await trio.lowlevel.checkpoint()
        scheme_port = 443 if self.ssl_context is not None else 80
        if self._memory_host is None or (host, port) != (self._memory_host, scheme_port):
            raise ConnectionRefusedError(
                errno.ECONNREFUSED, f"nothing listens on {host}:{port} in memory; dial the server's own url"
            )
        if not self._serving:
            raise ConnectionRefusedError(
                errno.ECONNREFUSED, f"{host}:{port} is not serving; start it: await nursery.start(server.serve)"
            )
        self.dialed.append((host, port))
        # Imported here, not at the top: trio.testing imports pytest, which `run --local`
        # (a real loopback server) does not need.
        from trio.testing import memory_stream_pair

        client, server_end = memory_stream_pair()
        self._admit(server_end)
        return client

    def http_client(self, *, ssl_context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` whose connections ``dial`` this in-memory server (the
        agent's own timeouts: 30 s to connect, 300 s between reads). Close it yourself
        (``async with``); ``ssl_context`` is the client's trust for ``https://``."""
        import httpx

        from .._transport._dialed_http import DialedTransport

        return httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=300.0),
            transport=DialedTransport(self.dial, ssl_context=ssl_context),
        )

    async def accept_raw(self) -> RawConnection:
        """The next TCP connection, before the handshake."""
        return RawConnection(self, await self._incoming.receive())

    async def accept_http(self) -> FakeHttpRequest:
        """The next connection's HTTP request (for the HTTPS/SSE transport)."""
        raw = await self.accept_raw()
        return await read_http_request(raw.stream)

    async def accept(self, *, delay: float = 0.0, headers: Sequence[tuple[str, str]] = ()) -> FakeConnection:
        """The next connection with its WebSocket handshake accepted."""
        raw = await self.accept_raw()
        return await raw.accept(delay=delay, headers=headers)

    def _require_nursery(self) -> trio.Nursery:
        if self._nursery is None:
            raise RuntimeError("start the server first: await nursery.start(server.serve)")
        return self._nursery

    async def _handshake(self, stream: trio.abc.Stream, headers: Sequence[tuple[str, str]]) -> FakeConnection:
        if isinstance(stream, trio.SSLStream):
            await stream.do_handshake()  # TLS failures surface here, not as a silent hang
        connection: FakeConnection = await self._require_nursery().start(self._connection_task, stream, headers)
        return connection

    async def _connection_task(
        self, stream: trio.abc.Stream, headers: Sequence[tuple[str, str]], *,
        task_status: trio.TaskStatus[FakeConnection],
    ) -> None:
        """One connection: its reader task lives in a nursery of its own, so a client that
        goes away mid-handshake fails this ``accept()`` instead of hanging it (or the server)."""
        watched = _HandshakeWatch(stream)
        started = False
        try:
            async with trio.open_nursery() as nursery:
                request = await trio_websocket.wrap_server_stream(
                    nursery, watched, message_queue_size=64, max_message_size=64 << 20,
                    receive_buffer_size=256 << 10,
                )
                record = Handshake(
                    request.path,
                    {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers},
                )
                self.handshakes.append(record)
                ws = await request.accept(extra_headers=[(k.encode(), v.encode()) for k, v in headers])
                watched.done = True
                connection = FakeConnection(self, ws, stream, record)
                self.connections.append(connection)
                task_status.started(connection)
                started = True
        except Exception as exc:  # includes groups of errors; Cancelled is a BaseException
            if not started:
                raise trio.BrokenResourceError("the client went away during the WebSocket handshake") from exc
