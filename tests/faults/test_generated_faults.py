"""Fault matrix, generated: hostile frames, tool arguments and tool return values
pushed through a live agent (issue 8, item 2).

Each example scripts a model whose every response is drawn from a strategy -- raw JSON
of any shape, frames of known types with arbitrary fields, error frames with arbitrary
codes and ``retry_after``, function calls with arbitrary arguments to a tool that
returns an arbitrary (possibly unencodable) value, calls that stream (and start at
once) before a hostile end -- and runs a few turns on the
in-memory seam under ``MockClock`` (so idle timeouts and backoff take no wall time).
The properties: the agent survives (nothing raises out of ``open_agent``), each turn
has exactly one terminal event and its ``result()`` agrees with it, and the
committed history is well-formed (every tool call is answered by exactly one output).
CI runs it derandomized (tests/conftest.py ``ci`` profile).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(
    max_size=20)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KNOWN = ["response.created", "response.in_progress", "response.output_item.added", "response.output_text.delta",
         "response.output_item.done", "response.completed", "response.failed", "response.incomplete", "error",
         "response.metadata", "response.reasoning_summary_text.delta", "something.new"]


@st.composite
def known_frame(draw: st.DrawFn) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": draw(st.sampled_from(KNOWN))}
    for key in draw(st.lists(st.sampled_from(["response", "item", "delta", "output_index", "error", "headers"]),
                             max_size=3, unique=True)):
        frame[key] = draw(json_values)
    return frame


@st.composite
def error_frame(draw: st.DrawFn) -> dict[str, Any]:
    code = draw(st.sampled_from(["server_is_overloaded", "rate_limit_exceeded", "invalid_image", "insufficient_quota",
                                 "previous_response_not_found", "whatever", None]))
    return frames.error_frame("hostile", code=code, retry_after=draw(json_scalars))


def echo_call(arguments: str) -> dict[str, Any]:
    return frames.completed("resp-call", [frames.function_call("call-echo", "echo", arguments)])


@st.composite
def streamed_call(draw: st.DrawFn) -> list[Any]:
    """A call that streams (it starts at once, issue 27), its name possibly hostile, then
    an end of any kind: completed with or without it, a repeat of it, a failure, garbage,
    or nothing (the idle timeout)."""
    call = frames.function_call("call-echo", draw(st.just("echo") | json_values), "{}")
    head = [frames.response_created("resp-call"), frames.output_item_done(0, call)]
    tail = draw(st.sampled_from([
        [frames.completed("resp-call", [call])],
        [frames.completed("resp-call", [])],
        [frames.output_item_done(1, call), frames.completed("resp-call", [call, call])],
        [frames.error_frame("overloaded", code="server_is_overloaded")],
        [frames.error_frame("quota", code="insufficient_quota")],
        ['{"type": "response.completed"'],
        [],
    ]))
    return [*head, *tail]


reply = st.one_of(
    st.lists(json_values.map(json.dumps) | known_frame(), min_size=1, max_size=4),
    error_frame().map(lambda frame: [frame]),
    json_values.map(lambda value: [echo_call(json.dumps(value))]),
    st.text(max_size=30).map(lambda text: [echo_call(text)]),
    streamed_call(),
    st.just([frames.completed("resp-final", [frames.assistant_message("final")])]),
)


def well_formed(history: list[dict[str, Any]]) -> bool:
    calls = [item["call_id"] for item in history if item.get("type") in ("function_call", "custom_tool_call")]
    outputs = [item["call_id"] for item in history
               if item.get("type") in ("function_call_output", "custom_tool_call_output")]
    return sorted(calls) == sorted(outputs) and len(set(outputs)) == len(outputs)


def _unique(frame: Any, n: int) -> Any:
    """The scripted frame with response and call ids made unique (a real server never
    reuses a response id; history pairs calls by id)."""
    if isinstance(frame, dict) and frame.get("type") in ("response.completed", "response.output_item.done"):
        text = json.dumps(frame).replace('"resp-', f'"r{n}-resp-').replace('"call-echo"', f'"call-echo-{n}"')
        return json.loads(text)
    return frame


async def serve(server: FakeResponsesServer, replies: list[list[Any]]) -> None:
    """Answer every request on every connection with the next reply (then finals)."""
    pending = list(replies)
    sent = 0

    async def connection(conn: FakeConnection) -> None:
        nonlocal sent
        try:
            while True:
                request = await conn.next_request()
                if request.get("generate") is False:
                    await conn.send_warmup("resp-warmup")
                    continue
                if request.get("type") == "response.interrupt":
                    continue
                sent += 1
                for frame in pending.pop(0) if pending else [frames.completed("resp-end", [
                        frames.assistant_message("end")])]:
                    frame = _unique(frame, sent)
                    if isinstance(frame, str):
                        await conn._ws.send_message(frame)
                    else:
                        await conn.send(frame)
        except Exception:  # the client dropped this connection (as it should, often)
            return

    async with trio.open_nursery() as nursery:
        while True:
            nursery.start_soon(connection, await server.accept())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(replies=st.lists(reply, max_size=6), returned=json_values | st.sampled_from(["bytes", "set", "circular"]))
def test_generated_faults_never_break_the_agents_promises(tmp_path: Path, replies: list[list[Any]],
                                                          returned: Any) -> None:
    if returned == "bytes":
        returned = b"\xff"
    elif returned == "set":
        returned = {1, 2}
    elif returned == "circular":
        returned = []
        returned.append(returned)

    async def echo(ctx: ta.ToolContext, args: Any) -> Any:
        return returned

    async def main() -> None:
        server = FakeResponsesServer.in_memory()
        tools = ta.Tools.default().function("echo", "Echo.", {"type": "object"}, echo)
        config = ta.AgentConfig(
            auth="k", workspace=tmp_path, session_id="generated", tools=tools,
            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                   websocket_url=server.url, dialer=server.dial, max_attempts=2, idle_timeout=5),
        )
        terminals: dict[int | None, list[str]] = {}
        outcomes: dict[int, str] = {}
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            nursery.start_soon(serve, server, replies)
            async with ta.open_agent(config) as agent:

                async def watch() -> None:
                    async for event in agent.events:
                        if event.kind.is_terminal:
                            terminals.setdefault(event.turn_id, []).append(event.payload["status"])

                nursery.start_soon(watch)
                results: list[ta.TurnResult] = []
                for text in ("one", "two", "three"):
                    turn = await agent.prompt(text)
                    try:
                        results.append(await turn.result())
                        outcomes[turn.turn_id] = "completed"
                    except ta.TurnFailed:
                        outcomes[turn.turn_id] = "failed"
            nursery.cancel_scope.cancel()
        assert terminals == {turn_id: [status] for turn_id, status in outcomes.items()}
        for result in results:
            assert well_formed(result.snapshot().history)
            assert all(not isinstance(v, float) or math.isfinite(v) for v in _floats(result.snapshot().history))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []
