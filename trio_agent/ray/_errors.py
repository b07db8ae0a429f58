"""The errors of ``trio_agent.ray``; every one is a ``ta.AgentError``::

    AgentError
     +-- ActorLost        the Ray actor running a task died (process killed, node lost)
     +-- TaskCrashed      a task's own coroutine raised something that is not an AgentError
     +-- TaskCancelled    a task was cancelled (``RemoteTask.cancel()`` or its caller's scope)
     +-- PoolClosed       ``start()`` on a pool whose block is closing

They travel between processes (Ray pickles them), so every extra field is a keyword
with a default: an unpickled error keeps its fields through ``__dict__``.
"""

from __future__ import annotations

from .._errors import AgentError

__all__ = ["ActorLost", "PoolClosed", "TaskCancelled", "TaskCrashed"]


class ActorLost(AgentError):
    """The actor running the task died before the task ended (its process was killed,
    or its node was lost), or the pool has no live actor left to run it.

    What the agent committed before the loss is in its rollout (when the task's config
    has one): resume it on another actor with ``pool.run(task.resumed(...))``.
    ``actor`` is the pool index of the lost actor (None: no live actor was left).
    """

    def __init__(self, message: str, *, actor: int | None = None, session_id: str | None = None) -> None:
        super().__init__(message)
        self.actor = actor
        self.session_id = session_id


class TaskCrashed(AgentError):
    """A task's coroutine (``AgentTask(body=...)``) raised an exception that is not an
    ``AgentError``. The original cannot cross processes safely, so its type name and
    formatted traceback are kept as text."""

    def __init__(self, message: str, *, exception_type: str = "", traceback: str = "") -> None:
        super().__init__(message)
        self.exception_type = exception_type
        self.traceback = traceback


class TaskCancelled(AgentError):
    """The task was cancelled: by ``RemoteTask.cancel()``, or because the scope that
    ran it (``pool.run``/``pool.map``, or the pool's block) was cancelled."""


class PoolClosed(AgentError):
    """Raised by ``RayPool.start()`` (and ``run``/``map``) once the pool's block is closing."""
