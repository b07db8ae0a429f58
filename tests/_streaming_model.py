"""A scripted model that streams a response in pieces, on either transport, for the
tests of streaming tool dispatch (issue 27 item 1): ``tests/runtime/test_streamed_dispatch.py``
and ``tests/faults/test_streamed_call_faults.py``.

``Model(server, transport)`` is the server side of one agent: ``next_request()`` takes
the next request (on the WebSocket it answers each new connection's warmup itself;
over HTTPS each request is a connection of its own), ``send(frames)`` sends frames of
the live response and keeps it open, ``end(frames)`` sends the last ones and, over
HTTPS, ends the event stream; ``drop()`` breaks the connection. ``config`` makes the
agent's config for it (through ``server.dial`` when the server is in memory), and
``tool`` a user function tool whose calls the test can watch and hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]
CALL_KINDS = ("function_call", "custom_tool_call")
OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")


class Model:
    def __init__(self, server: FakeResponsesServer, transport: ta.Transport) -> None:
        self.server = server
        self.transport = transport
        self.bodies: list[dict[str, Any]] = []
        self.connections = 0
        self._conn: FakeConnection | None = None
        self._http: FakeHttpRequest | None = None
        self._streaming = False

    @property
    def websocket(self) -> bool:
        return self.transport is ta.Transport.WEBSOCKET

    def config(self, workspace: Path, *, tools: ta.Tools | None = None, **responses: Any) -> ta.AgentConfig:
        if self.server.is_in_memory:
            responses["dialer"] = self.server.dial
        if self.websocket:
            settings = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=self.server.url, **responses)
        else:
            settings = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                                    api_base_url=self.server.http_base_url, **responses)
        return ta.AgentConfig(auth="test-key", workspace=workspace, responses=settings, session_id="streamed",
                              thinking=ta.Thinking.LOW, tools=tools if tools is not None else ta.Tools.default())

    async def next_request(self) -> dict[str, Any]:
        """The next request (a new connection's warmup answered first)."""
        self._streaming = False
        if not self.websocket:
            self._http = await self.server.accept_http()
            self.connections += 1
            body = dict(self._http.body)
        else:
            try:
                if self._conn is None:
                    raise ConnectionError
                body = dict(await self._conn.next_request())
            except Exception:  # none yet, or the agent dropped it: its next request comes on a new one
                body = await self._accept()
        self.bodies.append(body)
        return body

    async def _accept(self) -> dict[str, Any]:
        """A new socket's first request (the startup warmup answered first: a reconnect
        sends none)."""
        self._conn = await self.server.accept()
        self.connections += 1
        first = dict(await self._conn.next_request())
        if first.get("generate") is not False:
            return first
        await self._conn.send_warmup(f"resp-warmup-{self.connections}")
        return dict(await self._conn.next_request())

    async def send(self, frames: list[dict[str, Any]]) -> None:
        """Frames of the live response; it stays open."""
        if self.websocket:
            assert self._conn is not None
            await self._conn.send_all(frames)
            return
        assert self._http is not None
        if not self._streaming:
            self._streaming = True
            await self._http.start_stream()
        for frame in frames:
            await self._http.send_event(frame)

    async def end(self, frames: list[dict[str, Any]]) -> None:
        """The last frames of the live response (over HTTPS, the end of its stream)."""
        await self.send(frames)
        if not self.websocket:
            assert self._http is not None
            await self._http.finish()

    async def drop(self) -> None:
        """Break the connection under the live response."""
        if self.websocket:
            assert self._conn is not None
            await self._conn.drop()
            self._conn = None
        else:
            assert self._http is not None
            await self._http.stream.aclose()


class Tool:
    """A user function tool ``name``: each call records its arguments, sets ``started``,
    waits for ``release`` when ``held``, and answers ``done <n>``."""

    def __init__(self, name: str = "work", *, held: bool = False) -> None:
        self.name = name
        self.calls: list[str] = []  # call ids, in the order they started
        self.finished: list[str] = []
        self.started = trio.Event()
        self.release = trio.Event()
        self.held = held

    async def __call__(self, ctx: ta.ToolContext, args: Any) -> str:
        self.calls.append(ctx.call_id)
        self.started.set()
        if self.held:
            await self.release.wait()
        self.finished.append(ctx.call_id)
        return f"done {ctx.call_id}"

    def tools(self) -> ta.Tools:
        return ta.Tools.default().function(self.name, "Does work.", {"type": "object"}, self)


def calls_and_outputs(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(kind, call_id)`` of every call and output item, in order."""
    return [("call" if item.get("type") in CALL_KINDS else "output", str(item.get("call_id")))
            for item in items if item.get("type") in CALL_KINDS + OUTPUT_KINDS]


def output_of(items: list[dict[str, Any]], call_id: str) -> list[str]:
    """The output texts answering ``call_id`` (one, in a valid history)."""
    return [item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
            for item in items if item.get("type") in OUTPUT_KINDS and item.get("call_id") == call_id]


def well_formed(items: list[dict[str, Any]]) -> bool:
    """Every call answered by exactly one output, after it; no call id twice."""
    seen: list[str] = []
    answered: list[str] = []
    for kind, call_id in calls_and_outputs(items):
        if kind == "call":
            if call_id in seen:
                return False
            seen.append(call_id)
        else:
            if call_id not in seen or call_id in answered:
                return False
            answered.append(call_id)
    return sorted(seen) == sorted(answered)
