"""Hostile MCP servers (issue 28 item 1): tool names made to collide, overflow or
confuse JavaScript, and a stdout full of lines that are not JSON-RPC. Whatever the
names, each tool gets one name of at most 64 characters, distinct as the model writes
it, that calls that tool and no other -- from ``exec`` and from what ``tool_search``
shows; the SDK's complaints stay in the server's log; the agent goes on, with one
terminal event per turn. Against ``tests/fixtures/mcp_raw_server.py`` over stdio."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent._tools._mcp_names import MAX_NAME, js_form, server_part, tool_names
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm

RAW = Path(__file__).parent.parent / "fixtures" / "mcp_raw_server.py"
HOSTILE = [
    "get.time", "get_time", "get-time", "get time", "get/time", "ü", "日本語", " ", "$", "__proto__", "constructor",
    "a" * 200, "a" * 199, "x__y", "__", "-", "mcp__other__tool", "0start", "tool_search", "exec", "a\x00b", "😀",
    "toString", "then",
]


@given(st.lists(st.text(min_size=1, max_size=90), max_size=12), st.sampled_from(["s", "my-files", "A_1"]))
@example(HOSTILE, "s")
@example(["a.b", "a_b", "a_b_2e7336dc"], "s")  # a tool named like another's renamed name
def test_any_set_of_tool_names_gets_distinct_bounded_names_that_route_back(tools: list[str], server: str) -> None:
    names, renamed = tool_names(server, tools)
    assert set(names) == set(tools)
    forms = [js_form(n) for n in names.values()]
    assert len(set(forms)) == len(forms)  # no name the model writes reaches two tools
    assert all(len(n) <= MAX_NAME and server_part(n) == js_form(server) for n in names.values())
    assert tool_names(server, list(reversed(tools))) == (names, renamed)  # the set decides, not the order
    assert {r.tool for r in renamed} == {t for t, n in names.items() if n != _plain_name(server, t)}


def _plain_name(server: str, tool: str) -> str:
    return f"mcp__{server}__" + re.sub(r"[^A-Za-z0-9_-]", "_", tool)


@pytest.mark.parametrize("garbage", [False, True])
async def test_a_server_of_hostile_names_and_stdout_garbage_costs_the_agent_nothing(
    server: FakeResponsesServer, workspace: Path, garbage: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    args = [str(RAW), "--names", json.dumps(HOSTILE)] + (["--garbage"] if garbage else [])
    tools = ta.Tools.default().with_tool_search(defer_above=0).with_mcp("h", ta.McpServer.stdio(sys.executable, args))
    log = EventLog()
    seen: list[Any] = []
    source = (
        '// @exec: {"yield_time_ms": 60000}\n'
        "const found = (await tools.tool_search({query: 'text', limit: 32})).tools;\n"
        "const out = [];\n"
        "for (const t of found) { out.push([t.name, t.tool, (await tools[t.name]({text: 'x'})).content[0].text]); }\n"
        "text(JSON.stringify(out));"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(lambda e: e.kind in (ta.EventKind.MCP_SERVER_READY, ta.EventKind.MCP_SERVER_FAILED))
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        request: Any = await conn.next_request()
        seen.append(request["input"][0]["output"])
        await conn.send_final("resp-2", "survived")

    async with scripted(script, 60) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("hostile")).result()).final_message == "survived"
    ready = log.of(ta.EventKind.MCP_SERVER_READY)[0].payload["tools"]
    assert isinstance(ready, list) and len(ready) == len(HOSTILE)  # every name kept, none lost to a collision
    texts = [p["text"] for p in seen[0][1:] if p["type"] == "input_text"]
    found = json.loads(texts[0])
    assert sorted(name for name, _, _ in found) == sorted(str(n) for n in ready)
    assert all(answer == f"{tool}: x" for _, tool, answer in found)  # each name calls its own tool
    assert [k for k in log.kinds() if k in ("run.completed", "run.failed")] == ["run.completed"]
    noise = [p for p in log.payloads("api.warning") if p["code"] == "mcp_server_output"]
    assert len(noise) == (1 if garbage else 0)
    assert [r for r in caplog.records if r.name.startswith("mcp.") and r.levelno >= logging.WARNING] == []
