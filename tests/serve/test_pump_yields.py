"""The pump yields to other tasks after each burst of at most ``PUMP_BURST + 1`` thread
events, however many wait (the module docstring of ``_serve/_pump``: "at most
``PUMP_BURST`` in one pass before it yields").

A backlog is what every running thread emitted between two of the pump's passes (a
thread's unload, a busy server under load). The pump pops the ready events itself, and
the stream's ``get`` takes a waiting event without a schedule point up to 64 times in a
row (``_event_queue._BURST``): without the pump's own checkpoint after a full burst,
a backlog of up to 64 bursts (~16,000 events) was delivered in one scheduler pass, with
every connection's writer and request handler waiting. Checked: without that checkpoint
the witness below sees the whole backlog go in one pass.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import trio

from trio_agent import AgentEvent, EventKind
from trio_agent._event_queue import _EventQueue
from trio_agent._serve._pump import PUMP_BURST, Pump
from trio_agent._threads import ThreadEvent, ThreadEvents

BURSTS = 8


class States:
    """No thread of the events is loaded: the pump only looks each one up (counted)."""

    def __init__(self) -> None:
        self.looked_up = 0

    def target(self, thread_id: str) -> None:
        self.looked_up += 1


async def test_the_pump_yields_after_each_full_burst_of_a_backlog() -> None:
    queue: _EventQueue[ThreadEvent] = _EventQueue()
    total = BURSTS * (PUMP_BURST + 1)
    for index in range(total):
        delta = AgentEvent(EventKind.ASSISTANT_DELTA, {"delta": str(index)}, index, "thread-1", 1, 0.0)
        queue.put(ThreadEvent("thread-1", "agent", event=delta))
    queue.close()
    states = States()
    pump = Pump(cast(Any, None), cast(Any, states))
    seen = [0]  # how many events were delivered each time the witness ran

    async def witness() -> None:
        while not pump.done.is_set():
            await trio.lowlevel.checkpoint()
            seen.append(states.looked_up)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(witness)  # (a task that runs each pass, as a writer or handler would)
        nursery.start_soon(pump.run, ThreadEvents(queue))

    assert states.looked_up == total
    steps = [later - earlier for earlier, later in itertools.pairwise(seen)]
    # A pass runs each task once, in an order Trio may reverse from pass to pass: between
    # two turns of the witness the pump ran at most twice, a burst each time.
    assert max(steps) <= 2 * (PUMP_BURST + 1), steps
    assert len([step for step in steps if step]) >= BURSTS // 2
