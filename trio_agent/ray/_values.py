"""The values that cross the cluster: tasks, results, events and statistics.

All are frozen attrs values and pickle as themselves (Ray moves them with its own
serialiser): a ``TaskResult`` carries the same ``ta.TurnResult`` values the agent
produced, so ``result.turns[-1].snapshot()`` works on the driver.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast, final

import attrs

from .._config import AgentConfig
from .._errors import AgentError, ConfigError
from .._event_payloads._shared import JsonValue
from .._events import AgentEvent, EventKind
from .._ids import uuid7
from .._runtime import Prompt, TurnResult

if TYPE_CHECKING:
    from .._runtime import Agent

__all__ = [
    "ActorInfo",
    "ActorStatistics",
    "AgentTask",
    "EventBatch",
    "PollReply",
    "PoolStatistics",
    "TaskBody",
    "TaskEvent",
    "TaskResult",
    "TaskStart",
    "TaskStatus",
]

# What a task's own coroutine may return: the turns it wants reported.
TaskBody = Callable[["Agent"], Awaitable[TurnResult | Sequence[TurnResult] | None]]


def _prompts(value: object) -> tuple[str | Prompt, ...]:
    if isinstance(value, str | Prompt):
        return (value,)
    if not isinstance(value, Sequence):
        raise ConfigError(f"prompts must be a list of str or ta.Prompt, got {type(value).__name__}")
    for prompt in value:
        if not isinstance(prompt, str | Prompt):
            raise ConfigError(f"prompts must be str or ta.Prompt, got {type(prompt).__name__}")
    return tuple(value)


def _task_id() -> str:
    return f"task-{uuid7()}"


@final
@attrs.frozen
class AgentTask:
    """One agent to run on the pool: ``config`` plus either ``prompts`` (run one after
    another; the first failed turn ends the task) or ``body``, an async function that
    receives the opened ``ta.Agent`` and returns the ``TurnResult`` values to report.

    ``config`` and ``body`` are pickled to the actor (Ray's cloudpickle): closures work,
    sockets, open files and clients (``Responses(http_client=...)``, ``dialer=``) do
    not. ``config.workspace`` and ``config.rollout`` name paths on the actor's node.

    ``resume=True`` continues ``config.session_id`` from its rollout
    (``config.rollout.load_session(...)``, read on the actor, so the rollout home must
    be storage that actor can read): what a lost actor committed is kept, its open tool
    calls are answered as aborted. When no rollout of that session exists yet the
    agent starts fresh under the same session id. ``resumed()`` builds such a task.
    """

    config: AgentConfig
    prompts: tuple[str | Prompt, ...] = attrs.field(default=(), converter=_prompts)
    body: TaskBody | None = None
    resume: bool = False
    task_id: str = attrs.field(factory=_task_id)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.config, AgentConfig):
            raise ConfigError(f"an AgentTask needs a ta.AgentConfig, got {type(self.config).__name__}")
        if bool(self.prompts) == (self.body is not None):
            raise ConfigError("an AgentTask needs either prompts=[...] or body=async_fn(agent), not both or neither")
        if self.body is not None and not callable(self.body):
            raise ConfigError(f"body must be an async function taking the agent, got {self.body!r:.60}")
        if self.resume and self.config.rollout is None:
            raise ConfigError(
                "resume=True continues a session from its rollout; give the config rollout=RolloutConfig(home)"
            )
        if self.resume and self.config.resume is not None:
            raise ConfigError("resume=True reads the session from its rollout; do not also pass config.resume")
        if not self.task_id or not isinstance(self.task_id, str):
            raise ConfigError("task_id must be a non-empty string; omit it for a fresh one")

    def resumed(self, *prompts: str | Prompt, body: TaskBody | None = None) -> AgentTask:
        """A new task (new ``task_id``) that continues this task's session from its
        rollout with ``prompts`` (or ``body``): what to do after a lost actor."""
        return AgentTask(self.config, prompts, body=body, resume=True)


class TaskStatus(enum.Enum):
    """Where a task is: QUEUED (waiting for an actor), RUNNING (on an actor), then one
    of COMPLETED, FAILED, CANCELLED or LOST (its actor died)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"

    @property
    def is_terminal(self) -> bool:
        return self not in (TaskStatus.QUEUED, TaskStatus.RUNNING)


@final
@attrs.frozen
class TaskResult:
    """How a task ended. ``turns`` are the turns that completed, in order; ``error`` is
    None exactly when ``status`` is COMPLETED: the ``ta.TurnFailed`` (or other
    ``ta.AgentError``) that ended it, ``TaskCancelled``, ``TaskCrashed`` or
    ``ActorLost``. ``rollout_path`` is where the agent's rollout is (on its actor's
    node), whatever the status -- a LOST task's included, to resume it from -- and None
    when the task has no rollout or its agent never opened one. ``events`` counts the
    agent events the actor emitted (all of them were delivered to the task's event
    channel, if it had one and kept reading).
    ``actor`` is the pool index of the actor that ran it (None: it never reached one)."""

    task_id: str
    session_id: str
    status: TaskStatus
    turns: tuple[TurnResult, ...] = ()
    error: AgentError | None = None
    rollout_path: Path | None = None
    actor: int | None = None
    pid: int | None = None
    events: int = 0

    @property
    def final_message(self) -> str | None:
        """The last completed turn's final message (None when no turn completed)."""
        return self.turns[-1].final_message if self.turns else None


@final
@attrs.frozen
class TaskEvent:
    """One agent event of a task, as delivered to the caller's channel: per task, in
    ``event.seq`` order, none skipped."""

    task_id: str
    event: AgentEvent


@final
@attrs.frozen
class ActorInfo:
    """Who an actor is: its pool index, process id, Ray node and library version."""

    index: int
    pid: int
    node_id: str
    version: str


@final
@attrs.frozen
class ActorStatistics:
    """One actor's counters and memory, as the actor measured them.

    ``agents`` are open now; ``buffered_events`` wait on the actor for the driver to
    take them (events are never dropped: a slow consumer costs memory here, shown in
    this number; events the driver took are kept until it acknowledges them);
    ``rss_bytes`` is the process's resident memory now, ``peak_rss_bytes`` its
    high-water mark, ``cpu_seconds`` its CPU time so far.
    """

    index: int
    pid: int
    agents: int
    tasks_started: int
    tasks_finished: int
    buffered_events: int
    rss_bytes: int
    peak_rss_bytes: int
    cpu_seconds: float


@final
@attrs.frozen
class PoolStatistics:
    """``RayPool.statistics()``: the driver's counters and each actor's last report
    (every finished task brings a fresh one; ``await pool.actor_statistics()`` asks)."""

    num_actors: int
    live_actors: int
    agents_per_actor: int
    max_queued: int
    queued: int
    running: int
    completed: int
    failed: int
    cancelled: int
    lost: int
    events_delivered: int
    actors: tuple[ActorStatistics | None, ...]
    restarts: int = 0  # lost actors replaced so far (open_ray_pool's max_restarts)


# -- the poll protocol (private) ---------------------------------------------------------


@attrs.frozen
class TaskStart:
    """The actor took the task (sent once, in the first poll reply after it did)."""

    session_id: str
    pid: int


@attrs.frozen
class EventBatch:
    """One task's part of a poll reply: its next events, the start report (in its
    first batch), the rollout's path (once the agent opened it) and, in the batch with
    its last events, its result."""

    events: tuple[AgentEvent, ...] = ()
    start: TaskStart | None = None
    result: TaskResult | None = None
    rollout_path: Path | None = None

    def __reduce__(self) -> tuple[Callable[..., EventBatch], tuple[object, ...]]:
        # The events travel as rows -- kind by value, the session id once (one agent's
        # events): a poll carries thousands, and the pickler's per-object state dicts
        # made most of the actor's cost of sending them.
        events = self.events
        session_id = events[0].session_id if events else ""
        if any(event.session_id != session_id for event in events):  # not one agent's: as they are
            return EventBatch, (events, self.start, self.result, self.rollout_path)
        rows = tuple((event.kind.value, event.payload, event.seq, event.turn_id, event.time) for event in events)
        return _batch_from_rows, (session_id, rows, self.start, self.result, self.rollout_path)


def _batch_from_rows(session_id: str, rows: tuple[tuple[str, dict[str, JsonValue], int, int | None, float], ...],
                     start: TaskStart | None, result: TaskResult | None, rollout_path: Path | None) -> EventBatch:
    """An ``EventBatch`` back from ``EventBatch.__reduce__``'s rows."""
    kinds = EventKind._value2member_map_
    events = tuple(AgentEvent(cast(EventKind, kinds[kind]), payload, seq, session_id, turn_id, time)
                   for kind, payload, seq, turn_id, time in rows)
    return EventBatch(events, start, result, rollout_path)


@attrs.frozen
class PollReply:
    """One actor's answer to the driver's poll: batches by task id, and its statistics."""

    batches: dict[str, EventBatch]
    statistics: ActorStatistics
