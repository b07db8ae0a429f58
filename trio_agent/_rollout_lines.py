"""Reading a rollout's lines back: the reader's half of ``_rollout``.

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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ._errors import InvalidSessionSnapshot
from ._json_lines import LineProblem, json_kind, loads, untyped
from ._record import Record

__all__ = ["CALL_TYPES", "OUTPUT_TYPES", "Parsed", "parse"]

Item = dict[str, Any]
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")


class Parsed(Record):
    __slots__ = ("meta", "history", "end", "torn")  # noqa: RUF023  # field order

    def __init__(self, meta: dict[str, Any] | None, history: list[Item], end: int, torn: int) -> None:
        self.meta = meta
        self.history = history
        self.end = end  # bytes of whole lines: where the next append belongs
        self.torn = torn  # bytes after ``end`` without a newline (a write cut short), 0 if none


def parse(path: Path, data: bytes) -> Parsed:
    # Split on b"\n" only: str.splitlines() would also split inside a message holding
    # U+2028 or U+0085, which the JSON (ensure_ascii=False) carries unescaped.
    end = data.rfind(b"\n") + 1
    meta: dict[str, Any] | None = None
    history: list[Item] = []
    offset = 0
    payload: Any
    for number, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        line = _decode(path, raw, number, offset)
        offset += len(raw) + 1
        kind, payload = line["type"], line.get("payload")  # checked: an object for the types read
        if kind == "session_meta" and meta is None:
            meta = payload
        elif kind == "response_item":
            history.append(payload)
        elif kind == "compacted" and payload.get("replacement_history") is not None:
            history = list(payload["replacement_history"])
    return Parsed(meta, history, end, len(data) - end)


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
