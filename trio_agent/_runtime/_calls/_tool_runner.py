"""Run top-level tool calls and turn their results into history items and events.

A call is supported when it has no namespace and names ``exec``, ``wait`` (with the
built-ins) or a user tool; anything else is answered with the reference failure text
(``unsupported custom tool call: NAME`` / ``unsupported call: NAMESPACE::NAME``) and a
``tool.result`` with status ``failed``, and the turn goes on (SPEC sec. 7). A call item
whose ``name`` or ``namespace`` is not a string is answered the same way, with what was
wrong (``call_problem``), and never reaches the routing. Handlers run in the caller's
cancel scope: cancelling the turn cancels them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..._events import EventKind
from ..._record import Record
from ..._units import ns
from .._counters import TurnStats

__all__ = ["Runner", "ToolOutcome", "call_arguments", "call_problem", "run_call", "to_output", "tool_name"]


class ToolOutcome(Record):
    __slots__ = ("output", "status", "extra_items")  # noqa: RUF023  # field order

    def __init__(
        self, output: str | list[dict[str, Any]], status: str, extra_items: tuple[dict[str, Any], ...] = ()
    ) -> None:
        self.output = output
        self.status = status  # completed | failed
        self.extra_items = extra_items


def call_arguments(call: dict[str, Any]) -> Any:
    """The call's input: raw text for custom calls, decoded JSON (or text) for functions."""
    if call.get("type") == "custom_tool_call":
        return call.get("input", "")
    raw = call.get("arguments", "")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def call_problem(call: dict[str, Any]) -> str | None:
    """What makes a call item impossible to route (None: nothing): a ``name`` or a
    ``namespace`` that is not a string."""
    name, namespace = call.get("name", ""), call.get("namespace")
    kind = call.get("type")
    if not isinstance(name, str):
        return f"malformed {kind} item: its name must be a string, got {type(name).__name__}"
    if namespace is not None and not isinstance(namespace, str):
        return f"malformed {kind} item: its namespace must be a string, got {type(namespace).__name__}"
    return None


def tool_name(call: dict[str, Any]) -> str:
    """The call's tool name for events ("" when the item has no usable one)."""
    name = call.get("name", "")
    return name if isinstance(name, str) else ""


def unsupported_text(call: dict[str, Any]) -> str:
    name = f"{call.get('namespace') or ''}{call.get('name', '')}"
    if call.get("type") == "custom_tool_call":
        return f"unsupported custom tool call: {name}"
    return f"unsupported call: {name}"


class UnencodableValue(ValueError):
    """A tool returned a value JSON cannot encode (bytes, a set, a dict with non-string
    keys, a circular structure, NaN...)."""


def json_text(value: Any) -> str:
    """Compact JSON of a tool value; ``UnencodableValue`` when JSON cannot hold it."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnencodableValue(
            f"a value JSON cannot encode ({type(exc).__name__}: {exc}); "
            "return a string, a list of input_text/input_image items, or plain JSON data"
        ) from None


def to_output(value: Any) -> str | list[dict[str, Any]]:
    """A handler's return value as a tool output body (``UnencodableValue`` if it has none)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, dict) and "type" in v for v in value):
        json_text(value)  # the items must be sendable too
        return value
    return json_text(value)


Runner = Callable[[dict[str, Any], Any], Awaitable[ToolOutcome]]


async def run_call(
    call: dict[str, Any],
    resolve: Callable[[dict[str, Any]], Runner | None],
    *,
    emit: Callable[..., Any],
    turn_id: int,
    model_call_index: int,
    stats: TurnStats,
) -> ToolOutcome:
    """Emit ``tool.call``, run the call with what ``resolve`` routes it to (or answer it
    as malformed or unsupported), emit ``tool.result``."""
    call_id = call.get("call_id", "")
    name = tool_name(call)
    arguments = call_arguments(call)
    emit(
        EventKind.TOOL_CALL,
        {"call_id": call_id, "tool": name, "arguments": arguments, "model_call_index": model_call_index},
        turn_id,
    )
    stats.tool_calls += 1
    start = trio.current_time()
    problem = call_problem(call)
    runner = resolve(call) if problem is None else None
    if runner is None:
        outcome = ToolOutcome(problem or unsupported_text(call), "failed")
        duration = 0
    else:
        outcome = await runner(call, arguments)
        duration = ns(trio.current_time() - start)
    stats.tool_wall_duration_ns += duration
    emit(
        EventKind.TOOL_RESULT,
        {"call_id": call_id, "tool": name, "status": outcome.status, "duration_ns": duration,
         "result": outcome.output},
        turn_id,
    )
    return outcome
