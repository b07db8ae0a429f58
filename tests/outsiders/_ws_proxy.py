"""A logging WebSocket proxy between a codex front end and ``trio-agent serve``.

Codex's TUI and ``codex exec --remote`` connect to ``ws://127.0.0.1:<proxy port>``; each
connection is relayed, one text frame per JSON-RPC message, to the server's listener,
and every message is kept in ``Proxy.log`` in order, as ``(direction, message)`` with
direction ``"client"`` (codex to the server) or ``"server"``. ``server_messages()``
pairs each response with the method of the request it answers, so the test can check
every message trio-agent sent against the codex schema.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio_websocket

__all__ = ["Proxy", "logging_proxy"]

Json = dict[str, Any]


class Proxy:
    def __init__(self) -> None:
        self.port = 0
        self.log: list[tuple[str, Json]] = []
        self.connections = 0
        self.changed = trio.Event()

    def _record(self, direction: str, text: str) -> None:
        self.log.append((direction, json.loads(text)))
        self.changed.set()
        self.changed = trio.Event()

    def client_methods(self) -> list[str]:
        """The methods codex called, in order."""
        return [message["method"] for direction, message in self.log
                if direction == "client" and "method" in message and "id" in message]

    def server_messages(self) -> list[tuple[Json, str | None]]:
        """Every message the server sent, with the method a response answers (else None)."""
        asked: dict[Any, str] = {}
        out: list[tuple[Json, str | None]] = []
        for direction, message in self.log:
            if direction == "client" and "method" in message and "id" in message:
                asked[json.dumps(message["id"])] = message["method"]
            elif direction == "server":
                answered = None if "method" in message else asked.get(json.dumps(message.get("id")))
                out.append((message, answered))
        return out

    def responses(self, method: str) -> list[Json]:
        return [message for message, answered in self.server_messages() if answered == method]


async def _relay(proxy: Proxy, source: trio_websocket.WebSocketConnection,
                 sink: trio_websocket.WebSocketConnection, direction: str) -> None:
    try:
        while True:
            message = await source.get_message()
            text = message if isinstance(message, str) else message.decode("utf-8")
            proxy._record(direction, text)
            await sink.send_message(text)
    except (trio_websocket.ConnectionClosed, trio.BrokenResourceError):
        await sink.aclose()


@asynccontextmanager
async def logging_proxy(upstream_port: int) -> AsyncIterator[Proxy]:
    """A proxy on 127.0.0.1:0 in front of ``ws://127.0.0.1:upstream_port``."""
    proxy = Proxy()

    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        downstream = await request.accept()
        proxy.connections += 1
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{upstream_port}/") as upstream:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_relay, proxy, downstream, upstream, "client")
                await _relay(proxy, upstream, downstream, "server")
                nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(trio_websocket.serve_websocket, handler, "127.0.0.1", 0, None)
        proxy.port = server.port
        yield proxy
        nursery.cancel_scope.cancel()
