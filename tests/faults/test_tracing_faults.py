"""Fault matrix: what the tracer reads from the server, hostile (issue 29 item 2).

The tracer takes the response model and the finish reason from a response's terminal
frame, token counts from its ``usage`` and, when capturing content, its ``output``:
whatever those hold -- wrong types, missing pieces, a frame without a ``response``
object (the response fails) -- the turn ends with its one outcome, the call's span is
exported, and nothing but a well-typed value reaches an attribute or a metric (a
tracer error would stop tracing with a RuntimeWarning: an error under this suite's
warning filter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm
from ..tracing.conftest import Traces


def _hostile(**response: Any) -> dict[str, Any]:
    frame = frames.completed("resp-1", [frames.assistant_message("ok")])
    frame["response"].update(response)
    return frame


HOSTILE = {
    "model_a_number": _hostile(model=7),
    "model_an_object": _hostile(model={"name": "gpt"}),
    "incomplete_details_a_string": _hostile(incomplete_details="max_output_tokens"),
    "reason_a_list": _hostile(incomplete_details={"reason": ["max_output_tokens"]}),
    "usage_strings": _hostile(usage={"input_tokens": "ten", "output_tokens": None}),
    "usage_a_list": _hostile(usage=[1, 2]),
    "response_not_an_object": {"type": "response.completed", "response": "not an object"},
}
FAILS = {"usage_a_list", "response_not_an_object"}  # the runtime refuses these responses: the turn fails


@pytest.mark.parametrize("capture", [False, True], ids=["plain", "capturing"])
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_hostile_terminal_frames_leave_the_turn_and_its_spans_whole(
    server: FakeResponsesServer, workspace: Path, case: str, capture: bool, autojump_clock: trio.testing.MockClock
) -> None:
    traces, frame = Traces(), HOSTILE[case]
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, capture_content=capture)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await trio.sleep(0.25)
        await conn.send(frame)

    outcome: str
    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
            try:
                outcome = (await (await agent.prompt("go")).result()).final_message
            except ta.TurnFailed:
                outcome = "failed"

    assert outcome == ("failed" if case in FAILS else "ok")
    (turn,) = traces.named("invoke_agent /root")
    assert dict(turn.attributes or {})["trio_agent.turn.status"] == ("failed" if outcome == "failed" else "completed")
    (call,) = traces.named("chat gpt-5.5")
    attributes = dict(call.attributes or {})
    assert "gen_ai.response.model" not in attributes  # never a non-string model
    assert attributes.get("gen_ai.response.finish_reasons") == (None if outcome == "failed" else ("stop",))
    if capture:  # the input went out; the output is captured as whatever JSON came
        assert "gen_ai.input.messages" in attributes
        assert ("gen_ai.output.messages" in attributes) is isinstance(frame["response"], dict)
    for point in traces.histogram_points("gen_ai.client.token.usage"):
        assert isinstance(point.sum, int) and point.sum >= 0


ODD_FRAMES: dict[str, dict[str, Any]] = {
    "type_a_list": {"type": ["response.completed"]},
    "type_an_object": {"type": {"name": "response.completed"}},
    "type_a_number": {"type": 7},
    "no_type": {"response": {"id": "resp-1"}},
}


@pytest.mark.parametrize("case", list(ODD_FRAMES))
async def test_frames_with_odd_types_pass_the_tracers_frame_filter(
    server: FakeResponsesServer, workspace: Path, case: str, autojump_clock: trio.testing.MockClock
) -> None:
    """The tracer is given only some frames (``AgentObserver.api_frames``, by ``type``):
    a frame whose ``type`` is no string -- a list or an object would not even hash -- is
    not one of them. The runtime refuses such a frame (the turn fails); the turn ends
    with that one outcome, its spans say so, and the frame is in ``agent.events``."""
    traces = Traces()
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, capture_content=False)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await trio.sleep(0.25)
        await conn.send(ODD_FRAMES[case])

    async with scripted(script):
        log = EventLog()
        async with trio.open_nursery() as nursery:  # the log is read to the stream's end
            async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
                nursery.start_soon(log.consume, agent.events)
                with pytest.raises(ta.TurnFailed):
                    await (await agent.prompt("go")).result()
    assert ODD_FRAMES[case] in [e.payload["event"] for e in log.of(ta.EventKind.API_EVENT)]
    assert [e.kind for e in log.events if e.kind.is_terminal] == [ta.EventKind.RUN_FAILED]
    (turn,) = traces.named("invoke_agent /root")
    assert dict(turn.attributes or {})["trio_agent.turn.status"] == "failed"
    (call,) = traces.named("chat gpt-5.5")
    assert "error.type" in dict(call.attributes or {})


async def test_a_server_naming_a_new_model_per_response_gets_one_series_each(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The response model comes from the server and keys a metric series: a server
    naming a new one in every response makes as many series (the SDK bounds them: its
    cardinality limit) while the tracer keeps at most 64 of its own prebuilt mappings
    (``_metrics.Series``) -- past that, each recording still lands in its model's series."""
    traces = Traces()
    tracing = ta.Tracing(tracer_provider=traces.provider, meter_provider=traces.meters, capture_content=False)
    turns = 70

    async def script() -> None:
        conn = await warm(server)
        for i in range(turns):
            await conn.next_request()
            await trio.sleep(0.05)
            await conn.send(_hostile(id=f"resp-{i + 1}", model=f"model-{i}"))

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
            for _ in range(turns):
                assert (await (await agent.prompt("go")).result()).final_message == "ok"
    durations = traces.histogram_points("gen_ai.client.operation.duration")
    models = sorted(str((point.attributes or {})["gen_ai.response.model"]) for point in durations)
    assert models == sorted(f"model-{i}" for i in range(turns))
    assert all(point.count == 1 for point in durations)
    tokens = traces.histogram_points("gen_ai.client.token.usage")
    assert len(tokens) == 2 * turns and all(point.count == 1 for point in tokens)
