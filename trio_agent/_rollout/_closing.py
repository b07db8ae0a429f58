"""What a process that died mid-turn left open in its rollout, and how a load closes it
(issue 8: open tool calls; issue 23, item 2: the turn itself).

Theory of operation. A process killed while a turn runs (SIGKILL, OOM, power) leaves
that turn's journal ``task_started`` line (``_lines.TurnLines``) without its
``task_complete``/``turn_aborted``, and everything the turn committed before the kill
after it -- maybe tool calls without their outputs, maybe (killed within the few
writes between the journal line and the prompt's, or during a compaction before the
prompt joins) not even its prompt. ``close_interrupted_turn`` makes of that what a
cancelled turn records (SPEC sec. 4), so the next request tells the model what
happened and the session resumes:

- each open call is answered with ``INTERRUPTED_OUTPUT``;
- a *killed turn* -- one the journal shows begun and not ended, with a prompt
  (``user_message``) or a committed item -- gets its prompt if it was not committed
  yet (the journal's text, as a cancelled turn's ``_record_own_input`` would), then
  the ``INTERRUPTED_TEXT`` marker; a turn without either (a compaction turn: its
  cancellation records no marker either) gets nothing;
- once: a killed turn whose history already ends with the marker (a load closed it
  and a resumed writer wrote that down) is left as it is.

A rollout without a journal (an older file) is closed by its open calls alone, as
before. ``trio-agent serve`` shows a killed turn from the same lines
(``_serve._turn_durability``), so its view and the next request agree;
``read_last_turn`` gives it the last turn without reading a long file whole.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._ids import new_item_id
from .._session.context import TURN_ABORTED_TEXT, user_message
from .._session.ledger import output_item
from ._lines import CALL_TYPES, OUTPUT_TYPES, TurnLines, parse

__all__ = ["INTERRUPTED_OUTPUT", "INTERRUPTED_TEXT", "close_interrupted_turn", "is_abort_marker", "is_killed",
           "prompt_committed", "read_last_turn"]

Item = dict[str, Any]
INTERRUPTED_OUTPUT = "aborted: the session ended (its process exited) before this call finished"
INTERRUPTED_TEXT = (
    "<turn_aborted>\nThe previous turn was cut off: the session ended before it finished. "
    "Tool calls of that turn may have partially executed.\n</turn_aborted>"
)
_TAIL = 1 << 16  # the first window ``read_last_turn`` reads; it doubles until a turn begins in it


def is_abort_marker(item: Item, *, killed_only: bool = False) -> bool:
    """Whether ``item`` is the ``<turn_aborted>`` message closing a cancelled turn or one
    its process did not live to finish (``killed_only``: only the latter)."""
    content = item.get("content")
    texts = (INTERRUPTED_TEXT,) if killed_only else (INTERRUPTED_TEXT, TURN_ABORTED_TEXT)
    return (item.get("type") == "message" and item.get("role") == "user" and isinstance(content, list)
            and len(content) == 1 and isinstance(content[0], dict) and content[0].get("text") in texts)


def is_killed(turn: TurnLines | None) -> bool:
    """Whether ``turn`` is a killed turn (see the module docstring): begun, not ended,
    with a prompt or a committed item."""
    return turn is not None and turn.ended is None and (
        turn.prompt is not None or any(kind == "item" for kind, _, _ in turn.entries))


def prompt_committed(turn: TurnLines) -> bool:
    """Whether the journal's prompt of ``turn`` is among the user messages it committed."""
    return any(kind == "item" and item is not None and _first_text(item) == turn.prompt
               for kind, item, _ in turn.entries)


def close_interrupted_turn(history: list[Item], last: TurnLines | None) -> tuple[list[Item], tuple[str, ...]]:
    """``history`` (a rollout's, ``last`` its last journal turn) closed as the module
    docstring says, and the ids of the calls it answered."""
    answered = {item.get("call_id") for item in history if item.get("type") in OUTPUT_TYPES}
    open_calls: dict[str, Item] = {}
    for item in history:
        call_id = item.get("call_id")
        if item.get("type") in CALL_TYPES and call_id not in answered:
            open_calls.setdefault(str(call_id), item)
    killed = is_killed(last) and not (history and is_abort_marker(history[-1], killed_only=True))
    if not open_calls and not killed:
        return history, ()
    closing = [output_item(call, INTERRUPTED_OUTPUT) for call in open_calls.values()]
    if killed and last is not None and last.prompt is not None and not prompt_committed(last):
        closing.append(user_message(last.prompt))
    closing.append(user_message(INTERRUPTED_TEXT))
    # Client ids, as the ledger gives every item it records (each of these types takes one).
    return [*history, *({"type": i["type"], "id": new_item_id(i["type"]), **i} for i in closing)], tuple(open_calls)


def read_last_turn(path: Path) -> tuple[TurnLines | None, Item | None]:
    """The last turn ``path`` began (None: it has no journal) and the last item its
    history holds (None: none since that turn began), reading only as much of the
    file's end as holds that turn. Raises ``OSError``, and ``InvalidSessionSnapshot``
    for a damaged line in what it reads; a torn last line is skipped."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        window = _TAIL
        while True:
            start = max(0, size - window)
            file.seek(start)
            data = file.read(size - start)
            if start:  # from the first whole line on
                data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
            parsed = parse(path, data)
            if parsed.last_turn is not None or start == 0:
                last = parsed.last_turn
                item = parsed.history[-1] if last is not None and last.entries and parsed.history else None
                return last, item
            window *= 4


def _first_text(item: Item) -> object:
    content = item.get("content")
    if item.get("type") != "message" or item.get("role") != "user" or not isinstance(content, list) or not content:
        return None
    first = content[0]
    return first.get("text") if isinstance(first, dict) else None
