"""``ThreadManager`` and ``open_thread_manager``: the threads of one home, each a task
holding its agent (the package docstring tells the whole story)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, final

import attrs
import trio

from .._config import AgentConfig, _default_session_id
from .._errors import AgentError, ConfigError
from .._event_queue import _EventQueue
from .._events import AgentEvent, EventKind
from .._rollout import RolloutConfig
from .._runtime import Agent, open_agent
from .._session.snapshot import SessionSnapshot
from ._entry import LoadedThread, idle_watch
from ._values import ThreadError, ThreadEvent, ThreadEvents, ThreadInfo, ThreadStatus, UnsubscribeStatus

__all__ = ["ThreadManager", "open_thread_manager"]

FORWARD_BURST = 256  # agent events a thread forwards in one step, when they are ready
# Tested on every relayed event: module globals, as ``EventKind.X`` is a descriptor call
# on Python 3.11 (issue 30: the relay runs ~30 times a warm turn of every thread).
_RUN_STARTED, _RUN_COMPLETED, _RUN_FAILED = EventKind.RUN_STARTED, EventKind.RUN_COMPLETED, EventKind.RUN_FAILED


@final
class ThreadManager:
    """See the package docstring (``trio_agent._threads``); create it with ``open_thread_manager``."""

    def __init__(self, home: Path, nursery: trio.Nursery, config: AgentConfig, unload_delay: float,
                 rollouts: RolloutConfig | None = None, relayed: Callable[[AgentEvent], bool] | None = None) -> None:
        self.home = home
        self._relayed = relayed
        self._nursery = nursery
        self._config = config
        self._unload_delay = unload_delay
        self._rollouts = rollouts if rollouts is not None else RolloutConfig(home)
        self._threads: dict[str, LoadedThread] = {}
        self._ephemeral_gone: set[str] = set()
        # The agents' own event queue (a deque and the task waiting on it): a put is an
        # append, and a pump that finds events waiting takes them without a schedule point
        # -- a memory channel's send and receive cost more per event (issue 30, item 3).
        self._queue: _EventQueue[ThreadEvent] = _EventQueue()
        self.events = ThreadEvents(self._queue)
        self._closed = False

    # -- threads ---------------------------------------------------------------------

    async def start(
        self,
        *,
        ephemeral: bool = False,
        unload_delay: float | None = None,
        configure: Callable[[AgentConfig], AgentConfig] | None = None,
        subscriber: Hashable | None = None,
    ) -> Agent:
        """Start a new thread and return its agent. ``configure`` adjusts the thread's
        ``AgentConfig`` (model, tools, workspace...); ``subscriber`` subscribes at once
        (the app-server's ``thread/start`` does)."""
        thread_id = _default_session_id()
        config = attrs.evolve(self._config, session_id=thread_id, resume=None,
                              rollout=None if ephemeral else self._rollouts)
        if configure is not None:
            config = configure(config)
        return await self._load(thread_id, config, ephemeral=ephemeral, unload_delay=unload_delay,
                                subscriber=subscriber, started=True)

    async def resume(
        self,
        thread_id: str,
        *,
        subscriber: Hashable | None = None,
        unload_delay: float | None = None,
        configure: Callable[[AgentConfig], AgentConfig] | None = None,
    ) -> Agent:
        """The thread's agent: warm when loaded (``subscriber`` subscribes, cancelling a
        pending unload), cold from its rollout otherwise (the manager's default delay
        unless ``unload_delay`` is given). ``ThreadError`` for an unknown or unloaded
        ephemeral thread."""
        entry = self._threads.get(thread_id)
        while entry is not None and entry.agent is None and not entry.closing:
            # Another resume (or start) is loading it: wait for that one load and share
            # it; if it failed, the entry is gone and this resume loads it itself.
            await entry.load_done.wait()
            entry = self._threads.get(thread_id)
        if entry is not None:
            if entry.closing:
                raise ThreadError(f"thread {thread_id} is closing; retry the resume after the thread is closed")
            if subscriber is not None:
                self.subscribe(thread_id, subscriber)
            entry.touch()
            await trio.lowlevel.checkpoint()
            assert entry.agent is not None
            return entry.agent
        if thread_id in self._ephemeral_gone:
            raise ThreadError(f"cannot resume an unloaded ephemeral thread {thread_id}: it kept no rollout")
        durable = self._load_durable(thread_id)
        if durable.history:
            config = attrs.evolve(self._config, session_id=thread_id, resume=durable, rollout=self._rollouts,
                                  workspace=None, prompt_cache_key=None)
        else:  # it never ran a turn: a fresh agent continues its (empty) rollout, in its workspace
            config = attrs.evolve(self._config, session_id=thread_id, resume=None, rollout=self._rollouts,
                                  workspace=durable.workspace or None, prompt_cache_key=None)
        if configure is not None:
            config = configure(config)
        return await self._load(thread_id, config, ephemeral=False, unload_delay=unload_delay,
                                subscriber=subscriber, started=False)

    async def run_child(self, agent: Agent, *, parent_id: str, subscribers: Iterable[Hashable] = (),
                        started: bool = True, unload_delay: float | None = None) -> None:
        """Hold ``agent`` -- a worker of thread ``parent_id``'s agent, which owns it -- as a
        child thread for as long as it is open: its events reach ``events``, it has
        ``subscribers`` and a status, and idle unload *suspends* it (its owner closes it,
        keeping its history and unread mail, and reopens it when something reaches it).
        Returns once the agent has closed, after ``NOT_LOADED`` and ``thread.closed``;
        ``started`` says whether this is its first load (``thread.started``)."""
        parent = self._threads.get(parent_id)
        thread_id = agent.session_id
        if parent is None or thread_id in self._threads:
            raise ThreadError(f"cannot hold {thread_id} as a child of {parent_id}: the parent is not loaded "
                              "or the child already is")
        delay = self._unload_delay if unload_delay is None else unload_delay
        entry = LoadedThread(thread_id, ephemeral=parent.ephemeral, unload_delay=delay)
        entry.agent, entry.parent = agent, parent
        entry.subscribers.update(subscribers)
        entry.rollout_path = agent.rollout.path if agent.rollout is not None else None
        entry.load_done.set()
        self._threads[thread_id] = entry
        parent.children.add(entry)
        if started:
            self._emit(ThreadEvent(thread_id, "thread.started"))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._suspend_when_idle, entry, agent)
                await self._forward(entry, agent)  # until its events end: it has closed
                nursery.cancel_scope.cancel()
        finally:
            if self._threads.get(thread_id) is entry:
                del self._threads[thread_id]
            parent.children.discard(entry)
            parent.touch()
            if entry.ephemeral:
                self._ephemeral_gone.add(thread_id)
            self._emit(ThreadEvent(thread_id, "thread.status", ThreadStatus.NOT_LOADED))
            self._emit(ThreadEvent(thread_id, "thread.closed"))

    async def _suspend_when_idle(self, entry: LoadedThread, agent: Agent) -> None:
        """A child's idle unload: ask its owner to suspend it. It is *closing* (resumes
        are refused) until its agent has closed -- which cancels this task -- unless the
        owner refused (a turn had started) or something happened first: then the
        countdown starts again."""
        while True:
            await idle_watch(entry)
            entry.closing = agent._host.request_unload()
            await entry.changed.wait()
            entry.closing = False

    def subscribe(self, thread_id: str, subscriber: Hashable) -> bool:
        """Subscribe ``subscriber`` to a loaded thread; False when it is not loaded."""
        entry = self._threads.get(thread_id)
        if entry is None or entry.closing:
            return False
        entry.subscribers.add(subscriber)
        entry.touch()
        return True

    def unsubscribe(self, thread_id: str, subscriber: Hashable) -> UnsubscribeStatus:
        entry = self._threads.get(thread_id)
        if entry is None or entry.closing:
            return UnsubscribeStatus.NOT_LOADED
        if subscriber not in entry.subscribers:
            return UnsubscribeStatus.NOT_SUBSCRIBED
        entry.subscribers.discard(subscriber)
        entry.touch()  # losing the last subscriber starts a fresh countdown
        return UnsubscribeStatus.UNSUBSCRIBED

    def unsubscribe_all(self, subscriber: Hashable) -> None:
        """Forget ``subscriber`` everywhere (a client went away); running turns go on."""
        for thread_id, entry in list(self._threads.items()):
            if subscriber in entry.subscribers:
                self.unsubscribe(thread_id, subscriber)

    def loaded(self) -> list[str]:
        """The ids of the loaded threads, oldest first."""
        return [thread_id for thread_id, entry in self._threads.items() if not entry.closing]

    def agent(self, thread_id: str) -> Agent | None:
        entry = self._threads.get(thread_id)
        return entry.agent if entry is not None and not entry.closing else None

    def status(self, thread_id: str) -> ThreadStatus:
        entry = self._threads.get(thread_id)
        return ThreadStatus.NOT_LOADED if entry is None or entry.closing else entry.status

    def is_ephemeral(self, thread_id: str) -> bool:
        entry = self._threads.get(thread_id)
        return entry.ephemeral if entry is not None else thread_id in self._ephemeral_gone

    def read(self, thread_id: str) -> ThreadInfo:
        """A thread's status and committed history, loaded or not (from its rollout)."""
        entry = self._threads.get(thread_id)
        if entry is not None and entry.agent is not None and not entry.closing:
            history = entry.agent._host.history().to_list()
            return ThreadInfo(thread_id, entry.status, entry.ephemeral, entry.rollout_path, tuple(history))
        durable = self._load_durable(thread_id)
        path = self._rollouts.find(thread_id)
        return ThreadInfo(thread_id, ThreadStatus.NOT_LOADED, False, path, tuple(durable.history))

    def stored(self) -> list[str]:
        """The ids of every thread with a rollout under ``home``, newest first."""
        sessions = self.home / "sessions"
        if not sessions.is_dir():
            return []
        paths = sorted(sessions.glob("*/*/*/rollout-*.jsonl"), reverse=True)
        ids = []
        for path in paths:  # rollout-YYYY-MM-DDTHH-MM-SS-<thread id>
            parts = path.stem.split("-", 6)
            if len(parts) == 7 and parts[6] not in ids:
                ids.append(parts[6])
        return ids

    # -- internals -------------------------------------------------------------------

    def _load_durable(self, thread_id: str) -> SessionSnapshot:
        try:
            return self._rollouts.load_session(thread_id).snapshot
        except AgentError as exc:
            raise ThreadError(f"cannot resume an unloaded thread {thread_id}: {exc}") from exc

    async def _load(
        self, thread_id: str, config: AgentConfig, *, ephemeral: bool, unload_delay: float | None,
        subscriber: Hashable | None, started: bool,
    ) -> Agent:
        if self._closed:
            raise ThreadError("the thread manager is closing")
        delay = self._unload_delay if unload_delay is None else unload_delay
        entry = LoadedThread(thread_id, ephemeral=ephemeral, unload_delay=delay)
        if subscriber is not None:
            entry.subscribers.add(subscriber)
        self._threads[thread_id] = entry
        try:
            await self._nursery.start(self._run_thread, entry, config)
        except BaseException as exc:
            if self._threads.get(thread_id) is entry:
                del self._threads[thread_id]
            failure = _only_agent_error(exc)
            if failure is not None and failure is not exc:
                raise failure from None  # a refused config or sandbox, not wrapped in groups
            raise
        finally:
            entry.load_done.set()
        if started:
            self._emit(ThreadEvent(thread_id, "thread.started"))
        assert entry.agent is not None
        return entry.agent

    async def _run_thread(self, entry: LoadedThread, config: AgentConfig, *, task_status: Any) -> None:
        try:
            with entry.scope:
                async with open_agent(config) as agent:
                    entry.agent = agent
                    entry.rollout_path = agent.rollout.path if agent.rollout is not None else None
                    # Each event reaches the manager's stream as the agent emits it, in the
                    # agent's task, up to its close (the terminal events of turns its closing
                    # cancels included); see ``_listener``.
                    agent.events._listen(self._listener(entry))
                    task_status.started()
                    await idle_watch(entry)
                    entry.closing = True
        finally:
            if self._threads.get(entry.thread_id) is entry:
                del self._threads[entry.thread_id]
            if entry.ephemeral:
                self._ephemeral_gone.add(entry.thread_id)
        self._emit(ThreadEvent(entry.thread_id, "thread.status", ThreadStatus.NOT_LOADED))
        self._emit(ThreadEvent(entry.thread_id, "thread.closed"))
        if entry.failure is not None:  # a bug relaying its events (``_listener``): the manager fails
            raise entry.failure

    def _listener(self, entry: LoadedThread) -> Callable[[AgentEvent], None]:
        """The relay of a thread's agent events, called by the agent's event sink in the
        emitting task (issue 30: a forwarding task per thread was a wakeup and a queue
        hop per burst of every running thread's events). It never waits (see
        ``_emit`` for the stream's bound).

        A bug here is ours, and must neither hide nor hit the agent: the first exception
        is kept on the entry and the thread's task -- in the manager's nursery -- wakes,
        closes the agent and raises it, so the manager fails with it as the forwarding
        task's crash would have failed it. The agent's emit returns normally (its turn
        is not failed by our bug; it ends when the manager closes the thread), and
        nothing more of this thread is relayed: the manager is going down."""
        relay = self._relay_to_stream(entry)

        def listener(event: AgentEvent) -> None:
            if entry.failure is not None:
                return
            try:
                relay(event)
            except Exception as exc:
                entry.failure = exc
                entry.touch()  # wakes idle_watch in the thread's task, which raises it

        return listener

    async def _forward(self, entry: LoadedThread, agent: Agent) -> None:
        events = agent.events
        relay = self._relay_to_stream(entry)
        async for event in events:
            relay(event)
            # What else is ready goes in the same step: a checkpoint per event was a
            # scheduler pass per event of every loaded thread (issue 30: serve's CPU per turn).
            for _ in range(FORWARD_BURST):
                try:
                    event = events.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                relay(event)

    def _relay_to_stream(self, entry: LoadedThread) -> Callable[[AgentEvent], None]:
        """What puts ``entry``'s agent events onto the stream, one call per event: most
        of a turn's events (deltas, frames) take the short branch, its lookups bound
        here once (issue 30: the relay ran per event of every running thread)."""
        relayed, put, thread_id, edge = self._relayed, self._queue.put, entry.thread_id, self._relay_edge

        def relay(event: AgentEvent) -> None:
            kind = event.kind
            if kind is _RUN_STARTED or kind is _RUN_COMPLETED or kind is _RUN_FAILED:
                edge(entry, event)
                return
            if relayed is None or relayed(event):
                put(ThreadEvent(thread_id, "agent", event=event))  # (``_emit``, inlined)
            if entry.counting or entry.parent is not None:  # (``nudge``'s own tests, inlined)
                entry.nudge()  # an event left out still restarts a running countdown

        return relay

    def _relay_edge(self, entry: LoadedThread, event: AgentEvent) -> None:
        """A turn's start or end: the event, then the thread's status if it changed."""
        self._emit(ThreadEvent(entry.thread_id, "agent", event=event))
        status = entry.status_after(event)
        if status is not entry.reported and not entry.closing:
            entry.reported = status
            self._emit(ThreadEvent(entry.thread_id, "thread.status", status))
        entry.turn_edge()

    def _emit(self, event: ThreadEvent) -> None:
        """Put onto the manager's stream, never waiting: it runs in the agents' own tasks,
        which must never be held back by a reader. The stream has no bound of its own, as
        ``agent.events`` has none (``_events``: a slow reader costs memory, never an
        agent's latency). What bounds it is its reader. ``trio-agent serve``'s pump reads
        it without ever waiting on a client (each connection has its own bounded queue
        and a slow client is dropped) or on anything slow (only a thread's ``lock``,
        held by request handlers for in-memory steps), and takes everything waiting in
        each pass; Trio runs every runnable task once per scheduling batch, so between
        two passes each running thread emits at most one step's events (one read from
        its socket). In serve the stream holds at most about that many events per running
        thread -- proportional to the threads at work, not to time. A library reader
        that stops reading is the same as an agent's unread ``events``: its memory."""
        self._queue.put(event)  # (nothing once the manager has closed)

    def _close_threads(self) -> None:
        """Cancel every loaded thread (each ends its turns and closes its agent)."""
        self._closed = True
        for entry in list(self._threads.values()):
            entry.closing = True
            entry.scope.cancel()

    def _close(self) -> None:
        self._closed = True
        self._queue.close()


