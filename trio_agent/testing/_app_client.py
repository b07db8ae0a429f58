"""``AppServerClient``: a small typed client of the Codex app-server protocol (JSON-RPC
2.0), for tests of ``trio-agent serve`` -- or of the real ``codex app-server``.

It reads on demand, with no task of its own: ``request()`` sends a request and reads
until its response arrives; ``read_notification("thread/closed")`` returns the next
notification of that method; ``read_server_request("item/tool/call")`` the next
request from the server (answer it with ``respond``). Messages read while looking for
something else are kept, in order, for later reads (as codex's own test client does),
so nothing is lost between calls; at most ``max_buffered`` are kept (then
``ClientBufferFull``). Every read is cancel-safe, so a window such as "no
``thread/closed`` within 250 ms" is ``with trio.move_on_after(0.25):
await client.read_notification("thread/closed")``.

The transport is a message channel: ``LineChannel(stream)`` for a Trio stream (a
subprocess's stdio stapled together, one side of ``trio.testing.memory_stream_pair``),
``WebSocketChannel(ws)`` for a ``trio_websocket`` connection. ``validate`` (optional)
sees every message the server sends, with the method of the request a response
answers, so a test can check each one against the protocol schema.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, final

import attrs

from .._serve._channel import MessageChannel

__all__ = ["AppServerClient", "AppServerError", "ClientBufferFull", "ServerNotification", "ServerRequest"]

Json = dict[str, Any]
RequestId = int | str
Validator = Callable[[Json, "str | None"], None]


class AppServerError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{method}: error {code}: {message}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class ClientBufferFull(Exception):
    """More than ``max_buffered`` unread messages piled up: the test is not reading
    what it waits for (or waits for something that never comes)."""


@final
@attrs.frozen
class ServerNotification:
    """A notification from the server: ``method``, ``params`` and its ``emittedAtMs``."""

    method: str
    params: Json
    emitted_at_ms: int | None = None


@final
@attrs.frozen
class ServerRequest:
    """A request from the server (``item/tool/call``...); answer it with ``respond``."""

    id: RequestId
    method: str
    params: Json


@final
class AppServerClient:
    """A client of the app-server protocol over a message channel (see the module
    docstring): requests with ids, buffered reads by method, server-request answers."""

    def __init__(self, channel: MessageChannel, *, validate: Validator | None = None,
                 max_buffered: int = 10_000) -> None:
        self._channel = channel
        self._validate = validate
        self._max = max_buffered
        self._ids = itertools.count(1)
        self._methods: dict[RequestId, str] = {}
        self._buffer: list[Json] = []

    # -- sending ---------------------------------------------------------------------

    async def send_request(self, method: str, params: Json | None = None) -> int:
        """Send a request without waiting; returns its id (for ``read_response``/``read_error``)."""
        request_id = next(self._ids)
        self._methods[request_id] = method
        message: Json = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._channel.send(json.dumps(message))
        return request_id

    async def notify(self, method: str, params: Json | None = None) -> None:
        """Send a notification (no id, no answer)."""
        message: Json = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._channel.send(json.dumps(message))

    async def send_raw(self, text: str) -> None:
        """Send one message exactly as given (e.g. a malformed line)."""
        await self._channel.send(text)

    async def respond(self, request_id: RequestId, result: Any) -> None:
        """Answer the server request ``request_id`` with ``result``."""
        await self._channel.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))

    async def respond_error(self, request_id: RequestId, code: int, message: str) -> None:
        """Answer the server request ``request_id`` with a JSON-RPC error."""
        await self._channel.send(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                             "error": {"code": code, "message": message}}))

    # -- requests --------------------------------------------------------------------

    async def request(self, method: str, params: Json | None = None) -> Json:
        """Send a request and wait for its result (``AppServerError`` for an error)."""
        return await self.read_response(await self.send_request(method, params))

    async def read_response(self, request_id: RequestId) -> Json:
        """The result answering ``request_id`` (every result of this protocol is an object)."""
        message = await self._take(lambda m: m.get("id") == request_id and "method" not in m)
        if "error" in message:
            error = message["error"]
            raise AppServerError(self._methods.get(request_id, "?"), error.get("code"), error.get("message", ""),
                                 error.get("data"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise ValueError(f"the result of request {request_id} is not a JSON object: {result!r:.200}")
        return result

    async def read_error(self, request_id: RequestId) -> AppServerError:
        """The error answering ``request_id`` (``AssertionError`` if it succeeded)."""
        try:
            result = await self.read_response(request_id)
        except AppServerError as exc:
            return exc
        raise AssertionError(f"request {request_id} succeeded: {result!r}")

    async def initialize(self, name: str = "trio-agent-tests", version: str = "0.0.1",
                         capabilities: Json | None = None) -> Json:
        """``initialize`` then the ``initialized`` notification; returns the result."""
        params: Json = {"clientInfo": {"name": name, "title": name, "version": version}}
        if capabilities is not None:
            params["capabilities"] = capabilities
        result = await self.request("initialize", params)
        await self.notify("initialized")
        return result

    # -- reading ---------------------------------------------------------------------

    async def read_notification(self, method: str, predicate: Callable[[Json], bool] | None = None) -> Json:
        """The params of the next notification ``method`` (matching ``predicate``)."""
        return (await self.read_notification_message(method, predicate)).params

    async def read_notification_message(
        self, method: str, predicate: Callable[[Json], bool] | None = None
    ) -> ServerNotification:
        """Like ``read_notification``, with the whole notification (``emitted_at_ms`` too)."""

        def wanted(message: Json) -> bool:
            return (message.get("method") == method and "id" not in message
                    and (predicate is None or predicate(message.get("params") or {})))

        message = await self._take(wanted)
        return ServerNotification(method, message.get("params") or {}, message.get("emittedAtMs"))

    async def read_server_request(self, method: str | None = None) -> ServerRequest:
        """The next request from the server (of ``method``, if given)."""
        message = await self._take(lambda m: "id" in m and "method" in m and method in (None, m["method"]))
        return ServerRequest(message["id"], message["method"], message.get("params") or {})

    def pending(self, method: str | None = None) -> list[Json]:
        """Messages read but not yet taken (of ``method``, if given), oldest first."""
        return [m for m in self._buffer if method is None or m.get("method") == method]

    def take_pending(self, method: str | None = None) -> list[Json]:
        """Like ``pending``, and forget them (later reads will not return them)."""
        taken = self.pending(method)
        self._buffer = [m for m in self._buffer if not (method is None or m.get("method") == method)]
        return taken

    async def _take(self, wanted: Callable[[Json], bool]) -> Json:
        for index, message in enumerate(self._buffer):
            if wanted(message):
                return self._buffer.pop(index)
        while True:
            message = await self._receive()
            if wanted(message):
                return message
            if len(self._buffer) >= self._max:
                raise ClientBufferFull(f"{self._max} unread messages are buffered; read them or raise max_buffered")
            self._buffer.append(message)

    async def _receive(self) -> Json:
        text = await self._channel.receive()
        message = json.loads(text)
        if not isinstance(message, dict):
            raise ValueError(f"the server sent a JSON {type(message).__name__}, not an object: {text[:200]}")
        if self._validate is not None:
            answered = self._methods.get(message["id"]) if "id" in message and "method" not in message else None
            self._validate(message, answered)
        return message

    async def aclose(self) -> None:
        """Close the channel: for the server, this client went away."""
        await self._channel.aclose()
