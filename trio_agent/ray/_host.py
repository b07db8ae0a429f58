"""``AgentHost``: the Trio side of one actor. It runs tasks and keeps each task's
events until the driver has taken them.

Theory of operation. Every task has a record, keyed by task id and created by
``run_task``; it is the task's only shared state:

- ``run_task`` opens the agent inside the task's ``CancelScope`` and starts a *pump*
  that moves every event from ``agent.events`` into the record's buffer. The pump
  runs in a nursery outside that scope, so cancelling the task still lets it move the
  events emitted while the agent winds down -- the cancelled turn's ``run.failed``
  last -- and it ends when the agent's stream does. The result is set only after the
  pump has finished.
- ``poll(acks, paused, wait)`` is the driver's one long poll for the whole actor.
  ``acks`` says, per task the driver follows, how many events it has received and
  whether it knows the task started: those events are dropped here, and anything
  sent beyond them was lost in flight (a call Ray could not complete) and is sent
  again. The reply carries, for every task that has news and is not ``paused`` (the
  driver is still delivering its last batch: back-pressure), the start report
  first, the events not sent yet, and -- with its last events -- the result; once a
  poll no longer lists a task whose result was sent, its record is gone. The poll
  waits for news (at most ``wait`` seconds; None: no bound) and then lingers while a
  burst of events lasts, so one reply carries as much as it can: one Ray call
  serves every agent of the actor. Events wait here, counted in
  ``buffered_events``, until the driver has them -- never dropped.
- ``cancel(task_id)`` cancels the task's scope. The driver sends it only once a
  reply reported the start, so the record exists unless the task already ended
  (then it is a no-op).

Agents of one actor share its Trio loop and one TLS context (``with_tls``); nothing
else -- each has its own connection, history, tools and rollout.

A traced task's agent opens with the driver's span current (``traced_from``: the
trace context travels in the payload), so its spans join the driver's trace.

Cancelling the scope is the agent's own cancellation (DESIGN "Concurrency shape"): the
live turn is cancelled, its tools' process trees are killed, aborted calls are paired,
its terminal event is emitted, and closing the agent flushes the rollout.
"""

from __future__ import annotations

import math
import os
import pickle
import ssl
import traceback
from pathlib import Path

import attrs
import trio

from .. import __version__
from .._errors import AgentError
from .._events import AgentEvent, AgentEvents
from .._runtime import open_agent
from ._errors import TaskCrashed
from ._running import Run, only_cancelled, resumed_config, run_body, traced_from, usage, with_tls
from ._values import ActorInfo, ActorStatistics, AgentTask, EventBatch, PollReply, TaskResult, TaskStart, TaskStatus

__all__ = ["BATCH_LIMIT", "BURST_GAP", "LINGER", "REPLY_LIMIT", "AgentHost"]

BATCH_LIMIT = 1024  # events of one task per reply
REPLY_LIMIT = 8192  # events per reply
LINGER = 0.005  # at most this long (seconds) a poll waits for the rest of a burst
BURST_GAP = 0.001  # events closer than this belong to one burst


@attrs.define(eq=False)
class _Record:
    task_id: str
    started: bool = False
    start_reported: bool = False
    session_id: str = ""
    cancel_requested: bool = False
    scope: trio.CancelScope | None = None
    buffer: list[AgentEvent] = attrs.field(factory=list)  # not yet acknowledged by the driver
    acked: int = 0  # the number of the first buffered event in the task's sequence
    sent: int = 0  # events sent to the driver so far
    final_sent: bool = False
    rollout_path: Path | None = None  # once the agent has opened its rollout
    path_reported: bool = False  # ... and the driver knows it (or it was sent: see acknowledge)
    emitted: int = 0
    pumping: bool = False
    result: TaskResult | None = None

    @property
    def ended(self) -> bool:
        """The task has its result and every event is in the buffer."""
        return self.result is not None and not self.pumping

    @property
    def unsent(self) -> int:
        return self.acked + len(self.buffer) - self.sent

    @property
    def has_news(self) -> bool:
        return (self.unsent > 0 or not self.start_reported or (self.ended and not self.final_sent)
                or (self.rollout_path is not None and not self.path_reported))

    def acknowledge(self, received: int, start_seen: bool, path_seen: bool) -> None:
        """The driver has ``received`` events and knows (or not) that the task started
        and where its rollout is. Anything sent beyond that was lost in flight and is
        sent again."""
        taken = min(max(received - self.acked, 0), len(self.buffer))
        del self.buffer[:taken]
        self.acked += taken
        self.sent = self.acked
        self.start_reported = start_seen
        self.path_reported = path_seen
        self.final_sent = False


