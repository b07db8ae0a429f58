"""Many agents in one Trio run: independent sockets, no cross-talk, nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer

from ..conftest import EventLog

AGENTS = 30


async def _serve(conn: FakeConnection) -> None:
    warmup = await conn.next_request()
    session = warmup["client_metadata"]["session_id"]
    await conn.send_warmup(f"warm-{session}")
    first = await conn.next_request()
    assert first["previous_response_id"] == f"warm-{session}"
    await conn.send_tool_call(f"tool-{session}", f"call-{session}", "echo", {"session": session})
    second = await conn.next_request()
    assert second["previous_response_id"] == f"tool-{session}"
    output = second["input"][0]["output"]
    assert json.loads(output) == {"echo": session}, "a tool result crossed over between agents"
    await conn.send_final(f"final-{session}", f"done {session}")


async def test_thirty_concurrent_agents_keep_to_themselves(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def echo(ctx: ta.ToolContext, args: dict) -> dict:
        await trio.lowlevel.checkpoint()
        return {"echo": args["session"]}

    answers: dict[str, str] = {}
    logs: dict[str, EventLog] = {}

    async def one(index: int) -> None:
        workspace = tmp_path / f"agent-{index}"
        workspace.mkdir()
        config = ta.AgentConfig(
            auth="k", workspace=workspace, session_id=f"agent-{index}",
            responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url),
            tools=ta.Tools.default().function("echo", "Echo.", {"type": "object"}, echo),
        )
        log = logs[config.session_id] = EventLog()
        async with trio.open_nursery() as inner, ta.open_agent(config) as agent:
            inner.start_soon(log.consume, agent.events)
            answers[config.session_id] = (await (await agent.prompt("go")).result()).final_message

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            async def accept_all() -> None:
                for _ in range(AGENTS):
                    nursery.start_soon(_serve, await server.accept())

            nursery.start_soon(accept_all)
            async with trio.open_nursery() as agents:
                for index in range(AGENTS):
                    agents.start_soon(one, index)
    assert answers == {f"agent-{i}": f"done agent-{i}" for i in range(AGENTS)}
    for session, log in logs.items():
        assert all(event.session_id == session for event in log.events)
        assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))
        assert [k for k in log.kinds() if k in ("run.completed", "run.failed")] == ["run.completed"]
    assert len(server.handshakes) == AGENTS

