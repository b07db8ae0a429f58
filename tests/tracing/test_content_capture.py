"""Opt-in content capture: off by default, on with ``Tracing(capture_content=True)`` or
the conventions' environment variable; redacted like the cassette and bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._tracing._content import CONTENT_ENV, CONTENT_LIMIT
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from .conftest import Traces

CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.definitions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
KEY = "sk-test-secret-0123456789"


async def one_tool_turn(server: FakeResponsesServer, workspace: Path, tracing: ta.Tracing, result: str) -> None:
    """One turn: the model calls ``echo`` (with the API key in its arguments), then answers."""
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-tool", "call-1", "echo", {"text": f"key {KEY}"})
        await conn.next_request()
        await conn.send_final("resp-final", "all done")

    async def echo(ctx: ta.ToolContext, args: Any) -> str:
        return result

    tools = ta.Tools.default().function("echo", "Echo a text.", {"type": "object"}, echo)
    async with scripted(script, 30):
        config = attrs.evolve(make_config(server, workspace, tools=tools, tracing=tracing), auth=KEY)
        async with ta.open_agent(config) as agent:
            await (await agent.prompt(f"please echo; my key is {KEY}")).result()


def captured(traces: Traces) -> set[str]:
    return {key for span in traces.spans for key in (span.attributes or {}) if key in CONTENT_KEYS}


async def test_content_is_not_captured_by_default(
    server: FakeResponsesServer, workspace: Path, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    await one_tool_turn(server, workspace, traces.tracing, "secret output")
    assert traces.named("execute_tool echo") and captured(traces) == set()


async def test_captured_content_is_redacted_and_bounded(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    traces = Traces()
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, capture_content=True)
    await one_tool_turn(server, workspace, tracing, "x" * (CONTENT_LIMIT + 100))

    first, second = traces.named("chat gpt-5.5")
    attributes = dict(first.attributes or {})
    assert {"gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
            "gen_ai.output.messages"} <= set(attributes)
    assert "please echo; my key is <redacted>" in str(attributes["gen_ai.input.messages"])
    assert '"name":"echo"' in str(attributes["gen_ai.tool.definitions"])
    assert json.loads(str(attributes["gen_ai.output.messages"]))[0]["call_id"] == "call-1"
    assert "all done" in str(dict(second.attributes or {})["gen_ai.output.messages"])

    tool = dict(traces.one("execute_tool echo").attributes or {})
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"text": "key <redacted>"}
    result = str(tool["gen_ai.tool.call.result"])
    assert result == "x" * CONTENT_LIMIT + "...[100 more characters not captured]"
    assert all(KEY not in str(value) for span in traces.spans for value in (span.attributes or {}).values())


@pytest.mark.parametrize(("env", "setting", "expected"), [
    ("true", None, True), ("TRUE", None, True), ("false", None, False), ("true", False, False), ("", True, True),
])
async def test_the_environment_variable_decides_when_the_setting_is_none(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch,
    env: str, setting: bool | None, expected: bool,
) -> None:
    monkeypatch.setenv(CONTENT_ENV, env)
    traces = Traces()
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, capture_content=setting)
    await one_tool_turn(server, workspace, tracing, "out")
    assert bool(captured(traces)) is expected


def test_capture_content_must_be_a_bool_or_none() -> None:
    with pytest.raises(ta.ConfigError, match="capture_content"):
        ta.Tracing(capture_content="yes")  # type: ignore[arg-type]
