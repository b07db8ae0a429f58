"""A rollout's line format, both ways: ``format_line`` writes one, ``parse`` reads them back.

Every line is ``{"timestamp": <RFC 3339 UTC>, "type": ..., "payload": {...}}`` (with an
envelope ``ordinal`` after the timestamp in a codex *paginated* file, see "Ordinals"),
one JSON object and its newline; ``format_line`` makes one, ``rollout_timestamp`` its time.

``parse`` splits a rollout file's bytes into whole lines (those ending in a newline;
what follows the last newline is a *torn* line, counted but never read) and checks
each line as far as loading relies on it -- UTF-8 JSON within ``_json_lines``'
bounds, an object with a string ``type``; for the three types that are read, a
``payload`` object: ``session_meta`` fields of the right types, ``response_item``
payloads and each ``compacted.replacement_history`` item an object with a string
``type`` (and a string ``call_id`` on tool calls and their outputs). Lines of other
types (codex's ``turn_context``, ``event_msg``...) are skipped. Any other line is
damage: ``InvalidSessionSnapshot`` naming the file, the line, its byte offset and
what was wrong, whichever of ``read_history``, ``load_session`` or a resuming writer
reads it. Pure: the caller reads the file.

Turns. The journal's ``event_msg`` lines (``_runtime._identity.TurnJournal``, codex's
own) say where each turn began and how it ended: ``task_started`` (its ``turn_id``),
``user_message`` (its prompt), then ``task_complete`` or ``turn_aborted`` with the same
``turn_id``. ``Parsed.last_turn`` is the last turn the file began, with everything
committed after its ``task_started`` line, in order -- so a turn whose process was
killed (no end line) is known, with exactly the items it committed. A journal line
whose payload is not what it should be (no object, a ``turn_id`` that is no string) is
not a turn boundary, and is skipped like any other ``event_msg``.

Ordinals. ``Parsed.next_ordinal`` is where a codex *paginated* file's line numbering
goes on (``_Ordinals``): a writer appending to it gives each line it writes the next
envelope ``ordinal``, as codex's own appends do; for a legacy file (ours, or codex's
older ones) it is None and lines carry none.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, cast

from .._errors import InvalidSessionSnapshot
from .._json_lines import LineProblem, json_kind, loads, untyped
from .._jsontext import dumps
from .._record import Record

__all__ = ["CALL_TYPES", "OUTPUT_TYPES", "Parsed", "TurnLines", "format_line", "parse", "rollout_timestamp"]

Item = dict[str, Any]
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
_ENDS = {"task_complete": "completed", "turn_aborted": "interrupted"}


def rollout_timestamp() -> str:
    """Now, as the RFC 3339 UTC millisecond timestamp every rollout line carries."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def format_line(kind: str, payload: dict[str, Any], ordinal: int | None = None) -> str:
    """One rollout line of ``kind``, stamped now, with its newline (``ordinal``: the
    envelope number of a paginated file's line, None for a legacy file)."""
    if ordinal is None:
        return dumps({"timestamp": rollout_timestamp(), "type": kind, "payload": payload}) + "\n"
    return dumps({"timestamp": rollout_timestamp(), "ordinal": ordinal, "type": kind, "payload": payload}) + "\n"


class TurnLines:
    """The last turn a rollout began (see the module docstring). ``entries`` are what
    was committed after its ``task_started`` line, in order, each with its line's
    ``timestamp`` (None if it has none): ``("item", item)`` for a ``response_item``,
    ``("compacted", None)`` for a history rewrite. ``ended`` is None while the file
    says nothing of its end (still running, or killed), else ``"completed"``
    (``task_complete``) or ``"interrupted"`` (``turn_aborted``)."""

    __slots__ = ("ended", "ended_at", "entries", "prompt", "started_at", "turn_id")

    def __init__(self, turn_id: str, started_at: object) -> None:
        self.turn_id = turn_id
        self.started_at = started_at if isinstance(started_at, int) and not isinstance(started_at, bool) else None
        self.prompt: str | None = None  # the journal's user_message: the text of the turn's prompt
        self.entries: list[tuple[str, Item | None, str | None]] = []
        self.ended: str | None = None
        self.ended_at: str | None = None


class Parsed(Record):
    __slots__ = ("meta", "history", "end", "torn", "last_turn", "next_ordinal")  # noqa: RUF023  # field order

    def __init__(self, meta: dict[str, Any] | None, history: list[Item], end: int, torn: int,
                 last_turn: TurnLines | None = None, next_ordinal: int | None = None) -> None:
        self.meta = meta
        self.history = history
        self.end = end  # bytes of whole lines: where the next append belongs
        self.torn = torn  # bytes after ``end`` without a newline (a write cut short), 0 if none
        self.last_turn = last_turn
        self.next_ordinal = next_ordinal  # the ordinal of the next line of a paginated file; None: not paginated


