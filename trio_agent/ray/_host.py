"""``AgentHost``: the Trio side of one actor. It runs tasks and keeps each task's
events until the driver has taken them.

Theory of operation. Every task has a record, keyed by task id, created by whichever
of ``run_task`` and the driver's first ``poll`` arrives first (Ray does not order
calls of an async actor). The record is the task's only shared state:

- ``run_task`` opens the agent inside the task's ``CancelScope`` and starts a *pump*
  that moves every event from ``agent.events`` into the record's buffer. The pump
  runs in a nursery outside that scope, so cancelling the task still lets it move the
  events emitted while the agent winds down -- the cancelled turn's ``run.failed``
  last -- and it ends when the agent's stream does. The result is set only after the
  pump has finished.
- ``poll(task_id, cursor, start_seen)`` is the driver's long poll. ``cursor`` counts
  the events the driver has received: everything before it is acknowledged and
  dropped, everything from it on is (re)sent, so a reply lost in flight costs a
  resend, never an event. It returns as soon as there is something to say: events,
  the start of the task (once), or -- when every event was acknowledged -- the
  result, after which the record is gone. The driver polls again only after a reply,
  so one poll per task is in flight and the buffer holds what the driver has not
  taken yet: back-pressure is the driver's pace, not a bound that drops events.
- ``cancel(task_id)`` cancels the task's scope. The driver sends it only once a poll
  reported the start, so the record exists unless the task already ended (then it
  is a no-op).

Cancelling the scope is the agent's own cancellation (DESIGN "Concurrency shape"): the
live turn is cancelled, its tools' process trees are killed, aborted calls are paired,
its terminal event is emitted, and closing the agent flushes the rollout.
"""

from __future__ import annotations

import os
import pickle
import resource
import traceback
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from .. import __version__
from .._config import AgentConfig
from .._errors import AgentError, TurnCancelled
from .._events import AgentEvent, AgentEvents
from .._runtime import Agent, TurnResult, open_agent
from ._errors import TaskCancelled, TaskCrashed
from ._values import ActorInfo, ActorStatistics, AgentTask, EventBatch, TaskResult, TaskStart, TaskStatus

__all__ = ["BATCH_LIMIT", "AgentHost"]

BATCH_LIMIT = 512  # events per poll reply


