"""The agent's MCP client against the reference MCP server, @modelcontextprotocol/
server-everything (pinned, node), over stdio and Streamable HTTP (issue 28 item 1): its
tools, named with ``-`` (``get-sum``), are called from the first turn's ``exec`` by
their JavaScript names (over stdio typically while node is still starting: the call
waits for it); a second instance of it is deferred by the configuration order, whichever
instance comes up first; ``tool_search`` shows names that call the tools they name."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm
from ._reference import ENTRY, everything_http

Transport = Literal["stdio", "http"]
TOOLS = 13  # what the pinned version lists


@contextlib.asynccontextmanager
async def everything(transport: Transport) -> AsyncIterator[ta.McpServer]:
    if transport == "stdio":
        node = shutil.which("node")
        assert node is not None
        yield ta.McpServer.stdio(node, [str(ENTRY), "stdio"])
        return
    async with everything_http() as url:
        yield ta.McpServer.http(url)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_first_turn_calls_the_reference_servers_tools_and_a_second_instance_is_deferred(
    server: FakeResponsesServer, workspace: Path, transport: Transport
) -> None:
    log = EventLog()
    texts: list[str] = []
    source = (
        '// @exec: {"yield_time_ms": 60000}\n'
        "text((await tools.mcp__everything__get_sum({a: 2, b: 3})).content[0].text);\n"
        "text((await tools['mcp__everything__echo']({message: 'hi'})).content[0].text);\n"
        "try { await tools.mcp__again__echo({message: 'hi'}); } catch (e) { text(e.message); }\n"
        "const found = (await tools.tool_search({query: 'sum two numbers', limit: 3})).tools;\n"
        "text(found.map(t => `${t.name} ${t.server}/${t.tool}`).join());\n"
        "text((await tools[found[0].name]({a: 40, b: 2})).content[0].text);"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()  # no server is waited for: the call below is the first to wait
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        request: Any = await conn.next_request()
        texts.extend(str(p["text"]) for p in request["input"][0]["output"][1:] if p["type"] == "input_text")
        await conn.send_tool_call("resp-2", "call-2", "exec",
                                  "text(ALL_TOOLS.filter(t => t.name.startsWith('mcp__')).map(t => t.name).join());")
        request = await conn.next_request()
        texts.extend(str(p["text"]) for p in request["input"][0]["output"][1:] if p["type"] == "input_text")
        await conn.send_final("resp-3")

    async with everything(transport) as first, everything(transport) as second:
        tools = ta.Tools.default().with_mcp("everything", first).with_mcp("again", second)  # 2 x 13 > 16
        async with scripted(script, 90) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("sum")).result()
    assert texts[:2] == ["The sum of 2 and 3 is 5.", "Echo: hi"]
    assert texts[2] == ("MCP tool mcp__again__echo is deferred: call tools.tool_search({query}) first, "
                        "then call it by name")
    found = texts[3].split(",")
    assert found[0] in ("mcp__everything__get-sum everything/get-sum", "mcp__again__get-sum again/get-sum")
    assert texts[4] == "The sum of 40 and 2 is 42."
    listed = texts[5].split(",")
    ready = {str(e.payload["server"]): e.payload["tools"] for e in log.of(ta.EventKind.MCP_SERVER_READY)}
    assert isinstance(ready["everything"], list) and len(ready["everything"]) == TOOLS
    # The first configured, whole (ALL_TOOLS shows JavaScript names); of the second, what was found.
    assert listed[:TOOLS] == [str(name).replace("-", "_") for name in ready["everything"]]
    assert all(name.startswith("mcp__again__") for name in listed[TOOLS:])
    assert not [p for p in log.payloads("api.warning") if str(p["code"]).startswith("mcp_")]