def parse(path: Path, data: bytes) -> Parsed:
    # Split on b"\n" only: str.splitlines() would also split inside a message holding
    # U+2028 or U+0085, which the JSON (ensure_ascii=False) carries unescaped.
    end = data.rfind(b"\n") + 1
    meta: dict[str, Any] | None = None
    history: list[Item] = []
    turn: TurnLines | None = None
    offset = 0
    ordinals = _Ordinals()
    payload: Any
    for number, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        line = _decode(path, raw, number, offset)
        offset += len(raw) + 1
        ordinals.saw(line)
        kind, payload = line["type"], line.get("payload")  # checked: an object for the types read
        if kind == "session_meta" and meta is None:
            meta = payload
        elif kind == "response_item":
            history.append(payload)
            if turn is not None and turn.ended is None:
                turn.entries.append(("item", payload, _timestamp(line)))
        elif kind == "compacted" and payload.get("replacement_history") is not None:
            history = list(payload["replacement_history"])
            if turn is not None and turn.ended is None:
                turn.entries.append(("compacted", None, _timestamp(line)))
        elif kind == "event_msg" and isinstance(payload, dict):
            turn = _journal(turn, payload, line)
    return Parsed(meta, history, end, len(data) - end, turn, ordinals.next(meta))


class _Ordinals:
    """The envelope ``ordinal`` s of a file's lines. Codex's paginated rollouts
    (``session_meta.history_mode: "paginated"``) number every line 0, 1, 2, ... and codex
    refuses to resume one whose last line has none, so a writer appending to such a file
    continues the sequence (``next``). A file with ordinals but no ``history_mode``
    counts as paginated too; one without either is legacy (``None``)."""

    __slots__ = ("highest", "lines", "numbered")

    def __init__(self) -> None:
        self.highest = -1
        self.lines = 0
        self.numbered = False

    def saw(self, line: dict[str, Any]) -> None:
        self.lines += 1
        ordinal = line.get("ordinal")
        if isinstance(ordinal, int) and not isinstance(ordinal, bool):
            self.numbered = True
            self.highest = max(self.highest, ordinal)

    def next(self, meta: dict[str, Any] | None) -> int | None:
        paginated = (meta or {}).get("history_mode") == "paginated"
        if not (paginated or self.numbered):
            return None
        return self.highest + 1 if self.numbered else self.lines


def _journal(turn: TurnLines | None, payload: dict[str, Any], line: dict[str, Any]) -> TurnLines | None:
    """The last turn, after one ``event_msg`` line."""
    event, turn_id = payload.get("type"), payload.get("turn_id")
    if event == "task_started" and isinstance(turn_id, str):
        return TurnLines(turn_id, payload.get("started_at"))
    if turn is None or turn.ended is not None:
        return turn
    if event == "user_message" and turn.prompt is None and isinstance(payload.get("message"), str):
        turn.prompt = payload["message"]
    elif event in _ENDS and turn_id == turn.turn_id:
        turn.ended, turn.ended_at = _ENDS[event], _timestamp(line)
    return turn


def _timestamp(line: dict[str, Any]) -> str | None:
    value = line.get("timestamp")
    return value if isinstance(value, str) else None


def _decode(path: Path, raw: bytes, number: int, offset: int) -> dict[str, Any]:
    """Line ``number`` as a rollout line whose parts ``parse`` reads have their types."""
    try:
        line = loads(raw)
        problem = _line_problem(line)
    except LineProblem as exc:
        problem = str(exc)
    if problem is None:
        return cast(dict[str, Any], line)
    raise InvalidSessionSnapshot(
        f"the rollout {path} is damaged at line {number} (byte {offset}): {problem}. "
        "Only a torn last line (one without its newline) is skipped; repair or remove that line to load it"
    )


def _line_problem(line: object) -> str | None:
    """What is wrong with a parsed line, or None. Lines of other types (codex's
    ``turn_context``, ``event_msg``...) are not read, so only their ``type`` is checked."""
    problem = untyped(line)
    if problem is not None or not isinstance(line, dict):
        return problem
    kind = line["type"]
    if kind not in ("session_meta", "response_item", "compacted"):
        return None
    payload = line.get("payload")
    if not isinstance(payload, dict):
        return f"the payload of this {kind} line is {json_kind(payload)}, not an object"
    if kind == "response_item":
        return _item_problem(payload, "the item")
    if kind == "session_meta":
        return _meta_problem(payload)
    replacement = payload.get("replacement_history")
    if replacement is None:  # codex's older compacted lines carry only a message
        return None
    if not isinstance(replacement, list):
        return f"the replacement_history of this compacted line is {json_kind(replacement)}, not an array"
    for index, item in enumerate(replacement):
        problem = _item_problem(item, f"replacement_history[{index}]")
        if problem is not None:
            return problem
    return None


def _item_problem(item: object, what: str) -> str | None:
    if not isinstance(item, dict):
        return f"{what} is {json_kind(item)}, not an object"
    kind = item.get("type")
    if not isinstance(kind, str):
        return f'{what} has a "type" that is {json_kind(kind)}, not a string'
    if kind in (*CALL_TYPES, *OUTPUT_TYPES) and not isinstance(item.get("call_id"), str):
        return f'{what} ({kind}) has a "call_id" that is {json_kind(item.get("call_id"))}, not a string'
    return None


def _meta_problem(meta: dict[str, Any]) -> str | None:
    for key in ("model", "lineage_id", "cwd"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            return f"session_meta.{key} is {json_kind(meta[key])}, not a string"
    base = meta.get("base_instructions")
    if base is not None and not isinstance(base, dict):
        return f"session_meta.base_instructions is {json_kind(base)}, not an object"
    text = (base or {}).get("text")
    if text is not None and not isinstance(text, str):
        return f"session_meta.base_instructions.text is {json_kind(text)}, not a string"
    return None
