"""The conversation: request prefix, committed history and the response chain (pure).

Theory of operation (SPEC sec. 2): a request is either *incremental*
(``previous_response_id`` of the last completed response plus the items added since
``delta_start``) or a *full replay* (prefix + whole history, no id). After each
completed response the output items are committed and ``delta_start`` moves to the
end of history, so the next request carries just the tool outputs, steers or the
next prompt. Anything that loses the server-side chain (a new socket with
``store: false``, a reconnect, a warmup failure, cancellation) calls ``reset_chain``.
Client ids are assigned when items are recorded (``id_factory(type)``), so replays
and forks send identical ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from .history import History

__all__ = ["Conversation", "ConversationSnapshot", "IdFactory"]

Item = dict[str, Any]
IdFactory = Callable[[str], str | None]


@attrs.frozen
class ConversationSnapshot:
    """An O(1) copy of the conversation at a boundary (history is persistent)."""

    prefix: tuple[Item, ...]
    history: History
    previous_response_id: str | None
    delta_start: int


@attrs.define
class Conversation:
    prefix: tuple[Item, ...]
    id_factory: IdFactory
    history: History = attrs.field(factory=History)
    previous_response_id: str | None = None
    delta_start: int = 0

    def with_id(self, item: Item) -> Item:
        """``item`` with a client id (type prefix) when it has none and its type takes one."""
        if item.get("id") or "type" not in item:
            return item
        new_id = self.id_factory(item["type"])
        if new_id is None:
            return item
        out: Item = {"type": item["type"], "id": new_id}
        out.update((k, v) for k, v in item.items() if k not in ("type", "id"))
        return out

    def record(self, items: Iterable[Item]) -> list[Item]:
        """Commit client items (prompts, tool outputs, context); returns them with ids."""
        recorded = [self.with_id(item) for item in items]
        self.history = self.history.extend(recorded)
        return recorded

    def record_response(self, response_id: str, output: Iterable[Item]) -> None:
        """Commit a completed response's output and chain on it."""
        self.history = self.history.extend(self.with_id(item) for item in output)
        self.previous_response_id = response_id
        self.delta_start = len(self.history)

    def chain_on(self, response_id: str) -> None:
        """Chain on a response that added nothing to history (the warmup)."""
        self.previous_response_id = response_id
        self.delta_start = len(self.history)

    def reset_chain(self) -> None:
        """Forget the server-side chain: the next request replays in full."""
        self.previous_response_id = None

    @property
    def can_chain(self) -> bool:
        return self.previous_response_id is not None

    def incremental_input(self) -> list[Item]:
        return self.history.since(self.delta_start)

    def full_input(self) -> list[Item]:
        return [*self.prefix, *self.history]

    def snapshot(self) -> ConversationSnapshot:
        return ConversationSnapshot(
            self.prefix, self.history, self.previous_response_id, self.delta_start
        )
