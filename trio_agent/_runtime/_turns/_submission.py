"""``Submission`` and ``Declined``: what ``Agent.submit`` and ``Agent.start_if_idle`` return.

A module of their own so that their attrs classes are built by the first call (or the
first read of ``trio_agent.Submission``/``Declined``), not by ``import trio_agent``.
"""

from __future__ import annotations

from typing import Literal, final

import attrs

from ._turn import Turn

__all__ = ["Declined", "Submission"]


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
