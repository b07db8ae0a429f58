"""Waiting for a Ray ``ObjectRef`` from Trio, and what Ray's errors mean.

``ObjectRef.future()`` is Ray's own completion hook: a ``concurrent.futures.Future``
settled by Ray's core worker when the object is ready. Its done-callback runs on a
Ray thread and only schedules ``trio.Event.set`` on the Trio loop
(``TrioToken.run_sync_soon``), so waiting costs no thread and is cancellable like
any Trio wait; the reference stays pending and can be waited for again.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import ray
import trio

__all__ = ["PendingRef", "is_actor_loss"]


class PendingRef:
    """One ``ObjectRef`` being waited for; ``await wait()`` may be called again after a
    cancelled wait, and returns the value or raises Ray's error for it."""

    def __init__(self, ref: Any) -> None:  # ray.ObjectRef (untyped here)
        self.ref = ref
        self._done = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake(_: concurrent.futures.Future[Any]) -> None:
            try:
                token.run_sync_soon(self._done.set)
            except trio.RunFinishedError:
                pass  # the driver's loop has ended; nobody waits any more

        self._future: concurrent.futures.Future[Any] = ref.future()
        self._future.add_done_callback(wake)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> Any:
        await self._done.wait()
        return self._future.result()


def is_actor_loss(exc: BaseException) -> bool:
    """Whether ``exc`` (from a ref) means the actor is gone: its process died or its
    node was lost, so nothing more will come from it."""
    errors = ray.exceptions
    loss = (errors.RayActorError, errors.ObjectLostError, errors.OwnerDiedError, errors.WorkerCrashedError,
            errors.NodeDiedError)
    return isinstance(exc, loss)