@attrs.define(eq=False)
class _Record:
    task_id: str
    started: bool = False
    session_id: str = ""
    cancel_requested: bool = False
    scope: trio.CancelScope | None = None
    buffer: list[AgentEvent] = attrs.field(factory=list)  # not yet acknowledged by the driver
    acked: int = 0  # the index (in the task's event sequence) of buffer[0]
    emitted: int = 0
    pumping: bool = False
    result: TaskResult | None = None
    changed: trio.Event = attrs.field(factory=trio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def acknowledge(self, cursor: int) -> None:
        taken = min(max(cursor - self.acked, 0), len(self.buffer))
        del self.buffer[:taken]
        self.acked += taken


@attrs.define(eq=False)
class _Run:
    """What one run of a task produced so far."""

    task: AgentTask
    session_id: str
    turns: list[TurnResult] = attrs.field(factory=list)
    status: TaskStatus | None = None
    error: AgentError | None = None
    rollout_path: Path | None = None

    def completed(self) -> None:
        self.status = TaskStatus.COMPLETED

    def failed(self, error: AgentError) -> None:
        self.status = TaskStatus.CANCELLED if isinstance(error, TurnCancelled) else TaskStatus.FAILED
        self.error = error

    def crashed(self, exc: BaseException, what: str) -> None:
        self.status = TaskStatus.FAILED
        self.error = TaskCrashed(
            f"task {self.task.task_id}: {what} raised {type(exc).__name__}: {exc}",
            exception_type=type(exc).__qualname__,
            traceback="".join(traceback.format_exception(exc)),
        )

    def cancelled(self) -> None:
        if self.status is None:
            self.status = TaskStatus.CANCELLED
            self.error = TaskCancelled(f"task {self.task.task_id} was cancelled after {len(self.turns)} turn(s)")

    def result(self, index: int, pid: int, events: int) -> TaskResult:
        status = self.status or TaskStatus.FAILED
        return TaskResult(
            self.task.task_id, self.session_id, status, tuple(self.turns), _portable(self.error),
            self.rollout_path, index, pid, events,
        )


def _portable(error: AgentError | None) -> AgentError | None:
    """``error`` itself when it pickles, else an ``AgentError`` with its text."""
    if error is None:
        return None
    try:
        pickle.dumps(error)
    except Exception:  # any object inside may refuse pickling
        return AgentError(f"{type(error).__name__}: {error}")
    return error


def _resumed_config(config: AgentConfig) -> AgentConfig:
    """``config`` continuing its session from its rollout (blocking file I/O)."""
    assert config.rollout is not None  # AgentTask checks it
    if config.rollout.find(config.session_id) is None:
        return config  # nothing was recorded: a fresh start is the same session
    thread_id, snapshot, rollout = config.rollout.load_session(config.session_id).into_parts()
    return attrs.evolve(config, session_id=thread_id, resume=snapshot, rollout=rollout)


async def _run_body(agent: Agent, task: AgentTask, turns: list[TurnResult]) -> None:
    if task.body is None:
        for prompt in task.prompts:
            turn = await agent.prompt(prompt)
            turns.append(await turn.result())
        return
    value = await task.body(agent)
    if value is None:
        return
    if isinstance(value, TurnResult):
        turns.append(value)
    elif isinstance(value, Sequence) and all(isinstance(item, TurnResult) for item in value):
        turns.extend(value)
    else:
        raise TypeError(f"a task's body must return a TurnResult, a list of them or None, got {type(value).__name__}")


def _only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


def _memory() -> tuple[int, int]:
    """(resident bytes now, peak resident bytes) of this process. The kernel updates the
    peak lazily, so it is at least the resident size read just after."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak, peak
    return rss, max(peak, rss)


class AgentHost:
    """The tasks of one actor; every method runs on the actor's Trio thread."""

    def __init__(self, index: int, node_id: str = "") -> None:
        self._index = index
        self._pid = os.getpid()
        self._node_id = node_id
        self._records: dict[str, _Record] = {}
        self._agents = 0
        self._started = 0
        self._finished = 0

    def _record(self, task_id: str) -> _Record:
        record = self._records.get(task_id)
        if record is None:
            record = self._records[task_id] = _Record(task_id)
        return record

    def info(self) -> ActorInfo:
        return ActorInfo(self._index, self._pid, self._node_id, __version__)

    def statistics(self) -> ActorStatistics:
        rss, peak = _memory()
        buffered = sum(len(record.buffer) for record in self._records.values())
        return ActorStatistics(self._index, self._pid, self._agents, self._started, self._finished, buffered, rss, peak)

    # -- running a task -------------------------------------------------------------------

    async def run_task(self, task_id: str, payload: bytes, stream: bool) -> None:
        """Run the pickled task to its end; its result goes to the record (see ``poll``).
        A task that cannot be unpickled here (a module this actor cannot import) is a
        failed result like any other."""
        record = self._record(task_id)
        if record.started:
            raise RuntimeError(f"task {task_id} was submitted twice")
        record.started = True
        self._started += 1
        try:
            task = pickle.loads(payload)  # the driver's own task (Ray's cloudpickle wrote it)
            if not isinstance(task, AgentTask) or task.task_id != task_id:
                raise TypeError(f"the payload of task {task_id} is not that AgentTask")
        except Exception as exc:
            self._unloadable(record, task_id, exc)
            return
        record.session_id = task.config.session_id
        record.notify()
        run = _Run(task, task.config.session_id)
        try:
            async with trio.open_nursery() as pumps:  # outside the task's scope: see the module docstring
                with trio.CancelScope() as scope:
                    record.scope = scope
                    if record.cancel_requested:
                        scope.cancel()
                    await self._execute(task, stream, record, run, pumps)
                if scope.cancelled_caught:
                    run.cancelled()
        except BaseException as exc:  # the actor is shutting down (Cancelled), or a bug here
            if _only_cancelled(exc):
                run.cancelled()
            elif run.status is None:
                run.crashed(exc, "the actor")
            raise
        finally:
            record.scope = None
            record.result = run.result(self._index, self._pid, record.emitted)
            self._finished += 1
            record.notify()

    def _unloadable(self, record: _Record, task_id: str, exc: Exception) -> None:
        error = TaskCrashed(
            f"actor {self._index} could not load task {task_id}: {type(exc).__name__}: {exc}; the actor's "
            "workers must import everything the task refers to (see runtime_env in docs/ray.md)",
            exception_type=type(exc).__qualname__, traceback="".join(traceback.format_exception(exc)),
        )
        record.result = TaskResult(task_id, "", TaskStatus.FAILED, error=error, actor=self._index, pid=self._pid)
        self._finished += 1
        record.notify()

    async def _execute(
        self, task: AgentTask, stream: bool, record: _Record, run: _Run, pumps: trio.Nursery
    ) -> None:
        try:
            config = await trio.to_thread.run_sync(_resumed_config, task.config) if task.resume else task.config
            run.session_id = config.session_id
            async with open_agent(config) as agent:
                self._agents += 1
                try:
                    run.rollout_path = agent.rollout.path if agent.rollout is not None else None
                    record.pumping = True
                    pumps.start_soon(self._pump, agent.events, record, stream)
                    await _run_body(agent, task, run.turns)
                finally:
                    self._agents -= 1
            run.completed()
        except AgentError as exc:  # a failed turn, a config or rollout problem: the task's outcome
            run.failed(exc)
        except Exception as exc:  # the task's own code failed
            run.crashed(exc, "its body" if task.body is not None else "the agent")

    @staticmethod
    async def _pump(events: AgentEvents, record: _Record, stream: bool) -> None:
        try:
            async for event in events:
                record.emitted += 1
                if stream:
                    record.buffer.append(event)
                    record.notify()
        finally:
            record.pumping = False
            record.notify()

    # -- the driver's side ------------------------------------------------------------------

    async def poll(self, task_id: str, cursor: int, start_seen: bool) -> EventBatch:
        """The next reply for the driver (see the module docstring)."""
        record = self._record(task_id)
        record.acknowledge(cursor)
        while True:
            start = TaskStart(record.session_id, self._pid) if record.started and not start_seen else None
            if record.buffer or start is not None:
                return EventBatch(tuple(record.buffer[:BATCH_LIMIT]), start)
            if record.result is not None and not record.pumping:
                del self._records[task_id]
                return EventBatch(result=record.result, statistics=self.statistics())
            await record.changed.wait()

    def cancel(self, task_id: str) -> None:
        """Cancel a task that this actor started; a no-op once it has ended."""
        record = self._records.get(task_id)
        if record is None:
            return
        record.cancel_requested = True
        if record.scope is not None:
            record.scope.cancel()
