"""The response chain and what a request sends (pure).

Theory of operation (SPEC sec. 2): a request is either *incremental*
(``previous_response_id`` of the last completed response plus the history items
added since ``delta_start``) or a *full replay* (prefix + whole history, no id).
``Chain`` is that server-side position as a value. The model client owns it: it
moves it forward when a response's output is committed (``on``), and forgets it
(``reset``) whenever the server-side chain is lost -- a new socket with
``store: false``, a reconnect, a warmup failure, a cancelled turn, a history rewrite.
History itself is written only by the ``TurnLedger`` (``ledger.py``).

``ConversationSnapshot`` is an O(1) copy of a boundary (history is persistent):
what a fork or a ``TurnResult`` branches from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._record import Record
from .history import History

__all__ = ["Chain", "ConversationSnapshot", "full_input"]

Item = dict[str, Any]


class Chain(Record):
    """The response to chain on and the history index its delta starts at."""

    __slots__ = ("previous_response_id", "delta_start")  # noqa: RUF023  # field order

    def __init__(self, previous_response_id: str | None = None, delta_start: int = 0) -> None:
        self.previous_response_id = previous_response_id
        self.delta_start = delta_start

    @property
    def can_chain(self) -> bool:
        return self.previous_response_id is not None

    def on(self, response_id: str, delta_start: int) -> Chain:
        """Chain on ``response_id``; the next delta starts at history index ``delta_start``."""
        return Chain(response_id, delta_start)

    def reset(self) -> Chain:
        """Forget the server-side chain: the next request replays in full."""
        return Chain(None, self.delta_start)

    def incremental_input(self, history: History) -> list[Item]:
        return history.since(self.delta_start)


def full_input(prefix: Sequence[Item], history: History) -> list[Item]:
    """``[*prefix, *history]``; its ``wire()`` is the request form (``History.replay``)."""
    return history.replay(prefix)


class ConversationSnapshot(Record):
    """An O(1) copy of the conversation at a boundary (history is persistent)."""

    __slots__ = ("prefix", "history", "previous_response_id", "delta_start")  # noqa: RUF023  # field order

    def __init__(
        self, prefix: tuple[Item, ...], history: History, previous_response_id: str | None, delta_start: int
    ) -> None:
        self.prefix = prefix
        self.history = history
        self.previous_response_id = previous_response_id
        self.delta_start = delta_start

    @property
    def chain(self) -> Chain:
        return Chain(self.previous_response_id, self.delta_start)
