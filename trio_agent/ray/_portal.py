"""``TrioPortal``: one Trio event loop on its own thread, called from asyncio.

Theory of operation. Ray runs an async actor's methods as asyncio coroutines on one
event loop thread, and Trio cannot run on that loop. So each actor starts one Trio
loop on a dedicated thread when it is constructed and keeps it for its whole life;
every agent of the actor lives in that loop's root nursery. The two loops meet at two
thread-safe primitives only -- the ones ``trio.from_thread`` and
``asyncio.run_coroutine_threadsafe`` are built on:

- asyncio -> Trio: ``TrioToken.run_sync_soon`` schedules a callback on the Trio loop
  (FIFO). ``call`` uses it to start one Trio task per call, inside a ``CancelScope``
  of its own;
- Trio -> asyncio: ``loop.call_soon_threadsafe`` settles the caller's asyncio future
  with the Trio task's outcome.

No thread is blocked per call, so an actor can hold thousands of pending calls (Ray's
concurrency groups bound how many).

Cancellation. When the asyncio caller is cancelled (Ray cancelled the call, or the
actor is shutting down), the Trio task's scope is cancelled through the same FIFO --
after the callback that started it, so a task is never missed -- and the caller keeps
waiting, shielded, until the Trio task has finished: its cleanup (terminal events, a
flushed rollout) happens before the asyncio call ends, and only then is
``CancelledError`` re-raised. ``close()`` cancels the root nursery and joins the thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import outcome
import trio

__all__ = ["PortalClosed", "TrioPortal"]

T = TypeVar("T")


class PortalClosed(RuntimeError):
    """The portal's Trio loop has stopped (the actor is shutting down)."""


class _CallCancelled(Exception):
    """The outcome of a call whose Trio task was cancelled."""


@attrs.define(eq=False)
class _Call:
    fn: Callable[..., Awaitable[object]]
    args: tuple[object, ...]
    settle: Callable[[outcome.Outcome[object]], None]
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)


class TrioPortal:
    """A Trio loop on a daemon thread; ``await portal.call(fn, *args)`` from asyncio."""

    def __init__(self, name: str = "trio-agent") -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise PortalClosed("the Trio loop did not start") from self._failure

    # -- the Trio thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # kept for __init__ if the loop never started; printed by threading
            self._failure = exc
            raise
        finally:
            self._ready.set()

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await trio.sleep_forever()  # until close() cancels the nursery

    def _spawn(self, call: _Call) -> None:
        # A run_sync_soon callback, on the Trio thread.
        if self._nursery is None or self._nursery.cancel_scope.cancel_called:
            call.settle(outcome.Error(PortalClosed("the actor's Trio loop is shutting down")))
            return
        self._nursery.start_soon(self._invoke, call)

    @staticmethod
    async def _invoke(call: _Call) -> None:
        result: outcome.Outcome[object] = outcome.Error(_CallCancelled())
        try:
            with call.scope:
                result = outcome.Value(await call.fn(*call.args))
        except Exception as exc:  # the call's own failure is its outcome; Cancelled propagates
            result = outcome.Error(exc)
        finally:
            call.settle(result)

    # -- the asyncio side ---------------------------------------------------------------

    def _schedule(self, callback: Callable[[], object]) -> None:
        if self._token is None:
            raise PortalClosed("the actor's Trio loop is not running")
        try:
            self._token.run_sync_soon(callback)
        except trio.RunFinishedError:
            raise PortalClosed("the actor's Trio loop has stopped") from None

    async def call(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Run ``await fn(*args)`` as a Trio task; return its value or raise its error.

        If this coroutine is cancelled, the Trio task is cancelled and waited for
        before ``CancelledError`` propagates (see the module docstring)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[outcome.Outcome[object]] = loop.create_future()

        def settle(result: outcome.Outcome[object]) -> None:
            loop.call_soon_threadsafe(_set_once, future, result)

        call = _Call(fn, args, settle)
        self._schedule(lambda: self._spawn(call))
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            self._schedule(call.scope.cancel)
            await _wait_through_cancellation(future)
            raise
        if isinstance(result, outcome.Error) and isinstance(result.error, _CallCancelled):
            raise asyncio.CancelledError("the actor's Trio loop cancelled this call")
        return result.unwrap()  # type: ignore[return-value]  # fn's value, typed by fn

    async def call_sync(self, fn: Callable[..., T], *args: object) -> T:
        """Run the synchronous ``fn(*args)`` on the Trio thread (no Trio task)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[outcome.Outcome[T]] = loop.create_future()

        def run() -> None:
            loop.call_soon_threadsafe(_set_once, future, outcome.capture(fn, *args))

        self._schedule(run)
        return (await future).unwrap()

    def close(self, timeout: float = 10.0) -> None:
        """Cancel everything in the Trio loop and join its thread (idempotent)."""
        nursery = self._nursery
        if nursery is not None and self._thread.is_alive():
            try:
                self._schedule(nursery.cancel_scope.cancel)
            except PortalClosed:
                pass
        self._thread.join(timeout)


def _set_once(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


async def _wait_through_cancellation(future: asyncio.Future[T]) -> None:
    """Wait for ``future`` even if this task is cancelled again meanwhile."""
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            continue
