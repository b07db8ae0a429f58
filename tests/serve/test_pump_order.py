"""A thread's notifications leave the pump in the order of its agent's events, whichever
path each event takes (issue 30: most kinds -- deltas, items, usage -- are mapped and
published by ``Pump._deliver_plain`` without an await; a turn's edges, tool calls and
approvals by ``_on_thread_event``, which may wait for the thread's ``lock``).

The case that could reorder them: ``run.started`` arrives while a request handler holds
the thread's lock (registering the turn), followed in the same burst by the turn's
deltas. The pump waits for the lock, and the deltas behind it wait too: none is
published before its ``turn/started``, nor while the lock is held.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from trio_agent import AgentEvent, EventKind
from trio_agent._event_queue import _EventQueue
from trio_agent._serve._pump import Pump
from trio_agent._threads import ThreadEvent, ThreadEvents


class Meta:
    ephemeral = True  # (no record to keep)


class Mapper:
    """Maps each event to its own index (the message the pump publishes)."""

    dynamic_tools: frozenset[str] = frozenset()
    turns: list[Any] = []

    def on_event(self, event: AgentEvent) -> list[int]:
        return [event.seq]

    def wire_turn(self, turn_id: int | None) -> None:
        return None


class State:
    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.mapper = Mapper()
        self.meta = Meta()
        self.handles: dict[int, Any] = {}


class States:
    def __init__(self, state: State) -> None:
        self.state = state

    def target(self, thread_id: str) -> State:
        return self.state


class Server:
    def __init__(self) -> None:
        self.published: list[int] = []

    def publish(self, state: State, outs: list[int]) -> None:
        self.published.extend(outs)


def event(kind: EventKind, seq: int) -> ThreadEvent:
    return ThreadEvent("thread-1", "agent", event=AgentEvent(kind, {"delta": "x"}, seq, "thread-1", 1, 0.0))


async def test_deltas_behind_a_run_started_that_waits_for_the_lock_wait_with_it() -> None:
    queue: _EventQueue[ThreadEvent] = _EventQueue()
    kinds = [EventKind.ASSISTANT_DELTA, EventKind.RUN_STARTED, EventKind.ASSISTANT_DELTA, EventKind.ASSISTANT_DELTA,
             EventKind.RUN_COMPLETED, EventKind.ASSISTANT_DELTA]
    for seq, kind in enumerate(kinds):
        queue.put(event(kind, seq))
    queue.close()
    state, server = State(), Server()
    pump = Pump(cast(Any, server), cast(Any, States(state)))
    while_held: list[list[int]] = []

    async with trio.open_nursery() as nursery:
        await state.lock.acquire()  # a handler registering the turn
        nursery.start_soon(pump.run, ThreadEvents(queue))
        await trio.testing.wait_all_tasks_blocked()
        while_held.append(list(server.published))
        state.lock.release()

    assert while_held == [[0]]  # the first delta went; run.started and all behind it wait
    assert server.published == list(range(len(kinds)))
