"""Trio orchestration: the agent nursery, turns and their cancel scopes, model calls."""

from .._base.handle import AgentHandle
from ._agent import Agent, open_agent
from ._identity import Rollout
from ._turns._input import MailboxFull
from ._turns._turn import Prompt, Turn, TurnControl, TurnResult, TurnStatus

__all__ = [
    "Agent",
    "AgentHandle",
    "MailboxFull",
    "Prompt",
    "Rollout",
    "Turn",
    "TurnControl",
    "TurnResult",
    "TurnStatus",
    "open_agent",
]
