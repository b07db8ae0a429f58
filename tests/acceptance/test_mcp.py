"""MCP servers as tools, against a real MCP server written with the SDK
(``tests/fixtures/mcp_server.py``) over stdio (a subprocess of the agent) and
Streamable HTTP (a subprocess of the test, on 127.0.0.1). The model side is the fake
Responses server; every assertion is on what the model is sent or on the OS."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._serve._items import ThreadMapper
from trio_agent.testing import FakeConnection, FakeResponsesServer

from .._os_facts import pid_alive, processes_in, wait_for_os_fact
from ..conftest import EventLog, make_config, scripted, warm
from ._mcp_http import serve_http
from .test_builtin_tools import PIXEL_URL

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"
BASIC_TOOLS = ["add", "pid", "getenv", "pixel", "fail", "crash", "hang"]


def stdio(*args: str, **kw: Any) -> ta.McpServer:
    return ta.McpServer.stdio(sys.executable, [str(SERVER), *args], **kw)


def _is(kind: ta.EventKind, server: str | None = None) -> Any:
    return lambda e: e.kind is kind and (server is None or e.payload["server"] == server)


async def _exec_texts(conn: FakeConnection, response_id: str, call_id: str, source: str) -> list[Any]:
    await conn.send_tool_call(response_id, call_id, "exec", source)
    output = (await conn.next_request())["input"][0]["output"]
    assert isinstance(output, list), output
    return output[1:]


def _texts(parts: list[Any]) -> list[str]:
    return [p["text"] for p in parts if p["type"] == "input_text"]


def _pid(path: Path) -> int:
    return int(path.read_text())


async def test_stdio_server_tools_are_called_from_exec_and_the_process_is_gone_on_close(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "server.pid"
    monkeypatch.setenv("TRIO_AGENT_TEST_SECRET_TOKEN", "do-not-leak")
    server_env = {"TRIO_AGENT_TEST_VALUE": "42"}
    config = stdio("--pid-file", str(pid_file), env=server_env, description="Arithmetic.")
    tools = ta.Tools.default().with_mcp("calc", config)
    source = (
        "const r = await tools.mcp__calc__add({a: 2, b: 3});\n"
        "text(r.structuredContent.result); text(r.content[0].text);\n"
        "image((await tools.mcp__calc__pixel({})).content[0]);\n"
        "for (const call of [() => tools.mcp__calc__fail({}), () => tools.mcp__calc__add({a: 'x', b: 1}),\n"
        "                    () => tools.mcp__calc__add(5), () => tools.mcp__calc__nothing({})]) {\n"
        "  try { await call(); text('no error'); } catch (e) { text(e.message.split('\\n')[0]); }\n"
        "}\n"
        "text(ALL_TOOLS.filter(t => t.name.startsWith('mcp__')).map(t => t.name).join(','));\n"
        "text(await tools.mcp__calc__pid({}).then(r => r.structuredContent.result));\n"
        "for (const name of ['TRIO_AGENT_TEST_VALUE', 'TRIO_AGENT_TEST_SECRET_TOKEN']) {\n"
        "  text(JSON.stringify((await tools.mcp__calc__getenv({name})).structuredContent.result));\n"
        "}"
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        description = server.connections[0].requests[0]["input"][0]["tools"][0]["description"]
        assert "- `calc`: Arithmetic." in description
        await conn.next_request()
        ready = await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY))
        assert ready.payload == {"server": "calc", "tools": [f"mcp__calc__{t}" for t in BASIC_TOOLS]}
        assert ready.turn_id is None
        output = await _exec_texts(conn, "resp-1", "call-1", source)
        assert output[2] == {"type": "input_image", "image_url": PIXEL_URL}  # no detail on the wire (nanocodex)
        texts = _texts(output)
        assert texts[:2] == ["5", "5"]
        assert texts[2] == "MCP tool calc/fail returned an error: Error executing tool fail"
        assert texts[3].startswith("MCP tool calc/add returned an error: Error executing tool add: 1 validation")
        assert texts[4] == "tools.mcp__calc__add expects an object argument"
        assert texts[5] == "unknown MCP tool mcp__calc__nothing; find tools with tools.tool_search({query})"
        assert texts[6] == ",".join(f"mcp__calc__{t}" for t in BASIC_TOOLS)
        assert texts[7] == str(_pid(pid_file))
        assert texts[8:] == ['"42"', '""']  # its own env, and not the agent's (the SDK's safe default)
        await conn.send_final("resp-final")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("add")).result()
        pid = _pid(pid_file)
        assert pid_alive(pid)
        assert processes_in(workspace) == [pid]  # the server runs in the workspace by default
    assert not pid_alive(pid)  # gone by the time open_agent returns: nothing to wait for
    assert processes_in(workspace) == []
    nested = [p for p in log.payloads("tool.result") if p["tool"] != "exec"]
    assert [(p["call_id"], p["tool"], p["status"]) for p in nested[:3]] == [
        ("call-1/code-1", "mcp__calc__add", "completed"),
        ("call-1/code-2", "mcp__calc__pixel", "completed"),
        ("call-1/code-3", "mcp__calc__fail", "failed"),
    ]
    # The events show a result's content as text and image items.
    assert nested[0]["result"] == [{"type": "input_text", "text": "5"}]
    assert nested[1]["result"] == [{"type": "input_image", "image_url": PIXEL_URL}]
    assert nested[2]["result"] == "MCP tool calc/fail returned an error: Error executing tool fail"
    # A listed tool's call names its server and the tool's own name (an app-server
    # client's mcpToolCall item shows them); a name no server lists has neither.
    calls = {p["tool"]: p for p in log.payloads("tool.call")}
    assert (calls["mcp__calc__add"]["mcp_server"], calls["mcp__calc__add"]["mcp_tool"]) == ("calc", "add")
    assert "mcp_server" not in calls["mcp__calc__nothing"] and "mcp_tool" not in calls["mcp__calc__nothing"]
    mapper = ThreadMapper("t", cwd=str(workspace), model_context_window=1, dynamic_tools=frozenset(),
                          new_id=lambda: "id", now_ms=lambda: 0, shell="/bin/sh")
    shown = [out.params["item"] for event in log.events for out in mapper.on_event(event)
             if out.method == "item/completed" and out.params["item"]["type"] == "mcpToolCall"]
    assert [(i["server"], i["tool"], i["status"]) for i in shown[:3]] == [
        ("calc", "add", "completed"), ("calc", "pixel", "completed"), ("calc", "fail", "failed")]
    assert shown[0]["arguments"] == {"a": 2, "b": 3} and shown[0]["result"]["content"] == [
        {"type": "text", "text": "5"}]
    assert shown[2]["error"] == {"message": "MCP tool calc/fail returned an error: Error executing tool fail"}


async def test_a_hung_call_times_out_and_a_crashed_server_fails_the_call_in_flight(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    tools = (
        ta.Tools.default()
        .with_mcp("calc", stdio("--pid-file", str(pid_file)))
        .with_mcp("stuck", stdio(tool_timeout=1.0, enabled_tools=["hang", "add"]))
    )
    source = (
        "const attempt = async (f) => { try { return String(await f()); } catch (e) { return e.message; } };\n"
        "text(await attempt(() => tools.mcp__stuck__hang({})));\n"
        "text(await attempt(() => tools.mcp__stuck__add({a: 2, b: 2}).then(r => r.structuredContent.result)));\n"
        "text(await attempt(() => tools.mcp__calc__add({a: 1, b: 1}).then(r => r.structuredContent.result)));\n"
        "text(await attempt(() => tools.mcp__calc__crash({})));\n"
        "text(await attempt(() => tools.mcp__calc__add({a: 1, b: 1}).then(r => r.structuredContent.result)));"
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "calc"))
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "stuck"))
        texts = _texts(await _exec_texts(conn, "resp-1", "call-1", source))
        assert texts[0] == "MCP tool stuck/hang did not answer within 1 s"
        assert texts[1] == "4"  # the server is still up after a call timed out
        assert texts[2] == "2"
        assert texts[3].startswith("MCP tool calc/crash failed: MCPError: Connection closed")
        assert "about to crash" in texts[3]  # the tail of its stderr
        assert texts[4] == "2"  # the next call waited for the restart (test_mcp_restart.py)
        await conn.send_final("resp-1b", "the server died")
        await conn.next_request()
        await conn.send_final("resp-2", "still here")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("break it")).result()).final_message == "the server died"
        assert (await (await agent.prompt("again")).result()).final_message == "still here"
    assert not pid_alive(_pid(pid_file))
    assert processes_in(workspace) == []  # the stuck server too, its hung call and all


async def test_a_slow_server_never_delays_the_first_turn_and_tool_search_waits_for_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    tools = ta.Tools.default().with_mcp("slow", stdio("--gate", str(gate)))
    log = EventLog()

    async def release() -> None:
        def open_and_close() -> None:
            with open(gate, "w") as writer:  # blocks until the server opens the FIFO
                writer.write("go")

        await trio.to_thread.run_sync(open_and_close)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "no server needed")
        await conn.next_request()
        source = (
            '// @exec: {"yield_time_ms": 30000}\n'  # however long the server takes to start
            "const found = await tools.tool_search({query: 'add integers'});\n"
            "text(JSON.stringify(found.pending_servers)); text(found.tools[0].name);\n"
            "text((await tools.mcp__slow__add({a: 20, b: 22})).structuredContent.result);"
        )
        await conn.send_tool_call("resp-2", "call-2", "exec", source)
        await release()  # only now may the server start: tool_search is waiting for it
        output = (await conn.next_request())["input"][0]["output"]
        assert _texts(output[1:]) == ["[]", "mcp__slow__add", "42"]
        await conn.send_final("resp-3")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        first = await (await agent.prompt("hello")).result()
        assert first.final_message == "no server needed"
        assert not [e for e in log.events if e.kind is ta.EventKind.MCP_SERVER_READY]  # the turn did not wait
        await (await agent.prompt("now add")).result()
    kinds = [e.kind for e in log.events]
    assert kinds.index(ta.EventKind.RUN_COMPLETED) < kinds.index(ta.EventKind.MCP_SERVER_READY)


async def test_closing_the_agent_while_a_server_starts_stops_it_quietly(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    gate, pid_file = tmp_path / "gate", tmp_path / "server.pid"
    os.mkfifo(gate)  # never opened for writing: the server never gets past it
    # A "server" that never speaks MCP: a shell (quick to start, even on a loaded
    # machine) that records its pid and blocks opening the FIFO.
    never = ta.McpServer.stdio("sh", ["-c", f"echo $$ > {pid_file}; exec cat {gate}"])
    tools = ta.Tools.default().with_mcp("slow", never)
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("hello")).result()
        await wait_for_os_fact(pid_file.exists, "the server writing its pid")
    assert not pid_alive(_pid(pid_file))
    mcp_events = [e for e in log.events if e.kind.value.startswith("mcp.")]
    assert mcp_events == []  # closed while starting is neither ready nor a failure


async def test_many_tools_are_deferred_behind_a_bm25_tool_search(
    server: FakeResponsesServer, workspace: Path
) -> None:
    tools = ta.Tools.default().with_mcp("calc", stdio("--many", "40"))
    source = (
        "try { await tools.mcp__calc__add({a: 1, b: 2}); } catch (e) { text(e.message); }\n"
        "text(ALL_TOOLS.filter(t => t.name.startsWith('mcp__')).length);\n"
        "const found = await tools.tool_search({query: 'sum of two integers'});\n"
        "text(found.tools[0].name); text(found.tools[0].declaration);\n"
        "text((await tools.mcp__calc__add({a: 1, b: 2})).structuredContent.result);\n"
        "text((await tools.tool_search({query: 'tool'})).tools.length);\n"
        "text((await tools.tool_search({query: 'tool', limit: 100})).tools.length);\n"
        "text((await tools.tool_search({query: 'weather forecast city', limit: 2})).tools.map(t => t.name).join());\n"
        "try { await tools.tool_search({query: ' '}); } catch (e) { text(e.message); }"
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY))
        texts = _texts(await _exec_texts(conn, "resp-1", "call-1", source))
        assert texts[0] == (
            "MCP tool mcp__calc__add is deferred: call tools.tool_search({query}) first, then call it by name"
        )
        assert texts[1] == "0"
        assert texts[2] == "mcp__calc__add"
        assert texts[3] == (
            "declare const tools: { mcp__calc__add(args: { a: number; b: number }): "
            "Promise<CallToolResult<{ result: number }>>; }"
        )
        assert texts[4] == "3"
        assert texts[5] == "8"  # the default limit
        assert texts[6] == "32"  # the largest limit
        assert texts[7] in ("mcp__calc__tool_0,mcp__calc__tool_20", "mcp__calc__tool_20,mcp__calc__tool_0")
        assert texts[8] == "tool_search: query must be a non-empty string"
        # A later cell lists what the searches activated.
        listed = _texts(await _exec_texts(conn, "resp-2", "call-2", "text(ALL_TOOLS.map(t => t.name).join());"))
        names = listed[0].split(",")
        assert "mcp__calc__add" in names and "mcp__calc__tool_0" in names and "mcp__calc__crash" not in names
        await conn.send_final("resp-final")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("search")).result()


async def test_servers_that_cannot_start_give_failed_results_and_leave_nothing_behind(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hung.pid"
    tools = (
        ta.Tools.default()
        .with_mcp("missing", ta.McpServer.stdio(str(tmp_path / "no-such-server")))
        .with_mcp("hung", ta.McpServer.stdio(  # never speaks MCP; a shell starts fast even on a loaded machine
            "sh", ["-c", f"echo $$ > {pid_file}; exec sleep 3600"], startup_timeout=0.5,
        ))
    )
    source = (
        "for (const name of ['mcp__missing__add', 'mcp__hung__add']) {\n"
        "  try { await tools[name]({}); } catch (e) { text(e.message); }\n"
        "}\n"
        "text(JSON.stringify(await tools.tool_search({query: 'add'})));"
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_FAILED, "missing"))
        failed = await log.wait_for(_is(ta.EventKind.MCP_SERVER_FAILED, "hung"))
        assert failed.payload["error"] == "MCP server hung did not start within 0.5 s"
        texts = _texts(await _exec_texts(conn, "resp-1", "call-1", source))
        # A failed server's calls say why it failed (issue 28 item 4).
        assert texts[0].startswith("MCP tool mcp__missing__add cannot be called: MCP server missing failed: "
                                   "FileNotFoundError")
        assert texts[1] == "MCP tool mcp__hung__add cannot be called: MCP server hung did not start within 0.5 s"
        search = json.loads(texts[2])
        assert search["tools"] == [] and search["pending_servers"] == []
        assert search["failed_servers"]["hung"] == "MCP server hung did not start within 0.5 s"
        assert search["failed_servers"]["missing"].startswith("MCP server missing failed: FileNotFoundError")
        await conn.send_final("resp-final", "carried on")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("try")).result()).final_message == "carried on"
        await wait_for_os_fact(pid_file.exists, "the hung server writing its pid")
    assert not pid_alive(_pid(pid_file))  # killed while it was still starting


async def test_cancelling_the_agent_stops_its_servers(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_files = [tmp_path / "a.pid", tmp_path / "b.pid"]
    tools = (
        ta.Tools.default()
        .with_mcp("a", stdio("--pid-file", str(pid_files[0])))
        .with_mcp("b", stdio("--pid-file", str(pid_files[1])))
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()  # the turn waits here for ever: the agent is cancelled
        await trio.sleep_forever()

    with trio.fail_after(30):
        async with trio.open_nursery() as outer:
            outer.start_soon(script)
            with trio.CancelScope() as scope:
                async with ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
                    outer.start_soon(log.consume, agent.events)
                    turn = await agent.prompt("work")
                    await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "a"))
                    await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "b"))
                    pids = [_pid(p) for p in pid_files]
                    assert all(pid_alive(pid) for pid in pids)
                    scope.cancel()
                    await turn.result()
            assert scope.cancelled_caught
            assert not any(pid_alive(pid) for pid in pids)
            assert processes_in(workspace) == []
            outer.cancel_scope.cancel()


# -- Streamable HTTP -----------------------------------------------------------------


@pytest.fixture
async def http_server(nursery: trio.Nursery) -> AsyncIterator[tuple[str, trio.Process]]:
    """The test MCP server over Streamable HTTP on 127.0.0.1, requiring a bearer token."""
    async with serve_http("--token", "s3cret", "--name", "web") as served:
        yield served


async def test_http_server_with_headers_from_the_environment(
    server: FakeResponsesServer, workspace: Path, http_server: tuple[str, trio.Process],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, process = http_server
    monkeypatch.setenv("TRIO_MCP_TOKEN", "s3cret")
    monkeypatch.setenv("TRIO_TEAM", "trio")
    tools = (
        ta.Tools.default()
        .with_mcp("web", ta.McpServer.http(
            url, bearer_token_env="TRIO_MCP_TOKEN", header_env={"X-Team": "TRIO_TEAM"},
            enabled_tools=["add", "pixel", "pid"], disabled_tools=["pixel"],
        ))
        .with_mcp("slow", ta.McpServer.http(
            url, bearer_token="s3cret", headers={"X-Team": "trio"}, tool_timeout=1.0, enabled_tools=["hang"],
        ))
        .with_mcp("denied", ta.McpServer.http(url, bearer_token="wrong", headers={"X-Team": "trio"}))
    )
    source = (
        "text((await tools.mcp__web__add({a: 40, b: 2})).structuredContent.result);\n"
        "text((await tools.mcp__web__pid({})).structuredContent.result);\n"
        "try { await tools.mcp__slow__hang({}); } catch (e) { text(e.message); }\n"
        "try { await tools.mcp__web__pixel({}); } catch (e) { text(e.message); }"
    )
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        ready = await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "web"))
        assert ready.payload["tools"] == ["mcp__web__add", "mcp__web__pid"]
        await log.wait_for(_is(ta.EventKind.MCP_SERVER_READY, "slow"))
        denied = await log.wait_for(_is(ta.EventKind.MCP_SERVER_FAILED, "denied"))
        assert denied.payload["error"].endswith("(the server answered HTTP 401 Unauthorized)")
        texts = _texts(await _exec_texts(conn, "resp-1", "call-1", source))
        assert texts == [
            "42", str(process.pid), "MCP tool slow/hang did not answer within 1 s",
            "unknown MCP tool mcp__web__pixel; find tools with tools.tool_search({query})",
        ]
        process.kill()  # the server goes away under the agent
        await process.wait()
        retry = "try { await tools.mcp__web__add({a: 1, b: 1}); } catch (e) { text(e.message); }"
        after = _texts(await _exec_texts(conn, "resp-2", "call-2", retry))
        # Depending on which task sees the dead socket first: the call, or the session.
        assert after[0].startswith(("MCP tool web/add failed: ", "MCP server web failed: "))
        await conn.send_final("resp-final", "fine")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("web")).result()).final_message == "fine"


def test_mcp_server_configuration_is_checked() -> None:
    with pytest.raises(ta.ConfigError, match="needs a command"):
        ta.McpServer.stdio("")
    with pytest.raises(ta.ConfigError, match="args must be a list of strings"):
        ta.McpServer.stdio("srv", "--flag")  # type: ignore[arg-type]
    with pytest.raises(ta.ConfigError, match="http:// or https:// URL"):
        ta.McpServer.http("ftp://example.com")
    with pytest.raises(ta.ConfigError, match="startup_timeout must be a positive number"):
        ta.McpServer.stdio("srv", startup_timeout=0)
    with pytest.raises(ta.ConfigError, match="bearer_token or bearer_token_env, not both"):
        ta.McpServer.http("http://x", bearer_token="a", bearer_token_env="B")
    with pytest.raises(ta.ConfigError, match="not a valid HTTP header name"):
        ta.McpServer.http("http://x", headers={"bad header": "v"})
    with pytest.raises(ta.ConfigError, match="MCP server name 'a b' is invalid"):
        ta.Tools.default().with_mcp("a b", ta.McpServer.stdio("srv"))
    with pytest.raises(ta.ConfigError, match="added twice"):
        ta.Tools.default().with_mcp("a", ta.McpServer.stdio("srv")).with_mcp("a", ta.McpServer.stdio("srv"))
    with pytest.raises(ta.ConfigError, match="defer_above must be a non-negative integer"):
        ta.Tools.default().with_tool_search(defer_above=-1)
    secret = ta.McpServer.http("http://x", bearer_token="tok-123", headers={"X-Key": "k-456"})
    assert "tok-123" not in repr(secret) and "k-456" not in repr(secret)
