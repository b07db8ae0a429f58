"""Counters for terminal payloads: the agent's transport counters and per-turn stats.

The terminal event reports transport counters as the delta since the previous
terminal event of a turn that ran (``TransportStats`` subtraction is the one
definition of such a delta, token usage included), so the first turn includes the
startup warmup (``connection_attempts: 1, response_attempts: 2``) and later turns on
the same socket report ``0`` and ``1`` (SPEC sec. 3).
"""

from __future__ import annotations

from typing import Any

import attrs

from .._wire.usage import TokenUsage

__all__ = ["TransportStats", "TurnStats"]

_NO_USAGE = TokenUsage()


@attrs.define
class TransportStats:
    connection_attempts: int = 0
    websocket_reconnects: int = 0
    response_attempts: int = 0
    response_retries: int = 0
    connection_duration_ns: int = 0
    retry_backoff_duration_ns: int = 0
    warmup_duration_ns: int = 0
    warmup_usage: TokenUsage = TokenUsage()

    def copy(self) -> TransportStats:
        return TransportStats(*self._values())

    def __sub__(self, start: TransportStats) -> TransportStats:
        """What happened since ``start`` (an earlier copy)."""
        return TransportStats(*(a - b for a, b in zip(self._values(), start._values(), strict=True)))

    def _values(self) -> tuple[Any, ...]:
        # Every field, in order (a test holds this to attrs.fields); spelled out because
        # attrs.astuple/evolve cost more than the terminal payload they serve.
        return (
            self.connection_attempts, self.websocket_reconnects, self.response_attempts, self.response_retries,
            self.connection_duration_ns, self.retry_backoff_duration_ns, self.warmup_duration_ns, self.warmup_usage,
        )

    def counters_json(self) -> dict[str, Any]:
        return {
            "connection_attempts": self.connection_attempts,
            "websocket_reconnects": self.websocket_reconnects,
            "response_attempts": self.response_attempts,
            "response_retries": self.response_retries,
            "connection_duration_ns": self.connection_duration_ns,
            "retry_backoff_duration_ns": self.retry_backoff_duration_ns,
        }


class TurnStats:
    """A turn's counters, updated in place as it runs."""

    __slots__ = (  # noqa: RUF023  # field order
        "model_calls", "steers", "compactions", "tool_calls", "model_duration_ns", "tool_work_duration_ns",
        "tool_wall_duration_ns", "usage", "last_response_id",
    )

    def __init__(self) -> None:
        self.model_calls = 0
        self.steers = 0
        self.compactions = 0
        self.tool_calls = 0
        self.model_duration_ns = 0
        self.tool_work_duration_ns = 0
        self.tool_wall_duration_ns = 0
        self.usage = _NO_USAGE
        self.last_response_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "steers": self.steers,
            "compactions": self.compactions,
            "tool_calls": self.tool_calls,
        }
