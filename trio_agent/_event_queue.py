"""The queue behind ``agent.events`` and each subscription (see ``_events``' docstring).

A deque of events and the tasks waiting for one: what a memory channel does, for this
one job, cheaper. Kept apart from ``_events`` (the event value and the stream's public
side) for its size.
"""

from __future__ import annotations

import collections
import math
from typing import Generic, TypeVar

import trio

__all__ = ["_BURST", "_EventQueue", "_reschedule"]

_BURST = 64  # events received in a row without a real schedule point, at most
_reschedule = trio.lowlevel.reschedule  # (a module global: two attribute reads less per event)
_Event = TypeVar("_Event")  # AgentEvent (generic here: ``_events`` imports this module)


class _EventQueue(Generic[_Event]):
    """A one-way queue of events (what a memory channel did, for this one job, cheaper).

    ``put`` never blocks: it appends and wakes a parked ``get``; past ``max_size`` it
    raises ``trio.WouldBlock`` (a subscription's overflow), and it returns False once
    the receiving side is gone. ``get`` takes a waiting event without a schedule point
    (``checkpoint_if_cancelled`` keeps it a cancel point; a real yield at least every
    ``_BURST`` events) and parks otherwise. ``close`` ends the queue after the waiting
    events (``trio.EndOfChannel``); ``discard`` drops them and closes the receiving
    side (``trio.ClosedResourceError``)."""

    __slots__ = ("_count", "_events", "_max", "_waiting", "closed", "discarded")

    def __init__(self, max_size: float = math.inf) -> None:
        self._events: collections.deque[_Event] = collections.deque()
        # The tasks parked in get, not yet woken. A put wakes one and takes it off at once,
        # so the puts that follow while it is scheduled but not yet running (a chunk of
        # frames emits many events) find none to wake, at the cost of one truth test (a
        # ParkingLot keeps its task until it runs: each put would call into it again).
        self._waiting: collections.deque[trio.lowlevel.Task] = collections.deque()
        self._max = max_size
        self._count = 0
        self.closed = False
        self.discarded = False

    def put(self, event: _Event) -> bool:
        if self.closed or self.discarded:
            return False
        events = self._events
        if len(events) >= self._max:
            raise trio.WouldBlock
        events.append(event)
        if self._waiting:
            _reschedule(self._waiting.popleft())
        return True

    def _wake_all(self) -> None:
        waiting = self._waiting
        while waiting:
            _reschedule(waiting.popleft())

    def close(self) -> None:
        self.closed = True
        self._wake_all()

    def discard(self) -> None:
        self.discarded = True
        self._events.clear()
        self._wake_all()

    def get_nowait(self) -> _Event:
        if self.discarded:
            raise trio.ClosedResourceError("this event stream was closed")
        if self._events:
            return self._events.popleft()
        if self.closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def get(self) -> _Event:
        await trio.lowlevel.checkpoint_if_cancelled()
        events = self._events
        if events and self._count < _BURST:  # (discarding empties it)
            self._count += 1
            return events.popleft()
        self._count = 0
        yielded = False
        while True:
            if self.discarded:
                raise trio.ClosedResourceError("this event stream was closed")
            if events:
                if yielded:
                    return events.popleft()
                await trio.lowlevel.cancel_shielded_checkpoint()  # the cancel point was above
            elif self.closed:
                raise trio.EndOfChannel
            else:
                await self._park()
            yielded = True

    async def _park(self) -> None:
        """Wait for a put, a close or a discard (or a cancel: then the task leaves the
        queue of waiting tasks; a task already woken is no longer in it)."""
        task = trio.lowlevel.current_task()
        waiting = self._waiting
        waiting.append(task)

        def abort(_: object) -> trio.lowlevel.Abort:
            waiting.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