def _only_agent_error(exc: BaseException) -> AgentError | None:
    """The one ``AgentError`` inside nested single-exception groups, else None."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, AgentError) else None


@asynccontextmanager
async def open_thread_manager(
    home: str | Path, *, config: AgentConfig, unload_delay: float = 60.0, rollouts: RolloutConfig | None = None,
    relayed: Callable[[AgentEvent], bool] | None = None,
) -> AsyncIterator[ThreadManager]:
    """Run a thread manager for the duration of the block (see the package docstring).

    ``config`` is the template of every thread's ``AgentConfig`` (auth, model,
    transport, tools...); each thread gets its own session id and a rollout under
    ``home``. Leaving the block cancels every loaded thread (terminal events emitted,
    rollouts flushed) and ends ``manager.events``. ``rollouts``: how the threads keep
    their rollouts (its ``fsync`` policy; a subclass whose ``find`` knows where they are,
    as ``trio-agent serve``'s thread index does); its ``home`` must be ``home``. Default
    ``RolloutConfig(home)``. ``relayed``: which agent events reach ``manager.events``
    (called with each, in the agent's task; it must be quick and must not raise) --
    ``run.started`` and terminal events always do, for they carry the statuses.
    Default: every event. ``trio-agent serve`` leaves out those that make no message:
    half of a turn's events are one ``api.event`` per frame.
    """
    if not isinstance(config, AgentConfig):
        raise TypeError("open_thread_manager() needs config=ta.AgentConfig(...) as the template of its threads")
    if unload_delay < 0 or not math.isfinite(unload_delay):
        raise ValueError(f"unload_delay must be a finite number of seconds >= 0, got {unload_delay!r}")
    if config.record is not None:
        # Every thread would truncate the same cassette; one cassette is one agent's session.
        raise ConfigError(
            f"record={str(config.record)!r} cannot be the template of many threads (each would overwrite "
            "the same cassette); record a single agent with ta.open_agent(AgentConfig(record=...)) instead"
        )
    if relayed is not None and not callable(relayed):
        raise TypeError(f"relayed must be a function of an AgentEvent, got {relayed!r}")
    if rollouts is not None and (not isinstance(rollouts, RolloutConfig) or rollouts.home != Path(home)):
        raise ValueError(f"rollouts must be a ta.RolloutConfig whose home is {str(home)!r}, got {rollouts!r}")
    manager: ThreadManager | None = None
    try:
        async with trio.open_nursery() as nursery:
            manager = ThreadManager(Path(home), nursery, config, unload_delay, rollouts, relayed)
            try:
                yield manager
            finally:
                manager._close_threads()
    finally:
        if manager is not None:
            manager._close()
