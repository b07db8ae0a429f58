"""The workers of one agent: ``spawn_agent``, ``send_input``, ``send_message``,
``followup_task`` and ``close_agent``.

Theory of operation (codex.md 3.2; the collaboration tools of Multi-Agent V2): each
worker is a task in the agent's nursery that opens ``spawn(name)`` -- a clean child at
``<path>/<name>`` -- prompts it with its task, and then reports the worker's turns, in
the order they started, to the agent as mail from the worker's path
(``post_to_parent``): the final message, or a short text saying the turn failed. The
turns reported are the ones the tools prompted (the task, ``send_input``) and every
*automatic* turn of the worker (mail that triggered one, ``followup_task``).
``send_input`` submits to the worker (a steer while it is busy, else a new turn);
``send_message`` is queue-only mail (it joins the worker's running turn or waits for
its next one); ``followup_task`` is triggering mail. A worker's cancel scope is
cancelled by ``close_agent`` and, for every worker, when the agent shuts down
(``close``); an outer cancellation reaches them through the nursery.

Suspension (idle eviction, for a host such as the app server): the worker's agent
can be asked to unload (``HostHooks.request_unload``, ``Agent._host``). When it is idle -- no turn
running or queued, every finished turn reported -- the worker closes it and keeps
what it needs to come back: its session snapshot (the committed history; the rollout
goes on in the same file) and the queue-only mail it had not read yet. The next
tool that reaches the worker (``send_input``, ``send_message``, ``followup_task``), or
``reload(name)``, reopens it -- same name, path and session id (``reopen``) -- puts the
held mail back first, then delivers; a reload that fails leaves it suspended and the
tool's output (or ``reload``'s error) says why. Each load runs ``watch`` again.

Bounds: at most ``max_workers`` at once (suspended ones included), and per worker at
most ``TURN_BACKLOG`` turns waiting to be reported. Model mistakes are failed tool
outputs. One worker's state and its phases are ``_worker_state``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Generic

import trio

from ..._errors import AgentClosed, AgentError, SteerQueueFull
from ..._session.snapshot import SessionSnapshot
from ..._tools._namespaces import CollaborationOptions
from ._tool_runner import ToolOutcome, json_text
from ._worker_state import TURN_BACKLOG, A, Phase, Worker, WorkerAgent, discard_events, single_agent_error, turn_text

if TYPE_CHECKING:
    from .._turns._turn import Turn

__all__ = ["TURN_BACKLOG", "WorkerAgent", "Workers"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


def _summary(worker: Worker[A], status: str, **extra: Any) -> str:
    """A worker tool's output: the worker's name, path and status, and ``extra``."""
    return json_text({"name": worker.name, "path": worker.path, "status": status, **extra})


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
        reopen: Callable[[str, str, SessionSnapshot], AbstractAsyncContextManager[A]] | None = None,
    ) -> None:
        self._options = options
        self._path = path
        self._depth = path.count("/") - 1  # /root is 0, /root/<name> is 1
        self._spawn = spawn
        self._reopen = reopen
        self._watch = watch
        self._nursery = nursery
        self._workers: dict[str, Worker[A]] = {}
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
        worker: Worker[A] = Worker(name, f"{self._path}/{name}")
        self._workers[name] = worker  # the slot is taken before the first await
        try:
            await self._nursery.start(self._run, worker, task)
        except AgentError as exc:
            return ToolOutcome(f"collaboration.spawn_agent could not start worker {name!r}: {exc}", "failed")
        return ToolOutcome(_summary(worker,
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
        assert worker.turns is not None
        try:
            agent = await self._loaded(worker)
        except AgentError as exc:
            return ToolOutcome(f"collaboration.send_input to {worker.path} failed: {exc}", "failed")
        try:
            submission = await agent.submit(text)
        except SteerQueueFull:
            return ToolOutcome(f"collaboration.send_input: worker {worker.path} already holds the most pending "
                               "input it can; wait_agent for its answer before sending more", "failed")
        except AgentError as exc:
            return ToolOutcome(f"collaboration.send_input to {worker.path} failed: {exc}", "failed")
        if submission.kind == "started":
            worker.turns.send_nowait(submission.turn)  # room was checked above, with no await since
            return ToolOutcome(_summary(worker, "running", delivered="new_turn"), "completed")
        return ToolOutcome(_summary(worker, "running", delivered="joined_running_turn"), "completed")

    async def send_message(self, arguments: Any) -> ToolOutcome:
        """Queue-only mail for the worker: its running turn's next request, or its next turn."""
        return await self._mail("send_message", arguments, trigger=False)

    async def followup_task(self, arguments: Any) -> ToolOutcome:
        """Triggering mail: a turn of an idle worker (reported), or its running turn's next request."""
        return await self._mail("followup_task", arguments, trigger=True)

    async def _mail(self, tool: str, arguments: Any, *, trigger: bool) -> ToolOutcome:
        found = self._find(tool, arguments, "name", "text")
        if isinstance(found, str) or (trigger and found[0].backlog_full()):
            await trio.lowlevel.checkpoint()
            return ToolOutcome(found if isinstance(found, str) else (
                f"collaboration.{tool}: worker {found[0].path} has {TURN_BACKLOG} turns waiting already; "
                "wait_agent for its answers first"), "failed")
        worker, (_, text) = found
        try:
            agent = await self._loaded(worker)
            turn = await agent.post_mail(self._path, text, trigger_turn=trigger)
        except AgentError as exc:  # a reload that failed, a full mailbox, a worker closing
            return ToolOutcome(f"collaboration.{tool} to {worker.path} failed: {exc}", "failed")
        delivered = "new_turn" if turn is not None else "mail" if not worker.busy() else "joined_running_turn"
        return ToolOutcome(_summary(worker, "running" if worker.busy() else "idle", delivered=delivered), "completed")

    async def reload(self, name: str) -> A:
        """Worker ``name``'s agent, reopened first if it was suspended (``AgentError``
        saying why when it cannot be: unknown, closed, or its reload failed)."""
        worker = self._workers.get(name)
        if worker is None or not worker.started:
            raise AgentClosed(f"{self._path} runs no worker named {name!r}")
        return await self._loaded(worker)

    async def _loaded(self, worker: Worker[A]) -> A:
        """The worker's agent; a suspended worker is reloaded first (one reload at a time,
        shared by everyone waiting). Raises the reload's ``AgentError`` when it failed."""
        asked = False
        while True:
            if worker.phase is Phase.LOADED and worker.agent is not None:
                await trio.lowlevel.checkpoint()
                return worker.agent
            if worker.phase is Phase.SUSPENDED:
                if asked:  # the reload this call asked for failed
                    raise worker.load_error or AgentClosed(f"worker {worker.path} could not be reloaded")
                asked = True
                worker.load_error = None
                worker.set_phase(Phase.LOADING)
                worker.reload_wanted.set()
            if worker.closed.is_set():
                raise AgentClosed(f"worker {worker.path} has closed")
            await worker.changed.wait()

    def _request_unload(self, worker: Worker[A]) -> bool:
        """Suspend the worker if it is idle (once the turns it finished are reported);
        False -- nothing happens -- while a turn of it runs or waits."""
        if worker.phase is not Phase.LOADED or worker.busy():
            return False
        worker.unload_wanted.set()
        return True

    def _automatic(self, worker: Worker[A], turn: Turn) -> None:
        """An automatic turn of the worker (mail started it): its answer is reported too."""
        if worker.turns is not None:
            try:
                worker.turns.send_nowait(turn)
            except trio.WouldBlock:  # the backlog is full: this one answers nobody
                pass

    async def close_agent(self, arguments: Any) -> ToolOutcome:
        found = self._find("close_agent", arguments, "name")
        if isinstance(found, str):
            await trio.lowlevel.checkpoint()
            return ToolOutcome(found, "failed")
        worker = found[0]
        previous = "running" if worker.busy() else "idle"
        worker.scope.cancel()
        await worker.closed.wait()  # its running turn has ended (cancelled) and it has closed
        return ToolOutcome(_summary(worker, "closed", previous_status=previous), "completed")

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

    def _find(self, tool: str, arguments: Any, *fields: str) -> tuple[Worker[A], tuple[str, ...]] | str:
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

    async def _run(self, worker: Worker[A], task: str, *,
                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The worker's whole life: open it, prompt it, report its turns until closed."""
        send, receive = trio.open_memory_channel["Turn"](TURN_BACKLOG)
        worker.turns = send
        try:
            await self._live(worker, task, receive, task_status)
        except BaseExceptionGroup as group:
            # A worker that cannot start (its tools_factory failed, ...) is the spawning
            # tool's failed output, not a crash of the agent.
            if worker.started or (failure := single_agent_error(group)) is None:
                raise
            raise failure from None
        finally:
            worker.closed.set()
            if self._workers.get(worker.name) is worker:
                del self._workers[worker.name]
        if not worker.started:  # closed while starting: nursery.start() needs an answer
            raise AgentClosed(f"the agent closed before worker {worker.path} started")

    async def _live(self, worker: Worker[A], task: str, receive: trio.MemoryReceiveChannel[Turn],
                    task_status: trio.TaskStatus[None]) -> None:
        # The watcher runs beside each load of the worker and may outlive it by as long as
        # it takes to read the last events (they end when that agent has closed). Without
        # one, nobody else can read them: they are read and dropped, so a long-lived
        # worker does not pile them up.
        async with trio.open_nursery() as watchers:
            with worker.scope:
                await self._load(worker, self._spawn(worker.name), receive, watchers, task, task_status)
                while True:  # suspended: until something reaches it
                    await worker.reload_wanted.wait()
                    worker.reload_wanted = trio.Event()
                    assert self._reopen is not None and worker.session_id is not None and worker.snapshot is not None
                    try:
                        await self._load(worker, self._reopen(worker.name, worker.session_id, worker.snapshot),
                                         receive, watchers)
                    except AgentError as exc:
                        if worker.phase is not Phase.LOADING:
                            raise
                        worker.load_error = exc  # it stays suspended; whoever asked is told why
                        worker.set_phase(Phase.SUSPENDED)

    async def _load(self, worker: Worker[A], opening: AbstractAsyncContextManager[A],
                    receive: trio.MemoryReceiveChannel[Turn], watchers: trio.Nursery, task: str | None = None,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One load of the worker: open it, run it until it is suspended (or closed)."""
        assert worker.turns is not None
        async with opening as agent:
            worker.agent = agent
            worker.session_id = agent.session_id
            agent._host.as_worker(unload=lambda: self._request_unload(worker),
                                  automatic=lambda turn: self._automatic(worker, turn))
            agent._host.restore_mail(worker.held_mail)
            worker.held_mail = []
            watchers.start_soon(self._watch or discard_events, agent)
            if task is not None:
                worker.turns.send_nowait(await agent.prompt(task))
                task_status.started()
                worker.started = True
            worker.set_phase(Phase.LOADED)
            await self._serve(worker, agent, receive)
        worker.snapshot, worker.held_mail = agent._host.suspended_state()  # after its close: nothing is missed
        worker.agent = None
        worker.set_phase(Phase.SUSPENDED)

    async def _serve(self, worker: Worker[A], agent: A, receive: trio.MemoryReceiveChannel[Turn]) -> None:
        """Report the worker's turns; return when it was asked to unload while idle."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._report, worker, agent, receive)
            while True:
                await worker.unload_wanted.wait()
                worker.unload_wanted = trio.Event()
                if worker.busy():
                    continue  # a turn started since: it stays (its host asks again when idle)
                if worker.reporting or receive.statistics().current_buffer_used:
                    worker.unload_after_report = True  # _report asks again once it is done
                    continue
                nursery.cancel_scope.cancel()
                return

    async def _report(self, worker: Worker[A], agent: A, receive: trio.MemoryReceiveChannel[Turn]) -> None:
        while True:
            turn = await receive.receive()
            worker.reporting = True
            try:
                text = await turn_text(turn)
                try:
                    await agent.post_to_parent(text, trigger_turn=self._options.trigger_turn)
                except AgentError:
                    pass  # the parent has closed (AgentClosed) or is flooded (MailboxFull): nobody takes it
            finally:
                worker.reporting = False
            if worker.unload_after_report and not receive.statistics().current_buffer_used:
                worker.unload_after_report = False
                worker.unload_wanted.set()
