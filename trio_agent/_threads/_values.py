"""The thread manager's public values: its error, a thread's status, its events and
what it tells of an unloaded thread."""

from __future__ import annotations

import collections
import enum
from pathlib import Path
from typing import final

import attrs
import trio

from .._errors import AgentError
from .._event_payloads._shared import JsonValue
from .._event_queue import _EventQueue
from .._events import AgentEvent

__all__ = ["ThreadError", "ThreadEvent", "ThreadEvents", "ThreadInfo", "ThreadStatus", "UnsubscribeStatus"]


class ThreadError(AgentError):
    """A thread operation that cannot be done: an unknown thread, an ephemeral thread
    that was unloaded, a thread that is closing."""


class ThreadStatus(enum.Enum):
    """A thread's status; the values are the app-server protocol's ``type`` names."""

    NOT_LOADED = "notLoaded"
    IDLE = "idle"
    ACTIVE = "active"
    SYSTEM_ERROR = "systemError"


class UnsubscribeStatus(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    NOT_SUBSCRIBED = "notSubscribed"
    NOT_LOADED = "notLoaded"


@final
@attrs.frozen
class ThreadEvent:
    """One event of the manager: ``kind`` is ``"thread.started"``, ``"thread.status"``
    (``status`` set), ``"thread.closed"``, or ``"agent"`` (``event`` is the thread
    agent's event, in order)."""

    thread_id: str
    kind: str
    status: ThreadStatus | None = None
    event: AgentEvent | None = None


@final
@attrs.frozen
class ThreadInfo:
    """What ``ThreadManager.read`` knows of a thread without loading it."""

    thread_id: str
    status: ThreadStatus
    ephemeral: bool
    rollout_path: Path | None
    history: tuple[dict[str, JsonValue], ...]


@final
class ThreadEvents:
    """``manager.events``: every ``ThreadEvent`` in order (iterate from one task)."""

    def __init__(self, queue: _EventQueue[ThreadEvent]) -> None:
        self._queue = queue

    def __aiter__(self) -> ThreadEvents:
        return self

    async def __anext__(self) -> ThreadEvent:
        try:
            return await self._queue.get()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def receive_nowait(self) -> ThreadEvent:
        """The next event if one waits, else ``trio.WouldBlock`` (``trio.EndOfChannel``
        once the manager has closed and every event was taken)."""
        return self._queue.get_nowait()

    def _ready(self) -> collections.deque[ThreadEvent]:
        """The events waiting, oldest first, for a reader that pops them itself (``serve``'s
        pump: no call per event). Popping one is ``receive_nowait``; an empty deque is its
        ``WouldBlock`` (a discarded stream is empty: the next ``__anext__`` raises)."""
        return self._queue._events
