"""The GenAI conventions' pieces: time to first chunk from the request's send (a call
that streams only a tool call included), the response model and finish reasons, a
distinct ``gen_ai.agent.id``, and the two standard client metrics with their buckets
(real loopback, MockClock: exact values)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._tracing._metrics import DURATION_BUCKETS, FIRST_CHUNK_BUCKETS, TOKEN_BUCKETS
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import make_config, scripted, warm
from .conftest import Traces, attrs_of, seconds

SNAPSHOT = "gpt-5.5-2026-01-01"


def answered_by(frame: dict[str, Any], model: str = SNAPSHOT) -> dict[str, Any]:
    """``frame`` (a terminal frame) as sent by the model snapshot ``model``."""
    return {**frame, "response": {**frame["response"], "model": model}}


async def test_first_chunk_counts_from_the_request_even_for_a_tool_call_only_response(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()  # the warmup: answered 1 s late; the prompt's call waits for it
        await trio.sleep(1.0)
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await trio.sleep(0.75)  # then the model streams nothing but a tool call
        call = frames.function_call("call-1", "noop", "{}")
        await conn.send(frames.output_item_added(0, call))
        await trio.sleep(0.5)
        await conn.send(answered_by(frames.completed("resp-tool", [call])))
        await conn.next_request()
        await trio.sleep(0.25)
        await conn.send(answered_by(frames.completed("resp-final", [frames.assistant_message("done")])))

    async def noop(ctx: ta.ToolContext, args: Any) -> str:
        return "ok"

    tools = ta.Tools.default().function("noop", "Do nothing.", {"type": "object"}, noop)
    async with scripted(script, 30):
        config = make_config(server, workspace, tools=tools, tracing=traces.tracing)
        async with ta.open_agent(config) as agent:
            await (await agent.prompt("go")).result()

    tool_call, final = traces.named("chat gpt-5.5")
    assert seconds(tool_call) >= 2.25  # the call waited for the warmup: not in its first chunk
    assert attrs_of(tool_call, "gen_ai.response.time_to_first_chunk", "gen_ai.response.model",
                    "gen_ai.response.finish_reasons") == {
        "gen_ai.response.time_to_first_chunk": 0.75, "gen_ai.response.model": SNAPSHOT,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert attrs_of(final, "gen_ai.response.time_to_first_chunk", "gen_ai.response.finish_reasons") == {
        "gen_ai.response.time_to_first_chunk": 0.25, "gen_ai.response.finish_reasons": ("stop",),
    }
    chunks = {dict(p.attributes or {})["trio_agent.warmup.path"]: p for p in traces.histogram_points()}
    assert {path: (p.count, p.sum) for path, p in chunks.items()} == {
        "startup_prewarm": (1, 0.75), "warm_socket": (1, 0.25),
    }
    assert tuple(chunks["warm_socket"].explicit_bounds) == FIRST_CHUNK_BUCKETS

    # gen_ai.client.operation.duration: the whole call (the warmup wait included), one
    # series per operation with the conventions' attributes.
    (duration,) = traces.histogram_points("gen_ai.client.operation.duration")
    assert duration.count == 2 and tuple(duration.explicit_bounds) == DURATION_BUCKETS
    assert duration.sum == pytest.approx(seconds(tool_call) + seconds(final))
    assert dict(duration.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.5",
        "gen_ai.response.model": SNAPSHOT, "server.address": "127.0.0.1", "server.port": server.port,
    }
    # gen_ai.client.token.usage: by token type (frames.usage(): 10 in, 2 out per response).
    usage = traces.histogram_points("gen_ai.client.token.usage")
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in usage}
    assert {kind: (p.count, p.sum) for kind, p in tokens.items()} == {"input": (2, 20), "output": (2, 4)}
    assert tuple(tokens["input"].explicit_bounds) == TOKEN_BUCKETS


async def test_an_incomplete_response_reports_its_model_and_reason(
    server: FakeResponsesServer, workspace: Path, traces: Traces
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        message = frames.assistant_message("trunc")
        frame = answered_by(frames.completed("resp-cut", [message]))
        frame["type"] = "response.incomplete"
        frame["response"].update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        await conn.send(frame)

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            with pytest.raises(ta.TurnFailed, match="max_output_tokens"):
                await (await agent.prompt("long answer")).result()
    (call,) = traces.named("chat gpt-5.5")
    assert dict(call.attributes or {})["gen_ai.response.model"] == SNAPSHOT
    assert dict(call.attributes or {})["gen_ai.response.finish_reasons"] == ("max_output_tokens",)


async def test_each_agent_has_its_own_agent_id(server: FakeResponsesServer, workspace: Path, traces: Traces) -> None:
    for session in ("session-a", "session-b"):  # closed at once: the warmup is cut short
        async with ta.open_agent(make_config(server, workspace, session_id=session, tracing=traces.tracing)):
            pass

    agents = traces.named("agent /root")
    assert [attrs_of(s, "gen_ai.agent.name", "gen_ai.agent.id") for s in agents] == [
        {"gen_ai.agent.name": "/root", "gen_ai.agent.id": "session-a"},
        {"gen_ai.agent.name": "/root", "gen_ai.agent.id": "session-b"},
    ]

