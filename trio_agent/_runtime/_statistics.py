"""``AgentStatistics``: what ``Agent.statistics()`` returns.

A module of its own so that its attrs class is built by the first ``statistics()``
call (or the first read of ``trio_agent.AgentStatistics``), not by ``import
trio_agent``: an agent that is never asked does not pay for it.
"""

from __future__ import annotations

from typing import final

import attrs

from .._wire.usage import TokenUsage
from ._turns._turn import TurnStatus

__all__ = ["AgentStatistics"]


@final
@attrs.frozen
class AgentStatistics:
    """``Agent.statistics()``: a snapshot of an agent's counters."""

    session_id: str
    turns_accepted: int
    turns_queued: int
    running_turn: int | None
    last_turn_status: TurnStatus | None  # how the latest turn that ran ended
    history_items: int
    connection_attempts: int
    websocket_reconnects: int
    response_attempts: int
    response_retries: int
    warmup_usage: TokenUsage
