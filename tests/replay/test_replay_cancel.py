"""A cancelled turn is recorded with its cancel (``input.cancel``, at its point between
frames) and replays: the cancel is given again at the same point, the turn ends
cancelled, and the session goes on as recorded (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import Cassette, FakeResponsesServer, ReplayedTurn, frames, replay
from trio_agent.testing._server import ClientDisconnected

from ..conftest import EventLog, memory_config
from ._session import add_tool, config

TRANSPORTS = [pytest.param(ta.Transport.WEBSOCKET, id="websocket"), pytest.param(ta.Transport.HTTPS, id="https")]


async def _websocket_model(server: FakeResponsesServer) -> None:
    conn = await server.accept()
    await conn.next_request()
    await conn.send_warmup("resp-warmup")
    await conn.next_request()
    await conn.send(frames.response_created("resp-1"))
    await conn.send(frames.text_delta(0, "working"))
    try:
        await conn.next_request()  # the cancel: the agent abandons the socket
    except ClientDisconnected:
        pass
    again = await server.accept()
    await again.next_request()
    await again.send_final("resp-2", "second answer")


async def _https_model(server: FakeResponsesServer) -> None:
    first = await server.accept_http()
    await first.start_stream()
    await first.send_event(frames.response_created("resp-1"))
    await first.send_event(frames.text_delta(0, "working"))
    try:
        while await first.stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    second = await server.accept_http()
    await second.send_final("resp-2", "second answer")


async def _record(server: FakeResponsesServer, transport: ta.Transport, workspace: Path, path: Path) -> None:
    model = _websocket_model if transport is ta.Transport.WEBSOCKET else _https_model
    log = EventLog()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, server)
            async with ta.open_agent(config(server, transport, workspace, record=path)) as agent:
                nursery.start_soon(log.consume, agent.events)
                first = await agent.prompt("start something long")
                await log.wait_for(lambda e: e.kind is ta.EventKind.ASSISTANT_DELTA)
                await first.cancel()
                with pytest.raises(ta.TurnCancelled):
                    await first.result()
                second = await agent.prompt("now something short")
                assert (await second.result()).final_message == "second answer"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_cancel_is_recorded_between_the_frames_it_came_between(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    path = tmp_path / "cancelled.jsonl"
    await _record(server, transport, workspace, path)
    cassette = Cassette.load(path)
    cancels = [o for o in cassette.observations if o.kind == "input.cancel"]
    assert [(o.data["agent"], o.data["turn"]) for o in cancels] == [("/root", 1)]
    (cancel,) = cancels
    assert cancel in cassette.inputs()
    delta = next(o for o in cassette.observations if "output_text.delta" in str(o.data))
    end = next(o for o in cassette.turn_ends() if o.data["turn"] == 1)
    assert delta.line < cancel.line < end.line
    assert end.data["status"] == "cancelled"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_cancelled_turn_replays(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    path = tmp_path / "cancelled.jsonl"
    await _record(server, transport, workspace, path)
    with trio.fail_after(20):  # before issue 29 the replay waited here for a cancel never given
        result = await replay(path, workspace=workspace, tools=add_tool())
    result.check()
    assert result.turns == (ReplayedTurn(1, "cancelled", None), ReplayedTurn(2, "completed", "second answer"))


async def test_a_cancel_the_agent_no_longer_accepts_is_a_mismatch(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "cancelled.jsonl"
    await _record(server, ta.Transport.WEBSOCKET, workspace, path)
    lines = path.read_text().splitlines()
    # The recorded cancel now names turn 2, which has not been prompted at that point.
    edited = [line.replace('"turn":1', '"turn":2') if '"input.cancel"' in line else line for line in lines]
    assert edited != lines
    path.write_text("\n".join(edited) + "\n")
    with trio.fail_after(20):
        result = await replay(path, workspace=workspace, tools=add_tool())
    assert result.mismatch is not None
    assert "cancel" in result.mismatch.headline


async def test_a_stalled_replay_ends_at_its_timeout_saying_what_it_waited_for(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "cancelled.jsonl"
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_websocket_model, memory_server)
            async with ta.open_agent(memory_config(memory_server, workspace, record=path)) as agent:
                first = await agent.prompt("start something long")
                await first.wait_running()
                await trio.testing.wait_all_tasks_blocked()
                await first.cancel()
                await (await agent.prompt("now something short")).result()
    # A cassette without its cancel (as recorded before issue 29): the replayed turn
    # waits for frames, the server for the agent to close the socket.
    lines = [line for line in path.read_text().splitlines() if '"input.cancel"' not in line]
    path.write_text("\n".join(lines) + "\n")
    start = trio.current_time()
    result = await replay(path, workspace=workspace, in_memory=True, limit=30)
    assert trio.current_time() - start == pytest.approx(30)
    assert result.mismatch is not None
    headline = result.mismatch.headline
    assert "did not finish within 30 s" in headline
    assert "the agent to close connection 1" in headline
