"""The span tree of one turn, asserted exactly: a retry, an exec tool call whose cell
calls a user tool, a steer, and a cancel mid-stream (real loopback, MockClock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.trace import StatusCode

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm
from .conftest import Traces, attrs_of, parent_of, seconds

EXEC_SOURCE = "const sum = await tools.add({a: 2, b: 3}); text(String(sum));"


async def test_one_turn_with_a_retry_a_tool_call_a_steer_and_a_cancel(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    streaming = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_error("busy", code="server_is_overloaded", retry_after=2)  # attempt 1 of call 1
        conn = await server.accept()  # the retry reconnects
        await conn.next_request()
        await trio.sleep(0.5)  # think: the first output comes 0.5 s after the request
        await conn.send_assistant_output(0, "msg-1", "commentary", "adding")
        call = frames.custom_tool_call("call-exec", "exec", EXEC_SOURCE)
        await conn.send(frames.completed("resp-tool", [frames.assistant_message("adding"), call]))
        await conn.next_request()  # call 2: the tool output and the steer
        await trio.sleep(0.25)
        await conn.send(frames.response_created("resp-live"))
        await conn.send(frames.output_item_added(0, {**frames.assistant_message("x"), "content": []}))
        await conn.send(frames.text_delta(0, "partial"))
        streaming.set()
        await trio.sleep_forever()

    release = trio.Event()
    app_tracer = traces.provider.get_tracer("app")

    async def add(ctx: ta.ToolContext, args: Any) -> int:
        with app_tracer.start_as_current_span("user.add"):  # a span of the application's own
            await release.wait()
            return int(args["a"]) + int(args["b"])

    tools = ta.Tools.default().function("add", "Add two numbers.", {"type": "object"}, add)
    log = EventLog()
    async with scripted(script, 60) as nursery:
        config = make_config(server, workspace, tools=tools, tracing=traces.tracing)
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("add 2 and 3")
            await log.wait_for(lambda e: e.kind is ta.EventKind.TOOL_CALL and e.payload["tool"] == "add")
            await turn.steer("then double it")
            await trio.sleep(1.0)  # the tool takes 1 s
            release.set()
            await streaming.wait()
            await trio.sleep(0.125)
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
        nursery.cancel_scope.cancel()

    assert traces.tree() == [
        ("agent /root", [
            ("warmup gpt-5.5", [("model.attempt", [("websocket.connect", [])])]),
            ("invoke_agent /root", [
                ("chat gpt-5.5", [
                    ("model.attempt", []),
                    ("model.attempt", [("websocket.connect", [])]),
                ]),
                ("execute_tool exec", [
                    ("execute_tool add", [("user.add", [])]),
                ]),
                ("chat gpt-5.5", [("model.attempt", [])]),
            ]),
        ]),
    ]
    spans = traces.spans
    assert len({s.context.trace_id for s in spans}) == 1

    agent_span = traces.one("agent /root")
    assert agent_span.parent is None
    assert attrs_of(agent_span, "gen_ai.agent.name", "gen_ai.conversation.id", "trio_agent.agent.origin") == {
        "gen_ai.agent.name": "/root", "gen_ai.conversation.id": "model-test", "trio_agent.agent.origin": "root",
    }

    # The turn: cancelled (error status, described), with the steer as a span event.
    turn_span = traces.one("invoke_agent /root")
    assert turn_span.status.status_code is StatusCode.ERROR and turn_span.status.description == "cancelled"
    assert attrs_of(turn_span, "trio_agent.turn.status", "error.type", "trio_agent.turn.id", "gen_ai.operation.name",
                    "trio_agent.turn.model_calls", "trio_agent.turn.tool_calls", "trio_agent.turn.steers") == {
        "trio_agent.turn.status": "cancelled", "error.type": "cancelled", "trio_agent.turn.id": 1,
        "gen_ai.operation.name": "invoke_agent", "trio_agent.turn.model_calls": 2, "trio_agent.turn.tool_calls": 2,
        "trio_agent.turn.steers": 1,
    }
    assert [(e.name, dict(e.attributes or {})) for e in turn_span.events] == [
        ("trio_agent.steer", {"trio_agent.steer.index": 1, "trio_agent.steer.bytes": len("then double it")}),
    ]
    # 2 s backoff + 0.5 s think + 1 s tool + 0.25 s think + 0.125 s streaming.
    assert seconds(turn_span) == 3.875

    # Call 1: attempt 1 failed fast and was retried after the server's 2 s; attempt 2
    # reconnected and answered 0.5 s after its request.
    first_call, second_call = traces.named("chat gpt-5.5")
    assert first_call.status.status_code is StatusCode.UNSET
    assert seconds(first_call) == 2.5
    assert attrs_of(first_call, "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
                    "gen_ai.response.id", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.reasoning.output_tokens",
                    "gen_ai.response.time_to_first_chunk", "trio_agent.attempts", "trio_agent.model_call.index",
                    "trio_agent.warmup.path", "trio_agent.transport", "server.address") == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.5",
        "gen_ai.response.id": "resp-tool", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cache_read.input_tokens": 5, "gen_ai.usage.reasoning.output_tokens": 1,
        "gen_ai.response.time_to_first_chunk": 0.5, "trio_agent.attempts": 2, "trio_agent.model_call.index": 1,
        "trio_agent.warmup.path": "reconnect", "server.address": "127.0.0.1",
        "trio_agent.transport": None,  # on the agent span (on calls with detailed attributes)
    }
    failed, answered = sorted((s for s in spans if s.name == "model.attempt" and parent_of(s, spans) == first_call),
                              key=lambda s: s.start_time or 0)
    assert failed.status.status_code is StatusCode.ERROR and "busy" in (failed.status.description or "")
    assert attrs_of(failed, "trio_agent.attempt", "error.type", "trio_agent.error_class", "trio_agent.retryable",
                    "trio_agent.retry.delay_s", "trio_agent.retry.server_requested",
                    "trio_agent.retry.opens_new_socket", "trio_agent.connection.generation") == {
        "trio_agent.attempt": 1, "error.type": "api_server", "trio_agent.error_class": "api_server",
        "trio_agent.retryable": True, "trio_agent.retry.delay_s": 2.0, "trio_agent.retry.server_requested": True,
        "trio_agent.retry.opens_new_socket": True, "trio_agent.connection.generation": 1,
    }
    assert seconds(failed) == 0.0
    assert attrs_of(answered, "trio_agent.attempt", "trio_agent.connection.purpose", "gen_ai.response.id",
                    "trio_agent.replay_mode", "gen_ai.response.time_to_first_chunk") == {
        "trio_agent.attempt": 2, "trio_agent.connection.purpose": "reconnect", "gen_ai.response.id": "resp-tool",
        "trio_agent.replay_mode": "full_history", "gen_ai.response.time_to_first_chunk": 0.5,
    }
    assert seconds(answered) == 0.5
    assert (answered.start_time or 0) - (failed.end_time or 0) == 2_000_000_000  # the backoff

    # The tool calls: exec, and the cell's nested call as its child, lineage as attributes.
    exec_span, add_span = traces.one("execute_tool exec"), traces.one("execute_tool add")
    assert attrs_of(exec_span, "gen_ai.tool.call.id", "gen_ai.tool.name", "trio_agent.tool.status",
                    "trio_agent.model_call.index", "trio_agent.agent.path") == {
        "gen_ai.tool.call.id": "call-exec", "gen_ai.tool.name": "exec", "trio_agent.tool.status": "completed",
        "trio_agent.model_call.index": 1, "trio_agent.agent.path": None,  # gen_ai.agent.name says it
    }
    assert attrs_of(add_span, "gen_ai.tool.call.id", "trio_agent.tool.parent_call_id", "trio_agent.turn.id") == {
        "gen_ai.tool.call.id": "call-exec/code-1", "trio_agent.tool.parent_call_id": "call-exec",
        "trio_agent.turn.id": 1,
    }
    assert seconds(add_span) == 1.0

    # Call 2 was cancelled mid-stream: it and its open attempt end with the turn.
    assert second_call.status.status_code is StatusCode.ERROR and second_call.status.description == "cancelled"
    (live_attempt,) = [s for s in spans if s.name == "model.attempt" and parent_of(s, spans) == second_call]
    assert live_attempt.status.description == "cancelled"
    assert dict(live_attempt.attributes or {})["error.type"] == "cancelled"
    assert second_call.end_time == turn_span.end_time == live_attempt.end_time
    assert seconds(second_call) == 0.375

    # The first-chunk histogram: call 1 only (call 2 was cancelled before it completed),
    # from the answering attempt's request -- backoff and reconnect excluded -- to its first frame.
    assert [(dict(p.attributes or {})["trio_agent.warmup.path"], p.count, p.sum)
            for p in traces.histogram_points()] == [
        ("reconnect", 1, 0.5),
    ]
