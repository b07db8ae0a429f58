"""The pool's actors and the FIFO of tasks waiting for one (driver side).

Ray places the actors, queues and runs the calls sent to each, and moves the bytes;
what is left for the pool is Ray's own ``ActorPool`` idiom: hold a task until some
actor has a free slot, then send it to the least busy one. A slot is one of the
``agents_per_actor`` agents an actor may run at once; a task keeps its slot until the
driver has its result. Waiting tasks are served strictly first come, first served: a
freed slot is handed to the oldest waiter directly.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs
import trio

from ._values import ActorInfo, ActorStatistics

__all__ = ["Slot", "Slots"]


@attrs.define(eq=False)
class Slot:
    """One actor of the pool as the driver sees it."""

    index: int
    handle: Any  # a ray.actor.ActorHandle (Ray is untyped here)
    info: ActorInfo
    running: int = 0
    alive: bool = True
    statistics: ActorStatistics | None = None  # its latest report


@attrs.define(eq=False)
class _Waiter:
    event: trio.Event = attrs.field(factory=trio.Event)
    slot: Slot | None = None


class Slots:
    """``acquire()`` a slot (FIFO), ``release()`` it; ``lost()`` retires an actor and
    ``replace()`` puts its replacement at its index. While ``restarting`` replacements
    are under way, waiters wait for them rather than fail."""

    def __init__(self, slots: list[Slot], per_actor: int) -> None:
        self.all = slots
        self._per_actor = per_actor
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self.restarting = 0

    @property
    def live(self) -> int:
        return sum(slot.alive for slot in self.all)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _free(self) -> Slot | None:
        free = [slot for slot in self.all if slot.alive and slot.running < self._per_actor]
        return min(free, key=lambda slot: (slot.running, slot.index)) if free else None

    async def acquire(self) -> Slot | None:
        """The least busy live actor with a free slot, once there is one and every
        earlier waiter was served; None when no live actor is left (nor coming)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        slot = self._free()
        if slot is not None and not self._waiters:
            slot.running += 1
            await trio.lowlevel.cancel_shielded_checkpoint()
            return slot
        if not self.live and not self.restarting:
            return None
        waiter = _Waiter()
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:  # cancelled while waiting: give back what may have been handed over
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.slot is not None:
                self.release(waiter.slot)
            raise
        return waiter.slot

    def release(self, slot: Slot) -> None:
        slot.running -= 1
        self._hand_off()

    def lost(self, slot: Slot) -> None:
        """The actor died: no task goes to it again."""
        slot.alive = False
        self._hand_off()

    def replace(self, slot: Slot) -> None:
        """``slot`` is the new actor at its index (a replacement that started)."""
        self.all[slot.index] = slot
        self.restarting -= 1
        self._hand_off()

    def gave_up(self) -> None:
        """A replacement did not start."""
        self.restarting -= 1
        self._hand_off()

    def _hand_off(self) -> None:
        while self._waiters:
            slot = self._free()
            if slot is None and (self.live or self.restarting):
                return
            waiter = self._waiters.popleft()
            if slot is not None:
                slot.running += 1
            waiter.slot = slot  # None: no live actor is left
            waiter.event.set()
