"""A turn's lifecycle events: ``run.started``, ``run.steered``, ``run.error`` and exactly
one terminal ``run.completed``/``run.failed`` (payloads: nanocodex sec. 3.3).

``TurnReporter`` is shared by the turn queue (a queued turn cancelled before it ran
ends at once) and the turn runner. Transport counters in a terminal payload are the
delta since the previous terminal event of a turn that *ran*; a turn that never ran
reports zeros and leaves that mark alone, so it cannot take counters that belong to
the turn running beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..._config import AgentConfig, Transport
from ..._errors import AgentError
from ..._events import EventKind
from ..._jsontext import dumps, scrub_surrogates
from ..._units import ns
from ..._wire.usage import TokenUsage
from .._counters import TransportStats, TurnStats
from .._identity import TurnJournal

if TYPE_CHECKING:
    from .._observers import Observers
    from ._turn import TurnState

__all__ = ["TurnReporter"]

Emit = Callable[..., Any]


def _utf8_size(text: str) -> int:
    """Bytes of ``text`` as sent (lone surrogates count as the U+FFFD they become)."""
    if text.isascii():
        return len(text)
    return len(scrub_surrogates(text).encode())


def _endpoint(config: AgentConfig) -> str:
    if config.responses.transport is Transport.WEBSOCKET:
        return config.websocket_url.split("?", 1)[0]
    return config.api_base_url + "/responses"


class TurnReporter:
    def __init__(
        self, config: AgentConfig, workspace: Path, emit: Emit, transport: TransportStats,
        defer: Callable[[Callable[[], object]], None] | None = None, observers: Observers | None = None,
    ) -> None:
        self.journal: TurnJournal | None = None  # the rollout's per-turn lines, when there is a rollout
        self._observers = observers  # told each turn's end (status, final message): the observer seam
        self._config = config
        self._workspace = workspace
        self._emit = emit
        self._defer = defer  # run.started is emitted once the first request is on the wire (EventSink.defer)
        self._transport = transport
        self._mark = _counters(transport)
        self._now: Callable[[], float] = self._bind_clock
        # ``run.started`` differs per turn only in ``effort`` and ``instruction_bytes``: the
        # rest (in this key order) is built once and copied.
        self._started: dict[str, Any] = {
            "mode": "openai_model",
            "model": config.model,
            "reasoning_mode": "standard",
            "effort": None,
            "transport": config.responses.transport.value,
            "orchestration": "local_code_mode",
            "websocket_url": _endpoint(config),
            "workspace": str(workspace),
            "instruction_bytes": 0,
        }

    def _bind_clock(self) -> float:
        # ``trio.current_time()`` is three calls deep; the reporter lives in one run, so
        # its clock is looked up once, at the first terminal payload.
        self._now = trio.lowlevel.current_clock().current_time
        return self._now()

    def started(self, state: TurnState) -> None:
        if self._defer is not None and state.ran:
            self._defer(partial(self._emit_started, state))
        else:
            self._emit_started(state)
        if self.journal is not None and state.ran:
            self.journal.started(state.turn_id, state.prompt.text if state.prompt is not None else None)

    def _emit_started(self, state: TurnState) -> None:
        payload = self._started.copy()
        payload["model"] = state.settings.model  # the model the turn was accepted with (Agent.set_model)
        payload["effort"] = state.settings.effort
        payload["instruction_bytes"] = _utf8_size(
            state.prompt.text if state.prompt is not None else dumps(state.items or state.mail)
        )
        self._emit(EventKind.RUN_STARTED, payload, state.turn_id)

    def steered(self, state: TurnState, index: int, text: str) -> None:
        self._emit(
            EventKind.RUN_STEERED, {"steer_index": index, "instruction_bytes": _utf8_size(text)}, state.turn_id
        )

    def completed(self, state: TurnState, stats: TurnStats, start: float, final_message: str = "") -> None:
        self._emit(EventKind.RUN_COMPLETED, self._terminal(state, stats, start, "completed"), state.turn_id)
        state.terminal_reported()
        if self.journal is not None:
            self.journal.finished(state.turn_id, "completed", final_message)
        if self._observers is not None:
            self._observers.ended(state.turn_id, "completed", final_message)

    def failed(self, state: TurnState, stats: TurnStats, start: float, error: AgentError, *, status: str) -> None:
        """A failure: ``run.error`` then ``run.failed`` (``status: "failed"``), as nanocodex
        does. A cancellation is not an error (issue 12): ``run.failed`` alone, with
        ``status: "cancelled"`` and the cancellation's ``reason``."""
        payload = self._terminal(state, stats, start, status)
        if status == "cancelled":
            payload["reason"] = str(error)
        else:
            self._emit(EventKind.RUN_ERROR, {"message": str(error)}, state.turn_id)
        self._emit(EventKind.RUN_FAILED, payload, state.turn_id)
        state.terminal_reported()
        if self.journal is not None:
            self.journal.finished(state.turn_id, status, None)
        if self._observers is not None:
            self._observers.ended(state.turn_id, status, None)

    def cancelled_without_running(self, state: TurnState, error: AgentError) -> None:
        """The events of a turn cancelled before it ran: ``run.started``, then
        ``run.failed`` with status ``cancelled``, its ``reason`` and zero counters."""
        self.started(state)
        payload = self._payload(state, TurnStats(), trio.current_time(), "cancelled", _NO_COUNTERS, _NO_COUNTERS)
        payload["reason"] = str(error)
        self._emit(EventKind.RUN_FAILED, payload, state.turn_id)
        state.terminal_reported()
        if self._observers is not None:
            self._observers.ended(state.turn_id, "cancelled", None)

    def _terminal(self, state: TurnState, stats: TurnStats, start: float, status: str) -> dict[str, Any]:
        now = _counters(self._transport)
        mark, self._mark = self._mark, now
        return self._payload(state, stats, start, status, now, mark)

    def _payload(
        self, state: TurnState, stats: TurnStats, start: float, status: str, now: _Counters, mark: _Counters
    ) -> dict[str, Any]:
        """The terminal payload; the transport counters are ``now`` minus ``mark`` (what
        happened since the previous terminal event of a turn that ran)."""
        elapsed = self._now() - start
        warmup = _NO_USAGE if now[7] is mark[7] else now[7] - mark[7]  # (the usual case: no warmup since)
        return {
            "status": status,
            "model": state.settings.model,
            "reasoning_mode": "standard",
            "effort": state.settings.effort,
            "transport": self._started["transport"],  # (the config's, read once: an enum's value is a property)
            "orchestration": "local_code_mode",
            "duration_ms": int(elapsed * 1000),
            "duration_ns": ns(elapsed),
            "model_calls": stats.model_calls,
            "steers": stats.steers,
            "compactions": stats.compactions,
            "tool_calls": stats.tool_calls,
            "connection_attempts": now[0] - mark[0],
            "websocket_reconnects": now[1] - mark[1],
            "response_attempts": now[2] - mark[2],
            "response_retries": now[3] - mark[3],
            "connection_duration_ns": now[4] - mark[4],
            "retry_backoff_duration_ns": now[5] - mark[5],
            "model_duration_ns": stats.model_duration_ns,
            "warmup_duration_ns": now[6] - mark[6],
            "tool_work_duration_ns": stats.tool_work_duration_ns,
            "tool_wall_duration_ns": stats.tool_wall_duration_ns,
            "usage": stats.usage.to_json(),
            "warmup_usage": warmup.to_json(),
            "last_response_id": stats.last_response_id,
            "cost_usd": None,
            "cost_status": "not_reported_by_responses_api",
        }


# A terminal payload's transport counters, read straight off ``TransportStats`` (in the
# order of its fields; building two TransportStats to subtract them cost more than the
# rest of the payload): connection attempts, reconnects, response attempts, retries,
# connection and backoff time, warmup time, warmup usage.
_Counters = tuple[int, int, int, int, int, int, int, TokenUsage]
_NO_USAGE = TokenUsage()
_NO_COUNTERS: _Counters = (0, 0, 0, 0, 0, 0, 0, _NO_USAGE)


def _counters(t: TransportStats) -> _Counters:
    return (t.connection_attempts, t.websocket_reconnects, t.response_attempts, t.response_retries,
            t.connection_duration_ns, t.retry_backoff_duration_ns, t.warmup_duration_ns, t.warmup_usage)
