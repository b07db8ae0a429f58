"""The same scenarios over the WebSocket and the HTTPS/SSE transport (DESIGN "Tests")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from ..conftest import EventLog, scripted


class Peer:
    """One scripted model, whichever transport the agent uses."""

    def __init__(self, server: FakeResponsesServer, transport: ta.Transport) -> None:
        self.server = server
        self.transport = transport
        self._conn: FakeConnection | None = None
        self._pending: Any = None

    def config(self, workspace: Path, **kw: Any) -> ta.AgentConfig:
        if self.transport is ta.Transport.WEBSOCKET:
            responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=self.server.url)
        else:
            responses = ta.Responses(profile=ta.Profile.OPENAI,
                                     transport=ta.Transport.HTTPS, api_base_url=self.server.http_base_url)
        return ta.AgentConfig(auth="k", workspace=workspace, responses=responses, session_id="conformance", **kw)

    async def next_request(self) -> dict[str, Any]:
        if self.transport is ta.Transport.HTTPS:
            self._pending = await self.server.accept_http()
            return self._pending.body
        if self._conn is None:
            self._conn = await self.server.accept()
            await self._conn.next_request()
            await self._conn.send_warmup("resp-warmup")
        return await self._conn.next_request()

    async def reply(self, events: Sequence[dict[str, Any]]) -> None:
        if self.transport is ta.Transport.HTTPS:
            await self._pending.send_sse(list(events))
        else:
            assert self._conn is not None
            await self._conn.send_all(list(events))

    async def fail_retryably(self) -> None:
        if self.transport is ta.Transport.HTTPS:
            await self._pending.respond(503, '{"error":{"message":"overloaded"}}')
        else:
            assert self._conn is not None
            await self._conn.send_error("overloaded", code="server_is_overloaded")
            self._conn = await self.server.accept()


TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]


@pytest.fixture(params=TRANSPORTS, ids=["websocket", "https"])
def peer(request: pytest.FixtureRequest, server: FakeResponsesServer) -> Peer:
    return Peer(server, request.param)


async def _run(peer: Peer, workspace: Path, script: Any, prompts: Sequence[str]) -> tuple[list[str], EventLog]:
    log = EventLog()
    answers = []
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(peer.config(workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            for prompt in prompts:
                answers.append((await (await agent.prompt(prompt)).result()).final_message)
    return answers, log


async def test_tool_round_trip_and_follow_on(peer: Peer, workspace: Path) -> None:
    async def script() -> None:
        first = await peer.next_request()
        assert first["input"][-1]["content"][0]["text"] == "compute"
        await peer.reply([frames.completed("resp-1", [frames.custom_tool_call("call-1", "exec", "text(6 * 7)")])])
        second = await peer.next_request()
        output = next(i for i in second["input"] if i.get("type") == "custom_tool_call_output")
        # Exactly the script's text (a bare "42" could also match inside the item's id).
        assert output["output"][1:] == [{"type": "input_text", "text": "42"}]
        assert second.get("previous_response_id") == "resp-1"
        await peer.reply([frames.completed("resp-2", [frames.assistant_message("it is 42")])])
        third = await peer.next_request()
        assert third.get("previous_response_id") == "resp-2"
        assert [i["content"][0]["text"] for i in third["input"]] == ["thanks"]
        await peer.reply([frames.completed("resp-3", [frames.assistant_message("welcome")])])

    answers, log = await _run(peer, workspace, script, ["compute", "thanks"])
    assert answers == ["it is 42", "welcome"]
    assert [p["status"] for p in log.payloads("run.completed")] == ["completed", "completed"]
    assert log.payloads("run.completed")[0]["tool_calls"] == 1


async def test_retryable_failure_replays_in_full(peer: Peer, workspace: Path) -> None:
    async def script() -> None:
        await peer.next_request()
        await peer.fail_retryably()
        retry = await peer.next_request()
        assert "previous_response_id" not in retry
        assert retry["input"][0]["type"] == "additional_tools"
        await peer.reply([frames.completed("resp-1", [frames.assistant_message("recovered")])])

    answers, log = await _run(peer, workspace, script, ["try"])
    assert answers == ["recovered"]
    (retrying,) = log.payloads("model.attempt.retrying")
    assert retrying["replay_mode"] == "full_history"
    assert retrying["delay_ns"] == 192_000_000  # backoff_delay(1, call_index=1), whatever the clock
    assert log.payloads("run.completed")[0]["response_retries"] == 1
