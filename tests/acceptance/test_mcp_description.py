"""``exec``'s description lists the MCP tools active now (``_runtime/_live_prefix``), on
the wire: with a real SDK MCP server over stdio and the fake Responses server. The
agent's own prefix (built before the servers start) lists none; once the server is
up, a request that carries the tools lists them -- every full request of
``Profile.OPENAI`` and every request of ``Profile.GENERIC`` -- while a chained OpenAI
request (new items only) carries no tools at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer
from trio_agent.testing import _frames as frames

from ..conftest import EventLog, make_config, scripted, warm
from .test_mcp import BASIC_TOOLS, stdio

LISTED = "### Active MCP tools"


def _exec_description(tools: list[dict[str, Any]]) -> str:
    [exec_tool] = [tool for tool in tools if tool["name"] == "exec"]
    return str(exec_tool["description"])


def _ready(event: ta.AgentEvent) -> bool:
    return event.kind is ta.EventKind.MCP_SERVER_READY


async def _run_openai(server: FakeResponsesServer, workspace: Path, history: ta.History) -> list[dict[str, Any]]:
    """One turn: an exec call once the server is up, then the final answer; the requests."""
    tools = ta.Tools.default().with_mcp("calc", stdio(description="Arithmetic."))
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, history=history)
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_ready)
        await conn.send_tool_call("resp-1", "call-1", "exec", "text(1)")
        await conn.next_request()
        await conn.send_final("resp-final")

    async with scripted(script, 30) as nursery, \
            ta.open_agent(make_config(server, workspace, tools=tools, responses=responses)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("add")).result()
    return list(server.connections[0].requests)


async def test_a_full_request_lists_the_active_mcp_tools_in_exec(server: FakeResponsesServer, workspace: Path) -> None:
    requests = await _run_openai(server, workspace, ta.History.FULL_REPLAY)
    warmup, first, after = requests[0], requests[1], requests[2]
    assert LISTED not in _exec_description(warmup["input"][0]["tools"])  # the agent's own prefix
    assert LISTED not in _exec_description(first["input"][0]["tools"])  # the server was still starting
    listed = _exec_description(after["input"][0]["tools"])
    assert after["input"][0]["type"] == "additional_tools"
    assert "- `calc`: Arithmetic." in listed
    section = listed[listed.index(LISTED):]
    for name in BASIC_TOOLS:
        assert f"- `tools.mcp__calc__{name}`" in section
    assert "- `tools.mcp__calc__add`: Add two integers and return their sum." in section


async def test_a_chained_request_carries_no_tools_so_the_description_waits(
    server: FakeResponsesServer, workspace: Path
) -> None:
    requests = await _run_openai(server, workspace, ta.History.INCREMENTAL)
    after = requests[2]
    assert after.get("previous_response_id") == "resp-1"
    assert all(item.get("type") != "additional_tools" for item in after["input"])


async def test_the_generic_profile_sends_the_updated_description_with_the_next_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    tools = ta.Tools.default().with_mcp("calc", stdio(description="Arithmetic."))
    config = ta.AgentConfig(auth="sk-test", workspace=workspace, thinking=ta.Thinking.LOW, tools=tools,
                            responses=ta.Responses(api_base_url=server.http_base_url, transport=ta.Transport.HTTPS))
    log = EventLog()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        request = await server.accept_http()
        bodies.append(request.body)
        await log.wait_for(_ready)
        call = frames.function_call("call-1", "exec", json.dumps({"code": "text(1)"}))
        await request.send_sse([frames.completed("resp-1", [call])])
        request = await server.accept_http()
        bodies.append(request.body)
        await request.send_sse([frames.completed("resp-2", [frames.assistant_message("done")])])

    async with scripted(script, 30) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "done"
    assert LISTED not in _exec_description(bodies[0]["tools"])
    assert "- `tools.mcp__calc__add`" in _exec_description(bodies[1]["tools"])
