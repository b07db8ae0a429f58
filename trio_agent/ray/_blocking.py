"""``blocking_ray_pool``: the pool for a driver that is not Trio -- plain Ray code
composes its results with ``ray.get``/``ray.wait`` and cancels through the handle.

Theory of operation. The pool itself stays the Trio pool (``open_ray_pool``): it runs
on a Trio loop on a thread of its own in the driver (the one way to host a Trio loop
beside code that blocks), and the caller's thread reaches it only through
``trio.from_thread`` with the loop's token. Each submitted task gets a Ray
``ObjectRef`` at once, whatever happens to the task later: it is a pending call to
a small async *results actor* (``_Results``, no CPU reserved) that returns the task's
``TaskResult`` once the driver posts it -- for every status, LOST and CANCELLED
included. So ``ray.wait`` sees a task as ready exactly when its result exists, and
``ray.get`` never raises for a task's own outcome. ``ray.cancel(ref)`` settles the ref
with Ray's ``TaskCancelledError``; the driver watches each ref and cancels the task
when that happens (``TaskRef.cancel()`` does it directly and leaves the ref to carry
the CANCELLED result).

The results actor runs its calls on one asyncio loop (Ray gives each concurrency
group a loop of its own, and an ``asyncio.Event`` set from another loop's thread wakes
nobody), with room for twice the pool's capacity (running plus queued tasks:
``submit`` blocks beyond that) -- so the waits never fill it and a post never waits
behind the waits it settles.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypedDict, Unpack, final

import ray
import trio

from ._pool import RayPool, open_ray_pool
from ._refs import PendingRef
from ._remote import RemoteTask
from ._values import ActorInfo, AgentTask, PoolStatistics, TaskResult

__all__ = ["BlockingRayPool", "TaskRef", "blocking_ray_pool"]


class _Results:
    """The results actor: ``result(task_id)`` waits until ``post(task_id, value)``."""

    def __init__(self) -> None:
        self._values: dict[str, TaskResult] = {}
        self._posted: dict[str, asyncio.Event] = {}
        self._abandoned: set[str] = set()  # ray.cancel(ref): nobody will take the result

    async def result(self, task_id: str) -> TaskResult:
        try:
            if task_id not in self._values:
                await self._posted.setdefault(task_id, asyncio.Event()).wait()
            return self._values.pop(task_id)
        except asyncio.CancelledError:
            self._abandoned.add(task_id)
            raise
        finally:
            self._posted.pop(task_id, None)

    async def pid(self) -> int:
        """Its process (the tests check that it ends with the pool)."""
        return os.getpid()

    async def post(self, task_id: str, value: TaskResult) -> None:
        if task_id in self._abandoned:
            self._abandoned.discard(task_id)
            return
        self._values[task_id] = value
        posted = self._posted.get(task_id)
        if posted is not None:
            posted.set()


@final
class TaskRef:
    """A task submitted to a ``BlockingRayPool``. ``ref`` is a Ray ``ObjectRef`` of its
    ``TaskResult``: ``ray.get(ref)``, ``ray.wait([...])``; ``cancel()`` or
    ``ray.cancel(ref)`` cancel the task."""

    def __init__(self, remote: RemoteTask, ref: Any, token: trio.lowlevel.TrioToken) -> None:
        self._remote = remote
        self.ref: Any = ref  # a ray.ObjectRef (Ray is untyped here)
        self._token = token

    @property
    def task_id(self) -> str:
        return self._remote.task_id

    def cancel(self) -> None:
        """Ask for the task to be cancelled and return at once; ``ray.get(self.ref)``
        then returns its result (status CANCELLED, unless it ended first)."""
        trio.from_thread.run_sync(self._remote.cancel_soon, trio_token=self._token)

    def result(self) -> TaskResult:
        """The task's ``TaskResult``, blocking until it has one -- also after
        ``ray.cancel(self.ref)``, whose ref carries Ray's error instead."""
        return trio.from_thread.run(self._remote.result, trio_token=self._token)


