"""Agents that talk to each other: mail addresses, ``wait_agent`` and workers.

Theory of operation (SPEC sec. 10; codex.md 3.2 and 3.7):

- Every agent has a ``MailAddress``: its path and its ``post_mail``, open for as long
  as the agent is. A child (spawn or fork) holds its parent's address, so
  ``post_to_parent`` reaches the parent's mailbox; the parent reaches a child with
  ``child.post_mail(parent.path, text)``. An address is closed (and drops its agent)
  when the agent shuts down; posting to it then raises ``AgentClosed``.
- ``collaboration.wait_agent {timeout_ms?}`` waits on the agent's input-activity
  signal: mail -> ``Wait completed.``, a steer or injected item (or a queued prompt) ->
  ``Wait interrupted by new input.``, nothing -> ``Wait timed out.``. Input already
  waiting when it starts ends it at once, classified the same way (a steer first).
  The timeout is clamped up to ``WAIT_MIN_MS`` with a note; above ``WAIT_MAX_MS`` it is
  a failed output (as codex).
- Workers (``spawn_agent``/``send_input``/``close_agent``): each is a task in the
  agent's nursery that opens ``spawn(name)`` and then reports the worker's turns, in
  order, to the agent as mail from the worker's path (``post_to_parent``). A worker's
  cancel scope is cancelled by ``close_agent`` and, for all of them, when the agent
  shuts down; an outer cancellation reaches them through the nursery. At most
  ``max_workers`` run at once, and each keeps at most ``TURN_BACKLOG`` turns waiting
  to be reported (in practice one: input for a busy worker is a steer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

import attrs
import trio

from .._errors import AgentClosed, AgentError, SteerQueueFull, TurnCancelled, TurnFailed
from .._events import AgentEvents, EventKind
from .._tools._namespaces import WAIT_DEFAULT_MS, WAIT_MAX_MS, WAIT_MIN_MS, CollaborationOptions
from ._tool_runner import Runner, ToolOutcome, json_text

if TYPE_CHECKING:
    from ._pending_input import Submission
    from ._turn import Turn, TurnState
    from ._turn_queue import TurnQueue

__all__ = ["TURN_BACKLOG", "Collaboration", "MailAddress", "wait_output"]

TURN_BACKLOG = 4  # turns of one worker waiting to be reported (beyond the one being reported)
FAILURE_TEXT_LIMIT = 500  # characters of a failed turn's error in its mail
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

WaitOutcome = Literal["completed", "interrupted", "timed_out"]
_WAIT_MESSAGES: dict[WaitOutcome, str] = {
    "completed": "Wait completed.",
    "interrupted": "Wait interrupted by new input.",
    "timed_out": "Wait timed out.",
}


class MailAddress:
    """Where mail for one agent goes: its ``path`` and its ``post_mail``, while it is open."""

    def __init__(self, path: str, post: Callable[..., Awaitable[Turn | None]]) -> None:
        self.path = path
        self._post: Callable[..., Awaitable[Turn | None]] | None = post

    async def post(self, author: str, text: str, *, trigger_turn: bool) -> Turn | None:
        if self._post is None:
            raise AgentClosed(f"agent {self.path} has closed; mail to it cannot be delivered")
        return await self._post(author, text, trigger_turn=trigger_turn)

    def close(self) -> None:
        self._post = None  # also drops the reference to the agent


class _Counters(Protocol):
    @property
    def running_turn(self) -> int | None: ...

    @property
    def turns_queued(self) -> int: ...


class WorkerAgent(Protocol):
    """What the collaboration tools use of a worker (an ``Agent``)."""

    @property
    def path(self) -> str: ...

    @property
    def events(self) -> AgentEvents: ...

    async def prompt(self, prompt: str) -> Turn: ...

    async def submit(self, given: str) -> Submission: ...

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None: ...

    def statistics(self) -> _Counters: ...


A = TypeVar("A", bound=WorkerAgent)


# -- wait_agent ------------------------------------------------------------------------


def wait_output(outcome: WaitOutcome, timeout_ms: int, requested_ms: int | None) -> str:
    """The JSON output of ``wait_agent`` (with the clamp note when the request was too short)."""
    message = _WAIT_MESSAGES[outcome]
    if requested_ms is not None and requested_ms < timeout_ms:
        message += (f"\n\nThe requested timeout_ms {requested_ms} is below the minimum; "
                    f"waited up to {timeout_ms} ms instead.")
    return json_text({"message": message, "timed_out": outcome == "timed_out"})


def _wait_timeout(arguments: Any) -> tuple[int, int | None] | str:
    """``(timeout_ms, requested_ms)``, or the message of a failed output."""
    if arguments in ("", None):
        arguments = {}
    if not isinstance(arguments, dict):
        return f'collaboration.wait_agent takes a JSON object such as {{"timeout_ms": {WAIT_DEFAULT_MS}}}'
    unknown = sorted(set(arguments) - {"timeout_ms"})
    if unknown:
        return f"collaboration.wait_agent takes only timeout_ms; unknown field(s): {', '.join(unknown)}"
    value = arguments.get("timeout_ms")
    if value is None:
        return WAIT_DEFAULT_MS, None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value):
        return f"collaboration.wait_agent timeout_ms must be a whole number of milliseconds, got {_shown(value)}"
    if value > WAIT_MAX_MS:
        return f"collaboration.wait_agent timeout_ms must be at most {WAIT_MAX_MS} (1 hour), got {int(value)}"
    return max(int(value), WAIT_MIN_MS), int(value)


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


# -- workers ---------------------------------------------------------------------------


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


class Collaboration(Generic[A]):
    """The ``collaboration`` group of one agent: ``wait_agent`` and the agent's workers.

    ``spawn`` opens a named clean child of the agent (``AgentHandle.spawn``); workers
    run in ``nursery`` (the agent's). ``close()`` (the agent is shutting down) cancels
    every worker; the nursery then waits for them to close.
    """

    def __init__(
        self,
        options: CollaborationOptions,
        *,
        path: str,
        spawn: Callable[[str], AbstractAsyncContextManager[A]],
        watch: Callable[[A], Awaitable[None]] | None,
        queue: TurnQueue,
        nursery: trio.Nursery,
        emit: Callable[..., Any],
    ) -> None:
        self._options = options
        self._path = path
        self._depth = path.count("/") - 1  # /root is 0, /root/<name> is 1
        self._spawn = spawn
        self._watch = watch
        self._queue = queue
        self._nursery = nursery
        self._emit = emit
        self._workers: dict[str, _Worker[A]] = {}
        self._closed = False

    def runner(self, name: str, state: TurnState) -> Runner | None:
        tools: dict[str, Callable[[TurnState, dict[str, Any], Any], Awaitable[ToolOutcome]]] = {
            "wait_agent": self._wait_agent,
        }
        if self._options.max_workers:
            tools.update(spawn_agent=self._spawn_agent, send_input=self._send_input, close_agent=self._close_agent)
        tool = tools.get(name)
        if tool is None:
            return None

        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            return await tool(state, call, arguments)

        return run

    def close(self) -> None:
        """Refuse new workers and cancel every running one (idempotent, never blocks)."""
        self._closed = True
        for worker in self._workers.values():
            worker.scope.cancel()

    # -- wait_agent --------------------------------------------------------------------

    def _waiting(self, state: TurnState) -> WaitOutcome | None:
        """What already waits for the turn: a steer (or injected item, or queued
        prompt) interrupts, mail completes."""
        queue = self._queue
        if state.steers or state.injected or queue.queued or queue.idle_items:
            return "interrupted"
        return "completed" if len(queue.mailbox) else None

    async def _wait_agent(self, state: TurnState, call: dict[str, Any], arguments: Any) -> ToolOutcome:
        parsed = _wait_timeout(arguments)
        if isinstance(parsed, str):
            await trio.lowlevel.checkpoint()
            return ToolOutcome(parsed, "failed")
        timeout_ms, requested_ms = parsed
        self._emit(EventKind.TOOL_PROGRESS, {
            "call_id": call.get("call_id", ""), "tool": "wait_agent",
            "message": f"waiting up to {timeout_ms} ms for mail",
        }, state.turn_id)
        outcome = self._waiting(state)
        if outcome is not None:
            await trio.lowlevel.checkpoint()
        else:
            seen = state.activity.count
            outcome = "timed_out"
            with trio.move_on_after(timeout_ms / 1000):
                kind = await state.activity.wait_after(seen)
                outcome = "interrupted" if kind == "steer" else "completed"
        return ToolOutcome(wait_output(outcome, timeout_ms, requested_ms), "completed")

    # -- spawn_agent / send_input / close_agent ------------------------------------------

    def _named(self, tool: str, arguments: Any, *fields: str) -> tuple[str, ...] | str:
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

    def _unknown(self, tool: str, name: str) -> str:
        running = ", ".join(sorted(self._workers)) or "none"
        return f"collaboration.{tool}: no worker named {name!r} (workers: {running})"

    def _refusal(self, name: str) -> str | None:
        if self._closed:
            return "collaboration.spawn_agent: this agent is closing and starts no new workers"
        if self._depth >= self._options.max_depth:
            return (f"collaboration.spawn_agent: {self._path} is itself a worker; workers may only be spawned "
                    f"up to {self._options.max_depth} level(s) below /root")
        if name in self._workers:
            return (f"collaboration.spawn_agent: a worker named {name!r} already exists ({self._workers[name].path}); "
                    "use send_input to give it more work, close_agent it first, or pick another name")
        if len(self._workers) >= self._options.max_workers:
            return (f"collaboration.spawn_agent: this agent already runs {self._options.max_workers} workers "
                    f"({', '.join(sorted(self._workers))}), the most it may; close_agent one first")
        return None

    async def _spawn_agent(self, state: TurnState, call: dict[str, Any], arguments: Any) -> ToolOutcome:
        fields = self._named("spawn_agent", arguments, "name", "task")
        refusal = fields if isinstance(fields, str) else self._refusal(fields[0])
        if refusal is not None:
            await trio.lowlevel.checkpoint()
            return ToolOutcome(refusal, "failed")
        assert not isinstance(fields, str)
        name, task = fields
        worker: _Worker[A] = _Worker(name, f"{self._path}/{name}")
        self._workers[name] = worker  # the slot is taken before the first await
        try:
            await self._nursery.start(self._run_worker, worker, task)
        except AgentError as exc:
            return ToolOutcome(f"collaboration.spawn_agent could not start worker {name!r}: {exc}", "failed")
        return ToolOutcome(worker.summary(
            "running", message=f"Worker {worker.path} started; its answer will arrive as a message from it.",
        ), "completed")

    async def _send_input(self, state: TurnState, call: dict[str, Any], arguments: Any) -> ToolOutcome:
        fields = self._named("send_input", arguments, "name", "text")
        worker = None if isinstance(fields, str) else self._workers.get(fields[0])
        if isinstance(fields, str) or worker is None or worker.agent is None or worker.backlog_full():
            await trio.lowlevel.checkpoint()
            if isinstance(fields, str):
                return ToolOutcome(fields, "failed")
            if worker is None or worker.agent is None:
                return ToolOutcome(self._unknown("send_input", fields[0]), "failed")
            return ToolOutcome(f"collaboration.send_input: worker {worker.path} has {TURN_BACKLOG} turns waiting "
                               "already; wait_agent for its answers first", "failed")
        try:
            submission = await worker.agent.submit(fields[1])
        except SteerQueueFull:
            return ToolOutcome(f"collaboration.send_input: worker {worker.path} already holds the most pending "
                               "input it can; wait_agent for its answer before sending more", "failed")
        except AgentError as exc:
            return ToolOutcome(f"collaboration.send_input to {worker.path} failed: {exc}", "failed")
        if submission.kind == "started":
            assert worker.turns is not None
            worker.turns.send_nowait(submission.turn)  # room was checked above, with no await since
            return ToolOutcome(worker.summary("running", delivered="new_turn"), "completed")
        return ToolOutcome(worker.summary("running", delivered="joined_running_turn"), "completed")

    async def _close_agent(self, state: TurnState, call: dict[str, Any], arguments: Any) -> ToolOutcome:
        fields = self._named("close_agent", arguments, "name")
        worker = None if isinstance(fields, str) else self._workers.get(fields[0])
        if isinstance(fields, str) or worker is None:
            await trio.lowlevel.checkpoint()
            return ToolOutcome(fields if isinstance(fields, str) else self._unknown("close_agent", fields[0]),
                               "failed")
        previous = "running" if worker.busy() else "idle"
        worker.scope.cancel()
        await worker.closed.wait()  # its running turn has ended (cancelled) and it has closed
        return ToolOutcome(worker.summary("closed", previous_status=previous), "completed")

    async def _run_worker(self, worker: _Worker[A], task: str, *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The worker's whole life: open it, prompt it, report its turns until closed."""
        send, receive = trio.open_memory_channel["Turn"](TURN_BACKLOG)
        worker.turns = send
        try:
            await self._live_worker(worker, task, receive, task_status)
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

    async def _live_worker(self, worker: _Worker[A], task: str, receive: trio.MemoryReceiveChannel[Turn],
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
