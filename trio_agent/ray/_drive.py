"""Driving one task on one actor, from the driver's Trio loop.

Theory of operation. The driver sends ``run_task`` once and then *pumps*: one
``poll(task_id, cursor, start_seen)`` at a time, each reply's events delivered to the
caller's channel (``await send``: a slow consumer slows the pump, and the actor keeps
what was not taken) before the next poll acknowledges them, until a reply carries the
result. The pump is the only source of truth: results, start reports and losses all
arrive through it.

Cancellation (``RemoteTask.cancel()``, a cancelled ``run``/``map``, or the pool's block
cancelled): ``request_cancel`` sends ``cancel(task_id)`` to the actor as soon as a poll
has reported that the actor started the task (a queued task only leaves the queue).
When the pump itself is cancelled, the driver sends the cancel and keeps pumping,
shielded and bounded by ``cancel_grace``: the cancelled agent's last events and its
result still arrive. The poll in flight is kept across the cancelled wait, so there is
never a second poll for the same task.

Loss: a poll that fails because the actor died (Ray's ``ActorDiedError``) ends the task
as LOST with ``ActorLost`` and retires the actor; ``ActorUnavailableError`` (the actor
may come back) is retried, since a poll can be repeated without loss.
"""

from __future__ import annotations

from collections.abc import Callable

import ray
import trio

from .._errors import AgentError
from ._dispatch import Slot, Slots
from ._errors import ActorLost, TaskCancelled, TaskCrashed
from ._refs import PendingRef, is_actor_loss
from ._remote import TaskState
from ._values import EventBatch, TaskEvent, TaskResult, TaskStatus

__all__ = ["TaskDriver"]

_RETRY_FIRST, _RETRY_MAX = 0.05, 2.0  # backoff while an actor is unavailable


class TaskDriver:
    """Runs tasks on the pool's slots; ``finished`` sees every result (counters)."""

    def __init__(self, slots: Slots, cancel_grace: float, finished: Callable[[TaskState], None]) -> None:
        self._slots = slots
        self._grace = cancel_grace
        self._finished = finished

    def request_cancel(self, state: TaskState) -> None:
        if state.result is not None:
            return
        state.cancel_requested = True
        if state.status is TaskStatus.QUEUED and state.slot is None:
            state.queue_scope.cancel()
        elif state.start_seen:
            self._send_cancel(state)

    def _send_cancel(self, state: TaskState) -> None:
        if state.cancel_sent or state.slot is None or not state.slot.alive:
            return
        state.cancel_sent = True
        PendingRef(state.slot.handle.cancel.remote(state.task_id))  # fire and forget: the pump sees the end

    def _finish(self, state: TaskState, result: TaskResult) -> None:
        if state.result is None:
            state.finish(result)
            self._finished(state)

    def _ended(self, state: TaskState, status: TaskStatus, error: AgentError) -> TaskResult:
        slot = state.slot
        return TaskResult(
            state.task_id, state.task.config.session_id, status, error=error,
            actor=slot.index if slot is not None else None, pid=slot.info.pid if slot is not None else None,
            events=state.cursor,
        )

    # -- the task's life ------------------------------------------------------------------

    async def drive(self, state: TaskState, leave_queue: Callable[[], None]) -> None:
        """Wait for a slot (FIFO), run the task there, give the slot back.
        ``leave_queue`` is called once the task has left the queue."""
        slot: Slot | None = None
        try:
            try:
                with state.queue_scope:
                    slot = await self._slots.acquire()
            finally:
                leave_queue()
            if slot is None:
                if state.queue_scope.cancelled_caught:
                    error: AgentError = TaskCancelled(f"task {state.task_id} was cancelled while queued")
                    self._finish(state, self._ended(state, TaskStatus.CANCELLED, error))
                else:
                    error = ActorLost(f"task {state.task_id}: every actor of the pool has died; nothing can run it")
                    self._finish(state, self._ended(state, TaskStatus.LOST, error))
                return
            state.slot = slot
            await self._run_on(slot, state)
        finally:
            if state.result is None:  # the pool's scope was cancelled
                where = "while queued" if slot is None else f"on actor {slot.index}"
                self._finish(state, self._ended(state, TaskStatus.CANCELLED, TaskCancelled(
                    f"task {state.task_id} was cancelled {where}")))
            if slot is not None:
                self._slots.release(slot)

    async def _run_on(self, slot: Slot, state: TaskState) -> None:
        slot.handle.run_task.remote(state.task_id, state.payload, state.events is not None)
        try:
            await self._pump(slot, state)
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(self._grace):
                self.request_cancel(state)
                await self._pump(slot, state)
            if state.result is None:
                error = TaskCancelled(
                    f"task {state.task_id} was cancelled but its actor did not report its end within "
                    f"{self._grace} s; the actor is killed when the pool closes"
                )
                self._finish(state, self._ended(state, TaskStatus.CANCELLED, error))
            raise

    async def _pump(self, slot: Slot, state: TaskState) -> None:
        delay = _RETRY_FIRST
        while state.result is None:
            if state.poll is None:
                state.poll = PendingRef(slot.handle.poll.remote(state.task_id, state.cursor, state.start_seen))
            try:
                batch: EventBatch = await state.poll.wait()
            except ray.exceptions.ActorUnavailableError:
                state.poll = None
                await trio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                continue
            except Exception as exc:  # Ray's error for the poll: the actor is gone, or a bug there
                state.poll = None
                self._poll_failed(slot, state, exc)
                return
            state.poll = None
            delay = _RETRY_FIRST
            await self._take(slot, state, batch)

    async def _take(self, slot: Slot, state: TaskState, batch: EventBatch) -> None:
        if batch.start is not None and not state.start_seen:
            state.start_seen = True
            state.status = TaskStatus.RUNNING
            state.started.set()
            if state.cancel_requested:
                self._send_cancel(state)
        for event in batch.events:
            await self._deliver(state, TaskEvent(state.task_id, event))
            state.cursor += 1
        if batch.statistics is not None:
            slot.statistics = batch.statistics
        if batch.result is not None:
            self._finish(state, batch.result)

    @staticmethod
    async def _deliver(state: TaskState, event: TaskEvent) -> None:
        if state.events is None:
            return
        try:
            await state.events.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            state.events = None  # the caller closed or dropped its channel: nobody to deliver to
        else:
            state.delivered += 1

    def _poll_failed(self, slot: Slot, state: TaskState, exc: Exception) -> None:
        if is_actor_loss(exc):
            self._slots.lost(slot)
            error = ActorLost(
                f"task {state.task_id} (session {state.task.config.session_id}) was running on actor "
                f"{slot.index} (pid {slot.info.pid}), which died: {str(exc).splitlines()[0] if str(exc) else exc!r}. "
                "What its agent committed is in its rollout: resume it with pool.run(task.resumed(...))",
                actor=slot.index, session_id=state.task.config.session_id,
            )
            self._finish(state, self._ended(state, TaskStatus.LOST, error))
            return
        # Not a loss: the actor failed to serve the poll (a bug). Stop its agent too.
        self._send_cancel(state)
        crash = TaskCrashed(f"task {state.task_id}: actor {slot.index} failed to report it: {exc}",
                            exception_type=type(exc).__qualname__)
        self._finish(state, self._ended(state, TaskStatus.FAILED, crash))
