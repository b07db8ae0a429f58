"""Replays in memory under ``MockClock(autojump_threshold=0)``: recorded timing replayed
exactly (or scaled, or compressed), the same events every run, and an interrupting
steer that must land before the frame that makes it sendable."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import Cassette, FakeResponsesServer, ReplayMismatch, ReplayServer, frames, replay

from ..conftest import EventLog, memory_config


async def _timed_model(server: FakeResponsesServer) -> None:
    conn = await server.accept()
    await conn.next_request()
    await trio.sleep(1.0)
    await conn.send_warmup("resp-warmup")
    await conn.next_request()
    await trio.sleep(2.0)
    await conn.send(frames.response_created("resp-1"))
    await trio.sleep(0.5)
    await conn.send(frames.text_delta(0, "thinking"))
    await trio.sleep(1.5)
    await conn.send_final("resp-1", "done")


async def _record_timed(server: FakeResponsesServer, workspace: Path, path: Path) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_timed_model, server)
            async with ta.open_agent(memory_config(server, workspace, record=path)) as agent:
                await (await agent.prompt("hello")).result()


def inbound_gaps(events: tuple[ta.AgentEvent, ...] | list[ta.AgentEvent]) -> list[float]:
    """Seconds between each frame and what the agent sent or received just before it."""
    api = [e for e in events if e.kind is ta.EventKind.API_EVENT]
    return [round(b.time - a.time, 6) for a, b in itertools.pairwise(api)
            if b.payload["direction"] == "inbound"]


async def test_recorded_times_are_trios_clock(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "timed.jsonl"
    await _record_timed(memory_server, workspace, path)
    frames_ = [o for o in Cassette.load(path).observations if o.kind in ("ws.send", "ws.recv")]
    gaps = [round(b.t - a.t, 6) for a, b in itertools.pairwise(frames_)]
    assert gaps == [1.0, 0.0, 2.0, 0.5, 1.5]  # the prompt goes out as the warmup completes


@pytest.mark.parametrize(("timing", "expected"), [(1.0, [1.0, 2.0, 0.5, 1.5]), (0.5, [0.5, 1.0, 0.25, 0.75]),
                                                  (0.0, [0.0, 0.0, 0.0, 0.0])])
async def test_replayed_timing_is_exact_scaled_or_compressed(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock,
    timing: float, expected: list[float],
) -> None:
    path = tmp_path / "timed.jsonl"
    await _record_timed(memory_server, workspace, path)
    start = trio.current_time()
    result = await replay(path, workspace=workspace, timing=timing, in_memory=True)
    result.check()
    assert inbound_gaps(result.events) == expected
    assert round(trio.current_time() - start, 6) == sum(expected)


async def test_a_replay_gives_the_same_events_at_the_same_times_every_run(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "timed.jsonl"
    await _record_timed(memory_server, workspace, path)

    async def once() -> list[tuple[str, float]]:
        start = trio.current_time()
        result = await replay(path, workspace=workspace, timing=1.0, in_memory=True)
        result.check()
        return [(e.kind.value, round(e.time - start, 6)) for e in result.events if "duration" not in str(e.payload)]

    first = await once()
    assert first == await once()
    assert ("assistant.delta", 3.5) in first  # the warmup answer at 1.0, the delta 2.5 s after the prompt


def _interrupted(response_id: str) -> dict[str, Any]:
    frame = frames.completed(response_id, usage_block=frames.usage(42))
    frame["type"] = "response.incomplete"
    frame["response"]["status"] = "incomplete"
    frame["response"]["incomplete_details"] = {"reason": "interrupted"}
    del frame["response"]["output"]
    return frame


async def test_an_interrupting_steer_given_before_the_response_id_is_replayed(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Recorded: the steer (interrupt=True) is given before ``response.created`` names the
    response, so its interrupt frame can only go out after that frame. The replay gives
    the steer at the same point and the server holds ``response.created`` until it is
    given: the same interrupt, the same drained response, the same follow-up."""
    path = tmp_path / "interrupt.jsonl"
    request_seen = trio.Event()

    async def model() -> None:
        conn = await memory_server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        request_seen.set()
        await trio.testing.wait_all_tasks_blocked()  # the steer waits for the response id
        await conn.send(frames.response_created("resp-live"))
        interrupt = await conn.next_request()
        assert interrupt["type"] == "response.interrupt"
        await conn.send(_interrupted("resp-live"))
        follow_up = await conn.next_request()
        assert follow_up["previous_response_id"] == "resp-live"
        await conn.send_final("resp-after", "steered")

    log = EventLog()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model)
        async with ta.open_agent(memory_config(memory_server, workspace, record=path)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("first")
            await request_seen.wait()
            await turn.steer("second", interrupt=True)
            assert (await turn.result()).final_message == "steered"
    cassette = Cassette.load(path)
    steer = cassette.inputs()[1]
    created = next(o for o in cassette.observations if o.kind == "ws.recv" and "resp-live" in str(o.data))
    assert steer.data["interrupt"] is True and steer.line < created.line

    with trio.fail_after(60):
        result = await replay(path, workspace=workspace, in_memory=True)
    result.check()
    assert result.turns[0].final_message == "steered"
    sent = [e.payload["event"]["type"] for e in result.events
            if e.kind is ta.EventKind.API_EVENT and e.payload["direction"] == "outbound"]
    assert sent == ["response.create", "response.create", "response.interrupt", "response.create"]


async def test_a_replay_server_can_be_driven_by_hand(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Without ``replay()``: the test prompts the agent itself; the server still checks
    every request and plays every frame."""
    path = tmp_path / "timed.jsonl"
    await _record_timed(memory_server, workspace, path)
    server = ReplayServer(path, workspace=workspace, in_memory=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        config = ta.AgentConfig(auth="k", workspace=workspace, thinking=ta.Thinking.LOW,
                                session_id=server.cassette.header.session_id, responses=server.responses())
        async with ta.open_agent(config) as agent:
            assert (await (await agent.prompt("hello")).result()).final_message == "done"
        with trio.fail_after(5):
            await server.wait_done()
        assert server.unreached() == [] and server.mismatch is None
        assert server.requests_matched == 2
        nursery.cancel_scope.cancel()

    changed = ReplayServer(path, workspace=workspace, in_memory=True)
    caught: list[ReplayMismatch] = []
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(changed.serve)
            config = ta.AgentConfig(auth="k", workspace=workspace, thinking=ta.Thinking.LOW,
                                    responses=changed.responses())
            async with ta.open_agent(config) as agent:
                await (await agent.prompt("goodbye")).result()
    except* ReplayMismatch as group:  # serve raised the mismatch itself; the nursery grouped it
        caught.extend(e for e in group.exceptions if isinstance(e, ReplayMismatch))
    (mismatch,) = caught
    assert mismatch is changed.mismatch
    diff = mismatch.diff.splitlines()
    assert '-          "text": "hello",' in diff and '+          "text": "goodbye",' in diff
