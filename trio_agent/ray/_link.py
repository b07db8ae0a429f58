"""``ActorLink``: the driver's one long poll to one actor, shared by its tasks.

Theory of operation. A Ray call costs about a millisecond of CPU on each side, so
the driver does not poll per task: each actor has one link that keeps one
``poll(acks, paused, wait)`` in flight (see ``_host``) and hands every task its
batches (``TaskState.take``). Each task's own driver task delivers them to the
caller's channel, in order.

Back-pressure: a task whose batches are not delivered yet is *paused* in the next
poll, so the actor sends it nothing more and keeps its events; once the caller has
taken them, the task's acknowledgement rides the next poll. After handing out a
reply the link waits a moment (``SETTLE``) for the deliveries to finish, so the
common case -- a caller that keeps up -- acknowledges everything in the next poll.
While some task is paused the poll waits at most ``PAUSED_WAIT``, so a task that
catches up is resumed soon even when the others are quiet; when every task is paused
the link does not poll at all until one catches up. An idle actor has a poll in
flight too, which returns with the first task's start: a dead idle actor is found out
(and replaced, ``_keeper``) when it dies, not when the next task is sent to it. Results are acknowledged by
the next poll not listing their task, so a poll follows every reply with a result,
if only to let the actor forget it.

Loss: a poll that fails because the actor died fails every task of the link (their
drivers end them as LOST with ``ActorLost``) and tells the keeper, which replaces the
actor with a new link (``_keeper``); ``ActorUnavailableError`` (the actor
may come back) is retried with backoff, and the acknowledgements of the retry make
the actor send again whatever the failed call carried. The link runs shielded, in the pool's outer
nursery, and is stopped only after every task has ended: cancelled tasks still get
their last events and results through it.
"""

from __future__ import annotations

from collections.abc import Callable

import ray
import trio

from ._dispatch import Slot
from ._refs import PendingRef
from ._remote import TaskState
from ._values import PollReply

__all__ = ["PAUSED_WAIT", "SETTLE", "ActorLink"]

PAUSED_WAIT = 0.02
SETTLE = 0.002
_RETRY_FIRST, _RETRY_MAX = 0.05, 2.0  # backoff while an actor is unavailable


class ActorLink:
    """See the module docstring. ``run()`` until ``close()``."""

    def __init__(self, slot: Slot, lost: Callable[[Slot], None]) -> None:
        self.slot = slot
        self._lost = lost
        self._tasks: dict[str, TaskState] = {}
        self._kick = trio.Event()
        self._scope = trio.CancelScope(shield=True)
        self._release = False  # results were received: the next poll acknowledges them
        self._starts: list[TaskState] = []  # tasks to send in the next run_tasks call
        self.failure: Exception | None = None

    def add(self, state: TaskState) -> None:
        """Serve ``state`` (before its task is sent: ``submit``)."""
        if self.failure is not None:
            state.fail(self.failure)
            return
        self._tasks[state.task_id] = state
        self._kick.set()

    def submit(self, state: TaskState) -> None:
        """Send ``state``'s task to the actor (after ``add``), with the other tasks
        dispatched to it in the same pass of the loop: one ``run_tasks`` call for them
        all (a Ray call costs about a millisecond of CPU on each side, and results --
        which free slots -- arrive several per poll reply)."""
        if not self._starts:
            trio.lowlevel.current_trio_token().run_sync_soon(self._send_starts)
        self._starts.append(state)

    def _send_starts(self) -> None:
        starts, self._starts = self._starts, []
        tasks = [(state.task_id, state.payload, state.events is not None) for state in starts
                 if self._tasks.get(state.task_id) is state and state.failure is None]
        if tasks and self.failure is None:
            self.slot.handle.run_tasks.remote(tasks)

    def remove(self, state: TaskState) -> None:
        self._tasks.pop(state.task_id, None)
        self._kick.set()

    def delivered(self) -> None:
        """A task delivered all it had: it can be unpaused in the next poll."""
        self._kick.set()

    def close(self) -> None:
        self._scope.cancel()

    async def _wait_kick(self) -> None:
        await self._kick.wait()
        self._kick = trio.Event()

    async def run(self) -> None:
        with self._scope:
            delay = _RETRY_FIRST
            while True:
                paused = frozenset(task_id for task_id, state in self._tasks.items() if state.pending)
                if self._tasks and len(paused) == len(self._tasks) and not self._release:
                    await self._wait_kick()  # every task still delivering
                    continue
                acks = {task_id: (state.received, state.start_known, state.rollout_path is not None)
                        for task_id, state in self._tasks.items()}
                # No bound while every task can take more (or there is none: an idle actor's
                # loss is noticed at once); a short one while some cannot (see the module
                # docstring); none at all when no task can take more (only acknowledging results).
                wait = None if not paused else 0.0 if len(paused) == len(self._tasks) else PAUSED_WAIT
                self._release = False
                try:
                    reply: PollReply = await PendingRef(self.slot.handle.poll.remote(acks, paused, wait)).wait()
                except ray.exceptions.ActorUnavailableError:
                    await trio.sleep(delay)
                    delay = min(delay * 2, _RETRY_MAX)
                    continue
                except Exception as exc:  # Ray's error for the poll: the actor is gone, or a bug there
                    self._fail(exc)
                    return
                delay = _RETRY_FIRST
                await self._hand_out(reply)

    async def _hand_out(self, reply: PollReply) -> None:
        self.slot.statistics = reply.statistics
        served = []
        for task_id, batch in reply.batches.items():
            state = self._tasks.get(task_id)
            if state is None:
                continue  # a task given up on (cancelled past its grace)
            state.take(batch)
            served.append(state)
            if batch.result is not None:
                del self._tasks[task_id]  # not in the next acks: the actor forgets it
                self._release = True  # ... so there must be a next poll
        with trio.move_on_after(SETTLE):
            while any(state.pending for state in served):
                await self._wait_kick()

    def _fail(self, exc: Exception) -> None:
        self.failure = exc
        self._lost(self.slot)  # dead or broken: no task goes there again
        for state in list(self._tasks.values()):
            state.fail(exc)
        self._tasks.clear()
