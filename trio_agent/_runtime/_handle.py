"""``AgentHandle``: the weak handle to an agent given to ``tools_factory`` and tools."""

from __future__ import annotations

import weakref
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, final

from .._errors import AgentClosed

if TYPE_CHECKING:
    from ._agent import Agent
    from ._turn import TurnResult

__all__ = ["AgentHandle"]


class _Branching(Protocol):
    """What a handle reaches through: the agent's identity and its branching calls."""

    @property
    def session_id(self) -> str: ...

    @property
    def closing(self) -> bool: ...

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
        return self._get().session_id

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
