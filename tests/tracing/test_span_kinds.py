"""The other span shapes: a failed turn, a compaction, an interrupting steer, a failed
warmup, and the tool span as the current span inside a handler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm
from .conftest import Traces, attrs_of

COMPACTION_DONE = {
    "type": "response.output_item.done",
    "item": {"id": "cmp-1", "type": "compaction", "encrypted_content": "opaque-summary"},
}


async def test_a_failed_turn_and_its_model_call_carry_the_error_class(
    server: FakeResponsesServer, workspace: Path, traces: Traces
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_error("quota gone", code="insufficient_quota")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            with pytest.raises(ta.TurnFailed):
                await (await agent.prompt("spend")).result()

    turn, call = traces.one("invoke_agent /root"), traces.one("chat gpt-5.5")
    for span in (turn, call):
        assert span.status.status_code is StatusCode.ERROR
        assert "quota gone" in (span.status.description or "")
        assert dict(span.attributes or {})["error.type"] == "usage_limit"
    assert dict(turn.attributes or {})["trio_agent.turn.status"] == "failed"
    (attempt,) = traces.named("model.attempt")[1:]  # after the warmup's
    assert attrs_of(attempt, "trio_agent.retryable", "error.type") == {
        "trio_agent.retryable": False, "error.type": "usage_limit",
    }
    # The conventions' exception event (what record_exception writes) on each failed span.
    for span in (turn, call, attempt):
        (event,) = [e for e in span.events if e.name == "exception"]
        assert dict(event.attributes or {}) == {
            "exception.type": "usage_limit",
            "exception.message": "Responses API error: quota gone (code insufficient_quota)",
        }
    (duration,) = traces.histogram_points("gen_ai.client.operation.duration")
    assert dict(duration.attributes or {})["error.type"] == "usage_limit"
    assert traces.histogram_points("gen_ai.client.token.usage") == []  # no usage came back
    assert traces.histogram_points() == []  # nor a first chunk of an answer


@pytest.mark.parametrize("detailed", [False, True])
async def test_a_compaction_is_a_span_of_its_turn(
    server: FakeResponsesServer, workspace: Path, detailed: bool, autojump_clock: trio.testing.MockClock
) -> None:
    traces = Traces(detailed=detailed)
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await trio.sleep(0.1)
        call = frames.custom_tool_call("call-exec", "exec", 'text("ok")')
        await conn.send(frames.completed("resp-tool", [call], usage_block=frames.usage(372_001)))
        await conn.next_request()  # the compaction request
        await trio.sleep(0.1)
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        await conn.next_request()
        await trio.sleep(0.1)
        await conn.send_final("resp-final")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            await (await agent.prompt("compact please")).result()

    assert traces.tree()[0][1][1] == ("invoke_agent /root", [
        ("chat gpt-5.5", []),  # each answered at its first attempt: no attempt span
        ("execute_tool exec", []),
        ("compact gpt-5.5", []),
        ("chat gpt-5.5", []),
    ])
    compact = traces.one("compact gpt-5.5")
    assert attrs_of(compact, "gen_ai.operation.name", "gen_ai.response.id", "trio_agent.model_call.index",
                    "trio_agent.phase", "trio_agent.previous_response_id", "trio_agent.compaction.token_limit") == {
        "gen_ai.operation.name": "compact", "gen_ai.response.id": "resp-compact", "trio_agent.model_call.index": 1,
        # Its phase and chained response are detail (the operation name says the one).
        "trio_agent.phase": "compaction" if detailed else None,
        "trio_agent.previous_response_id": "resp-tool" if detailed else None,
        "trio_agent.compaction.token_limit": 244_800,
    }
    active = dict(compact.attributes or {})["trio_agent.compaction.active_context_tokens"]
    assert isinstance(active, int) and active > 372_000
    assert dict(traces.one("invoke_agent /root").attributes or {})["trio_agent.turn.compactions"] == 1


@pytest.mark.parametrize("detailed", [False, True])
async def test_a_call_answered_at_its_first_attempt_is_one_span_with_the_attempts_attributes(
    server: FakeResponsesServer, workspace: Path, detailed: bool
) -> None:
    """No ``model.attempt`` under a call whose first attempt answered without opening a
    socket or carrying an event: its span would repeat the call's. What only the attempt
    knew (replay mode, attempt limit, socket) is on the call span with detailed
    attributes; by default it is left out, as is ``trio_agent.attempts`` (1)."""
    traces = Traces(detailed=detailed)
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1")

    async with scripted(script):
        responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, max_attempts=3)
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing, responses=responses)) as agent:
            await (await agent.prompt("plain")).result()

    call = traces.one("chat gpt-5.5")
    assert traces.children(call) == []
    expected: dict[str, Any] = {
        "trio_agent.attempts": 1, "trio_agent.attempt.max": 3, "trio_agent.replay_mode": "incremental",
        "trio_agent.connection.generation": 1, "trio_agent.response.status": "completed",
    }
    assert attrs_of(call, "gen_ai.response.id", *expected) == {
        "gen_ai.response.id": "resp-1", **(expected if detailed else dict.fromkeys(expected)),
    }
    (warmup,) = traces.named("warmup gpt-5.5")  # its attempt opened the socket: kept
    assert [s.name for s in traces.children(warmup)] == ["model.attempt"]


@pytest.mark.parametrize("api_events", [True, False])
async def test_an_interrupting_steer_is_an_event_of_the_turn_and_of_the_interrupted_attempt(
    server: FakeResponsesServer, workspace: Path, detailed_traces: Traces, api_events: bool
) -> None:
    # With api_events=False the tracer still sees the interrupt frame; agent.events does not.
    traces = detailed_traces  # the follow-up's previous response id is a detailed attribute
    streaming = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.response_created("resp-live"))
        streaming.set()
        interrupt = await conn.next_request()
        assert interrupt["type"] == "response.interrupt"
        await conn.send({"type": "response.incomplete", "response": {
            "id": "resp-live", "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}})
        await conn.next_request()
        await conn.send_final("resp-2")

    async with scripted(script):
        config = make_config(server, workspace, tracing=traces.tracing, api_events=api_events)
        async with ta.open_agent(config) as agent, trio.open_nursery() as nursery:
            log = EventLog()
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("go")
            await streaming.wait()
            await turn.steer("change course", interrupt=True)
            await turn.result()
            nursery.cancel_scope.cancel()

    assert bool(log.of(ta.EventKind.API_EVENT)) is api_events
    assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))
    turn_span = traces.one("invoke_agent /root")
    assert [e.name for e in turn_span.events] == ["trio_agent.interrupt", "trio_agent.steer"]
    assert dict(turn_span.events[0].attributes or {}) == {"gen_ai.response.id": "resp-live"}
    interrupted, follow_up = traces.named("chat gpt-5.5")
    assert dict(interrupted.attributes or {})["trio_agent.response.status"] == "incomplete"
    assert dict(follow_up.attributes or {})["trio_agent.previous_response_id"] == "resp-live"
    (attempt,) = traces.children(interrupted)
    assert [e.name for e in attempt.events] == ["trio_agent.interrupt"]
    assert attempt.status.status_code is StatusCode.UNSET  # an interrupted response is a completed one


async def test_a_failed_warmup_is_an_error_span_and_the_first_call_takes_the_fallback_path(
    server: FakeResponsesServer, workspace: Path, traces: Traces
) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_error("warmup unavailable")
        fallback = await server.accept()
        await fallback.next_request()
        await fallback.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            await (await agent.prompt("go")).result()

    warmup = traces.one("warmup gpt-5.5")
    assert warmup.status.status_code is StatusCode.ERROR and "warmup unavailable" in (warmup.status.description or "")
    assert dict(warmup.attributes or {})["error.type"] == "warmup_failed"
    call = traces.one("chat gpt-5.5")
    assert attrs_of(call, "trio_agent.warmup.path") == {"trio_agent.warmup.path": "warmup_fallback"}
    (attempt,) = traces.children(call)
    (connect,) = traces.children(attempt)
    assert dict(connect.attributes or {})["trio_agent.connection.purpose"] == "warmup_fallback"


async def test_inside_a_tool_handler_its_tool_span_is_current(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[tuple[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        for n in (1, 2):
            await conn.next_request()
            await conn.send_tool_call(f"resp-tool-{n}", f"call-{n}", "probe", {})
            await conn.next_request()
            await conn.send_final(f"resp-{n}")

    async def probe(ctx: ta.ToolContext, args: Any) -> str:
        seen.append((ctx.call_id, trace.get_current_span().get_span_context()))
        return "ok"

    before = trace.get_current_span()
    tools = ta.Tools.default().function("probe", "Look at the current span.", {"type": "object"}, probe)
    async with scripted(script, 30):
        async with ta.open_agent(make_config(server, workspace, tools=tools, tracing=traces.tracing)) as agent:
            for prompt in ("one", "two"):
                await (await agent.prompt(prompt)).result()
                assert trace.get_current_span() is before  # the application's task is left alone
    tool_spans = {dict(s.attributes or {})["gen_ai.tool.call.id"]: s.context
                  for s in traces.named("execute_tool probe")}
    assert seen == [("call-1", tool_spans["call-1"]), ("call-2", tool_spans["call-2"])]


async def test_a_call_made_by_a_cell_that_outlived_its_turn_stays_under_its_exec_span(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    source = "yield_control(); await new Promise(r => setTimeout(r, 1000)); await tools.add({a: 1, b: 1});"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-tool", "call-exec", "exec", source)
        await conn.next_request()  # "Script running with cell ID 1"
        await conn.send_final("resp-final")

    async def add(ctx: ta.ToolContext, args: Any) -> int:
        return int(args["a"]) + int(args["b"])

    tools = ta.Tools.default().function("add", "Add two numbers.", {"type": "object"}, add)
    async with scripted(script, 30) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=tools, tracing=traces.tracing)) as agent:
            log = EventLog()
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("start a background cell")).result()
            await log.wait_for(lambda e: e.kind is ta.EventKind.TOOL_RESULT and e.payload["tool"] == "add")

    turn, exec_span, add_span = (traces.one(name) for name in ("invoke_agent /root", "execute_tool exec",
                                                               "execute_tool add"))
    assert add_span.parent is not None and add_span.parent.span_id == exec_span.context.span_id
    assert (add_span.start_time or 0) > (turn.end_time or 0)  # it ran after its turn had ended
    assert attrs_of(add_span, "trio_agent.tool.background", "trio_agent.tool.parent_call_id",
                    "trio_agent.tool.status", "trio_agent.turn.id") == {
        "trio_agent.tool.background": True, "trio_agent.tool.parent_call_id": "call-exec",
        "trio_agent.tool.status": "completed", "trio_agent.turn.id": None,
    }
