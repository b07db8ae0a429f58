"""User tools registered on ``ta.Tools``: definitions on the wire and a full round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import events_of, make_config, scripted


def _tools(log: list[Any]) -> ta.Tools:
    async def add(ctx: ta.ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        log.append((ctx.call_id, ctx.tool, args))
        ctx.report("adding")
        return {"sum": args["a"] + args["b"]}

    async def shout(ctx: ta.ToolContext, text: str) -> str:
        return text.upper()

    async def broken(ctx: ta.ToolContext, args: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    return (
        ta.Tools.default()
        .function("add", "Add two numbers.", schema, add)
        .custom("shout", "Upper-case the input.", shout)
        .function("broken", "Always fails.", {"type": "object"}, broken)
    )


async def test_user_tools_round_trip_with_outputs_in_order(server: FakeResponsesServer, workspace: Path) -> None:
    log: list[Any] = []

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        names = [tool["name"] for tool in warmup["input"][0]["tools"]]
        assert names == ["exec", "wait", "add", "shout", "broken"]
        assert "### `add`" in warmup["input"][0]["tools"][0]["description"]
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_completed("resp-tools", [
            frames.function_call("call-add", "add", json.dumps({"a": 2, "b": 3})),
            frames.custom_tool_call("call-shout", "shout", "quiet"),
            frames.function_call("call-broken", "broken", "{}"),
            frames.function_call("call-bad-json", "add", "{not json"),
        ])
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-tools"
        outputs = continuation["input"]
        assert [item["call_id"] for item in outputs] == ["call-add", "call-shout", "call-broken", "call-bad-json"]
        assert (outputs[0]["type"], outputs[0]["output"]) == ("function_call_output", '{"sum":5}')
        assert outputs[1]["type"] == "custom_tool_call_output"
        assert outputs[1]["output"] == "QUIET"
        assert outputs[2]["output"] == "tool broken failed: RuntimeError: disk on fire"
        assert outputs[3]["output"].startswith("invalid arguments for add: expected a JSON object")
        await conn.send_final("resp-final", "all done")

    events: list[ta.AgentEvent] = []
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=_tools(log))) as agent:

            async def collect() -> None:
                async for event in agent.events:
                    events.append(event)

            nursery.start_soon(collect)
            result = await (await agent.prompt("use the tools")).result()
    assert result.final_message == "all done"
    assert log == [("call-add", "add", {"a": 2, "b": 3})]
    statuses = [e.payload["status"] for e in events if e.kind is ta.EventKind.TOOL_RESULT]
    assert statuses == ["completed", "completed", "failed", "failed"]
    progress = [e.payload for e in events if e.kind is ta.EventKind.TOOL_PROGRESS]
    assert progress == [{"call_id": "call-add", "tool": "add", "message": "adding"}]
    lines = "".join(e.to_json_line() for e in events)
    (completed,) = events_of(lines, "run.completed")
    assert completed["tool_calls"] == 4


def test_tools_reject_bad_registrations() -> None:
    async def handler(ctx: ta.ToolContext, args: Any) -> str:
        return ""

    with pytest.raises(ta.ConfigError, match="taken by a built-in"):
        ta.Tools.default().function("exec_command", "x", {"type": "object"}, handler)
    with pytest.raises(ta.ConfigError, match="registered twice"):
        ta.Tools.empty().custom("a", "x", handler).custom("a", "y", handler)
    with pytest.raises(ta.ConfigError, match="is invalid"):
        ta.Tools.empty().custom("has space", "x", handler)
    with pytest.raises(ta.ConfigError, match="JSON Schema object"):
        ta.Tools.empty().function("f", "x", {"type": "array"}, handler)
    assert ta.Tools.empty().custom("exec_command", "mine", handler).definitions()[0]["name"] == "exec_command"


async def test_empty_tools_send_only_user_definitions(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert warmup["input"][0]["tools"] == []
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-final")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tools=ta.Tools.empty())) as agent:
            await (await agent.prompt("hi")).result()
