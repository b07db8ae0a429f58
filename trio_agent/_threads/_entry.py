"""A loaded thread's bookkeeping, and the countdown that unloads it when idle."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import trio

from .._events import AgentEvent, EventKind
from .._runtime import Agent, TurnStatus
from ._values import ThreadStatus

__all__ = ["LoadedThread", "idle_watch"]


class LoadedThread:
    """A loaded thread's bookkeeping (lives while its task does)."""

    def __init__(self, thread_id: str, *, ephemeral: bool, unload_delay: float) -> None:
        self.thread_id = thread_id
        self.ephemeral = ephemeral
        self.unload_delay = unload_delay
        self.agent: Agent | None = None
        self.subscribers: set[Hashable] = set()
        self.closing = False
        self.reported = ThreadStatus.IDLE  # the status last announced
        self.scope = trio.CancelScope()  # the agent's: cancelled when the manager closes
        self.changed = trio.Event()
        self.counting = False  # idle_watch's countdown runs (else it waits for ``changed``)
        self.load_done = trio.Event()  # set when the agent is up, or its load failed
        self.rollout_path: Path | None = None
        self.parent: LoadedThread | None = None  # a child thread: the thread whose worker it is
        self.children: set[LoadedThread] = set()  # loaded child threads (workers of this agent)
        self.failure: Exception | None = None  # a bug relaying its events: the thread's task raises it

    @property
    def running(self) -> bool:
        """A turn runs or waits, here or in a loaded child (a parent whose workers work
        stays loaded: they are part of its agent)."""
        if any(child.running for child in self.children):
            return True
        if self.agent is None:
            return False
        stats = self.agent.statistics()
        return stats.running_turn is not None or stats.turns_queued > 0

    @property
    def status(self) -> ThreadStatus:
        """From the agent's own state (never behind its events): running or queued
        turns make it ACTIVE; a latest turn that failed, SYSTEM_ERROR."""
        if self.agent is None:
            return ThreadStatus.IDLE
        stats = self.agent.statistics()
        if stats.running_turn is not None or stats.turns_queued > 0:
            return ThreadStatus.ACTIVE
        return ThreadStatus.SYSTEM_ERROR if stats.last_turn_status is TurnStatus.FAILED else ThreadStatus.IDLE

    def status_after(self, event: AgentEvent) -> ThreadStatus:
        """The status once ``event`` -- a ``run.started`` or a terminal event -- has taken
        effect. The manager hears an event in the emitting task (``ThreadManager._listener``):
        a turn's terminal event comes before the agent marks it finished, so for the
        running turn's own terminal event the status is what it is once that turn is
        done -- ACTIVE while a turn waits (or a child works), SYSTEM_ERROR after a
        failure, else IDLE. Any other event: ``status`` (the agent's state is current)."""
        agent = self.agent
        if agent is None or not event.kind.is_terminal:
            return self.status
        stats = agent.statistics()
        if stats.running_turn is None or stats.running_turn != event.turn_id:
            return self.status
        if stats.turns_queued > 0 or any(child.running for child in self.children):
            return ThreadStatus.ACTIVE
        failed = event.kind is EventKind.RUN_FAILED and event.payload.get("status") == TurnStatus.FAILED.value
        return ThreadStatus.SYSTEM_ERROR if failed else ThreadStatus.IDLE

    def touch(self) -> None:
        """Something happened: wake the idle-unload countdown (it restarts), the parent's too."""
        self.changed.set()
        self.changed = trio.Event()
        if self.parent is not None:
            self.parent.touch()

    def turn_edge(self) -> None:
        """A turn started or ended (its ``run.started`` or terminal event): wake the
        countdowns this can change -- one that runs (it restarts), or a watcher with no
        subscriber (it waits for the turn to end) -- here and in the parents. A watcher
        held by subscribers is not woken: a turn edge leaves it subscribed, and waking
        it was two task switches per turn of every subscribed thread (issue 30);
        ``unsubscribe`` wakes it."""
        if self.counting or not self.subscribers:
            self.changed.set()
            self.changed = trio.Event()
        if self.parent is not None:
            self.parent.turn_edge()

    def nudge(self) -> None:
        """An event inside a turn (neither its start nor its end): restart the countdowns
        that run (this thread's, its parents'). A watcher that waits for the turn to end
        is not woken: it would find the turn still running and wait again -- a task
        switch per burst of every running thread's events (issue 30). What ends a turn
        is its terminal event, which ``touch``es."""
        if self.counting:
            self.changed.set()
            self.changed = trio.Event()
        if self.parent is not None:
            self.parent.nudge()


async def idle_watch(entry: LoadedThread) -> None:
    """Return when the thread should unload: the countdown of idle unload (see the
    package docstring), restarted by every ``touch``; at once after a relay bug
    (``failure``: the thread's task raises it)."""
    while True:
        if entry.failure is not None:
            return
        if entry.subscribers or entry.running:
            await entry.changed.wait()
            continue
        changed = entry.changed
        entry.counting = True
        try:
            with trio.move_on_after(entry.unload_delay) as countdown:
                await changed.wait()
        finally:
            entry.counting = False
        if countdown.cancelled_caught and not entry.subscribers and not entry.running:
            return
