"""MCP resources, resource templates, prompts, progress and logging, against the SDK
test server (``tests/fixtures/mcp_server.py --extras``) over stdio and Streamable
HTTP: what a script reads with ``tools.list_mcp_resources`` and the like, and the
``mcp.progress`` / ``mcp.log`` events a tool call's notifications become."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm
from ._mcp_http import SERVER, serve_http

SOURCE = """\
const attempt = async (f) => { try { return await f(); } catch (e) { return {error: e.message}; } };
text(JSON.stringify(await tools.list_mcp_resources({})));
text(JSON.stringify(await tools.list_mcp_resources({server: 'notes'})));
text(JSON.stringify(await tools.list_mcp_resource_templates({})));
text(JSON.stringify(await tools.read_mcp_resource({server: 'notes', uri: 'note://readme'})));
text(JSON.stringify(await tools.read_mcp_resource({server: 'notes', uri: 'note://rust/summary'})));
const big = await tools.read_mcp_resource({server: 'notes', uri: 'note://big'});
text(JSON.stringify([big.contents[0].text.length, big.contents[0].truncated]));
text(JSON.stringify(await tools.list_mcp_prompts({server: 'notes'})));
text(JSON.stringify(await tools.get_mcp_prompt({server: 'notes', name: 'review', arguments: {code: 'x = 1'}})));
text(JSON.stringify(await attempt(() => tools.read_mcp_resource({server: 'notes', uri: 'note://nothing'}))));
text(JSON.stringify(await attempt(() => tools.read_mcp_resource({server: 'nobody', uri: 'note://readme'}))));
text(JSON.stringify(await attempt(() => tools.list_mcp_resources({cursor: 'c'}))));
text(JSON.stringify(await attempt(() => tools.get_mcp_prompt({server: 'notes', name: 'review', extra: 1}))));
text((await tools.mcp__notes__progress({steps: 3})).content[0].text);
"""


@pytest.fixture
async def http_url(nursery: trio.Nursery) -> AsyncIterator[str]:
    async with serve_http("--extras", "--name", "notes") as (url, _):
        yield url


async def _run(server: FakeResponsesServer, workspace: Path, config: ta.McpServer) -> tuple[list[Any], EventLog]:
    tools = ta.Tools.default().with_mcp("notes", config)
    log = EventLog()
    texts: list[Any] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", SOURCE)
        request: Any = await conn.next_request()
        output = request["input"][0]["output"]
        texts.extend(p["text"] for p in output[1:] if p["type"] == "input_text")
        await conn.send_final("resp-final")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("read")).result()
    return texts, log


def _check(texts: list[Any], log: EventLog) -> None:
    assert len(texts) == 13, texts
    every, one, templates, readme, summary, big, prompts, prompt = (json.loads(t) for t in texts[:8])
    names = {r["name"]: r for r in every["resources"]}
    assert set(names) == {"readme", "big"} and names["readme"] == {
        "server": "notes", "uri": "note://readme", "name": "readme", "description": "What this server is.",
        "mimeType": "text/plain"}
    assert one["server"] == "notes" and one["resources"] == every["resources"]
    assert [(t["server"], t["uriTemplate"]) for t in templates["resourceTemplates"]] == [
        ("notes", "note://{topic}/summary")]
    assert readme["server"] == "notes" and readme["uri"] == "note://readme"
    assert [c["text"] for c in readme["contents"]] == ["a test server"]
    assert [c["text"] for c in summary["contents"]] == ["all about rust"]
    assert big == [1 << 20, True]  # cut at the read bound, and marked
    assert [(p["server"], p["name"]) for p in prompts["prompts"]] == [("notes", "review")]
    assert {a["name"]: a.get("required") for a in prompts["prompts"][0]["arguments"]} == {
        "code": True, "language": False}
    assert prompt["server"] == "notes" and prompt["name"] == "review"
    assert prompt["messages"] == [{"role": "user", "content": {"type": "text",
                                                               "text": "Review this python code:\nx = 1"}}]
    errors = [json.loads(t)["error"] for t in texts[8:12]]
    assert errors[0].startswith("MCP server notes could not read: ")
    assert errors[1] == "unknown MCP server 'nobody' (the servers are: notes)"
    assert errors[2] == "list_mcp_resources: a cursor needs its server (pass server too)"
    assert errors[3] == "get_mcp_prompt: unexpected field 'extra' (the fields are: server, name, arguments)"
    assert texts[12] == "done"
    call_id = next(p["call_id"] for p in log.payloads("tool.call") if p["tool"] == "mcp__notes__progress")
    assert log.payloads("mcp.progress") == [
        {"call_id": call_id, "server": "notes", "tool": "progress", "progress": float(step), "total": 3.0,
         "message": f"step {step}"} for step in (1, 2, 3)]
    progress_turns = {e.turn_id for e in log.of("mcp.progress")}
    assert progress_turns == {log.of("tool.call")[0].turn_id}
    logs = log.payloads("mcp.log")
    assert [(p["server"], p["level"], p["data"]) for p in logs] == [
        ("notes", "info", f"did step {step}") for step in (1, 2, 3)]


async def test_resources_prompts_progress_and_logs_over_stdio(
    server: FakeResponsesServer, workspace: Path
) -> None:
    texts, log = await _run(server, workspace, ta.McpServer.stdio(sys.executable, [str(SERVER), "--extras"]))
    _check(texts, log)


async def test_resources_prompts_progress_and_logs_over_http(
    server: FakeResponsesServer, workspace: Path, http_url: str
) -> None:
    texts, log = await _run(server, workspace, ta.McpServer.http(http_url))
    _check(texts, log)
