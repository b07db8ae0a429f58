"""MCP that is ready when called, deterministic and collision-safe (issue 28 item 1),
against the SDK server of ``tests/fixtures/mcp_server.py`` over stdio (a subprocess of
the agent) and Streamable HTTP (a subprocess of the test, on 127.0.0.1). A server is
held "starting" by ``--gate FIFO`` until the test opens the FIFO: over stdio it has
not answered ``initialize``, over HTTP its port accepts connections into the listen
backlog but nothing answers. Every assertion is on what the model is sent, on events
or on the OS."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"
Transport = Literal["stdio", "http"]


@contextlib.asynccontextmanager
async def mcp_server(transport: Transport, *args: str, **kw: Any) -> AsyncIterator[ta.McpServer]:
    """The SDK server with ``args``: run by the agent (stdio) or by the test (HTTP)."""
    if transport == "stdio":
        yield ta.McpServer.stdio(sys.executable, [str(SERVER), *args], **kw)
        return
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "--http", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    try:
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some(64)
        yield ta.McpServer.http(f"http://127.0.0.1:{int(line)}/mcp", **kw)
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def release(gate: Path) -> None:
    """Let a gated server go on (blocks until it has opened the FIFO)."""

    def open_and_close() -> None:
        with open(gate, "w") as writer:
            writer.write("go")

    await trio.to_thread.run_sync(open_and_close)


async def output_texts(conn: FakeConnection) -> list[str]:
    """The texts of the exec output the next request carries."""
    request: Any = await conn.next_request()
    output = request["input"][0]["output"]
    assert isinstance(output, list), output
    return [str(part["text"]) for part in output[1:] if part["type"] == "input_text"]


async def exec_texts(conn: FakeConnection, response_id: str, call_id: str, source: str) -> list[str]:
    await conn.send_tool_call(response_id, call_id, "exec", '// @exec: {"yield_time_ms": 60000}\n' + source)
    return await output_texts(conn)


def _mcp_call_started(name: str) -> Any:
    return lambda e: e.kind is ta.EventKind.TOOL_CALL and e.payload["tool"] == name


def _ready(server: str) -> Any:
    return lambda e: e.kind is ta.EventKind.MCP_SERVER_READY and e.payload["server"] == server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_to_a_starting_server_waits_for_it_and_runs(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: Transport
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    log = EventLog()
    texts: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()  # the first request: it left while the server is held
        assert not log.of(ta.EventKind.MCP_SERVER_READY)
        await conn.send_tool_call("resp-1", "call-1", "exec", '// @exec: {"yield_time_ms": 60000}\n'
                                  "text((await tools.mcp__slow__add({a: 20, b: 22})).structuredContent.result);")
        await log.wait_for(_mcp_call_started("mcp__slow__add"))  # the call is in, the server still held
        assert not log.of(ta.EventKind.MCP_SERVER_READY)
        await release(gate)
        texts.extend(await output_texts(conn))
        await conn.send_final("resp-2")

    async with mcp_server(transport, "--gate", str(gate)) as config:
        tools = ta.Tools.default().with_mcp("slow", config)
        async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("add")).result()
    # Before: "unknown MCP tool mcp__slow__add (servers still starting: slow)".
    assert texts == ["42"]
    # The call names its server and tool (an app-server client's mcpToolCall) though it began before the listing.
    call = next(p for p in log.payloads("tool.call") if p["tool"] == "mcp__slow__add")
    assert (call["mcp_server"], call["mcp_tool"]) == ("slow", "add")
    kinds = log.kinds()
    assert kinds.index("tool.call") < kinds.index("mcp.server.ready") < kinds.index("run.completed")


async def test_the_wait_is_bounded_by_the_startup_timeout_and_the_turn_cancel_and_a_failure_says_why(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # never opened for writing: "held" never starts
    tools = (
        ta.Tools.default()
        .with_mcp("late", ta.McpServer.stdio(sys.executable, [str(SERVER), "--gate", str(gate)], startup_timeout=1.0))
        .with_mcp("held", ta.McpServer.stdio(sys.executable, [str(SERVER), "--gate", str(gate)]))
        .with_mcp("broken", ta.McpServer.stdio(  # fails at start, saying why on stderr
            "sh", ["-c", "echo 'config error: BROKEN_API_KEY is not set' >&2; exit 3"]))
    )
    log = EventLog()
    texts: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        texts.extend(await exec_texts(conn, "resp-1", "call-1", (
            "for (const f of [() => tools.mcp__late__add({a: 1, b: 2}), () => tools.mcp__broken__add({})]) {\n"
            "  try { await f(); text('no error'); } catch (e) { text(e.message); }\n"
            "}")))
        # The turn is cancelled while this call waits for "held".
        await conn.send_tool_call("resp-2", "call-2", "exec", "await tools.mcp__held__add({a: 1, b: 2});")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("try")
        await log.wait_for(_mcp_call_started("mcp__held__add"))
        await trio.testing.wait_all_tasks_blocked()
        await turn.cancel()
        with pytest.raises(ta.TurnCancelled):
            await turn.result()
        assert not log.of(ta.EventKind.MCP_SERVER_READY) and "held" not in str(log.payloads("mcp.server.failed"))
    assert texts[0] == "MCP tool mcp__late__add cannot be called: MCP server late did not start within 1 s"
    assert texts[1].startswith("MCP tool mcp__broken__add cannot be called: MCP server broken failed: ")
    assert "\n(server log, last lines:\nconfig error: BROKEN_API_KEY is not set" in texts[1]
    results = [p for p in log.payloads("tool.result") if p["tool"] == "mcp__held__add"]
    assert [p["status"] for p in results] == ["cancelled"]


@pytest.mark.parametrize("first_up", ["a", "b"])
async def test_which_tools_are_active_follows_the_configuration_not_the_start_order(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, first_up: str
) -> None:
    # Two servers of three tools each, room for four: the first configured is active
    # and the second deferred, whichever comes up first. Before, the first up was active.
    gates = {name: tmp_path / f"gate-{name}" for name in "ab"}
    for gate in gates.values():
        os.mkfifo(gate)
    keep = ["add", "pid", "getenv"]
    tools = ta.Tools.default().with_tool_search(defer_above=4)
    for name in "ab":
        tools.with_mcp(name, ta.McpServer.stdio(sys.executable, [str(SERVER), "--gate", str(gates[name])],
                                                enabled_tools=keep))
    later = "b" if first_up == "a" else "a"
    log = EventLog()
    texts: list[str] = []
    listing = "text(ALL_TOOLS.filter(t => t.name.startsWith('mcp__')).map(t => t.name).join());"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await release(gates[first_up])
        await log.wait_for(_ready(first_up))
        texts.extend(await exec_texts(conn, "resp-1", "call-1", listing))
        await conn.send_tool_call("resp-2", "call-2", "exec", (
            '// @exec: {"yield_time_ms": 60000}\n'
            "for (const s of ['a', 'b']) {\n"
            "  try { text((await tools[`mcp__${s}__add`]({a: 1, b: 1})).structuredContent.result); }\n"
            "  catch (e) { text(e.message); }\n"
            "}"))
        await log.wait_for(_mcp_call_started("mcp__a__add"))
        await release(gates[later])
        texts.extend(await output_texts(conn))
        texts.extend(await exec_texts(conn, "resp-3", "call-3", listing))  # a cell lists what is active at its start
        await conn.send_final("resp-4")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("list")).result()
    # Until "a" has settled, "b"'s activation is not known: neither is listed.
    assert texts[0] == ("mcp__a__add,mcp__a__pid,mcp__a__getenv" if first_up == "a" else "")
    assert texts[1:] == [
        "2",
        "MCP tool mcp__b__add is deferred: call tools.tool_search({query}) first, then call it by name",
        "mcp__a__add,mcp__a__pid,mcp__a__getenv",
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_colliding_tool_names_are_distinct_stable_reported_and_each_routes_to_its_tool(
    server: FakeResponsesServer, workspace: Path, transport: Transport
) -> None:
    log = EventLog()
    texts: list[str] = []
    source = (
        "const found = (await tools.tool_search({query: 'answers time', limit: 32})).tools;\n"
        "for (const t of found) {\n"
        "  const r = await tools[t.name]({});\n"
        "  text(`${t.name} ${t.tool} ${r.structuredContent.result}`);\n"
        "}"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_ready("clock"))
        texts.extend(await exec_texts(conn, "resp-1", "call-1", source))
        await conn.send_final("resp-2")

    async with mcp_server(transport, "--collide", enabled_tools=["get.time", "get_time", "get-time", "x" * 70]) \
            as config:
        tools = ta.Tools.default().with_tool_search(defer_above=0).with_mcp("clock", config)
        async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("time")).result()
    names = log.of(ta.EventKind.MCP_SERVER_READY)[0].payload["tools"]
    long = "mcp__clock__" + "x" * 43 + "_"
    assert isinstance(names, list) and names[1] == "mcp__clock__get_time"
    assert [str(n)[:-8] for n in (names[0], names[2], names[3])] == [
        "mcp__clock__get_time_", "mcp__clock__get-time_", long]
    # Every name tool_search shows calls the tool it names, and no other.
    assert sorted(texts) == sorted(f"{name} {tool} {tool}" for name, tool in zip(
        names, ["get.time", "get_time", "get-time", "x" * 70], strict=True))
    renamed = [p for p in log.payloads("api.warning") if p["code"] == "mcp_tool_renamed"]
    assert sorted(str(p["name"]) for p in renamed) == sorted(str(n) for n in names if n != "mcp__clock__get_time")
    assert all(p["server"] == "clock" for p in renamed)


async def test_a_server_printing_on_stdout_is_kept_in_its_log_and_reported_not_on_the_hosts_stderr(
    server: FakeResponsesServer, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    log = EventLog()
    texts: list[str] = []
    tools = ta.Tools.default().with_mcp(
        "chatty", ta.McpServer.stdio(sys.executable, [str(SERVER), "--noisy", "--name", "chatty"],
                                     enabled_tools=["add", "crash"]))

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_ready("chatty"))
        texts.extend(await exec_texts(conn, "resp-1", "call-1", (
            "text((await tools.mcp__chatty__add({a: 1, b: 2})).structuredContent.result);\n"
            "try { await tools.mcp__chatty__crash({}); } catch (e) { text(e.message); }")))
        await conn.send_final("resp-2")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("noise")).result()
    assert texts[0] == "3"  # the stray line cost the server nothing
    # A failed call quotes the server's log: its stderr and what the client said of it.
    assert "[mcp client] Failed to parse JSONRPC message from server" in texts[1]
    assert "about to crash" in texts[1]
    noted = [p for p in log.payloads("api.warning") if p["code"] == "mcp_server_output"]
    assert len(noted) == 1 and noted[0]["server"] == "chatty"
    assert "Failed to parse JSONRPC message from server" in str(noted[0]["message"])
    assert "chatty server starting" in str(noted[0]["message"])
    # No record of the SDK's reached a handler (before: a traceback on the host's stderr).
    assert [r for r in caplog.records if r.name.startswith("mcp.") and r.levelno >= logging.WARNING] == []


async def test_an_http_body_that_is_not_json_rpc_is_kept_in_the_servers_log_and_reported(
    server: FakeResponsesServer, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    log = EventLog()
    texts: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_ready("web"))
        texts.extend(await exec_texts(conn, "resp-1", "call-1", (  # the server goes on after a bad body
            "try { await tools.mcp__web__getenv({name: 'HOME'}); text('no error'); } catch (e) { text(e.message); }\n"
            "text((await tools.mcp__web__add({a: 1, b: 2})).structuredContent.result);")))
        await conn.send_final("resp-2")

    async with mcp_server("http", "--noisy", enabled_tools=["getenv", "add"], tool_timeout=2.0) as config:
        tools = ta.Tools.default().with_mcp("web", config)
        async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("noise")).result()
    assert texts[0].startswith("MCP tool web/getenv failed: MCPError: Failed to parse JSON response")
    assert "[mcp client] Error parsing JSON response" in texts[0]  # the SDK's record, from the server's log
    assert texts[1] == "3"
    noted = [p for p in log.payloads("api.warning") if p["code"] == "mcp_server_output"]
    assert len(noted) == 1 and noted[0]["server"] == "web"
    assert [r for r in caplog.records if r.name.startswith("mcp.") and r.levelno >= logging.WARNING] == []
