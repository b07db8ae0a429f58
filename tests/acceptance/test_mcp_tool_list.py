"""A hostile MCP server's malformed ``tools/list`` entries are skipped one by one
(issue 21, item 8), against ``tests/fixtures/mcp_raw_server.py`` over stdio: a server
that writes its JSON-RPC by hand and lists, across two pages, good tools beside an
``inputSchema`` that is a string, an entry without a name, a number, a name that is a
number, an empty name, a second tool of one name, an object schema with nonsense inside
and two names that map to one ``mcp__`` name. Before the fix the SDK refused the whole
page, and the server failed with none of its tools. Issue 28: the two names that
collide are both kept, under distinct names (one with a hashed suffix, reported), a
duplicate name is skipped with a warning (before, silently), and the nonsense schema
costs nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm

RAW = Path(__file__).parent.parent / "fixtures" / "mcp_raw_server.py"


async def test_a_malformed_tool_entry_is_skipped_alone_and_the_good_tools_are_callable(
    server: FakeResponsesServer, workspace: Path
) -> None:
    tools = ta.Tools.default().with_mcp("raw", ta.McpServer.stdio(sys.executable, [str(RAW)]))
    source = ("text((await tools.mcp__raw__echo({text: 'hi'})).content[0].text);\n"
              "text((await tools.mcp__raw__shout({text: 'hi'})).content[0].text);\n"
              "text((await tools.mcp__raw__a_b({text: 'plain'})).content[0].text);\n"
              "text((await tools.mcp__raw__a_b_2e7336dc({text: 'renamed'})).content[0].text);\n"
              "text((await tools.mcp__raw__odd_schema({n: 1})).content[0].text);\n"
              "text((await tools.tool_search({query: 'odd_schema'})).tools[0].declaration);")
    log = EventLog()
    outputs: list[Any] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        ready = await log.wait_for(lambda e: e.kind in (ta.EventKind.MCP_SERVER_READY, ta.EventKind.MCP_SERVER_FAILED))
        assert ready.payload == {"server": "raw", "tools": [
            "mcp__raw__echo", "mcp__raw__a_b_2e7336dc", "mcp__raw__shout", "mcp__raw__a_b", "mcp__raw__odd_schema"]}
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        outputs.append((await conn.next_request())["input"][0]["output"])
        await conn.send_final("resp-2")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("use the raw server")).result()
    texts = [part["text"] for part in outputs[0][1:] if part["type"] == "input_text"]
    assert texts[:5] == ["hi", "HI", "a_b: plain", "a.b: renamed", "odd_schema: "]  # each name, its own tool
    assert texts[5].startswith("declare const tools: { mcp__raw__odd_schema(")
    warned = [e for e in log.events if e.kind is ta.EventKind.API_WARNING]
    assert [e.payload["code"] for e in warned] == ["mcp_tool_skipped"] * 6 + ["mcp_tool_renamed"]
    assert all(e.payload["server"] == "raw" and e.turn_id is None for e in warned)
    assert warned[-1].payload["name"] == "mcp__raw__a_b_2e7336dc"
    prefix = "MCP server raw: "
    suffix = "; its other tools are available"
    assert [e.payload["message"] for e in warned] == [prefix + m + suffix for m in [
        "its tools/list entry 1 'bad_schema' was skipped: inputSchema: Input should be a valid dictionary or "
        "instance of InputSchema",
        "its tools/list entry 2 was skipped: name: Field required",
        "its tools/list entry 3 was skipped: Input should be a valid dictionary or instance of Tool",
        "its tools/list entry 5 was skipped: name: Input should be a valid string",
        "its tool '' was skipped: its name is empty",
        "its tool 'echo' was skipped: a tool of that name came before it",
    ]] + ["MCP server raw: its tool 'a.b' is called mcp__raw__a_b_2e7336dc, not mcp__raw__a_b: its name maps to "
          "mcp__raw__a_b, which tool 'a_b' has"]
    assert not [e for e in log.events if e.kind is ta.EventKind.MCP_SERVER_FAILED]
