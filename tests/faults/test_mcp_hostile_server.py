"""A hostile MCP server (``tests/fixtures/mcp_hostile_server.py``) against the resource,
prompt, progress and log paths: floods of malformed progress and log notifications,
garbage listings, a cursor that never ends, contents of the wrong type, prompts over
any bound. The agent's turn ends normally; every answer the script gets is a result
or a failed call naming the server; the events are bounded in number and well formed
(the suite's payload audit checks each)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent._tools._mcp_notify import BURST, RATE
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm

HOSTILE = Path(__file__).parent.parent / "fixtures" / "mcp_hostile_server.py"
SOURCE = """\
const attempt = async (f) => {
  try { return JSON.stringify(await f()).slice(0, 200); } catch (e) { return 'failed: ' + e.message.split('\\n')[0]; }
};
text(await attempt(() => tools.mcp__bad__flood({})));
text(await attempt(() => tools.list_mcp_resources({})));
text(await attempt(() => tools.list_mcp_resources({server: 'bad'})));
text(await attempt(() => tools.list_mcp_resource_templates({server: 'bad'})));
text(await attempt(() => tools.read_mcp_resource({server: 'bad', uri: 'h://ok'})));
text(await attempt(() => tools.list_mcp_prompts({})));
text(await attempt(() => tools.get_mcp_prompt({server: 'bad', name: 'p'})));
text(await attempt(() => tools.mcp__bad__quiet({})));
"""


async def test_a_hostile_server_costs_bounded_events_and_failed_calls_only(
    server: FakeResponsesServer, workspace: Path
) -> None:
    tools = ta.Tools.default().with_mcp("bad", ta.McpServer.stdio(sys.executable, [str(HOSTILE)]))
    log = EventLog()
    texts: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(lambda e: e.kind is ta.EventKind.MCP_SERVER_READY)
        await conn.send_tool_call("resp-1", "call-1", "exec", SOURCE)
        request: Any = await conn.next_request()
        texts.extend(p["text"] for p in request["input"][0]["output"][1:] if p["type"] == "input_text")
        await conn.send_final("resp-2", "survived")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        result = await (await agent.prompt("poke it")).result()
    assert result.final_message == "survived"
    assert texts[0] == '{"content":[{"type":"text","text":"flooded"}],"isError":false}'
    assert texts[1].startswith('{"resources":[],"failed_servers":{"bad":"MCP server bad could not list resources: '
                               'ValidationError: 4 validation errors for ListResourcesResult')
    assert texts[2:5] == [
        "failed: MCP server bad could not list resources: ValidationError: 4 validation errors for "
        "ListResourcesResult",
        "failed: MCP server bad could not list resourceTemplates: ValidationError: 1 validation error for "
        "ListResourceTemplatesResult",
        "failed: MCP server bad could not read: ValidationError: 1 validation error for ReadResourceResult"]
    assert json.loads(texts[5]) == {"prompts": [], "failed_servers": {
        "bad": "MCP server bad could not list prompts: MCPError: no prompts/list here"}}
    assert texts[6].startswith('{"server":"bad","name":"p","messages":[{"role":"user","content":{"type":"text"')
    assert texts[7] == '{"content":[{"type":"text","text":"quiet"}],"isError":false}'  # still up
    flood = log.of(ta.EventKind.MCP_PROGRESS)
    elapsed = log.of(ta.EventKind.TOOL_RESULT)[0].time - log.of(ta.EventKind.TOOL_CALL)[1].time
    assert 0 < len(flood) <= BURST + RATE * elapsed + 1
    logs = log.of(ta.EventKind.MCP_LOG)
    assert 0 < len(logs) <= BURST + RATE * (log.events[-1].time - log.events[0].time) + 1
    assert log.payloads("mcp.server.failed") == []
