"""The ``wait`` tool's arguments, checked (pure): model-controlled data, so anything
malformed is a clear failed output, never an exception.

``cell_id`` is required (an integer or its decimal string, as ``exec`` reported it);
``yield_time_ms`` (default 10,000) and ``max_tokens`` (default: the cell's own limit)
are optional whole numbers from 0 to 2**53-1 (JavaScript's safe integers, as in the
``exec`` pragma); ``null`` means the default. ``terminate`` must be a boolean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from ._pragma import MAX_SAFE_INTEGER

__all__ = ["WaitArguments", "parse_wait_arguments"]

DEFAULT_YIELD_MS = 10_000


@attrs.frozen
class WaitArguments:
    cell_id: int
    yield_time_ms: int = DEFAULT_YIELD_MS
    max_tokens: int | None = None
    terminate: bool = False


def _whole(value: object) -> int | None:
    """``value`` as a safe non-negative integer, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit() or len(text) > 16:
            return None
        value = int(text)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_SAFE_INTEGER:
        return value
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_wait_arguments(arguments: object) -> WaitArguments | str:
    """The checked arguments, or the message of a failed ``wait`` output."""
    if not isinstance(arguments, Mapping):
        return f"wait takes a JSON object such as {{\"cell_id\": \"1\"}}, got {_shown(arguments)}"
    cell_id = _whole(arguments.get("cell_id"))
    if cell_id is None:
        return f"wait needs a numeric cell_id (as returned by exec), got {_shown(arguments.get('cell_id'))}"
    numbers: dict[str, int | None] = {}
    for key in ("yield_time_ms", "max_tokens"):
        raw = arguments.get(key)
        numbers[key] = None if raw is None else _whole(raw)
        if raw is not None and numbers[key] is None:
            return f"wait: {key} must be a whole number from 0 to {MAX_SAFE_INTEGER}, got {_shown(raw)}"
    terminate = arguments.get("terminate", False)
    if terminate is None:
        terminate = False
    if not isinstance(terminate, bool):
        return f"wait: terminate must be true or false, got {_shown(terminate)}"
    yield_ms = numbers["yield_time_ms"]
    return WaitArguments(
        cell_id, DEFAULT_YIELD_MS if yield_ms is None else yield_ms, numbers["max_tokens"], terminate
    )
