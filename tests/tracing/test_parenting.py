"""Where the agent's spans hang: under the application's spans (through Trio's
contextvars), and forks and children linked to the agent they came from."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from .conftest import Traces, parent_of


def links(span: ReadableSpan) -> list[tuple[int, str]]:
    return [(link.context.span_id, str((link.attributes or {}).get("trio_agent.link.type"))) for link in span.links]


async def three_answers(server: FakeResponsesServer) -> None:
    conn = await warm(server)
    for n in (1, 2, 3):
        await conn.next_request()
        await conn.send_final(f"resp-{n}")


async def test_an_application_span_is_the_parent_of_the_agent_and_of_the_turns_it_asks_for(
    server: FakeResponsesServer, workspace: Path, traces: Traces
) -> None:
    app = traces.provider.get_tracer("app")
    async with scripted(functools.partial(three_answers, server)):
        with app.start_as_current_span("app.session") as session:
            async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
                await (await agent.prompt("asked in the block")).result()
                with app.start_as_current_span("app.request") as request:
                    second = await agent.prompt("asked under the request span")
                await second.result()
                token = otel_context.attach(otel_context.Context())  # a task with no current span
                try:
                    third = await agent.prompt("asked with no span")
                finally:
                    otel_context.detach(token)
                await third.result()

    spans = traces.spans
    agent_span = traces.one("agent /root")
    assert parent_of(agent_span, spans) is not None
    assert parent_of(agent_span, spans).context == session.get_span_context()  # type: ignore[union-attr]
    first, second_span, third_span = traces.named("invoke_agent /root")
    # The span the agent was opened under, or none: the turn hangs under the agent span.
    assert parent_of(first, spans) == agent_span and links(first) == []
    assert parent_of(third_span, spans) == agent_span and links(third_span) == []
    # A span the application opened since: the turn is its child, linked to the agent.
    assert second_span.parent is not None and second_span.parent.span_id == request.get_span_context().span_id
    assert links(second_span) == [(agent_span.context.span_id, "agent")]
    (call,) = [s for s in traces.named("chat gpt-5.5") if parent_of(s, spans) == second_span]
    assert call.attributes is not None and call.attributes["gen_ai.response.id"] == "resp-2"
    assert {s.context.trace_id for s in spans} == {session.get_span_context().trace_id}


async def test_a_fork_is_linked_to_its_parent_agent_and_the_turn_it_forked_from(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    """The root's tool forks the agent mid-turn: the fork's agent span is a child of that
    tool's span (current in the handler) and links to the root agent and its live turn."""

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await trio.sleep(0.1)
        await root.send_tool_call("resp-tool", "call-fork", "fork_and_ask", {})
        branch = await server.accept()  # the fork's own connection, no warmup
        request = await branch.next_request()
        assert "ask the branch" in json.dumps(request)
        await branch.send_final("resp-branch", "branch answer")
        await root.next_request()
        await root.send_final("resp-root")

    async def fork_and_ask(ctx: ta.ToolContext, args: Any) -> str:
        async with ctx.agent.fork() as branch:
            return (await (await branch.prompt("ask the branch")).result()).final_message

    tools = ta.Tools.default().function("fork_and_ask", "Fork and ask.", {"type": "object"}, fork_and_ask)
    async with scripted(script, 30):
        config = make_config(server, workspace, tools=tools, tracing=traces.tracing)
        async with ta.open_agent(config) as agent:
            assert (await (await agent.prompt("go")).result()).final_message == "done"

    spans = traces.spans
    root_agent, root_turn = traces.one("agent /root"), traces.one("invoke_agent /root")
    fork_agent, fork_turn = traces.one("agent /root/fork-1"), traces.one("invoke_agent /root/fork-1")
    assert parent_of(fork_agent, spans) == traces.one("execute_tool fork_and_ask")
    assert links(fork_agent) == [(root_agent.context.span_id, "parent_agent"),
                                 (root_turn.context.span_id, "parent_turn")]
    assert fork_agent.attributes is not None
    assert fork_agent.attributes["trio_agent.agent.origin"] == "fork"
    assert fork_agent.attributes["trio_agent.agent.parent_session_id"] == "model-test"
    assert fork_agent.attributes["gen_ai.conversation.id"] != "model-test"  # its own session
    assert parent_of(fork_turn, spans) == fork_agent
    (fork_call,) = [s for s in spans if s.name == "chat gpt-5.5" and parent_of(s, spans) == fork_turn]
    assert fork_call.attributes is not None and fork_call.attributes["trio_agent.warmup.path"] == "cold_connect"
    assert [name for name, _ in traces.tree()[0][1]] == ["warmup gpt-5.5", "invoke_agent /root"]


async def test_a_spawned_child_warms_up_on_its_own_and_links_to_its_parent(
    server: FakeResponsesServer, workspace: Path, traces: Traces
) -> None:
    async def script() -> None:
        await warm(server)
        child = await server.accept()
        warmup = await child.next_request()
        assert warmup["generate"] is False
        await child.send_warmup("resp-child-warmup")
        await child.next_request()
        await child.send_final("resp-child")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            async with agent.spawn("helper") as child:
                await (await child.prompt("hello")).result()

    spans = traces.spans
    child_agent = traces.one("agent /root/helper")
    assert child_agent.parent is None  # no application span was current
    assert links(child_agent) == [(traces.one("agent /root").context.span_id, "parent_agent")]
    assert child_agent.attributes is not None and child_agent.attributes["trio_agent.agent.origin"] == "spawn"
    child_warmup = [s for s in traces.named("warmup gpt-5.5") if parent_of(s, spans) == child_agent]
    assert len(child_warmup) == 1
    (call,) = traces.named("chat gpt-5.5")
    assert call.attributes is not None and call.attributes["trio_agent.warmup.path"] == "startup_prewarm"


async def test_turn_traces_roots_each_turn_without_an_application_span_in_a_trace_of_its_own(
    server: FakeResponsesServer, workspace: Path
) -> None:
    traces = Traces()
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, turn_traces=True)
    app = traces.provider.get_tracer("app")
    async with scripted(functools.partial(three_answers, server)):
        async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
            await (await agent.prompt("one")).result()
            await (await agent.prompt("two")).result()
            with app.start_as_current_span("app.request") as request:
                third = await agent.prompt("asked under the request span")
            await third.result()
            await agent.flush_telemetry()  # what tracing deferred: the ended turns' spans
            # Each turn's trace is whole now, before the agent closes: its root has ended.
            finished = traces.spans
            assert sorted(s.name for s in finished if s.parent is None) == ["app.request", *["invoke_agent /root"] * 2]

    spans = traces.spans
    agent_span = traces.one("agent /root")
    first, second, third_span = traces.named("invoke_agent /root")
    trace_ids = {agent_span.context.trace_id, first.context.trace_id, second.context.trace_id}
    assert len(trace_ids) == 3  # the agent's trace, and one per turn
    for turn in (first, second):
        assert turn.parent is None and links(turn) == [(agent_span.context.span_id, "agent")]
        (call,) = [s for s in spans if s.name == "chat gpt-5.5" and parent_of(s, spans) == turn]
        assert call.context.trace_id == turn.context.trace_id
    # A turn asked for under an application span still hangs under it.
    assert third_span.parent is not None and third_span.parent.span_id == request.get_span_context().span_id


def test_turn_traces_must_be_a_bool() -> None:
    with pytest.raises(ta.ConfigError, match="turn_traces"):
        ta.Tracing(turn_traces=1)  # type: ignore[arg-type]
