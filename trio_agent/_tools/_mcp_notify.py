"""An MCP server's progress notifications and log messages, as agent events.

A tool call carries a progress token (the SDK adds one when a progress callback is
given), and the server may answer with ``notifications/progress`` while it works: each
becomes an ``mcp.progress`` event of that nested call. A server's
``notifications/message`` (its log) becomes ``mcp.log``; the client opts in at
``LOG_LEVEL`` (``info``: a 2026-07-28 server sends nothing without the opt-in, and
debug chatter is the server's business) -- an older server sends what its own level
says.

Both are the server's data, so both are bounded: a server that sends thousands of
notifications a second costs the agent a few events a second. ``RateGate`` is a
token bucket on Trio's clock (``BURST`` events at once, then ``RATE`` a second): what
it refuses is dropped and counted, and the next event that passes says how many
(``dropped``). Strings are cut (a progress message at 1,000 characters, a log string
at 4,000; log data that is not a string at 4,000 characters of JSON).
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from .._events import EventKind

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT
    from mcp_types import LoggingMessageNotificationParams

__all__ = ["BURST", "LOG_LEVEL", "RATE", "RateGate", "log_callback", "progress_callback"]

BURST = 10
RATE = 5.0  # events a second, once the burst is spent
LOG_LEVEL = "info"
_MAX_MESSAGE = 1000
_MAX_LOG = 4000
_LEVELS = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})


class RateGate:
    """A token bucket: ``admit()`` is None for an event to drop, else how many were
    dropped since the last admitted one (see the module docstring)."""

    def __init__(self, *, burst: int = BURST, rate: float = RATE) -> None:
        self._burst = burst
        self._rate = rate
        self._tokens = float(burst)
        self._last: float | None = None
        self._dropped = 0

    def admit(self) -> int | None:
        now = trio.current_time()
        if self._last is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens < 1:
            self._dropped += 1
            return None
        self._tokens -= 1
        dropped, self._dropped = self._dropped, 0
        return dropped


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def progress_callback(server: str, tool: str, emit: Callable[[dict[str, Any]], None]) -> ProgressFnT:
    """The SDK's ``progress_callback`` for one call of ``server``'s ``tool``: ``emit``
    gets each admitted notification's ``mcp.progress`` payload (less ``call_id``)."""
    gate = RateGate()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        value = _number(progress)
        if value is None:
            return  # not a number the event could carry: the server's mistake, dropped
        dropped = gate.admit()
        if dropped is None:
            return
        payload: dict[str, Any] = {"server": server, "tool": tool, "progress": value}
        if (limit := _number(total)) is not None:
            payload["total"] = limit
        if isinstance(message, str) and message:
            payload["message"] = message[:_MAX_MESSAGE]
        if dropped:
            payload["dropped"] = dropped
        emit(payload)

    return on_progress


def _log_data(data: object) -> object:
    if isinstance(data, str):
        return data[:_MAX_LOG]
    try:
        text = json.dumps(data)
    except (TypeError, ValueError):
        return str(data)[:_MAX_LOG]
    return data if len(text) <= _MAX_LOG else text[:_MAX_LOG]


def log_callback(server: str, emit: Callable[..., Any]) -> Callable[[LoggingMessageNotificationParams],
                                                                      Awaitable[None]]:
    """The SDK's ``logging_callback`` for ``server``: ``mcp.log`` events, rate-bounded."""
    gate = RateGate()

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        dropped = gate.admit()
        if dropped is None:
            return
        level = str(params.level)
        payload: dict[str, Any] = {"server": server, "level": level if level in _LEVELS else "info",
                                   "data": _log_data(params.data)}
        if isinstance(params.logger, str) and params.logger:
            payload["logger"] = params.logger[:200]
        if dropped:
            payload["dropped"] = dropped
        emit(EventKind.MCP_LOG, payload, None)

    return on_log
