"""The thread manager hears each agent event in the task that emits it (issue 30, item 3):
the thread's agent hands its stream to a listener (``AgentEvents._listen``) instead of a
forwarding task reading it -- a wakeup and a queue hop per burst of every running
thread's events. What must not change: the manager's stream has every event, in order,
and the status events at the same places: ``ACTIVE`` right after a turn's
``run.started``, ``IDLE`` (``SYSTEM_ERROR`` after a failure) right after its terminal
event, nothing between turns that follow each other without a pause.

Checked without the change: with the forwarding task, the event a test emits is not in
the manager's stream until the task runs (``WouldBlock``); with the listener but the
status read as before (``entry.status``), a turn's terminal event is heard while the
agent still counts the turn running, so ``IDLE`` and ``SYSTEM_ERROR`` are never said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._events import EventKind, EventSink
from trio_agent.testing import FakeConnection, FakeResponsesServer

from ..acceptance.test_thread_manager import Model, Reply, answer_done

PROGRESS = {"call_id": "c", "tool": "t", "message": "x"}
@asynccontextmanager
async def manager(tmp_path: Path, reply: Reply = answer_done, relayed: Any = None) -> AsyncIterator[ta.ThreadManager]:
    server = FakeResponsesServer.in_memory()
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    config = ta.AgentConfig(auth="k", workspace=workspace, thinking=ta.Thinking.LOW,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url, dialer=server.dial))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(Model(server, reply).serve)
        async with ta.open_thread_manager(tmp_path / "home", config=config, relayed=relayed) as threads:
            yield threads
        nursery.cancel_scope.cancel()


def drain(threads: ta.ThreadManager) -> list[ta.ThreadEvent]:
    """What the manager's stream holds now (no checkpoint)."""
    taken = []
    while True:
        try:
            taken.append(threads.events.receive_nowait())
        except trio.WouldBlock:
            return taken


def statuses_and_turn_edges(events: list[ta.ThreadEvent]) -> list[str]:
    """Each turn's start and terminal event and each status event, in stream order."""
    shown = []
    for event in events:
        if event.kind == "thread.status":
            assert event.status is not None
            shown.append(event.status.value)
        elif event.event is not None and (event.event.kind is EventKind.RUN_STARTED or event.event.kind.is_terminal):
            shown.append(str(event.event.kind))
    return shown


async def test_the_manager_hears_an_event_in_the_emitting_task(tmp_path: Path) -> None:
    async with manager(tmp_path) as threads:
        agent = await threads.start(subscriber="client")
        drain(threads)
        sink: EventSink = agent._sink
        emitted = sink.emit(EventKind.TOOL_PROGRESS, PROGRESS)
        heard = drain(threads)  # no checkpoint since the emit
        assert [(event.kind, event.thread_id, event.event) for event in heard] == [
            ("agent", agent.session_id, emitted)]


async def test_a_listener_gets_the_waiting_events_first_then_each_in_order() -> None:
    sink = EventSink("s")
    first = sink.emit(EventKind.TOOL_PROGRESS, {**PROGRESS, "message": "1"})
    heard: list[Any] = []
    sink.stream._listen(heard.append)
    assert heard == [first]
    second = sink.emit(EventKind.TOOL_PROGRESS, {**PROGRESS, "message": "2"})
    assert heard == [first, second] and [e.seq for e in heard] == [1, 2]
    sink.close()
    sink.emit(EventKind.TOOL_PROGRESS, {**PROGRESS, "message": "3"})  # after close: nobody hears it
    assert heard == [first, second]
    with pytest.raises(trio.EndOfChannel):  # the stream itself only ends
        await sink.stream.receive()


async def test_status_events_sit_right_after_the_turn_edges(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with manager(tmp_path) as threads:
        agent = await threads.start(subscriber="client")
        drain(threads)
        await (await agent.prompt("one")).result()
        await trio.testing.wait_all_tasks_blocked()
        assert statuses_and_turn_edges(drain(threads)) == ["run.started", "active", "run.completed", "idle"]
        # Two turns back to back: active once, idle once the second is done.
        first, second = await agent.prompt("two"), await agent.prompt("three")
        await first.result()
        await second.result()
        await trio.testing.wait_all_tasks_blocked()
        assert statuses_and_turn_edges(drain(threads)) == [
            "run.started", "active", "run.completed", "run.started", "run.completed", "idle"]


async def test_a_failed_turn_says_system_error_after_its_terminal_event(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def fail(conn: FakeConnection, request: dict[str, Any]) -> None:
        await conn.send({"type": "response.failed", "response": {"id": "resp-1", "error": {
            "code": "invalid_request_error", "message": "simulated failure"}}})

    async with manager(tmp_path, fail) as threads:
        agent = await threads.start(subscriber="client")
        drain(threads)
        with pytest.raises(ta.TurnFailed):
            await (await agent.prompt("fail")).result()
        await trio.testing.wait_all_tasks_blocked()
        assert statuses_and_turn_edges(drain(threads)) == ["run.started", "active", "run.failed", "systemError"]


async def test_relayed_leaves_events_out_but_never_a_turn_edge(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[EventKind] = []

    def only_deltas(event: Any) -> bool:
        asked.append(event.kind)
        return bool(event.kind is EventKind.ASSISTANT_DELTA)

    async with manager(tmp_path, relayed=only_deltas) as threads:
        agent = await threads.start(subscriber="client")
        drain(threads)
        asked.clear()
        await (await agent.prompt("one")).result()
        await trio.testing.wait_all_tasks_blocked()
        heard = drain(threads)
        kinds = {event.event.kind for event in heard if event.event is not None}
        assert kinds <= {EventKind.RUN_STARTED, EventKind.RUN_COMPLETED, EventKind.ASSISTANT_DELTA}
        assert statuses_and_turn_edges(heard) == ["run.started", "active", "run.completed", "idle"]
        assert asked and EventKind.RUN_STARTED not in asked and EventKind.RUN_COMPLETED not in asked


async def test_an_event_left_out_still_restarts_the_idle_countdown(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with manager(tmp_path, relayed=lambda event: False) as threads:
        agent = await threads.start(subscriber="client", unload_delay=10.0)
        threads.unsubscribe(agent.session_id, "client")
        await trio.sleep(9)
        agent._sink.emit(EventKind.TOOL_PROGRESS, PROGRESS)  # left out of the stream
        await trio.sleep(9)
        assert threads.loaded() == [agent.session_id]
        await trio.sleep(2)
        assert threads.loaded() == []


async def test_relayed_must_be_a_function(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="relayed"):
        async with ta.open_thread_manager(tmp_path, config=ta.AgentConfig(auth="k"), relayed="all"):  # type: ignore[arg-type]
            pass


async def test_waiting_manager_events_are_taken_without_a_schedule_point(tmp_path: Path) -> None:
    """The manager's stream is the agents' own event queue (a deque), not a memory
    channel: a reader that finds events waiting takes them without a scheduler round
    each (issue 30, item 3: serve's pump). Without the change: the memory channel's
    ``receive`` yields once per event and the other task runs."""
    async with manager(tmp_path) as threads, trio.open_nursery() as nursery:
        agent = await threads.start(subscriber="client")
        drain(threads)
        emitted = [agent._sink.emit(EventKind.TOOL_PROGRESS, PROGRESS) for _ in range(3)]
        ran: list[str] = []

        async def other() -> None:
            ran.append("other")

        nursery.start_soon(other)  # runs at the next schedule point
        taken = [await threads.events.__anext__() for _ in range(3)]
        assert [event.event for event in taken] == emitted and ran == []
