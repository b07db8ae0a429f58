"""Driving one task on one actor, from the driver's Trio loop.

Theory of operation. A task waits for a slot (``Slots``, FIFO), is registered with
its actor's link (``ActorLink``), and its task is sent once (``ActorLink.submit``). From then on the
task's driver task only *forwards*: it takes the batches the link hands it and
delivers their events to the caller's channel (``await send``: a slow consumer slows
this task alone -- the link pauses it, the actor keeps its events), until a batch
carries the result, or the link reports that the actor is gone.

Cancellation (``RemoteTask.cancel()``, a cancelled ``run``/``map``, or the pool's block
cancelled): ``request_cancel`` sends ``cancel(task_id)`` to the actor as soon as a
batch has reported that the actor started the task (a queued task only leaves the
queue). When the forwarding itself is cancelled, the driver requests the cancel and
keeps forwarding, shielded and bounded by ``cancel_grace``: the cancelled agent's last
events and its result still arrive, and a batch interrupted half-way resumes where it
stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from .._errors import AgentError
from ._dispatch import Slot, Slots
from ._errors import ActorLost, TaskCancelled, TaskCrashed
from ._link import ActorLink
from ._refs import PendingRef, is_actor_loss
from ._remote import TaskState
from ._values import EventBatch, TaskEvent, TaskResult, TaskStatus

if TYPE_CHECKING:
    from .._events import AgentEvent

__all__ = ["TaskDriver"]

_NOWAIT_RUN = 256  # events delivered without a schedule point before one is taken


class TaskDriver:
    """Runs tasks on the pool's slots; ``finished`` sees every result (counters)."""

    def __init__(self, slots: Slots, link_of: Callable[[Slot], ActorLink], cancel_grace: float,
                 finished: Callable[[TaskState], None]) -> None:
        self._slots = slots
        self._link_of = link_of
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
        PendingRef(state.slot.handle.cancel.remote(state.task_id))  # fire and forget: the end comes by the link

    def _finish(self, state: TaskState, result: TaskResult) -> None:
        if state.result is None:
            state.finish(result)
            self._finished(state)

    def _ended(self, state: TaskState, status: TaskStatus, error: AgentError) -> TaskResult:
        slot = state.slot
        return TaskResult(
            state.task_id, state.task.config.session_id, status, error=error, rollout_path=state.rollout_path,
            actor=slot.index if slot is not None else None, pid=slot.info.pid if slot is not None else None,
            events=state.received,
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
                    error = ActorLost(f"task {state.task_id}: every actor of the pool has died and none could be "
                                      "replaced (max_restarts); nothing can run it")
                    self._finish(state, self._ended(state, TaskStatus.LOST, error))
                return
            state.slot = slot
            await self._run_on(self._link_of(slot), state)
        finally:
            if state.result is None:  # the pool's scope was cancelled
                where = "while queued" if slot is None else f"on actor {slot.index}"
                self._finish(state, self._ended(state, TaskStatus.CANCELLED, TaskCancelled(
                    f"task {state.task_id} was cancelled {where}")))
            if slot is not None:
                self._slots.release(slot)

    async def _run_on(self, link: ActorLink, state: TaskState) -> None:
        link.add(state)
        try:
            if state.failure is None:
                link.submit(state)
            try:
                await self._forward(link, state)
            except trio.Cancelled:
                with trio.CancelScope(shield=True), trio.move_on_after(self._grace):
                    self.request_cancel(state)
                    await self._forward(link, state)
                if state.result is None:
                    error = TaskCancelled(
                        f"task {state.task_id} was cancelled but its actor did not report its end within "
                        f"{self._grace} s; the actor is killed when the pool closes"
                    )
                    self._finish(state, self._ended(state, TaskStatus.CANCELLED, error))
                raise
        finally:
            link.remove(state)

    async def _forward(self, link: ActorLink, state: TaskState) -> None:
        while state.result is None:
            if state.pending:
                await self._take(state, state.pending[0])
                state.pending.popleft()
                state.offset = 0
                link.delivered()
            elif state.failure is not None:
                self._failed(link.slot, state, state.failure)
            else:
                await state.wait_inbox()

    async def _take(self, state: TaskState, batch: EventBatch) -> None:
        if batch.start is not None and not state.start_seen:
            state.start_seen = True
            state.status = TaskStatus.RUNNING
            state.started.set()
            if state.cancel_requested:
                self._send_cancel(state)
        events = batch.events
        if state.offset < len(events):
            await self._deliver(state, events)
        if batch.result is not None:
            self._finish(state, batch.result)

    @staticmethod
    async def _deliver(state: TaskState, events: tuple[AgentEvent, ...]) -> None:
        """The batch's events from ``state.offset`` on, in order. A memory channel with
        room takes them without a schedule point each (``send_nowait``): one checkpoint
        per ``_NOWAIT_RUN`` events instead of a pass of the driver's loop per event;
        a full one (or another kind of channel) is waited on, event by event."""
        channel = state.events
        memory = channel if isinstance(channel, trio.MemorySendChannel) else None
        task_id = state.task_id
        run = 0
        while state.offset < len(events):
            if channel is None:
                state.offset = len(events)
                return
            event = TaskEvent(task_id, events[state.offset])
            try:
                if memory is not None and run < _NOWAIT_RUN:
                    try:
                        memory.send_nowait(event)
                        run += 1
                    except trio.WouldBlock:
                        await memory.send(event)
                        run = 0
                else:
                    await channel.send(event)
                    run = 0
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                state.events = channel = memory = None  # the caller closed or dropped its channel
            else:
                state.delivered += 1
            state.offset += 1
        if run:
            await trio.lowlevel.checkpoint()

    def _failed(self, slot: Slot, state: TaskState, exc: Exception) -> None:
        if is_actor_loss(exc):
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            error: AgentError = ActorLost(
                f"task {state.task_id} (session {state.task.config.session_id}) was running on actor "
                f"{slot.index} (pid {slot.info.pid}), which died: {first}. What its agent committed is in "
                "its rollout: resume it with pool.run(task.resumed(...))",
                actor=slot.index, session_id=state.task.config.session_id,
            )
            self._finish(state, self._ended(state, TaskStatus.LOST, error))
            return
        # Not a loss: the actor failed to serve the poll (a bug). Stop its agent too.
        self._send_cancel(state)
        error = TaskCrashed(f"task {state.task_id}: actor {slot.index} failed to report it: {exc}",
                            exception_type=type(exc).__qualname__)
        self._finish(state, self._ended(state, TaskStatus.FAILED, error))
