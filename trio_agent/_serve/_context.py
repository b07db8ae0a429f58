"""What the method handlers (``_router`` and the ``_*_methods`` modules), the child
threads, the pump and the client questions use of the app server: ``ServerContext``.

Why a protocol: the server (``_server.AppServer``) dispatches to the handlers and owns
the pump, so it imports them; were they to name ``AppServer`` back -- even for their
annotations only -- the server and a dozen modules would form one import cycle, which
anyone changing one of them would have to hold in mind. They name this protocol
instead, which lies below all of them and names only values of lower modules;
``AppServer`` satisfies it (mypy checks it where the server hands itself over).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from .._config import AgentConfig
from .._runtime import Agent
from .._threads import ThreadManager, ThreadStatus
from .._tools._security import Approvals
from ._clock import WireClock
from ._connection import Connection
from ._credential import Account
from ._dynamic import DynamicToolSpec
from ._outs import Out
from ._shapes import ThreadMeta, TurnRecord
from ._store import ThreadStore
from ._thread_index import ThreadIndex
from ._thread_state import ThreadState

__all__ = ["ChildThreads", "ServerContext"]

Json = dict[str, Any]


class ChildThreads(Protocol):
    """What the thread methods use of the child threads (``_children.Children``)."""

    async def resume(self, conn: Connection, meta: ThreadMeta) -> ThreadState: ...


class ServerContext(Protocol):
    """The app server as its handlers see it (see the module docstring)."""

    @property
    def config(self) -> AgentConfig:
        """The template of every thread's agent."""

    @property
    def home(self) -> Path: ...

    @property
    def model_provider(self) -> str: ...

    @property
    def account(self) -> Account: ...

    @property
    def clock(self) -> WireClock: ...

    @property
    def store(self) -> ThreadStore: ...

    @property
    def index(self) -> ThreadIndex: ...

    @property
    def children(self) -> ChildThreads: ...

    @property
    def closing(self) -> bool:
        """The server is shutting down: no new work."""

    @property
    def threads(self) -> ThreadManager:
        """The thread manager; ``InvalidRequest`` once the server is shutting down."""

    def now_ms(self) -> int: ...

    # -- thread states

    def state(self, thread_id: str) -> ThreadState | None: ...

    def loaded_state(self, thread_id: str) -> tuple[ThreadState, Agent]: ...

    def new_state(self, meta: ThreadMeta, *, turns: Sequence[TurnRecord] = (), usage_total: Json | None = None,
                  specs: list[DynamicToolSpec] | None = None) -> ThreadState: ...

    def drop_state(self, state: ThreadState) -> None: ...

    def configure(self, state: ThreadState, config: AgentConfig, **changes: Any) -> AgentConfig: ...

    def approvals(self, policy: str | None) -> Approvals: ...

    def thread_view(self, state: ThreadState, *, turns: bool, status: ThreadStatus | None = None) -> Json: ...

    def settings_view(self, state: ThreadState, thread: Json) -> Json: ...

    # -- delivery

    def broadcast(self, method: str, params: Json) -> None: ...

    def publish(self, state: ThreadState, outs: list[Out]) -> None: ...
