"""How events travel in batches (issue 30 item 5): the actor's pump takes every event
waiting in the agent's stream at one wake, a batch pickles as rows (the session id
once), and the driver hands a batch to a memory channel with room without a schedule
point per event -- each in order, none lost."""

from __future__ import annotations

import pickle
from pathlib import Path

import ray.cloudpickle
import trio
import trio.testing

import trio_agent as ta
from trio_agent._events import EventSink
from trio_agent.ray import AgentTask, TaskStatus
from trio_agent.ray._drive import TaskDriver
from trio_agent.ray._host import AgentHost, _Record
from trio_agent.ray._remote import TaskState
from trio_agent.ray._values import EventBatch, TaskEvent
from trio_agent.testing import FakeResponsesServer


def events(count: int, session_id: str = "session-one") -> tuple[ta.AgentEvent, ...]:
    return tuple(ta.AgentEvent(ta.EventKind.ASSISTANT_DELTA, {"text": f"d{i}"}, i + 1, session_id, 1, float(i))
                 for i in range(count))


def test_a_batch_pickles_as_rows_with_its_session_id_once() -> None:
    batch = EventBatch(events(5))
    for data in (pickle.dumps(batch, protocol=5), ray.cloudpickle.dumps(batch)):
        assert pickle.loads(data) == batch
        assert data.count(b"session-one") == 1
        assert b"payload" not in data and b"turn_id" not in data  # no per-event state dicts
    mixed = EventBatch(events(1) + events(1, "session-two"))  # not one agent's: as they are
    assert pickle.loads(pickle.dumps(mixed)) == mixed
    assert pickle.loads(pickle.dumps(EventBatch())) == EventBatch()


async def test_the_pump_takes_every_waiting_event_at_one_wake() -> None:
    host = AgentHost(0)
    record = host._records["t"] = _Record("t", started=True, start_reported=True)
    sink = EventSink("session-one")
    for i in range(5):
        sink.emit(ta.EventKind.ASSISTANT_DELTA, {"text": f"d{i}"}, 1)
    async with trio.open_nursery() as nursery:
        record.pumping = True
        nursery.start_soon(host._pump, sink.stream, record, True)
        await trio.testing.wait_all_tasks_blocked()
        assert [e.payload["text"] for e in record.buffer] == [f"d{i}" for i in range(5)]
        assert host._touches == 1 and record.emitted == 5  # one wake, one touch
        sink.emit(ta.EventKind.ASSISTANT_DELTA, {"text": "d5"}, 1)
        sink.close()
    assert len(record.buffer) == 6 and record.emitted == 6 and not record.pumping


async def test_a_batch_goes_into_a_channel_with_room_without_a_schedule_point_per_event() -> None:
    send, receive = trio.open_memory_channel[TaskEvent](16)
    task = AgentTask(ta.AgentConfig(auth="test-key", workspace="."), prompts=["hi"])
    state = TaskState(task, b"", send)
    seen: list[int] = []
    done = False

    async def deliver() -> None:
        nonlocal done
        await TaskDriver._deliver(state, events(5))
        done = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(deliver)
        while not done:
            seen.append(send.statistics().current_buffer_used)
            await trio.lowlevel.checkpoint()
    assert set(seen) <= {0, 5}  # never part of the batch
    received = [receive.receive_nowait().event.seq for _ in range(5)]
    assert received == [1, 2, 3, 4, 5] and state.delivered == 5 and state.offset == 5

    # A full channel is waited on, event by event, in order.
    small_send, small_receive = trio.open_memory_channel[TaskEvent](2)
    state = TaskState(task, b"", small_send)
    got: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(TaskDriver._deliver, state, events(5))
        for _ in range(5):
            got.append((await small_receive.receive()).event.seq)
    assert got == [1, 2, 3, 4, 5] and state.delivered == 5


class _Method:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, bytes, bool]]] = []

    def remote(self, tasks: list[tuple[str, bytes, bool]]) -> None:
        self.calls.append(tasks)


class _Handle:
    def __init__(self) -> None:
        self.run_tasks = _Method()


async def test_tasks_dispatched_together_go_to_their_actor_in_one_call() -> None:
    """``ActorLink.submit``: the tasks submitted in one pass of the driver's loop travel
    in one ``run_tasks`` call, in order; one the link no longer serves is left out."""
    from trio_agent.ray._dispatch import Slot
    from trio_agent.ray._link import ActorLink
    from trio_agent.ray._values import ActorInfo

    handle = _Handle()
    link = ActorLink(Slot(0, handle, ActorInfo(0, 1, "node", "0")), lambda slot: None)
    config = ta.AgentConfig(auth="test-key", workspace=".")
    states = [TaskState(AgentTask(config, prompts=["hi"]), f"payload-{i}".encode(), None) for i in range(4)]
    states[1].events = trio.open_memory_channel[TaskEvent](1)[0]
    for state in states:
        link.add(state)
        link.submit(state)
    link.remove(states[3])  # gone before the call left (cancelled past its grace)
    await trio.testing.wait_all_tasks_blocked()
    assert handle.run_tasks.calls == [[(s.task_id, s.payload, s.events is not None) for s in states[:3]]]
    link.submit(states[0])
    await trio.testing.wait_all_tasks_blocked()
    assert len(handle.run_tasks.calls) == 2 and handle.run_tasks.calls[1][0][0] == states[0].task_id


async def test_tasks_sent_in_one_call_end_each_on_its_own(model: FakeResponsesServer, workspace: Path) -> None:
    """``AgentHost.run_tasks``: a task of the call that cannot even be loaded is a failed
    result, and the other runs to its end as if it had had a call of its own."""
    from .test_host import Driver, config, submit

    host = AgentHost(0)
    good = AgentTask(config(model, workspace), prompts=["hello"])
    driver = Driver(host)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.run_tasks, [("task-x", b"not a pickle", True), submit(good, True)])
        await driver.drain("task-x", good.task_id)
    assert driver.results["task-x"].status is TaskStatus.FAILED
    assert driver.results[good.task_id].status is TaskStatus.COMPLETED
    assert driver.events[good.task_id][-1].kind is ta.EventKind.RUN_COMPLETED
