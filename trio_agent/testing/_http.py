"""The HTTP/SSE half of ``FakeResponsesServer``: one scripted request per connection.

``await server.accept_http()`` reads the next connection's HTTP request (h11) and
returns a ``FakeHttpRequest`` with ``method``, ``path``, lower-cased ``headers`` and
the JSON ``body``; the test answers it with ``send_sse(frames)``, a streamed
response (``start_stream`` / ``send_event`` / ``finish``), an error status
(``respond``), an empty event stream (``send_unexpected_end``) or ``drop()``.
Every response closes the connection, as the reference suites' servers do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import h11
import trio

from .._event_payloads._shared import JsonValue

__all__ = ["FakeHttpRequest", "read_http_request"]

_SSE_HEADERS = [("content-type", "text/event-stream"), ("connection", "close")]


class FakeHttpRequest:
    """One HTTP request the agent sent (``method``, ``path``, lower-cased ``headers``,
    ``raw_body`` and the decoded JSON ``body``), answered once by the test."""

    def __init__(
        self, stream: trio.abc.Stream, conn: h11.Connection, request: h11.Request, body: bytes
    ) -> None:
        self.stream = stream
        self._conn = conn
        self.method = request.method.decode()
        self.path = request.target.decode()
        self.headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        self.raw_body = body
        self.body: dict[str, JsonValue] = json.loads(body) if body else {}

    async def _send(self, event: Any) -> None:
        data = self._conn.send(event)
        if data:
            await self.stream.send_all(data)

    async def start_stream(self, *, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> None:
        """Send the response head of a chunked event stream."""
        await self._send(h11.Response(status_code=status, headers=[*_SSE_HEADERS, *headers]))

    async def send_event(self, frame: dict[str, Any] | str) -> None:
        """One ``data:`` event of a stream begun with ``start_stream`` (a dict is sent as
        compact JSON, a string as it is: ``"[DONE]"``, or hostile text)."""
        data = frame if isinstance(frame, str) else json.dumps(frame, separators=(",", ":"))
        await self._send(h11.Data(data=f"data: {data}\n\n".encode()))

    async def send_data(self, data: str) -> None:
        """One event whose data is ``data`` exactly (a line per line of ``data``, as SSE
        encodes multi-line data)."""
        lines = "".join(f"data: {line}\n" for line in data.split("\n"))
        await self._send(h11.Data(data=f"{lines}\n".encode()))

    async def finish(self) -> None:
        """End a streamed response and close the connection."""
        await self._send(h11.EndOfMessage())
        await self.stream.aclose()

    async def send_sse(self, frames: Sequence[dict[str, Any]], *, done: bool = True) -> None:
        """A whole event stream (``Content-Length`` framed), then close."""
        body = "".join(f"data: {json.dumps(f, separators=(',', ':'))}\n\n" for f in frames)
        if done:
            body += "data: [DONE]\n\n"
        payload = body.encode()
        headers = [*_SSE_HEADERS, ("content-length", str(len(payload)))]
        await self._send(h11.Response(status_code=200, headers=headers))
        await self._send(h11.Data(data=payload))
        await self.finish()

    async def send_final(self, response_id: str, text: str = "done") -> None:
        """A whole event stream: one completed response whose output is an assistant message."""
        from . import _frames as frames

        await self.send_sse([frames.completed(response_id, [frames.assistant_message(text)])])

    async def send_unexpected_end(self) -> None:
        """``200 OK`` with an empty event stream: the response never completes."""
        await self.send_sse([], done=False)

    async def respond(self, status: int, body: str = "", headers: Sequence[tuple[str, str]] = ()) -> None:
        """A plain (non-streamed) response, e.g. ``respond(429, body, [("retry-after", "2")])``."""
        payload = body.encode()
        head = [("content-type", "application/json"), ("connection", "close"),
                ("content-length", str(len(payload))), *headers]
        await self._send(h11.Response(status_code=status, headers=head))
        await self._send(h11.Data(data=payload))
        await self.finish()

    async def respond_json(self, body: Any, *, status: int = 200) -> None:
        """A JSON response (``body`` encoded compactly), then close."""
        await self.respond(status, json.dumps(body, separators=(",", ":")))

    async def drop(self) -> None:
        """Close the connection without answering."""
        await self.stream.aclose()


async def read_http_request(stream: trio.abc.Stream) -> FakeHttpRequest:
    conn = h11.Connection(h11.SERVER)
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(bytes(await stream.receive_some(65536)))
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            break
        elif isinstance(event, h11.ConnectionClosed):
            raise trio.BrokenResourceError("the client closed before sending a whole request")
    assert request is not None
    return FakeHttpRequest(stream, conn, request, bytes(body))