class AgentHost:
    """The tasks of one actor; every method runs on the actor's Trio thread."""

    def __init__(self, index: int, node_id: str = "") -> None:
        self._index = index
        self._pid = os.getpid()
        self._node_id = node_id
        self._records: dict[str, _Record] = {}
        self._news: set[str] = set()  # records with unsent events or an unreported end
        self._changed = trio.Event()  # set (and replaced) on news while a poll waits for it
        self._waiting = 0  # polls waiting on ``_changed``
        self._touches = 0  # news so far: a lingering poll compares it across a gap
        self._tls_context: ssl.SSLContext | None = None
        self._agents = 0
        self._started = 0
        self._finished = 0

    def _tls(self) -> ssl.SSLContext:
        """The TLS context every agent of this actor shares (see ``with_tls``)."""
        if self._tls_context is None:
            self._tls_context = ssl.create_default_context()
        return self._tls_context

    def _touch(self, record: _Record) -> None:
        if record.has_news:
            self._news.add(record.task_id)
        self._touches += 1
        if self._waiting:  # only a poll waiting for news needs waking (not one lingering)
            self._changed.set()
            self._changed = trio.Event()

    async def _wait_changed(self) -> None:
        self._waiting += 1
        try:
            await self._changed.wait()
        finally:
            self._waiting -= 1

    def info(self) -> ActorInfo:
        return ActorInfo(self._index, self._pid, self._node_id, __version__)

    def statistics(self) -> ActorStatistics:
        rss, peak, cpu = usage()
        buffered = sum(record.unsent for record in self._records.values())
        return ActorStatistics(
            self._index, self._pid, self._agents, self._started, self._finished, buffered, rss, peak, cpu
        )

    # -- running a task -------------------------------------------------------------------

    async def run_tasks(self, tasks: list[tuple[str, bytes, bool]]) -> None:
        """``run_task`` for each of ``tasks`` (one Ray call for the tasks the driver
        dispatched here together), concurrently; each ends on its own. A task whose
        run fails other than by cancellation (a bug here) is ended by ``run_task``'s own
        ``finally`` and does not stop the others, as when each had its own call."""
        async def one(task_id: str, payload: bytes, stream: bool) -> None:
            try:
                await self.run_task(task_id, payload, stream)
            except Exception:  # recorded as the task's result already; invisible to the driver before too
                pass

        async with trio.open_nursery() as nursery:
            for task_id, payload, stream in tasks:
                nursery.start_soon(one, task_id, payload, stream)

    async def run_task(self, task_id: str, payload: bytes, stream: bool) -> None:
        """Run the pickled task to its end; its result goes to the record (see ``poll``).
        A task that cannot be unpickled here (a module this actor cannot import) is a
        failed result like any other."""
        if task_id in self._records:
            raise RuntimeError(f"task {task_id} was submitted twice")
        record = self._records[task_id] = _Record(task_id, started=True)
        self._started += 1
        self._touch(record)  # news: the start
        try:
            # The driver's own task and its trace context (Ray's cloudpickle wrote them: _running.travelling).
            task, trace = pickle.loads(payload)
            if not isinstance(task, AgentTask) or task.task_id != task_id or not isinstance(trace, dict):
                raise TypeError(f"the payload of task {task_id} is not that AgentTask")
        except Exception as exc:
            self._unloadable(record, exc)
            return
        record.session_id = task.config.session_id
        run = Run(task, task.config.session_id)
        try:
            async with trio.open_nursery() as pumps:  # outside the task's scope: see the module docstring
                with trio.CancelScope() as scope, traced_from(trace):
                    record.scope = scope
                    if record.cancel_requested:
                        scope.cancel()
                    await self._execute(task, stream, record, run, pumps)
                if scope.cancelled_caught:
                    run.cancelled()
        except BaseException as exc:  # the actor is shutting down (Cancelled), or a bug here
            if only_cancelled(exc):
                run.cancelled()
            elif run.status is None:
                run.crashed(exc, "the actor")
            raise
        finally:
            record.scope = None
            self._end(record, run.result(self._index, self._pid, record.emitted))

    def _end(self, record: _Record, result: TaskResult) -> None:
        record.result = result
        self._finished += 1
        self._touch(record)

    def _unloadable(self, record: _Record, exc: Exception) -> None:
        error = TaskCrashed(
            f"actor {self._index} could not load task {record.task_id}: {type(exc).__name__}: {exc}; the "
            "actor's workers must import everything the task refers to (see runtime_env in docs/ray.md)",
            exception_type=type(exc).__qualname__, traceback="".join(traceback.format_exception(exc)),
        )
        self._end(record, TaskResult(record.task_id, "", TaskStatus.FAILED, error=error, actor=self._index,
                                     pid=self._pid))

    async def _execute(self, task: AgentTask, stream: bool, record: _Record, run: Run, pumps: trio.Nursery) -> None:
        try:
            config = await trio.to_thread.run_sync(resumed_config, task.config) if task.resume else task.config
            config = with_tls(config, self._tls())
            run.session_id = config.session_id
            async with open_agent(config) as agent:
                self._agents += 1
                try:
                    run.rollout_path = agent.rollout.path if agent.rollout is not None else None
                    if run.rollout_path is not None:  # news: the driver keeps it for a LOST result
                        record.rollout_path = run.rollout_path
                        self._touch(record)
                    record.pumping = True
                    pumps.start_soon(self._pump, agent.events, record, stream)
                    await run_body(agent, task, run.turns)
                finally:
                    self._agents -= 1
            run.completed()
        except AgentError as exc:  # a failed turn, a config or rollout problem: the task's outcome
            run.failed(exc)
        except Exception as exc:  # the task's own code failed
            run.crashed(exc, "its body" if task.body is not None else "the agent")

    async def _pump(self, events: AgentEvents, record: _Record, stream: bool) -> None:
        """Move the agent's events into the record: each time it wakes, every event
        already waiting in the stream (bounded by ``BATCH_LIMIT``), then one ``_touch``."""
        buffer = record.buffer
        try:
            async for event in events:
                taken = 1
                if stream:
                    buffer.append(event)
                while taken < BATCH_LIMIT:
                    try:
                        event = events.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    taken += 1
                    if stream:
                        buffer.append(event)
                record.emitted += taken
                if stream:
                    self._touch(record)
        finally:
            record.pumping = False
            self._touch(record)

    # -- the driver's side ------------------------------------------------------------------

    async def poll(self, acks: dict[str, tuple[int, bool, bool]], paused: frozenset[str],
                   wait: float | None) -> PollReply:
        """The next reply for the driver (see the module docstring)."""
        for task_id, record in list(self._records.items()):
            if task_id in acks:
                record.acknowledge(*acks[task_id])
                if record.has_news:
                    self._news.add(task_id)
                else:
                    self._news.discard(task_id)
            elif record.final_sent:  # the driver has its result: the task is over here
                del self._records[task_id]
                self._news.discard(task_id)
        with trio.move_on_after(math.inf if wait is None else wait):
            while not self._ready(paused):
                await self._wait_changed()
        if self._ready(paused):
            await self._linger()
        return PollReply(self._collect(paused), self.statistics())

    def _ready(self, paused: frozenset[str]) -> bool:
        return any(task_id not in paused for task_id in self._news)

    async def _linger(self) -> None:
        """Events come in bursts (a response read off one socket, a tool starting):
        wait while more keep coming -- some news in each ``BURST_GAP``, for at most
        ``LINGER`` -- so one reply carries the burst. A stream with gaps (a live
        model's tokens) is sent as it comes. The news is counted, not waited for: the
        poll wakes once per gap, not once per event."""
        with trio.move_on_after(LINGER):
            while True:
                seen = self._touches
                await trio.sleep(BURST_GAP)
                if self._touches == seen:
                    return

    def _collect(self, paused: frozenset[str]) -> dict[str, EventBatch]:
        batches: dict[str, EventBatch] = {}
        budget = REPLY_LIMIT
        for task_id in [task_id for task_id in self._news if task_id not in paused]:
            record = self._records[task_id]
            offset = record.sent - record.acked
            events = tuple(record.buffer[offset : offset + min(BATCH_LIMIT, budget)])
            record.sent += len(events)
            budget -= len(events)
            start = None
            if not record.start_reported:
                record.start_reported = True
                start = TaskStart(record.session_id, self._pid)
            path = None
            if record.rollout_path is not None and not record.path_reported:
                record.path_reported = True
                path = record.rollout_path
            last = record.ended and record.unsent == 0
            record.final_sent = last
            batches[task_id] = EventBatch(events, start, record.result if last else None, path)
            if not record.has_news:
                self._news.discard(task_id)
            if budget <= 0:
                break
        return batches

    def cancel(self, task_id: str) -> None:
        """Cancel a task that this actor started; a no-op once it has ended."""
        record = self._records.get(task_id)
        if record is None:
            return
        record.cancel_requested = True
        if record.scope is not None:
            record.scope.cancel()
