"""The workers of one agent: ``spawn_agent``, ``send_input`` and ``close_agent``.

Theory of operation (codex.md 3.2; the collaboration tools of Multi-Agent V2): each
worker is a task in the agent's nursery that opens ``spawn(name)`` -- a clean child at
``<path>/<name>`` -- prompts it with its task, and then reports the worker's turns, in
the order they started, to the agent as mail from the worker's path
(``post_to_parent``): the final message, or a short text saying the turn failed.
``send_input`` submits to the worker (a steer while it is busy, else a new turn that
is reported the same way). A worker's cancel scope is cancelled by ``close_agent``
and, for every worker, when the agent shuts down (``close``); an outer cancellation
reaches them through the nursery. Bounds: at most ``max_workers`` at once, and per
worker at most ``TURN_BACKLOG`` turns waiting to be reported (in practice one: input
for a busy worker is a steer). Model mistakes are failed tool outputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs
import trio

from .._errors import AgentClosed, AgentError, SteerQueueFull, TurnCancelled, TurnFailed
from .._events import AgentEvents
from .._tools._namespaces import CollaborationOptions
from ._tool_runner import ToolOutcome, json_text

if TYPE_CHECKING:
    from ._pending_input import Submission
    from ._turn import Turn

__all__ = ["TURN_BACKLOG", "WorkerAgent", "Workers"]

TURN_BACKLOG = 4  # turns of one worker waiting to be reported (beyond the one being reported)
FAILURE_TEXT_LIMIT = 500  # characters of a failed turn's error in its mail
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class _Counters(Protocol):
    @property
    def running_turn(self) -> int | None: ...

    @property
    def turns_queued(self) -> int: ...


class WorkerAgent(Protocol):
    """What the worker tools use of a worker (an ``Agent``)."""

    @property
    def path(self) -> str: ...

    @property
    def events(self) -> AgentEvents: ...

    async def prompt(self, prompt: str) -> Turn: ...

    async def submit(self, given: str) -> Submission: ...

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None: ...

    def statistics(self) -> _Counters: ...


A = TypeVar("A", bound=WorkerAgent)


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


@attrs.define(eq=False)
class _Worker(Generic[A]):
    name: str
    path: str
    agent: A | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: bool = False  # running in the agent's nursery (spawn_agent has returned)
    closed: trio.Event = attrs.field(factory=trio.Event)
    turns: trio.MemorySendChannel[Turn] | None = None

    def busy(self) -> bool:
        if self.agent is None:
            return True  # still starting
        stats = self.agent.statistics()
        return stats.running_turn is not None or stats.turns_queued > 0

    def backlog_full(self) -> bool:
        return self.turns is None or self.turns.statistics().current_buffer_used >= TURN_BACKLOG

    def summary(self, status: str, **extra: Any) -> str:
        return json_text({"name": self.name, "path": self.path, "status": status, **extra})


async def _turn_text(turn: Turn) -> str:
    """What a finished worker turn tells its parent."""
    try:
        result = await turn.result()
    except TurnCancelled:
        return "(My turn was cancelled before it finished.)"
    except TurnFailed as exc:
        text = str(exc)
        if len(text) > FAILURE_TEXT_LIMIT:
            text = text[: FAILURE_TEXT_LIMIT - 3] + "..."
        return f"(My turn failed: {text})"
    return result.final_message if result.final_message.strip() else "(My turn ended without a final message.)"


def _single_agent_error(group: BaseExceptionGroup[BaseException]) -> AgentError | None:
    while len(group.exceptions) == 1:
        only = group.exceptions[0]
        if isinstance(only, AgentError):
            return only
        if not isinstance(only, BaseExceptionGroup):
            return None
        group = only
    return None


async def _discard_events(agent: WorkerAgent) -> None:
    async for _ in agent.events:
        pass


class Workers(Generic[A]):
    """The workers of the agent at ``path``; ``spawn`` opens a named clean child of it
    (``AgentHandle.spawn``) and workers run in ``nursery`` (the agent's)."""

    def __init__(
        self,
        options: CollaborationOptions,
        *,
        path: str,
        spawn: Callable[[str], AbstractAsyncContextManager[A]],
        watch: Callable[[A], Awaitable[None]] | None,
        nursery: trio.Nursery,
    ) -> None:
        self._options = options
        self._path = path
        self._depth = path.count("/") - 1  # /root is 0, /root/<name> is 1
        self._spawn = spawn
        self._watch = watch
        self._nursery = nursery
        self._workers: dict[str, _Worker[A]] = {}
        self._closed = False

    def close(self) -> None:
        """Refuse new workers and cancel every running one (idempotent, never blocks);
        the nursery then waits for them to close."""
        self._closed = True
        for worker in self._workers.values():
            worker.scope.cancel()

    # -- the tools ---------------------------------------------------------------------

    async def spawn_agent(self, arguments: Any) -> ToolOutcome:
        fields = self._fields("spawn_agent", arguments, "name", "task")
        refusal = fields if isinstance(fields, str) else self._refusal(fields[0])
        if refusal is not None:
            await trio.lowlevel.checkpoint()
            return ToolOutcome(refusal, "failed")
        assert not isinstance(fields, str)
        name, task = fields
        worker: _Worker[A] = _Worker(name, f"{self._path}/{name}")
        self._workers[name] = worker  # the slot is taken before the first await
        try:
            await self._nursery.start(self._run, worker, task)
        except AgentError as exc:
            return ToolOutcome(f"collaboration.spawn_agent could not start worker {name!r}: {exc}", "failed")
        return ToolOutcome(worker.summary(
            "running", message=f"Worker {worker.path} started; its answer will arrive as a message from it.",
        ), "completed")

    async def send_input(self, arguments: Any) -> ToolOutcome:
        found = self._find("send_input", arguments, "name", "text")
        if isinstance(found, str) or found[0].backlog_full():
            await trio.lowlevel.checkpoint()
            return ToolOutcome(found if isinstance(found, str) else (
                f"collaboration.send_input: worker {found[0].path} has {TURN_BACKLOG} turns waiting already; "
                "wait_agent for its answers first"), "failed")
        worker, (_, text) = found
        assert worker.agent is not None and worker.turns is not None
        try:
            submission = await worker.agent.submit(text)
        except SteerQueueFull:
            return ToolOutcome(f"collaboration.send_input: worker {worker.path} already holds the most pending "
                               "input it can; wait_agent for its answer before sending more", "failed")
        except AgentError as exc:
            return ToolOutcome(f"collaboration.send_input to {worker.path} failed: {exc}", "failed")
        if submission.kind == "started":
            worker.turns.send_nowait(submission.turn)  # room was checked above, with no await since
            return ToolOutcome(worker.summary("running", delivered="new_turn"), "completed")
        return ToolOutcome(worker.summary("running", delivered="joined_running_turn"), "completed")

    async def close_agent(self, arguments: Any) -> ToolOutcome:
        found = self._find("close_agent", arguments, "name")
        if isinstance(found, str):
            await trio.lowlevel.checkpoint()
            return ToolOutcome(found, "failed")
        worker = found[0]
        previous = "running" if worker.busy() else "idle"
        worker.scope.cancel()
        await worker.closed.wait()  # its running turn has ended (cancelled) and it has closed
        return ToolOutcome(worker.summary("closed", previous_status=previous), "completed")

    # -- arguments and refusals -----------------------------------------------------------

    def _fields(self, tool: str, arguments: Any, *fields: str) -> tuple[str, ...] | str:
        """The string fields of a call (the first is a worker name), or a failure message."""
        if not isinstance(arguments, dict):
            return f"collaboration.{tool} takes a JSON object with {', '.join(fields)}"
        values = []
        for field in fields:
            value = arguments.get(field)
            if not isinstance(value, str) or not value.strip():
                return f"collaboration.{tool} needs {field}, a non-empty string, got {_shown(value)}"
            values.append(value)
        if not _NAME.fullmatch(values[0]):
            return (f"collaboration.{tool}: a worker name is letters, digits, '_' or '-' (1-64 characters), "
                    f"got {_shown(values[0])}")
        return tuple(values)

    def _find(self, tool: str, arguments: Any, *fields: str) -> tuple[_Worker[A], tuple[str, ...]] | str:
        """The started worker a call names, with the call's fields, or a failure message."""
        values = self._fields(tool, arguments, *fields)
        if isinstance(values, str):
            return values
        worker = self._workers.get(values[0])
        if worker is None or not worker.started:
            running = ", ".join(sorted(self._workers)) or "none"
            return f"collaboration.{tool}: no worker named {values[0]!r} (workers: {running})"
        return worker, values

    def _refusal(self, name: str) -> str | None:
        options = self._options
        if self._closed:
            return "collaboration.spawn_agent: this agent is closing and starts no new workers"
        if self._depth >= options.max_depth:
            return (f"collaboration.spawn_agent: {self._path} is itself a worker; workers may only be spawned "
                    f"up to {options.max_depth} level(s) below /root")
        if name in self._workers:
            return (f"collaboration.spawn_agent: a worker named {name!r} already exists ({self._workers[name].path}); "
                    "use send_input to give it more work, close_agent it first, or pick another name")
        if len(self._workers) >= options.max_workers:
            return (f"collaboration.spawn_agent: this agent already runs {options.max_workers} workers "
                    f"({', '.join(sorted(self._workers))}), the most it may; close_agent one first")
        return None

    # -- a worker's life ----------------------------------------------------------------

    async def _run(self, worker: _Worker[A], task: str, *,
                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The worker's whole life: open it, prompt it, report its turns until closed."""
        send, receive = trio.open_memory_channel["Turn"](TURN_BACKLOG)
        worker.turns = send
        try:
            await self._live(worker, task, receive, task_status)
        except BaseExceptionGroup as group:
            # A worker that cannot start (its tools_factory failed, ...) is the spawning
            # tool's failed output, not a crash of the agent.
            if worker.started or (failure := _single_agent_error(group)) is None:
                raise
            raise failure from None
        finally:
            worker.closed.set()
            if self._workers.get(worker.name) is worker:
                del self._workers[worker.name]
        if not worker.started:  # closed while starting: nursery.start() needs an answer
            raise AgentClosed(f"the agent closed before worker {worker.path} started")

    async def _live(self, worker: _Worker[A], task: str, receive: trio.MemoryReceiveChannel[Turn],
                    task_status: trio.TaskStatus[None]) -> None:
        assert worker.turns is not None
        # The watcher runs beside the worker and may outlive its block by as long as it
        # takes to read the last events (they end when the worker has closed). Without
        # one, nobody else can read them: they are read and dropped, so a long-lived
        # worker does not pile them up.
        async with trio.open_nursery() as watchers:
            with worker.scope:
                async with self._spawn(worker.name) as agent:
                    worker.agent = agent
                    watchers.start_soon(self._watch or _discard_events, agent)
                    worker.turns.send_nowait(await agent.prompt(task))
                    task_status.started()
                    worker.started = True
                    await self._report(agent, receive)

    async def _report(self, agent: A, receive: trio.MemoryReceiveChannel[Turn]) -> None:
        async for turn in receive:
            text = await _turn_text(turn)
            try:
                await agent.post_to_parent(text, trigger_turn=self._options.trigger_turn)
            except AgentError:
                pass  # the parent has closed (AgentClosed) or is flooded (MailboxFull): nobody takes it
