"""``RemoteTask``: the caller's handle to a task on the pool, and its driver-side state."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, final

import attrs
import trio

from ._values import AgentTask, EventBatch, TaskEvent, TaskResult, TaskStatus

if TYPE_CHECKING:
    from ._dispatch import Slot

__all__ = ["RemoteTask", "TaskState"]


@attrs.define(eq=False)
class TaskState:
    """Everything the driver knows about one task (owned by the pool's driver task).

    The actor's link ``take``s batches into ``pending``; the task's driver delivers
    them in order (``offset``: events of ``pending[0]`` already delivered), so a
    delivery cancelled half-way resumes exactly where it stopped."""

    task: AgentTask
    payload: bytes  # the task, pickled once on the driver
    events: trio.abc.SendChannel[TaskEvent] | None
    status: TaskStatus = TaskStatus.QUEUED
    slot: Slot | None = None
    received: int = 0  # events received from the actor: the acknowledgement the link sends
    pending: collections.deque[EventBatch] = attrs.field(factory=collections.deque)
    offset: int = 0
    failure: Exception | None = None  # the link's error: the actor is gone (or failed)
    start_known: bool = False  # a received batch reported the start (acknowledged to the actor)
    start_seen: bool = False  # ... and this task's driver has handled it
    rollout_path: Path | None = None  # the actor reported the agent's rollout (kept for a LOST result)
    queue_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: trio.Event = attrs.field(factory=trio.Event)  # running, or ended without running
    done: trio.Event = attrs.field(factory=trio.Event)
    result: TaskResult | None = None
    cancel_requested: bool = False
    cancel_sent: bool = False
    delivered: int = 0
    _inbox: trio.Event = attrs.field(factory=trio.Event)

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def take(self, batch: EventBatch) -> None:
        self.pending.append(batch)
        self.received += len(batch.events)
        self.start_known = self.start_known or batch.start is not None
        if batch.rollout_path is not None:
            self.rollout_path = batch.rollout_path
        self._inbox.set()

    def fail(self, exc: Exception) -> None:
        self.failure = exc
        self._inbox.set()

    async def wait_inbox(self) -> None:
        await self._inbox.wait()
        self._inbox = trio.Event()

    def finish(self, result: TaskResult) -> None:
        if self.result is not None:
            return
        self.result = result
        self.status = result.status
        self.started.set()
        self.done.set()


@final
class RemoteTask:
    """A task accepted by the pool (``await pool.start(task)``); it runs in the pool's
    nursery. Like ``ta.Turn``: ``wait_running()``, ``cancel()``, ``result()``."""

    def __init__(self, state: TaskState, request_cancel: Callable[[TaskState], None]) -> None:
        self._state = state
        self._request_cancel = request_cancel

    @property
    def task_id(self) -> str:
        return self._state.task_id

    @property
    def status(self) -> TaskStatus:
        return self._state.status

    @property
    def actor(self) -> int | None:
        """The pool index of the actor the task was sent to (None while it waits)."""
        slot = self._state.slot
        return slot.index if slot is not None else None

    async def wait_running(self) -> bool:
        """Wait until an actor has started the task (True), or the task ended without
        ever starting (False: cancelled while queued, or no live actor was left)."""
        await self._state.started.wait()
        return self._state.start_seen

    async def cancel(self) -> None:
        """Cancel the task and wait until it has ended.

        A queued task leaves the queue and never runs. A running one has its agent
        cancelled on its actor: the live turn is cancelled (its tools' process trees
        killed, aborted calls paired), its terminal ``run.failed`` event is delivered,
        its rollout is flushed; then its result (status CANCELLED, the turns completed
        before) arrives. A no-op once the task has ended; cancelling this call does not
        stop the cancellation."""
        self.cancel_soon()
        await self._state.done.wait()

    def cancel_soon(self) -> None:
        """``cancel()`` without waiting for the end (from a callback, or a thread through
        ``trio.from_thread.run_sync``); ``result()`` then has the outcome."""
        self._request_cancel(self._state)

    async def result(self) -> TaskResult:
        """Wait for the task's ``TaskResult``; every event of the task has been delivered
        to its event channel before this returns."""
        await self._state.done.wait()
        assert self._state.result is not None
        return self._state.result
