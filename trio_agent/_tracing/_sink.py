"""The event sink of a traced agent: every emitted event is also shown to its tracer.

Tracing observes the runtime's own events (``EventSink.emit``) instead of adding hook
calls all over it. An agent without tracing gets the plain ``EventSink``, so tracing
off costs nothing on the per-event (and per-frame: ``api.event``) path.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol

import trio

from .._events import AgentEvent, EventKind, EventSink

__all__ = ["AgentObserver", "TracedSink"]


class AgentObserver(Protocol):
    def on_event(self, event: AgentEvent) -> None: ...

    def turn_accepted(self, turn_id: int) -> None: ...

    def close(self) -> None: ...


class TracedSink(EventSink):
    """``EventSink`` that also feeds an ``AgentObserver`` (synchronously, in the emitting
    task, so the observer sees the emitter's context). A failing observer is dropped
    with a ``RuntimeWarning``: tracing never changes what the agent does."""

    def __init__(self, session_id: str, observer: AgentObserver, *, api_events: bool = True) -> None:
        super().__init__(session_id)
        self._observer: AgentObserver | None = observer
        # AgentConfig(api_events=False): the model client still reports frames, for the
        # tracer's sake (interrupts), but they never reach agent.events nor take a seq.
        self._api_events = api_events

    def emit(self, kind: EventKind, payload: dict[str, Any], turn_id: int | None = None) -> AgentEvent:
        if kind is EventKind.API_EVENT and not self._api_events:
            event = AgentEvent(kind, payload, 0, self.session_id, turn_id, trio.current_time())
        else:
            event = super().emit(kind, payload, turn_id)
        if self._observer is not None:
            try:
                self._observer.on_event(event)
            except Exception as exc:
                self._failed(exc)
        return event

    def defer(self, emit_later: Callable[[], object]) -> None:
        # Spans are opened in the emitting task's context and at its time: never later.
        emit_later()

    def turn_accepted(self, turn_id: int) -> None:
        """Called by the turn queue in the task that accepted the turn."""
        if self._observer is not None:
            try:
                self._observer.turn_accepted(turn_id)
            except Exception as exc:
                self._failed(exc)

    def close(self) -> None:
        super().close()
        observer, self._observer = self._observer, None
        if observer is not None:
            try:
                observer.close()
            except Exception as exc:
                self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self._observer = None
        warnings.warn(
            f"trio_agent: tracing stopped for agent session {self.session_id} after an internal error: {exc!r}",
            RuntimeWarning,
            stacklevel=3,
        )
