"""``AgentHandle``: the weak handle to an agent given to ``tools_factory`` and tools."""

from __future__ import annotations

import weakref
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, final

from .._errors import AgentClosed

if TYPE_CHECKING:
    from ._agent import Agent
    from ._turn import Turn, TurnResult

__all__ = ["AgentHandle"]


class _Branching(Protocol):
    """What a handle reaches through: the agent's identity and its branching calls."""

    @property
    def session_id(self) -> str: ...

    @property
    def closing(self) -> bool: ...

    @property
    def path(self) -> str: ...

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None: ...

    def fork(self) -> AbstractAsyncContextManager[Agent]: ...

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[Agent]: ...

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[Agent]: ...


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
        agent = self._agent()
        if agent is None:
            raise AgentClosed("the agent behind this handle has closed")
        return agent.session_id

    @property
    def path(self) -> str:
        """The agent's mail path (``/root``, ``/root/<name>``, ...)."""
        agent = self._agent()
        if agent is None:
            raise AgentClosed("the agent behind this handle has closed")
        return agent.path

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None:
        """``Agent.post_to_parent`` of the agent this handle belongs to: a tool of a
        spawned or forked agent reports to its parent. Works while the agent is still
        finishing its turns (closing); ``AgentClosed`` once the parent has closed."""
        agent = self._agent()
        if agent is None:
            raise AgentClosed("the agent behind this handle has closed")
        return await agent.post_to_parent(text, trigger_turn=trigger_turn)

    def fork(self) -> AbstractAsyncContextManager[Agent]:
        """``Agent.fork`` of the agent this handle belongs to."""
        return self._get().fork()

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[Agent]:
        """``Agent.fork_from`` of the agent this handle belongs to."""
        return self._get().fork_from(result)

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[Agent]:
        """``Agent.spawn`` of the agent this handle belongs to."""
        return self._get().spawn(name)

    def _get(self) -> _Branching:
        agent = self._agent()
        if agent is None or agent.closing:
            raise AgentClosed("the agent behind this handle has closed")
        return agent
