"""``open_ray_pool`` and ``RayPool``: many agents on a pool of Ray actors, from Trio.

Concurrency shape (the same as one agent's, DESIGN "Concurrency shape"): the pool owns
two Trio nurseries on the driver -- an outer one with the ``ActorKeeper`` (``_keeper``:
one shielded link per actor, the long poll of ``_link``, and the replacement of lost
actors) and an inner one with one driver task per accepted task
(``_drive``) -- and the actors, which it creates on entry and kills on exit. The links
stop only after the inner nursery has finished, so cancelled tasks can still hear
from their actors. Nothing
outlives the ``async with`` block: leaving it normally waits for every accepted task;
an exception or a cancellation in the block cancels every task -- each remote agent is
cancelled in its own actor and its terminal events and result are still collected,
within ``cancel_grace`` -- and then the actors are killed, which also kills anything a
stuck agent left running (each actor's tool processes die with it).

Limits: ``agents_per_actor`` agents run at once on each actor; at most ``max_queued``
accepted tasks wait for a free one (``start()`` waits beyond that: back-pressure on the
caller, never a dropped task); events wait on their actor until the driver takes
them, at the pace of the caller's channel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, final

import ray
import trio

from .._errors import ConfigError
from ._actor import actor_class
from ._dispatch import Slot, Slots
from ._drive import TaskDriver
from ._errors import ActorLost, PoolClosed
from ._keeper import ActorKeeper, kill, start_actor
from ._refs import PendingRef, is_actor_loss
from ._remote import RemoteTask, TaskState
from ._running import travelling
from ._values import ActorInfo, ActorStatistics, AgentTask, PoolStatistics, TaskEvent, TaskResult, TaskStatus

__all__ = ["RayPool", "open_ray_pool"]

_FIXED_OPTIONS = {"max_restarts": 0, "max_task_retries": 0}
# Each actor runs one Trio loop (about one core at most): reserve one CPU for it, so Ray
# places no more actors than the cluster has cores for (actor_options={"num_cpus": ...}).
_DEFAULT_OPTIONS = {"scheduling_strategy": "SPREAD", "num_cpus": 1}


@final
class RayPool:
    """A pool of Ray actors running agents; create it with ``open_ray_pool``."""

    def __init__(self, keeper: ActorKeeper, nursery: trio.Nursery, *, agents_per_actor: int,
                 max_queued: int, cancel_grace: float) -> None:
        self._keeper = keeper
        slots = self._slots = keeper.slots
        self._nursery = nursery
        self._agents_per_actor = agents_per_actor
        self._max_queued = max_queued
        self._grace = cancel_grace
        self._queue = trio.Semaphore(max_queued)
        self._driver = TaskDriver(slots, keeper.link_of, cancel_grace, self._count)
        self._closing = False
        self._states: set[TaskState] = set()
        self._sessions: set[str] = set()
        self._counts = dict.fromkeys(TaskStatus, 0)
        self._events_delivered = 0

    @property
    def actors(self) -> tuple[ActorInfo, ...]:
        """Each actor's identity (pool index, pid, Ray node), in pool order; a replaced
        actor's entry is its replacement's (same index, new pid)."""
        return tuple(slot.info for slot in self._slots.all)

    # -- accepting tasks ----------------------------------------------------------------

    async def start(self, task: AgentTask, *, events: trio.abc.SendChannel[TaskEvent] | None = None) -> RemoteTask:
        """Accept ``task`` and return its handle; it runs in the pool's nursery.

        Waits while ``max_queued`` accepted tasks are already waiting for an actor
        (back-pressure). With ``events``, every event of the task's agent is sent to
        that channel as a ``TaskEvent``, in order, none dropped: a full channel slows
        the task's delivery (the actor holds the rest) and never the agent. The pool
        never closes the channel. Raises ``PoolClosed`` once the block is closing and
        ``ConfigError`` for a task whose session (with a rollout) is already running here.
        """
        if not isinstance(task, AgentTask):
            raise ConfigError(f"start() takes a trio_agent.ray.AgentTask, got {type(task).__name__}")
        self._check_open()
        payload = _pickled(task)
        await self._queue.acquire()
        try:
            self._check_open()
            session = task.config.session_id if task.config.rollout is not None else None
            if session is not None and session in self._sessions:
                raise ConfigError(
                    f"session {session!r} is already running in this pool and its rollout has one writer; "
                    "give each task's config its own session_id (AgentConfig's default is a fresh one)"
                )
        except BaseException:
            self._queue.release()
            raise
        state = TaskState(task, payload, events)
        self._states.add(state)
        if session is not None:
            self._sessions.add(session)
        self._nursery.start_soon(self._drive, state, session)
        return RemoteTask(state, self._driver.request_cancel)

    def _check_open(self) -> None:
        if self._closing:
            raise PoolClosed("the pool's block is closing; start tasks inside `async with open_ray_pool(...)`")

    async def _drive(self, state: TaskState, session: str | None) -> None:
        try:
            await self._driver.drive(state, self._queue.release)
        finally:
            self._states.discard(state)
            if session is not None:
                self._sessions.discard(session)

    def _count(self, state: TaskState) -> None:
        assert state.result is not None
        self._counts[state.result.status] += 1
        self._events_delivered += state.delivered

    async def run(self, task: AgentTask, *, events: trio.abc.SendChannel[TaskEvent] | None = None) -> TaskResult:
        """Run one task to its end and return its result (see ``start`` for ``events``).

        Cancelling the caller cancels the task (as ``RemoteTask.cancel()``) and waits,
        shielded and at most ``cancel_grace`` seconds, for its terminal events and
        result before the cancellation propagates."""
        return (await self.map([task], events=events))[0]

    async def map(self, tasks: Iterable[AgentTask], *,
                  events: trio.abc.SendChannel[TaskEvent] | None = None) -> list[TaskResult]:
        """Run every task; returns their results in the order given.

        Tasks are accepted one by one as the queue has room (an iterable is consumed
        lazily); all of them share ``events``. A failed task is a result, not an
        exception. If the caller is cancelled, or an error leaves ``map``, every task it
        accepted is cancelled and waited for as in ``run``."""
        states: list[TaskState] = []
        try:
            for task in tasks:
                handle = await self.start(task, events=events)
                states.append(handle._state)
            for state in states:
                await state.done.wait()
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(self._grace + 1):
                for state in states:
                    self._driver.request_cancel(state)
                for state in states:
                    await state.done.wait()
            raise
        return [state.result for state in states if state.result is not None]

    # -- statistics ---------------------------------------------------------------------

    def statistics(self) -> PoolStatistics:
        """The driver's counters and each actor's last report (never a network call)."""
        counts = self._counts
        return PoolStatistics(
            num_actors=len(self._slots.all), live_actors=self._slots.live, agents_per_actor=self._agents_per_actor,
            max_queued=self._max_queued, queued=sum(s.slot is None for s in self._states),
            running=sum(s.slot is not None for s in self._states), completed=counts[TaskStatus.COMPLETED],
            failed=counts[TaskStatus.FAILED], cancelled=counts[TaskStatus.CANCELLED], lost=counts[TaskStatus.LOST],
            events_delivered=self._events_delivered + sum(s.delivered for s in self._states),
            actors=tuple(slot.statistics for slot in self._slots.all), restarts=self._keeper.restarts,
        )

    async def actor_statistics(self) -> tuple[ActorStatistics | None, ...]:
        """Ask every live actor for its statistics now (memory included); None for a
        lost actor. The actors answer at once, however busy they are."""
        results: list[ActorStatistics | None] = [None] * len(self._slots.all)

        async def ask(slot: Slot) -> None:
            try:
                slot.statistics = results[slot.index] = await PendingRef(slot.handle.statistics.remote()).wait()
            except Exception as exc:  # Ray's error: the actor is gone
                if not is_actor_loss(exc):
                    raise
                self._keeper.lost(slot)

        async with trio.open_nursery() as nursery:
            for slot in self._slots.all:
                if slot.alive:
                    nursery.start_soon(ask, slot)
        return tuple(results)


def _pickled(task: AgentTask) -> bytes:
    """``task`` as the bytes an actor loads (with what travels with it: ``travelling``);
    ``ConfigError`` when it cannot travel."""
    try:
        payload: bytes = ray.cloudpickle.dumps(travelling(task))
    except Exception as exc:  # whatever the config or body holds that refuses pickling
        raise ConfigError(
            f"task {task.task_id} cannot be sent to an actor: {type(exc).__name__}: {exc}. A task's config and "
            "body are pickled: leave out sockets, clients (Responses(http_client=...)), dialers, SSL contexts "
            "and open files, and create them inside the body instead (tracing: Tracing() with the actors' global "
            "providers, or providers that pickle; docs/ray.md)"
        ) from exc
    return payload


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _options(actor_options: Mapping[str, object] | None) -> dict[str, object]:
    given = dict(actor_options or {})
    for key, fixed in _FIXED_OPTIONS.items():
        if given.get(key, fixed) != fixed:
            raise ConfigError(
                f"actor_options[{key!r}] must stay {fixed}: the pool never re-runs a task behind your back "
                "(a retry would re-run its tools); the pool replaces a lost actor itself (open_ray_pool's "
                "max_restarts), and a lost task resumes from its rollout with task.resumed(...)"
            )
    return {**_DEFAULT_OPTIONS, **given, **_FIXED_OPTIONS}


async def _start_actors(cls: Any, num_actors: int, options: dict[str, object], patience: float,
                        handles: list[Any]) -> list[Slot]:
    slots: list[Slot] = []
    try:
        with trio.move_on_after(patience) as waited:
            async with trio.open_nursery() as nursery:  # created together, so Ray places them together

                async def one(index: int) -> None:
                    slots.append(await start_actor(cls, options, index, handles))

                for index in range(num_actors):
                    nursery.start_soon(one, index)
        if waited.cancelled_caught:
            raise ActorLost(
                f"the pool's {num_actors} actors did not all start within {patience} s; check that the cluster "
                f"has room for them: each reserves {options.get('num_cpus', 1)} CPU (ray.available_resources(); "
                f"actor_options={options!r}; actor_options={{'num_cpus': ...}} changes it)"
            )
    except BaseExceptionGroup as group:
        kill(handles)
        raise group.exceptions[0] from None  # the first actor's failure, as itself
    except BaseException:
        kill(handles)
        raise
    return sorted(slots, key=lambda slot: slot.index)


def open_ray_pool(
    num_actors: int = 2,
    agents_per_actor: int = 64,
    *,
    max_queued: int | None = None,
    actor_options: Mapping[str, object] | None = None,
    cancel_grace: float = 30.0,
    startup_timeout: float = 120.0,
    max_restarts: int = 3,
    restart_window: float = 60.0,
) -> AbstractAsyncContextManager[RayPool]:
    """Run a pool of ``num_actors`` Ray actors for the duration of the block.

    Each actor is one process with one Trio loop running up to ``agents_per_actor``
    agents at once; ``max_queued`` accepted tasks (default: one full round,
    ``num_actors * agents_per_actor``) may wait for a free agent slot. Call
    ``ray.init(...)`` first (``address=`` for an existing cluster, ``runtime_env=`` so its
    workers can import trio_agent). ``actor_options`` go to Ray's
    ``ActorClass.options()`` (``num_cpus``, ``memory``, ``resources``, ``runtime_env``,
    ``scheduling_strategy``; defaults ``num_cpus=1`` -- one Trio loop uses about one
    core -- and ``"SPREAD"``); Ray never restarts an actor nor retries a call.
    Waits until every actor answers (``ActorLost`` after ``startup_timeout`` s).

    A lost actor (killed, crashed, its node gone) ends its tasks as LOST and is replaced
    by a new one at the same index, so the pool keeps its size: at most
    ``max_restarts`` replacements in any ``restart_window`` seconds (0: never), each
    reported as a WARNING on the ``trio_agent.ray`` logger and counted in
    ``statistics().restarts``.

    Leaving the block waits for every accepted task; an exception or cancellation
    cancels them all (see ``RayPool.run``), waiting at most ``cancel_grace`` seconds
    per task for its end. The actors are killed on the way out.
    """
    _check_positive("num_actors", num_actors)
    _check_positive("agents_per_actor", agents_per_actor)
    if max_queued is not None:
        _check_positive("max_queued", max_queued)
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ConfigError(f"max_restarts must be an integer >= 0 (0: never replace a lost actor), got {max_restarts!r}")
    for name, value in (("cancel_grace", cancel_grace), ("startup_timeout", startup_timeout),
                        ("restart_window", restart_window)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    options = _options(actor_options)
    if not ray.is_initialized():
        raise ConfigError(
            "Ray is not initialised in this process; call ray.init() first "
            "(ray.init(address='auto') joins a running cluster, ray.init() starts a local one)"
        )
    return _open(num_actors, agents_per_actor, max_queued or num_actors * agents_per_actor, options,
                 cancel_grace, startup_timeout, max_restarts, restart_window)


@asynccontextmanager
async def _open(num_actors: int, agents_per_actor: int, max_queued: int, options: dict[str, object],
                cancel_grace: float, startup_timeout: float, max_restarts: int,
                restart_window: float) -> AsyncIterator[RayPool]:
    cls = actor_class(agents_per_actor)
    handles: list[Any] = []
    slots = await _start_actors(cls, num_actors, options, startup_timeout, handles)
    keeper = ActorKeeper(cls, options, Slots(slots, agents_per_actor), handles, max_restarts=max_restarts,
                         restart_window=restart_window, startup_timeout=startup_timeout)
    try:
        # Two nurseries: the actors' links (shielded) outlive the tasks, so that
        # cancelled tasks still receive their last events and results through them.
        async with trio.open_nursery() as outer:
            outer.start_soon(keeper.run)
            try:
                async with trio.open_nursery() as nursery:
                    pool = RayPool(keeper, nursery, agents_per_actor=agents_per_actor,
                                   max_queued=max_queued, cancel_grace=cancel_grace)
                    try:
                        yield pool
                    except BaseException:
                        nursery.cancel_scope.cancel()  # every driver task cancels its remote agent (see _drive)
                        raise
                    finally:
                        pool._closing = True
            finally:
                keeper.close()
    except BaseExceptionGroup as group:
        single: BaseException = group
        while isinstance(single, BaseExceptionGroup) and len(single.exceptions) == 1:
            single = single.exceptions[0]
        if not isinstance(single, BaseExceptionGroup):
            raise single from None  # the block's own error (or cancellation), as itself
        raise
    finally:
        kill(keeper.handles)
