"""A running turn in the thread record, and the turn a killed server left behind
(issue 23, item 2; docs/app-server.md, "Durability").

Theory of operation. Two files know of a turn while it runs. The rollout (the
agent's) commits its history as it happens -- the prompt, each response, each tool
output -- between the journal's ``task_started`` and ``task_complete`` /
``turn_aborted`` lines (``_rollout._lines.TurnLines``). The thread record (the
server's, ``_store``) gets its ``turn`` line only at the end. A server killed in
between (SIGKILL, OOM, power) left a turn the model will see again -- the next load
closes it with the ``<turn_aborted>`` marker and the next request carries everything
it committed -- but that the thread view did not show at all.

*Writing* (the pump, ``record_progress``, for durable threads): when a turn starts
(``run.started``), a ``turn_started`` line with what the view knows of it then -- its
wire id, its input (the ``userMessage``), its start -- and the rollout journal's id
of it; each time one of its tool items starts or completes, an ``item`` line. Each is
one ``O_APPEND`` write of the record (no fsync, like every record line), a few per
turn: message text never goes there, it is the rollout's.

*Reading* (``restored_turn``): a ``turn_started`` without its ``turn`` line is a turn
whose server died. What the next request carries of it decides what it shows: the
rollout's items committed after its ``task_started``, each as the live thread
showed its kind -- the prompt (as the client gave it: the recorded ``userMessage``),
later user messages (steers) as ``userMessage``, assistant messages as
``agentMessage``, reasoning summaries as ``reasoning``, a compaction as
``contextCompaction``; the context messages before the prompt and the
``<turn_aborted>`` marker as nothing, as live. A tool call is shown as the tool items
recorded for it (the commands an ``exec`` cell ran, each as last recorded; one still
running as it started), at the call's place. The turn is ``interrupted`` (or
``completed``, when the rollout says it ended and only its ``turn`` line is missing)
and its times are the rollout lines'. The items are built by the live mapper
(``TurnMapper``) from those lines, so their shapes are the live ones.

The prompt is shown where the rollout has it; a killed turn whose prompt had not
reached the rollout (the kill came within the journal's first writes, or during a
compaction before the prompt joined) shows it after what the turn did commit, which
is where the load commits it (``_rollout._closing``). Which turn is restored, and
when the rollout alone knows of it, is ``_restore``'s.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._events import AgentEvent, EventKind
from .._rollout._closing import is_abort_marker
from .._runtime._identity import codex_turn_id
from ._items import ThreadMapper, TurnMapper, UserInput
from ._outs import Out
from ._shapes import TurnRecord
from ._tool_items import text_of

if TYPE_CHECKING:
    from .._rollout._lines import TurnLines
    from ._store import StartedTurn, ThreadStore
    from ._thread_state import ThreadState

__all__ = ["RECORDED", "record_progress", "restored_turn"]

Json = dict[str, Any]
RECORDED = frozenset({EventKind.RUN_STARTED, EventKind.TOOL_CALL, EventKind.TOOL_RESULT})
_FROM_ROLLOUT = frozenset({"userMessage", "agentMessage", "reasoning", "contextCompaction"})
_ITEM_NOTES = ("item/started", "item/completed")


def record_progress(store: ThreadStore, state: ThreadState, event: AgentEvent, outs: Sequence[Out]) -> None:
    """What the record learns of a running turn from ``event`` (one of ``RECORDED``)
    and the notifications it made (``outs``)."""
    thread_id = state.meta.thread_id
    if event.kind is EventKind.RUN_STARTED:
        turn = state.mapper.wire_turn(event.turn_id)
        if turn is not None and outs and event.turn_id is not None:  # no outs: it had started already
            store.turn_started(thread_id, turn.record, codex_turn_id(thread_id, event.turn_id))
        return
    for out in outs:
        if out.method in _ITEM_NOTES and out.params["item"].get("type") not in _FROM_ROLLOUT:
            store.turn_item(thread_id, out.params["turnId"], out.params["item"])


def restored_turn(started: StartedTurn | None, last: TurnLines, *, thread_id: str,
                  new_id: Callable[[], str]) -> TurnRecord:
    """The turn a killed server left (see the module docstring): ``started`` is what
    the record saw of it (None: nothing), ``last`` the rollout's lines of it."""
    return _Rebuild(started, last, thread_id, new_id).turn()


def _ms(stamp: str | None) -> int | None:
    if stamp is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


