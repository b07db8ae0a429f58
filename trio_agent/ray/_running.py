"""What running one task on an actor is made of: what travels with it (``travelling``),
its config (resumed from the rollout when asked), its body, and the accumulation of its
outcome into a ``TaskResult``."""

from __future__ import annotations

import os
import pickle
import resource
import ssl
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
import ray
import trio

from .._config import AgentConfig
from .._errors import AgentError, TurnCancelled
from .._runtime import Agent, TurnResult
from ._errors import TaskCancelled, TaskCrashed
from ._values import AgentTask, TaskResult, TaskStatus

__all__ = ["Run", "only_cancelled", "resumed_config", "run_body", "traced_from", "travelling", "usage", "with_tls"]

TraceContext = dict[str, str]  # W3C traceparent/tracestate: the driver's span (empty: none)


def travelling(task: AgentTask) -> tuple[AgentTask, TraceContext]:
    """What the driver sends for ``task``, in the caller's task: the task, with its
    cassette path (``record``) made absolute -- the actor writes it, and the driver's
    working directory means nothing there -- and, for a traced task, the trace context
    current here (the driver's span becomes the parent of the actor's spans)."""
    config = task.config
    if config.record is not None and not config.record.is_absolute():
        task = attrs.evolve(task, config=config._derive(record=config.record.absolute()))
    if config.tracing is None:
        return task, {}
    from .._tracing._propagation import current_context  # the OpenTelemetry API: Tracing() imported it

    return task, current_context()


@contextmanager
def traced_from(trace: TraceContext) -> Iterator[None]:
    """On the actor: the driver's span current in this task for the block (nothing
    without one), so the agent opened in it starts its span as that span's child."""
    if not trace:
        yield
        return
    from .._tracing._propagation import continued

    with continued(trace):
        yield


@attrs.define(eq=False)
class Run:
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


def with_tls(config: AgentConfig, context: ssl.SSLContext) -> AgentConfig:
    """``config`` using the actor's shared TLS context when it brings none of its own
    (it cannot: an ``SSLContext`` does not pickle). The system's CA store is then
    loaded once per actor instead of once per connection."""
    responses = config.responses
    if responses.ssl_context is not None or responses.http_client is not None:
        return config
    return attrs.evolve(config, responses=attrs.evolve(responses, ssl_context=context))


def resumed_config(config: AgentConfig) -> AgentConfig:
    """``config`` continuing its session from its rollout (blocking file I/O)."""
    from .._rollout import RolloutConfig  # loaded already: the task's config holds one

    rollout = config.rollout
    assert isinstance(rollout, RolloutConfig)  # AgentTask checks it is set, AgentConfig its class
    if rollout.find(config.session_id) is None:
        return config  # nothing was recorded: a fresh start is the same session
    thread_id, snapshot, rollout = rollout.load_session(config.session_id).into_parts()
    return attrs.evolve(config, session_id=thread_id, resume=snapshot, rollout=rollout)


async def run_body(agent: Agent, task: AgentTask, turns: list[TurnResult]) -> None:
    """The task's prompts one after another, or its body; completed turns go to ``turns``."""
    if task.body is None:
        for prompt in task.prompts:
            turn = await agent.prompt(prompt)
            turns.append(await turn.result())
        return
    value = await task.body(agent)
    if value is None:
        return
    if isinstance(value, TurnResult):
        returned = [value]
    elif isinstance(value, Sequence) and all(isinstance(item, TurnResult) for item in value):
        returned = list(value)
    else:
        raise TypeError(f"a task's body must return a TurnResult, a list of them or None, got {type(value).__name__}")
    # What a body built itself may hold anything: checked here, so that it fails this
    # task alone instead of the poll that carries every task of the actor.
    try:
        ray.cloudpickle.dumps(returned)
    except Exception as exc:  # whatever refused pickling
        raise TypeError(f"the turns it returned cannot be sent to the driver: {type(exc).__name__}: {exc}") from None
    turns.extend(returned)


def only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


def usage() -> tuple[int, int, float]:
    """(resident bytes now, peak resident bytes, CPU seconds) of this process. The
    kernel updates the peak lazily, so it is at least the resident size read just after."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = used.ru_maxrss * 1024, used.ru_utime + used.ru_stime  # ru_maxrss: KiB on Linux
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak, peak, cpu
    return rss, max(peak, rss), cpu
