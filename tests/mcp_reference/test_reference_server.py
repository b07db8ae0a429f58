"""The agent's MCP client against the reference server, ``@modelcontextprotocol/server-everything``
(pinned, ``bash .ci/mcp``), over stdio (a subprocess of the agent) and Streamable HTTP (a
subprocess of the test on 127.0.0.1): a tool listed and called, a resource listed and read, a
resource template filled in, a prompt listed and fetched, a long-running tool's progress and the
server's log messages as events -- and, over HTTP, a server that went away and came back (its
old session unknown to the new process) reconnected."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._tools import _mcp_session
from trio_agent.testing import FakeConnection, FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm
from ._reference import ENTRY, node

SOURCE = """\
const attempt = async (f) => { try { return await f(); } catch (e) { return {error: e.message}; } };
text(JSON.stringify(ALL_TOOLS.map(t => t.name).filter(n => n.startsWith('mcp__ref__get_s'))));
text((await tools.mcp__ref__echo({message: 'hello'})).content[0].text);
text((await tools.mcp__ref__get_sum({a: 2, b: 3})).content[0].text);
const listed = await tools.list_mcp_resources({server: 'ref'});
text(JSON.stringify(listed.resources.slice(0, 1)));
const first = await tools.read_mcp_resource({server: 'ref', uri: listed.resources[0].uri});
text(JSON.stringify([first.server, first.uri === listed.resources[0].uri, first.contents.length]));
const templates = await tools.list_mcp_resource_templates({});
text(JSON.stringify(templates.resourceTemplates.map(t => t.uriTemplate).sort()));
const dynamic = await tools.read_mcp_resource({server: 'ref', uri: 'demo://resource/dynamic/text/7'});
text(dynamic.contents[0].text);
const prompts = await tools.list_mcp_prompts({server: 'ref'});
text(JSON.stringify(prompts.prompts.map(p => p.name).sort()));
text(JSON.stringify(await tools.get_mcp_prompt({server: 'ref', name: 'args-prompt', arguments: {city: 'Paris'}})));
text(JSON.stringify(await attempt(() => tools.read_mcp_resource({server: 'ref', uri: 'demo://nothing/here'}))));
text((await tools.mcp__ref__toggle_simulated_logging({})).content[0].text);
text((await tools.mcp__ref__trigger_long_running_operation({duration: 0.3, steps: 3})).content[0].text);
"""


def _tools(server: ta.McpServer) -> ta.Tools:
    return ta.Tools.default().with_mcp("ref", server).with_tool_search(defer_above=64)


def stdio_server() -> ta.McpServer:
    command = node()
    assert command is not None
    return ta.McpServer.stdio(command, [str(ENTRY), "stdio"], startup_timeout=60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(port: int) -> AsyncIterator[trio.Process]:
    """The reference server over Streamable HTTP on 127.0.0.1:``port`` (``/mcp``)."""
    command = node()
    assert command is not None
    process = await trio.lowlevel.open_process(
        [command, str(ENTRY), "streamableHttp"], env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    said = b""
    try:
        with trio.fail_after(60):
            while b"listening on port" not in said:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, said
                said += chunk
        yield process
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def _exec(conn: FakeConnection, response_id: str, source: str) -> list[str]:
    await conn.send_tool_call(response_id, f"call-{response_id}", "exec", source)
    request: Any = await conn.next_request()
    return [p["text"] for p in request["input"][0]["output"][1:] if p["type"] == "input_text"]


def _is(kind: ta.EventKind) -> Callable[[ta.AgentEvent], bool]:
    return lambda e: e.kind is kind


async def _session(server: FakeResponsesServer, workspace: Path, config: ta.McpServer) -> tuple[list[str], EventLog]:
    log = EventLog()
    texts: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(lambda e: e.kind in (ta.EventKind.MCP_SERVER_READY, ta.EventKind.MCP_SERVER_FAILED))
        texts.extend(await _exec(conn, "resp-1", SOURCE))
        await log.wait_for(_is(ta.EventKind.MCP_LOG))  # the first simulated message is sent at once
        await conn.send_final("resp-2")

    async with (scripted(script, 120) as nursery,
                ta.open_agent(make_config(server, workspace, tools=_tools(config))) as agent):
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("use the reference server")).result()
    return texts, log


def _check(texts: list[str], log: EventLog) -> None:
    assert log.payloads("mcp.server.failed") == [], log.payloads("mcp.server.failed")
    assert len(texts) == 12, texts
    assert texts[0] == '["mcp__ref__get_structured_content","mcp__ref__get_sum"]', texts[0]
    assert texts[1] == "Echo: hello"
    assert texts[2] == "The sum of 2 and 3 is 5."
    [resource] = json.loads(texts[3])
    assert resource["server"] == "ref" and resource["uri"].startswith("demo://resource/static/document/")
    assert json.loads(texts[4]) == ["ref", True, 1]
    assert json.loads(texts[5]) == ["demo://resource/dynamic/blob/{resourceId}",
                                    "demo://resource/dynamic/text/{resourceId}"]
    assert "7" in texts[6]  # its text names the resource id it was made from
    assert {"simple-prompt", "args-prompt"} <= set(json.loads(texts[7]))
    prompt = json.loads(texts[8])
    assert prompt["server"] == "ref" and prompt["name"] == "args-prompt"
    assert prompt["messages"] == [{"role": "user", "content": {"type": "text", "text": "What's weather in Paris?"}}]
    assert json.loads(texts[9])["error"].startswith("MCP server ref could not read: ")
    assert texts[10].startswith("Started simulated")
    assert texts[11] == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
    progress = log.payloads("mcp.progress")
    assert [(p["server"], p["tool"], p["progress"], p.get("total")) for p in progress] == [
        ("ref", "trigger-long-running-operation", float(step), 3.0) for step in (1, 2, 3)]
    call = next(p for p in log.payloads("tool.call") if p.get("mcp_tool") == "trigger-long-running-operation")
    assert {p["call_id"] for p in progress} == {call["call_id"]}
    logged = log.payloads("mcp.log")
    # "Info-level message", "Alert level-message": a random level, named in the text
    assert logged and all(p["server"] == "ref" and str(p["level"]) in str(p["data"]).lower() for p in logged), logged


async def test_the_reference_server_over_stdio(server: FakeResponsesServer, workspace: Path) -> None:
    texts, log = await _session(server, workspace, stdio_server())
    _check(texts, log)


async def test_the_reference_server_over_http(server: FakeResponsesServer, workspace: Path) -> None:
    port = _free_port()
    async with http_server(port):
        texts, log = await _session(server, workspace, ta.McpServer.http(f"http://127.0.0.1:{port}/mcp",
                                                                         startup_timeout=60))
    _check(texts, log)


async def test_a_dropped_http_session_is_reconnected(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mcp_session, "BACKOFF", 0.1)
    port = _free_port()
    config = ta.McpServer.http(f"http://127.0.0.1:{port}/mcp", startup_timeout=60)
    log = EventLog()
    echo = "text((await tools.mcp__ref__echo({message: 'again'})).content[0].text);"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY))
        assert await _exec(conn, "resp-1", echo) == ["Echo: again"]
        await stop.wait()  # the test restarts the server: a new process, which knows no session
        texts = await _exec(conn, "resp-2", "try { await tools.mcp__ref__echo({message: 'x'}); } "
                                            "catch (e) { text(e.message); }\n" + echo)
        # server-everything answers an unknown session with a bare 400 (not the spec's 404); a ping fails too
        assert texts[0] == ("MCP tool ref/echo failed: MCPError: Server returned an error response "
                            "(the server answered HTTP 400 Bad Request)"), texts
        assert texts[1] == "Echo: again"  # the call after waited for the new session
        await conn.send_final("resp-3")

    stop = trio.Event()
    async with http_server(port) as first:
        async with (scripted(script, 120) as nursery,
                    ta.open_agent(make_config(server, workspace, tools=_tools(config))) as agent):
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("reconnect")
            await log.wait_for(lambda e: e.kind is ta.EventKind.TOOL_RESULT and e.payload["call_id"] == "call-resp-1")
            first.kill()
            await first.wait()
            async with http_server(port):
                stop.set()
                await turn.result()
    restarts = log.payloads("mcp.server.restarting")
    assert [(p["server"], p["attempt"], p["reason"]) for p in restarts] == [
        ("ref", 1, "MCPError: Server returned an error response (the server answered HTTP 400 Bad Request)")]
    assert len(log.payloads("mcp.server.ready")) == 2