class _Rebuild:
    """The turn's items, from its rollout lines, through a mapper of its own."""

    def __init__(self, started: StartedTurn | None, last: TurnLines, thread_id: str,
                 new_id: Callable[[], str]) -> None:
        self._last = last
        self._new_id = new_id
        start = started.record.started_at_ms if started is not None else None
        if start is None:
            start = last.started_at * 1000 if last.started_at is not None else _first_time(last)
        self._now = start or 0
        thread = ThreadMapper(thread_id, cwd="", model_context_window=0, dynamic_tools=frozenset(), new_id=new_id,
                              now_ms=lambda: self._now, shell="")
        record = TurnRecord(started.record.id if started is not None else last.turn_id, started_at_ms=start)
        self._turn = TurnMapper(thread, record, None)
        self._prompt = [i for i in started.record.items if i.get("type") == "userMessage"][:1] if started else []
        self._tools: dict[str, list[Json]] = {}
        for item_id, item in (started.items if started is not None else {}).items():
            self._tools.setdefault(item_id.partition("/code-")[0], []).append(item)
        self._prompt_seen = False
        self._reasoning = 0

    def turn(self) -> TurnRecord:
        for kind, item, stamp in self._last.entries:
            self._now = _ms(stamp) or self._now
            if kind == "compacted":
                self._turn.on_event(EventKind.MODEL_COMPACTION_STARTED, {})
                self._turn.on_event(EventKind.MODEL_COMPACTION_COMPLETED, {})
            elif item is not None:
                self._item(item)
        if not self._prompt_seen and self._last.prompt is not None and self._last.ended is None:
            self._add_prompt()  # not committed before the kill: the load commits it (``_rollout._closing``)
        for items in self._tools.values():  # recorded for a call the rollout does not show
            self._add_tools(items)
        self._now = _ms(self._last.ended_at) or self._now
        self._turn.finish("completed" if self._last.ended == "completed" else "cancelled")
        return self._turn.record

    def _item(self, item: Json) -> None:
        kind, role = item.get("type"), item.get("role")
        if kind == "message" and role == "user":
            self._user(item)
        elif kind == "message" and role == "assistant":
            item_id = item.get("id")
            self._turn.on_event(EventKind.ASSISTANT_MESSAGE, {
                "item_id": item_id if isinstance(item_id, str) and item_id else self._new_id(),
                "text": text_of(item.get("content") or []), "phase": item.get("phase")})
        elif kind == "reasoning":
            self._summary(item)
        elif isinstance(item.get("call_id"), str) and item["call_id"] in self._tools:
            self._add_tools(self._tools.pop(item["call_id"]))

    def _user(self, item: Json) -> None:
        """The prompt (after the context messages), then steers; never the marker."""
        content = item.get("content")
        parts: list[Any] = content if isinstance(content, list) else []
        first = parts[0].get("text") if parts and isinstance(parts[0], dict) else None
        if not self._prompt_seen:
            if self._last.prompt is None or first != self._last.prompt:
                return  # a context message, or the input of a turn without a prompt (as live: none)
            self._add_prompt(parts)
            return
        if is_abort_marker(item):
            return
        self._turn.steers.append(UserInput(text_of(parts), content=tuple(_content(parts))))
        self._turn.steered()

    def _add_prompt(self, parts: list[Any] | None = None) -> None:
        """The prompt as the client gave it (the record's ``userMessage``), else as the
        rollout has it (``parts``), else the journal's text of it."""
        self._prompt_seen = True
        if self._prompt:
            self._turn.record.items.append(dict(self._prompt[0]))
            return
        if parts is None:
            parts = [{"type": "input_text", "text": self._last.prompt}]
        self._turn.steers.append(UserInput(text_of(parts), content=tuple(_content(parts))))
        self._turn.steered()

    def _summary(self, item: Json) -> None:
        given = item.get("summary")
        summary: list[Any] = given if isinstance(given, list) else []
        text = "".join(part["text"] for part in summary if isinstance(part, dict) and isinstance(part.get("text"), str))
        if not text:
            return  # live, a reasoning item is made by its summary's deltas
        self._reasoning += 1
        self._turn.on_event(EventKind.REASONING_SUMMARY_DELTA, {"model_call_index": self._reasoning, "text": text})
        self._turn.on_event(EventKind.MODEL_CALL_COMPLETED, {"call_index": self._reasoning})

    def _add_tools(self, items: list[Json]) -> None:
        for item in items:
            shown = dict(item)
            if shown.get("completedAtMs") is None:  # still running when the server died
                shown["completedAtMs"] = self._now
            self._turn.record.items.append(shown)


def _content(parts: list[Any]) -> list[Json]:
    """A user message's content as ``UserInput`` items."""
    content: list[Json] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "input_text" and isinstance(part.get("text"), str):
            content.append({"type": "text", "text": part["text"], "text_elements": []})
        elif part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
            content.append({"type": "image", "url": part["image_url"]})
    return content


def _first_time(last: TurnLines) -> int | None:
    for _, _, stamp in last.entries:
        moment = _ms(stamp)
        if moment is not None:
            return moment
    return None
