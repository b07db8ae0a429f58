"""OpenTelemetry tracing of agents (optional: the ``[otel]`` extra).

Importing this package imports no OpenTelemetry module: ``Tracing`` (``_settings``) does
when it is constructed, and ``open_event_sink`` only for a config that has one. Neither
``_settings`` nor the traced sink is imported with the runtime: an agent without
tracing never needs them. The runtime calls
in here at two points: ``open_event_sink`` when an agent is built (the agent's span
starts, and its events feed the tracer from then on) and the turn queue's
``accept_hook`` (the span current where a prompt was accepted becomes its turn's
parent). Everything else is derived from the agent's events (``_observer``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._events import EventSink

if TYPE_CHECKING:
    from .._config import AgentConfig

__all__ = ["accept_hook", "open_event_sink"]


def open_event_sink(config: AgentConfig, *, path: str, parent_id: str | None, forked: bool) -> EventSink:
    """The agent's event sink: a plain ``EventSink`` unless ``config.tracing`` is set,
    else one that feeds a new ``AgentTracer`` (whose agent span starts now, as a child
    of the span current in the calling task)."""
    if config.tracing is None:
        return EventSink(config.session_id)
    from ._observer import AgentTracer  # lazy: the first OpenTelemetry import
    from ._settings import Tracing
    from ._sink import TracedSink

    tracing = config.tracing
    assert isinstance(tracing, Tracing)  # AgentConfig checks it; its field names a protocol

    if forked:
        origin = "fork"
    elif parent_id is not None:
        origin = "spawn"
    else:
        origin = "resume" if config.resume is not None else "root"
    try:
        tracer = AgentTracer(config, tracing, path=path, parent_id=parent_id, origin=origin)
    except Exception as exc:  # e.g. a provider that fails: the agent runs untraced
        warnings.warn(f"trio_agent: tracing is off for agent session {config.session_id}: the tracer could not "
                      f"start ({exc!r})", RuntimeWarning, stacklevel=2)
        return EventSink(config.session_id)
    return TracedSink(config.session_id, tracer, api_events=config.api_events)


def accept_hook(sink: EventSink) -> Callable[[int], None] | None:
    """What the turn queue calls with each accepted turn id (None without tracing)."""
    if type(sink) is EventSink:
        return None  # untraced (and _sink never imported)
    from ._sink import TracedSink

    return sink.turn_accepted if isinstance(sink, TracedSink) else None
