"""An MCP server whose connection is lost is restarted (reconnected), with backoff,
bounded: a stdio server that crashes mid-call or while idle, one that keeps crashing
(given up after ``MAX_RESTARTS``), and a Streamable HTTP server that goes away and
comes back on its port (a new process: the old session is gone)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._tools import _mcp_session
from trio_agent.testing import FakeConnection, FakeResponsesServer

from .._os_facts import pid_alive, processes_in
from ..conftest import EventLog, make_config, scripted, warm
from ._mcp_http import SERVER, serve_http

ATTEMPT = ("const attempt = async (f) => { try { return JSON.stringify(await f()); } "
           "catch (e) { return e.message; } };\n")


def _is(kind: ta.EventKind, server: str = "calc") -> Any:
    return lambda e: e.kind is kind and e.payload["server"] == server


async def _exec(conn: FakeConnection, response_id: str, source: str) -> list[str]:
    await conn.send_tool_call(response_id, f"call-{response_id}", "exec", ATTEMPT + source)
    request: Any = await conn.next_request()
    return [p["text"] for p in request["input"][0]["output"][1:] if p["type"] == "input_text"]


def _ready_count(log: EventLog, count: int) -> Callable[[ta.AgentEvent], bool]:
    return lambda _: len(log.of(ta.EventKind.MCP_SERVER_READY)) == count


def _calc(pid_file: Path) -> ta.Tools:
    """The SDK test server over stdio as ``calc``, writing its pid to ``pid_file``."""
    return ta.Tools.default().with_mcp("calc", ta.McpServer.stdio(sys.executable, [str(SERVER), "--pid-file",
                                                                                   str(pid_file)]))


def _pid(path: Path) -> int:
    return int(path.read_text())


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mcp_session, "BACKOFF", 0.05)


async def test_a_stdio_server_that_crashes_is_restarted_and_the_next_call_runs_on_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    tools = _calc(pid_file)
    log = EventLog()
    pids: list[int] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY))
        pids.append(_pid(pid_file))
        texts = await _exec(conn, "resp-1", "text(await attempt(() => tools.mcp__calc__crash({})));\n"
                                            "const r = await tools.mcp__calc__pid({});\n"
                                            "text(String(r.structuredContent.result));")
        assert texts[0].startswith("MCP tool calc/crash failed: MCPError: Connection closed"), texts
        assert "about to crash" in texts[0]
        pids.append(int(texts[1]))  # the call after the crash waited for the restart, and ran
        # Killed while idle: noticed from the connection alone, and restarted again.
        os.kill(pids[-1], signal.SIGKILL)
        await log.wait_for(_ready_count(log, 3))
        texts = await _exec(conn, "resp-2", "text(String((await tools.mcp__calc__add({a: 1, b: 2}))"
                                            ".structuredContent.result));")
        assert texts == ["3"]
        pids.append(_pid(pid_file))
        await conn.send_final("resp-3")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("crash it")).result()
    assert len(set(pids)) == 3 and not any(pid_alive(pid) for pid in pids)
    assert processes_in(workspace) == []
    restarts = log.payloads("mcp.server.restarting")
    assert [(p["server"], p["attempt"], p["max_attempts"]) for p in restarts] == [("calc", 1, 5), ("calc", 2, 5)]
    assert [p["delay_ns"] for p in restarts] == [50_000_000, 100_000_000]  # doubling
    # Its stdout ended: seen before the SDK fails the call in flight with "Connection closed".
    assert [p["reason"] for p in restarts] == ["the server closed the connection (did it exit?)"] * 2
    assert all(e.turn_id is None for e in log.of("mcp.server.restarting"))
    ready = log.payloads("mcp.server.ready")
    assert len(ready) == 3 and ready[0] == ready[1] == ready[2]  # the same tools each time, no warnings
    assert log.payloads("api.warning") == [] and log.payloads("mcp.server.failed") == []


async def test_a_server_that_keeps_crashing_is_given_up_after_the_bound(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    tools = _calc(pid_file)
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        for count in range(1, _mcp_session.MAX_RESTARTS + 2):
            await log.wait_for(_ready_count(log, count))
            os.kill(_pid(pid_file), signal.SIGKILL)
        failed = await log.wait_for(_is(ta.EventKind.MCP_SERVER_FAILED))
        assert str(failed.payload["error"]).startswith(
            "MCP server calc lost its connection 5 times within 600 s and is not restarted again; the last time: "
            "the server closed the connection (did it exit?)")
        texts = await _exec(conn, "resp-1", "text(await attempt(() => tools.mcp__calc__add({a: 1, b: 2})));")
        assert texts == [f"MCP tool mcp__calc__add cannot be called: {failed.payload['error']}"]
        await conn.send_final("resp-2")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("crash it")).result()
    assert [p["attempt"] for p in log.payloads("mcp.server.restarting")] == [1, 2, 3, 4, 5]
    assert processes_in(workspace) == []


async def test_an_http_server_that_went_away_is_reconnected_when_it_is_back(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mcp_session, "BACKOFF", 0.5)  # later attempts (1 s, 2 s, ...) leave time to come back
    log = EventLog()
    async with serve_http("--name", "web") as (url, process):
        port = url.split(":")[2].split("/")[0]
        tools = ta.Tools.default().with_mcp("web", ta.McpServer.http(url))

        async def script() -> None:
            conn = await warm(server)
            await conn.next_request()
            await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "web"))
            pid = "text(String((await tools.mcp__web__pid({})).structuredContent.result));"
            assert await _exec(conn, "resp-1", pid) == [str(process.pid)]
            process.kill()
            await process.wait()
            gone = await _exec(conn, "resp-2", "text(await attempt(() => tools.mcp__web__pid({})));")
            assert gone == ["MCP tool web/pid failed: MCPError: Connection closed"]
            # Bring it back only after one attempt failed while it was away (the second restarting
            # event says so): a server back within the first backoff would race the assertion below.
            await log.wait_for(lambda e: _is(ta.EventKind.MCP_SERVER_RESTARTING, "web")(e)
                               and e.payload["attempt"] == 2)
            async with serve_http("--name", "web", "--port", port) as (_, again):
                assert await _exec(conn, "resp-3", pid) == [str(again.pid)]
            await conn.send_final("resp-4")

        async with (scripted(script, 60) as nursery,
                    ta.open_agent(make_config(server, workspace, tools=tools)) as agent):
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("reconnect")).result()
    restarts = log.payloads("mcp.server.restarting")
    assert [(p["server"], p["attempt"]) for p in restarts[:2]] == [("web", 1), ("web", 2)]
    assert restarts[0]["reason"] == "MCPError: Connection closed"
    assert str(restarts[1]["reason"]).startswith("MCP server web failed: ")  # why the attempt did not connect
    assert len(log.payloads("mcp.server.ready")) == 2


async def test_closing_the_agent_during_a_restarts_backoff_ends_it_at_once(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mcp_session, "BACKOFF", 3600.0)  # only a close can end this wait
    monkeypatch.setattr(_mcp_session, "MAX_BACKOFF", 3600.0)
    pid_file = tmp_path / "server.pid"
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY))
        os.kill(_pid(pid_file), signal.SIGKILL)
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_RESTARTING))
        texts = await _exec(conn, "resp-1", "text(ALL_TOOLS.filter(t => t.name.startsWith('mcp__')).length > 0);")
        assert texts == ["true"]  # its tools stay listed while it restarts
        await conn.send_final("resp-2")

    async with scripted(script, 60) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=_calc(pid_file))) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("crash it")).result()
            closing = trio.current_time()
        assert trio.current_time() - closing < 30  # the hour's backoff did not hold the close
    assert [p["delay_ns"] for p in log.payloads("mcp.server.restarting")] == [3600 * 10**9]
    assert log.payloads("mcp.server.failed") == [] and processes_in(workspace) == []
