"""Streaming tool dispatch (issue 27 item 1; codex.md 3.4), on both transports, on the
in-memory seam under ``MockClock(autojump_threshold=0)``: a tool call starts when its
``response.output_item.done`` arrives, while the rest of its response streams; calls
still run one at a time in model order; the response's items are committed first and
then each call's output, in model order, exactly once -- also when a call finished
before its response did; and the events, which now interleave with the response's own,
come in the same order every run.

Without streaming dispatch (the branch point) every test here fails but the one with
calls that only come in ``response.completed``, which guards the old path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._streaming_model import TRANSPORTS, Model, Tool, calls_and_outputs, output_of, well_formed
from ..conftest import EventLog, scripted

IDS = [t.name.lower() for t in TRANSPORTS]
A = frames.function_call("call-a", "work", "{}")
B = frames.function_call("call-b", "other", "{}")
TRAILER = frames.assistant_message("more after the calls")


async def run_turn(model: Model, workspace: Path, tools: ta.Tools, script: Callable[[], Awaitable[None]],
                   log: EventLog) -> ta.TurnResult:
    async with scripted(script, 30) as nursery, ta.open_agent(model.config(workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("go")
        return await turn.result()


def index_of(log: EventLog, match: Callable[[ta.AgentEvent], bool]) -> int:
    return next(i for i, event in enumerate(log.events) if match(event))


def inbound_item(call_id: str | None = None, item_type: str | None = None) -> Callable[[ta.AgentEvent], bool]:
    def match(event: ta.AgentEvent) -> bool:
        frame: Any = event.payload.get("event") if event.kind is ta.EventKind.API_EVENT else None
        if not isinstance(frame, dict) or event.payload.get("direction") != "inbound":
            return False
        item = frame.get("item") or {}
        return frame.get("type") == "response.output_item.done" and (
            call_id is None or item.get("call_id") == call_id) and (item_type is None or item.get("type") == item_type)

    return match


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_call_starts_while_its_response_streams_and_its_output_follows_the_response(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport,
) -> None:
    model, tool, log = Model(memory_server, transport), Tool(), EventLog()
    seconds: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()  # the response is still open: the call started while it streams
        await trio.testing.wait_all_tasks_blocked()
        assert tool.finished == ["call-a"]  # ... and finished before its response did
        await model.end([frames.output_item_done(1, TRAILER), frames.completed("resp-1", [A, TRAILER])])
        seconds.append(await model.next_request())
        await model.end([frames.completed("resp-2", [frames.assistant_message("ok")])])

    result = await run_turn(model, workspace, tool.tools(), script, log)

    assert tool.calls == ["call-a"]
    history = result.snapshot().history
    assert well_formed(history)
    # The response's items first, then the call's output (the runner's task writes both).
    kinds = [item["type"] for item in history if item.get("type") != "message" or item.get("role") == "assistant"]
    assert kinds == ["function_call", "message", "function_call_output", "message"]
    [second] = seconds
    assert output_of(second["input"], "call-a") == ["done call-a"]
    # Still chained on the response (the server holds the same call): the output alone.
    assert second.get("previous_response_id") == "resp-1"
    assert calls_and_outputs(second["input"]) == [("output", "call-a")]
    # tool.call and tool.result came while the response streamed, before its trailing item.
    trailer = index_of(log, inbound_item(item_type="message"))
    assert index_of(log, lambda e: e.kind is ta.EventKind.TOOL_RESULT) < trailer
    assert index_of(log, lambda e: e.kind is ta.EventKind.TOOL_CALL) > index_of(log, inbound_item("call-a"))


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_calls_still_run_one_at_a_time_in_model_order(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport,
) -> None:
    model, first, other, log = Model(memory_server, transport), Tool(held=True), Tool("other"), EventLog()
    seconds: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A),
                          frames.output_item_done(1, B)])
        await first.started.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert other.calls == []  # dispatched, waiting for the call before it
        await model.end([frames.completed("resp-1", [A, B])])
        await trio.testing.wait_all_tasks_blocked()
        assert other.calls == [] and seconds == []
        first.release.set()
        seconds.append(await model.next_request())
        await model.end([frames.completed("resp-2", [frames.assistant_message("ok")])])

    tools = first.tools().function("other", "Other work.", {"type": "object"}, other)
    result = await run_turn(model, workspace, tools, script, log)

    assert (first.calls, other.calls) == (["call-a"], ["call-b"])
    assert [p["call_id"] for p in log.payloads("tool.call")] == ["call-a", "call-b"]
    assert calls_and_outputs(seconds[0]["input"]) == [("output", "call-a"), ("output", "call-b")]
    assert calls_and_outputs(result.snapshot().history) == [
        ("call", "call-a"), ("call", "call-b"), ("output", "call-a"), ("output", "call-b")]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_calls_that_only_come_with_the_completed_response_run_after_it(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport,
) -> None:
    """A server that streams no items (most of this suite's scripts): as before."""
    model, tool, log = Model(memory_server, transport), Tool(), EventLog()

    async def script() -> None:
        await model.next_request()
        await model.end([frames.completed("resp-1", [A])])
        await model.next_request()
        await model.end([frames.completed("resp-2", [frames.assistant_message("ok")])])

    result = await run_turn(model, workspace, tool.tools(), script, log)
    assert tool.calls == ["call-a"] and well_formed(result.snapshot().history)
    assert index_of(log, lambda e: e.kind is ta.EventKind.MODEL_CALL_COMPLETED) < index_of(
        log, lambda e: e.kind is ta.EventKind.TOOL_CALL)


# -- the same event sequence every run -------------------------------------------------------

RUNS = 100


async def _interleaved_once(workspace: Path, transport: ta.Transport) -> list[str]:
    """Call A is quick (0.5 s), the server thinks 1 s before streaming call B (2 s) and a
    trailing message: A's result comes mid-stream, B's after the response ended."""
    server = FakeResponsesServer.in_memory()

    async def work(ctx: ta.ToolContext, args: Any) -> str:
        ctx.report("working")
        await trio.sleep(0.5 if ctx.call_id == "call-a" else 2.0)
        return "done"

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await trio.sleep(1.0)
        await model.send([frames.output_item_done(1, B)])
        await model.end([frames.output_item_done(2, TRAILER), frames.completed("resp-1", [A, B, TRAILER])])
        await model.next_request()
        await model.end([frames.completed("resp-2", [frames.assistant_message("ok")])])

    tools = ta.Tools.default().function("work", "Work.", {"type": "object"}, work).function(
        "other", "Work.", {"type": "object"}, work)
    log = EventLog()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        model = Model(server, transport)
        await run_turn(model, workspace, tools, script, log)
        nursery.cancel_scope.cancel()
    return [_signature(event) for event in log.events]


def _signature(event: ta.AgentEvent) -> str:
    payload = event.payload
    if event.kind is ta.EventKind.API_EVENT:
        frame: Any = payload.get("event") or {}
        return f"api.event {payload.get('direction')} {frame.get('type')} {(frame.get('item') or {}).get('call_id')}"
    if event.kind in (ta.EventKind.TOOL_CALL, ta.EventKind.TOOL_RESULT, ta.EventKind.TOOL_PROGRESS):
        return f"{event.kind.value} {payload.get('call_id')}"
    return event.kind.value


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_streamed_calls_interleave_with_their_response_the_same_way_every_run(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, transport: ta.Transport
) -> None:
    sequences = set()
    for run in range(RUNS):
        workspace = tmp_path / f"run-{run}"
        workspace.mkdir()
        sequences.add(tuple(await _interleaved_once(workspace, transport)))
    assert len(sequences) == 1, f"{len(sequences)} different event sequences in {RUNS} runs"
    [sequence] = sequences
    at = sequence.index
    # A ran and answered while the server was thinking; B started as soon as its item came,
    # before the trailing message, and answered after the response had ended.
    assert at("tool.call call-a") < at("tool.result call-a") < at("api.event inbound response.output_item.done call-b")
    assert at("api.event inbound response.output_item.done call-b") < at("tool.call call-b") < at(
        "api.event inbound response.output_item.done None")
    assert at("model.call.completed") < at("tool.result call-b")