@final
class BlockingRayPool:
    """``open_ray_pool`` for a driver that is not Trio; create it with
    ``blocking_ray_pool(...)``."""

    def __init__(self, pool: RayPool, nursery: trio.Nursery, results: Any, token: trio.lowlevel.TrioToken) -> None:
        self._pool = pool
        self._nursery = nursery
        self._results = results
        self._token = token

    @property
    def actors(self) -> tuple[ActorInfo, ...]:
        return trio.from_thread.run_sync(lambda: self._pool.actors, trio_token=self._token)

    def statistics(self) -> PoolStatistics:
        return trio.from_thread.run_sync(self._pool.statistics, trio_token=self._token)

    def submit(self, task: AgentTask) -> TaskRef:
        """Accept ``task`` (blocking while the pool's queue is full, as ``start``) and
        return its handle at once. Raises ``ConfigError`` as ``RayPool.start`` does."""
        remote, ref = trio.from_thread.run(self._submit, task, trio_token=self._token)
        return TaskRef(remote, ref, self._token)

    async def _submit(self, task: AgentTask) -> tuple[RemoteTask, Any]:
        remote = await self._pool.start(task)
        ref = self._results.result.remote(remote.task_id)
        self._nursery.start_soon(self._follow, remote, PendingRef(ref))
        return remote, ref

    async def _follow(self, remote: RemoteTask, pending: PendingRef) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._cancel_on_ray_cancel, remote, pending)
            result = await remote.result()
            self._results.post.remote(remote.task_id, result)

    @staticmethod
    async def _cancel_on_ray_cancel(remote: RemoteTask, pending: PendingRef) -> None:
        try:
            await pending.wait()
        except ray.exceptions.TaskCancelledError:  # ray.cancel(ref): cancel the task itself
            await remote.cancel()
        except Exception:  # the results actor is gone (Ray shutting down): nothing to watch
            pass


class _Abandon(Exception):
    """Raised in the pool's block when the caller's ``with`` block failed."""


class PoolOptions(TypedDict, total=False):
    """``open_ray_pool``'s keyword arguments (see there)."""

    max_queued: int | None
    actor_options: Mapping[str, object] | None
    cancel_grace: float
    startup_timeout: float
    max_restarts: int
    restart_window: float


@contextmanager
def blocking_ray_pool(num_actors: int = 2, agents_per_actor: int = 64,
                      **options: Unpack[PoolOptions]) -> Iterator[BlockingRayPool]:
    """``open_ray_pool`` (same arguments, same guarantees) as a plain ``with`` block,
    for a driver that is not Trio: ``pool.submit(task).ref`` is a Ray ``ObjectRef``
    of the task's ``TaskResult``. Leaving the block waits for every submitted task; an
    exception in it cancels them all. The pool's Trio loop runs on a thread of its own."""
    open_ray_pool(num_actors, agents_per_actor, **options)  # checks every argument here, in the caller's thread
    capacity = (options.get("max_queued") or num_actors * agents_per_actor) + num_actors * agents_per_actor
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        token = trio.lowlevel.current_trio_token()
        close = state["close"] = trio.Event()
        results = ray.remote(_Results).options(num_cpus=0, max_concurrency=2 * capacity + 1).remote()
        try:
            async with open_ray_pool(num_actors, agents_per_actor, **options) as pool:
                async with trio.open_nursery() as nursery:
                    state["pool"] = BlockingRayPool(pool, nursery, results, token)
                    ready.set()
                    await close.wait()
                    if state.get("abandon"):
                        raise _Abandon
        finally:
            ray.kill(results)

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported to the caller's thread
            state["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="trio-agent-ray-pool", daemon=True)
    thread.start()
    ready.wait()
    if "pool" not in state:
        thread.join()
        error = state.get("error")
        raise error if isinstance(error, Exception) else RuntimeError(f"the pool did not start: {error!r}")
    pool: BlockingRayPool = state["pool"]
    try:
        yield pool
    except BaseException:
        state["abandon"] = True
        raise
    finally:
        trio.from_thread.run_sync(state["close"].set, trio_token=pool._token)
        thread.join()
        error = state.get("error")
        if error is not None and not state.get("abandon") and not _only_abandoned(error):
            raise error


def _only_abandoned(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_only_abandoned(inner) for inner in error.exceptions)
    return isinstance(error, _Abandon)
