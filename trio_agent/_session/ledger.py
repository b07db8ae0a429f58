"""The turn ledger: the one writer of an agent's committed history (pure).

Theory of operation: every change to history goes through a ``TurnLedger`` method
that names what happened -- the session context, a prompt, a joined steer or
injected item, a committed response, a tool output, an aborted call, the
``<turn_aborted>`` marker, or one of the two *rewrites* (truncating tool outputs that
no longer fit the window, installing a compaction). Appends are published as
``Committed`` (with the response id when the items are a response's output, so the
model client can chain on it); rewrites as ``Rewritten`` carrying the whole new
history, so a subscriber never has to guess how a shorter history came about. The
rollout and the model client's chain subscribe; the ledger itself knows nothing of
either. Client ids are assigned here, when items are recorded (``id_factory(type)``),
so replays and forks send identical ids.

History is persistent (``History``), so a snapshot of a boundary is O(1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._record import Record
from .compaction import compacted_history, summarized_history, truncate_tool_outputs
from .context import TURN_ABORTED_TEXT, user_message
from .conversation import Chain, ConversationSnapshot
from .history import History

__all__ = [
    "Committed",
    "IdFactory",
    "LedgerEvent",
    "Rewritten",
    "TurnLedger",
    "aborted_output",
    "output_item",
]

Item = dict[str, Any]
IdFactory = Callable[[str], str | None]


class Committed(Record):
    """``items`` were appended; ``history`` is the history after them. ``response_id`` is
    set when the items are the output of that completed response (chain on it)."""

    __slots__ = ("items", "history", "response_id")  # noqa: RUF023  # field order

    def __init__(self, items: tuple[Item, ...], history: History, response_id: str | None = None) -> None:
        self.items = items
        self.history = history
        self.response_id = response_id


class Rewritten(Record):
    """History was replaced by ``history`` (``reason``: ``"compaction"`` or
    ``"truncation"``); its first ``unchanged`` items are the same as before. ``message``
    is a local compaction's summary bridge text ("" otherwise): the rollout's
    ``compacted`` line carries it, as codex's does."""

    __slots__ = ("reason", "history", "unchanged", "message")  # noqa: RUF023  # field order

    def __init__(self, reason: str, history: History, unchanged: int, message: str = "") -> None:
        self.reason = reason
        self.history = history
        self.unchanged = unchanged
        self.message = message


LedgerEvent = Committed | Rewritten
Listener = Callable[[LedgerEvent], None]


def output_item(call: Item, output: str | list[Item]) -> Item:
    """The output item that answers ``call`` (custom or function call)."""
    kind = "custom_tool_call_output" if call.get("type") == "custom_tool_call" else "function_call_output"
    return {"type": kind, "call_id": call.get("call_id", ""), "output": output}


def aborted_output(elapsed: float) -> str:
    """The output of a tool call cut short by a cancelled turn (SPEC sec. 4)."""
    return f"Wall time: {elapsed:.3f} seconds\naborted by user"


