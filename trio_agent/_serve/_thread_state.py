"""What the server keeps for its loaded threads: one ``ThreadState`` per loaded agent
generation of a thread, and ``ThreadStates``, the registry of them.

Generations. A thread can be loaded again while the events of its previous agent are
still being delivered (a resume that raced its unload): the new state replaces the
current one, which is *retired* until the thread's ``thread.closed`` event, so each
event reaches the state of the agent that emitted it (``target``): a retired
generation's until its close, then the current one.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

import trio

from .._runtime import Agent, Turn
from ._connection import Connection
from ._dynamic import DynamicCalls, DynamicToolSpec, Introductions
from ._items import ThreadMapper
from ._shapes import ThreadMeta

__all__ = ["ThreadState", "ThreadStates", "registering"]


class ThreadState:
    """What the server keeps for one loaded thread (one agent generation)."""

    def __init__(self, meta: ThreadMeta, mapper: ThreadMapper, specs: list[DynamicToolSpec],
                 calls: DynamicCalls) -> None:
        self.meta = meta
        self.mapper = mapper
        self.specs = specs
        self.calls = calls
        self.gate = Introductions()  # approvals, by approval id
        self.lock = trio.Lock()
        self.subscribers: set[Connection] = set()
        self.handles: dict[int, Turn] = {}  # this agent's turns that the server started
        self.agent: Agent | None = None

    @property
    def thread_id(self) -> str:
        return self.meta.thread_id


class registering:  # (lower case: used as ``async with registering(state)``, like a function)
    """Hold ``state.lock`` while a handler registers what the pump needs before it maps
    the next event (``_pump``). A free lock is taken without a schedule point (issue 30:
    a step of the request's task per ``turn/start``); a held one is waited for, fairly."""

    __slots__ = ("_lock",)

    def __init__(self, state: ThreadState) -> None:
        self._lock = state.lock

    async def __aenter__(self) -> None:
        if self._lock.locked():
            await self._lock.acquire()
        else:
            self._lock.acquire_nowait()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()


class ThreadStates:
    """The current state of each loaded thread, and the retired generations awaiting
    their close (see the module docstring)."""

    def __init__(self) -> None:
        self._states: dict[str, ThreadState] = {}
        self._retired: dict[str, collections.deque[ThreadState]] = {}

    def get(self, thread_id: str) -> ThreadState | None:
        """The thread's current state."""
        return self._states.get(thread_id)

    def __iter__(self) -> Iterator[ThreadState]:
        """The current states."""
        return iter(list(self._states.values()))

    def add(self, state: ThreadState) -> None:
        """``state`` becomes its thread's current one; one still awaiting its close is retired."""
        old = self._states.get(state.thread_id)
        if old is not None:
            self._retired.setdefault(state.thread_id, collections.deque()).append(old)
        self._states[state.thread_id] = state

    def drop(self, state: ThreadState) -> None:
        """A load that failed: forget its state (and bring back a retired one)."""
        if self._states.get(state.thread_id) is state:
            del self._states[state.thread_id]
            retired = self._retired.get(state.thread_id)
            if retired:
                self._states[state.thread_id] = retired.pop()
                if not retired:
                    del self._retired[state.thread_id]

    def target(self, thread_id: str) -> ThreadState | None:
        """The state an event belongs to: a retired generation's until its close."""
        retired = self._retired.get(thread_id) if self._retired else None  # (mostly none: per event)
        return retired[0] if retired else self._states.get(thread_id)

    def closed(self, thread_id: str) -> None:
        """The thread's oldest generation closed: forget it."""
        retired = self._retired.get(thread_id)
        if retired:
            retired.popleft()
            if not retired:
                del self._retired[thread_id]
            return
        self._states.pop(thread_id, None)
