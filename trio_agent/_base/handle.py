"""``AgentHandle``: the weak handle to an agent given to ``tools_factory`` and tools.

It lives in the configuration layer (docs/architecture.md, "Layers") because the
layers below the runtime name it: ``AgentConfig.tools_factory`` takes one and
``ToolContext.agent`` is one. So it cannot name the runtime's classes -- they import
this layer, and naming them here, even for a type checker, would close an import cycle
through the whole core. It names the agent, its turns and their results through the
protocols below instead: what a ``ta.Agent``, a ``ta.Turn`` and a ``ta.TurnResult``
offer the code that holds a handle. The objects behind them are always those classes
(``isinstance(child, ta.Agent)`` narrows to the rest of the agent's API); the runtime
passes its ``Agent`` to ``AgentHandle``, so the type checker proves there that the
classes meet the protocols.
"""

from __future__ import annotations

import weakref
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, final

from .._errors import AgentClosed

if TYPE_CHECKING:
    from .._events import AgentEvents
    from .._session.snapshot import SessionSnapshot

__all__ = ["AgentHandle", "AgentLike", "TurnLike", "TurnResultLike"]


class TurnResultLike(Protocol):
    """A completed turn, as a handle's holder sees it: a ``ta.TurnResult``."""

    @property
    def turn_id(self) -> int: ...

    @property
    def final_message(self) -> str: ...

    @property
    def response_id(self) -> str | None: ...

    def snapshot(self) -> SessionSnapshot: ...


class TurnLike(Protocol):
    """A turn, as a handle's holder sees it: a ``ta.Turn``."""

    @property
    def turn_id(self) -> int: ...

    async def wait_running(self) -> bool: ...

    async def steer(self, text: str, *, interrupt: bool = False) -> None: ...

    async def cancel(self) -> None: ...

    async def result(self) -> TurnResultLike: ...


class AgentLike(Protocol):
    """An agent, as the layers below the runtime see it: a ``ta.Agent`` (a fork, a
    spawned child or a worker; ``Tools.with_collaboration(watch=...)`` is given one)."""

    @property
    def session_id(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def closing(self) -> bool: ...

    @property
    def events(self) -> AgentEvents: ...

    async def prompt(self, prompt: str) -> TurnLike: ...

    async def post_mail(self, author: str, text: str, *, trigger_turn: bool = False) -> TurnLike | None: ...

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> TurnLike | None: ...

    def fork(self) -> AbstractAsyncContextManager[AgentLike]: ...

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[AgentLike]: ...


class _Branching(AgentLike, Protocol):
    """What a handle reaches through: an ``AgentLike`` that also forks from a result.

    ``Agent.fork_from`` takes the runtime's own ``TurnResult`` (it reads the turn's
    checkpoint), a class this layer cannot name; the handle passes on what it is
    given, which is one (``AgentHandle.fork_from``)."""

    def fork_from(self, result: Any) -> AbstractAsyncContextManager[AgentLike]: ...


@final
class AgentHandle:
    """A weak handle to an agent, given to ``tools_factory`` and tool handlers.

    It does not keep the agent alive; using it after the agent closed raises
    ``AgentClosed``.
    """

    def __init__(self, agent: _Branching) -> None:
        self._agent = weakref.ref(agent)

    @property
    def session_id(self) -> str:
        """The agent's session id (also while it closes, and inside ``tools_factory``)."""
        return self._live().session_id

    @property
    def path(self) -> str:
        """The agent's mail path (``/root``, ``/root/<name>``, ...)."""
        return self._live().path

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> TurnLike | None:
        """``Agent.post_to_parent`` of the agent this handle belongs to: a tool of a
        spawned or forked agent reports to its parent. Works while the agent is still
        finishing its turns (closing); ``AgentClosed`` once the parent has closed."""
        return await self._live().post_to_parent(text, trigger_turn=trigger_turn)

    def fork(self) -> AbstractAsyncContextManager[AgentLike]:
        """``Agent.fork`` of the agent this handle belongs to."""
        return self._open().fork()

    def fork_from(self, result: TurnResultLike) -> AbstractAsyncContextManager[AgentLike]:
        """``Agent.fork_from`` of the agent this handle belongs to (``result``: a
        ``ta.TurnResult`` of that agent)."""
        return self._open().fork_from(result)

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[AgentLike]:
        """``Agent.spawn`` of the agent this handle belongs to."""
        return self._open().spawn(name)

    def _live(self) -> _Branching:
        """The agent, also while it closes."""
        agent = self._agent()
        if agent is None:
            raise AgentClosed("the agent behind this handle has closed")
        return agent

    def _open(self) -> _Branching:
        """The agent, while it is not closing (a closing agent makes no children)."""
        agent = self._live()
        if agent.closing:
            raise AgentClosed("the agent behind this handle has closed")
        return agent