class TurnLedger:
    """See the module docstring. ``history`` is read-only from outside."""

    def __init__(self, prefix: tuple[Item, ...], id_factory: IdFactory, history: History | None = None) -> None:
        self.prefix = prefix
        self._ids = id_factory
        self._history = history if history is not None else History()
        self._listeners: list[Listener] = []

    @property
    def history(self) -> History:
        return self._history

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with every later ``Committed``/``Rewritten`` event, in order."""
        self._listeners.append(listener)

    def snapshot(self, chain: Chain) -> ConversationSnapshot:
        """The boundary as it stands, chained as ``chain`` says (O(1))."""
        return ConversationSnapshot(self.prefix, self._history, chain.previous_response_id, chain.delta_start)

    def with_id(self, item: Item) -> Item:
        """``item`` with a client id (type prefix) when it has none and its type takes one."""
        if item.get("id") or "type" not in item:
            return item
        new_id = self._ids(item["type"])
        if new_id is None:
            return item
        out: Item = {"type": item["type"], "id": new_id}
        out.update((k, v) for k, v in item.items() if k not in ("type", "id"))
        return out

    # -- appends -------------------------------------------------------------------

    def record_context(self, items: Sequence[Item]) -> list[Item]:
        """The session's context messages (first turn, SPEC sec. 2)."""
        return self._append(items)

    def record_prompt(self, content: list[dict[str, str]]) -> Item:
        """A turn's prompt, as a user message with ``content``."""
        # Built in its final shape (the id second, as ``with_id`` places it), without the
        # intermediate copies: this is on every turn's way to its first request.
        new_id = self._ids("message")
        item: Item = (
            {"type": "message", "id": new_id, "role": "user", "content": content}
            if new_id is not None else {"type": "message", "role": "user", "content": content}
        )
        self._history = self._history.extend((item,))
        self._publish(Committed((item,), self._history))
        return item

    def join_steer(self, text: str) -> Item:
        """A steer joining the request being built."""
        [item] = self._append([user_message(text)])
        return item

    def record_raw(self, items: Sequence[Item]) -> list[Item]:
        """Raw items that start an automatic turn, recorded exactly as given (no client
        id is added: a ``function_call_output`` without ``call_id`` stays as it is)."""
        recorded = list(items)
        if recorded:
            self._history = self._history.extend(recorded)
            self._publish(Committed(tuple(recorded), self._history))
        return recorded

    def join_items(self, items: Sequence[Item]) -> list[Item]:
        """Raw items (``Agent.inject``) joining the request being built."""
        return self._append(items)

    def commit_response(self, response_id: str | None, output: Iterable[Item]) -> list[Item]:
        """A finished response's history items. ``response_id`` None: the response never
        reached its terminal frame, so nothing may chain on it."""
        return self._append(list(output), response_id=response_id, always=response_id is not None)

    def record_tool_output(self, call: Item, output: str | list[Item], extra: Sequence[Item] = ()) -> list[Item]:
        """The output answering ``call``, then any extra items (``notify`` outputs)."""
        return self._append([output_item(call, output), *extra])

    def pair_aborted(self, call: Item, elapsed: float) -> Item:
        """Answer a call cut short by a cancelled turn."""
        [item] = self._append([output_item(call, aborted_output(elapsed))])
        return item

    def mark_aborted(self) -> Item:
        """The ``<turn_aborted>`` marker after a cancelled turn."""
        [item] = self._append([user_message(TURN_ABORTED_TEXT)])
        return item

    # -- rewrites ------------------------------------------------------------------

    def truncate_tool_outputs(self, window: int) -> bool:
        """Truncate the newest tool outputs until the history fits ``window`` tokens;
        True if anything changed."""
        items = self._history.to_list()
        rewritten = truncate_tool_outputs(items, window=window)
        if rewritten == items:
            return False
        self._rewrite("truncation", rewritten)
        return True

    def install_compaction(self, summary: Item, *, permissions: Item, context: Item) -> History:
        """Replace history with its compacted form (SPEC sec. 8)."""
        installed = compacted_history(
            self._history.to_list(), summary, permissions=self.with_id(permissions), context=self.with_id(context)
        )
        self._rewrite("compaction", installed)
        return self._history

    def install_summary(self, summary: str, *, permissions: Item, context: Item) -> History:
        """Replace history with a local compaction's (``summary`` module): the recent
        user messages, fresh context, then the bridge message holding ``summary``."""
        installed, bridge = summarized_history(
            self._history.to_list(), summary, permissions=self.with_id(permissions), context=self.with_id(context)
        )
        self._rewrite("compaction", [self.with_id(item) for item in installed], message=bridge)
        return self._history

    # -- internals -----------------------------------------------------------------

    def _append(self, items: Sequence[Item], *, response_id: str | None = None, always: bool = False) -> list[Item]:
        recorded = list(map(self.with_id, items))
        if not recorded and not always:
            return recorded
        self._history = self._history.extend(recorded)
        self._publish(Committed(tuple(recorded), self._history, response_id))
        return recorded

    def _rewrite(self, reason: str, items: list[Item], *, message: str = "") -> None:
        before = self._history
        unchanged = 0
        for old, new in zip(before, items, strict=False):
            if old is not new and old != new:
                break
            unchanged += 1
        self._history = History(items)
        self._publish(Rewritten(reason, self._history, unchanged, message))

    def _publish(self, event: LedgerEvent) -> None:
        for listener in self._listeners:
            listener(event)
