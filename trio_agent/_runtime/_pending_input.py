"""Input that arrives while an agent may be busy: submit, start-if-idle, conditional
interrupt (SPEC sec. 10, the parts that need no mailbox).

- ``submit(prompt)`` steers the running turn when there is one that can still take a
  steer, and starts a turn otherwise; it says which.
- ``start_if_idle(prompt)`` starts a turn only when nothing is running or queued, and
  otherwise declines with a reason, recording nothing.
- ``interrupt_if_no_pending_input(turn_id)`` cancels that running turn only when no
  input is waiting for it (no pending steers, no queued prompt); it answers before the
  cancellation completes, so a tool of that very turn can call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, final

import attrs

from .._errors import TurnNotSteerable
from ._turn import Prompt, Turn, TurnState, TurnStatus

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Declined", "Submission", "interrupt_if_no_pending_input", "start_if_idle", "submit"]


@final
@attrs.frozen
class Submission:
    """What ``Agent.submit`` did: ``kind`` is ``"started"`` or ``"steered"``."""

    kind: Literal["started", "steered"]
    turn: Turn


@final
@attrs.frozen
class Declined:
    """``Agent.start_if_idle`` did nothing; ``reason`` is ``"not_idle"``."""

    reason: str


def _running(agent: Agent) -> TurnState | None:
    for state in agent._pending:
        if state.status is TurnStatus.RUNNING:
            return state
    return None


async def submit(agent: Agent, prompt: str | Prompt) -> Submission:
    live = _running(agent)
    if live is not None and live.steerable:
        turn = Turn(agent, live)
        text = prompt.text if isinstance(prompt, Prompt) else prompt
        try:
            await turn.steer(text)
        except TurnNotSteerable:
            pass  # it decided to finish in the meantime: start a turn instead
        else:
            return Submission("steered", turn)
    return Submission("started", await agent.prompt(prompt))


async def start_if_idle(agent: Agent, prompt: str | Prompt) -> Turn | Declined:
    if agent._pending:
        return Declined("not_idle")
    return await agent.prompt(prompt)


def interrupt_if_no_pending_input(agent: Agent, turn_id: int) -> bool:
    live = _running(agent)
    if live is None or live.turn_id != turn_id or live.steers or len(agent._pending) > 1:
        return False
    if live.cancel_scope.cancel_called:
        return False
    live.steerable = False
    live.cancel_scope.cancel()
    return True
