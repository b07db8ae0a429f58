"""A scripted model on either transport, with raw (possibly hostile) frames."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeHttpRequest, FakeResponsesServer

TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]


class Peer:
    """The server side of one agent. On the WebSocket it answers the warmup of each new
    connection itself; on HTTPS each request is its own connection."""

    def __init__(self, server: FakeResponsesServer, transport: ta.Transport) -> None:
        self.server = server
        self.transport = transport
        self.conn: FakeConnection | None = None
        self.http: FakeHttpRequest | None = None
        self.connections = 0

    @property
    def websocket(self) -> bool:
        return self.transport is ta.Transport.WEBSOCKET

    def responses(self, **kw: Any) -> ta.Responses:
        if self.websocket:
            return ta.Responses(profile=ta.Profile.OPENAI, websocket_url=self.server.url, **kw)
        return ta.Responses(profile=ta.Profile.OPENAI,
                            transport=ta.Transport.HTTPS, api_base_url=self.server.http_base_url, **kw)

    def config(self, workspace: Path, *, responses: dict[str, Any] | None = None, **kw: Any) -> ta.AgentConfig:
        kw.setdefault("session_id", "faults")
        kw.setdefault("thinking", ta.Thinking.LOW)
        return ta.AgentConfig(auth="test-key", workspace=workspace, responses=self.responses(**(responses or {})), **kw)

    async def next_request(self, *, new_connection: bool = False) -> dict[str, Any]:
        if not self.websocket:
            self.http = await self.server.accept_http()
            self.connections += 1
            return self.http.body
        if self.conn is None or new_connection:
            self.conn = await self.server.accept()
            self.connections += 1
            warmup = await self.conn.next_request()
            if warmup.get("generate") is False:
                await self.conn.send_warmup(f"resp-warmup-{self.connections}")
                return await self.conn.next_request()
            return warmup
        return await self.conn.next_request()

    async def send(self, frames: Sequence[dict[str, Any] | str | bytes], *, end: bool = True) -> None:
        """Send frames: dicts as JSON, str as raw text data, bytes as a binary frame
        (WebSocket only). On HTTPS ``end`` finishes the body."""
        if self.websocket:
            assert self.conn is not None
            for frame in frames:
                if isinstance(frame, dict):
                    await self.conn.send(frame)
                else:
                    await self.conn._ws.send_message(frame)
            return
        assert self.http is not None
        await self.http.start_stream()
        for frame in frames:
            assert not isinstance(frame, bytes), "HTTPS carries text events only"
            await self.http.send_event(frame if isinstance(frame, str) else json.dumps(frame))
        if end:
            await self.http.finish()
