"""Which agent events make messages (``ThreadMapper.on_event``'s reach, kind by kind),
decided from the event alone: ``makes_messages`` is the thread manager's ``relayed`` in
``serve``, run for every event of every running thread, so an event that can make no
message never reaches the pump (issue 30, item 3). Kept apart from ``_items``, whose
``_HANDLERS`` must map exactly ``HANDLED`` (tests/serve/test_silent_events checks it).
"""

from __future__ import annotations

from typing import Any

from .._events import AgentEvent, EventKind

__all__ = ["HANDLED", "MAPPED", "TURN_EDGES", "completed_frame", "makes_messages", "silent"]

# The kinds ``ThreadMapper`` handles itself (``_edge``); the others go to the turn's mapper.
TURN_EDGES = frozenset({
    EventKind.RUN_STARTED, EventKind.RUN_STEERED, EventKind.RUN_COMPLETED, EventKind.RUN_FAILED,
    EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_RESOLVED,
})
# The kinds the turn's mapper has a handler for (``_items._HANDLERS``' keys).
HANDLED = frozenset({
    EventKind.ASSISTANT_DELTA, EventKind.ASSISTANT_MESSAGE, EventKind.REASONING_SUMMARY_DELTA,
    EventKind.MODEL_CALL_COMPLETED, EventKind.MODEL_CALL_FAILED, EventKind.MODEL_ATTEMPT_RETRYING,
    EventKind.RUN_ERROR, EventKind.MODEL_COMPACTION_STARTED, EventKind.MODEL_COMPACTION_COMPLETED,
    EventKind.MODEL_COMPACTION_FAILED, EventKind.TOOL_CALL, EventKind.TOOL_RESULT, EventKind.TOOL_PROGRESS,
    EventKind.MCP_PROGRESS, EventKind.PLAN_UPDATED, EventKind.API_EVENT,
})
# What ``ThreadMapper.on_event`` maps; any other kind makes no message (``silent``).
MAPPED = HANDLED | TURN_EDGES
_API_EVENT = EventKind.API_EVENT  # (a module global: ``EventKind.X`` is a descriptor call on 3.11)


def completed_frame(payload: dict[str, Any]) -> dict[str, Any] | None:
    """An ``api.event``'s frame when it is an inbound ``response.completed``, the one
    frame the mapper reads (``_items.TurnMapper._api_event``)."""
    frame = payload.get("event")
    if payload.get("direction") != "inbound" or not isinstance(frame, dict):
        return None
    return frame if frame.get("type") == "response.completed" else None


def silent(event: AgentEvent) -> bool:
    """True when ``ThreadMapper.on_event`` makes nothing of ``event`` whatever the state
    (its kind is not mapped; an ``api.event`` frame other than ``response.completed``):
    the pump passes it by at once. Most of a warm turn's events are such (15 of 31 a
    10-delta answer: one ``api.event`` per frame), each a mapping and a publish of nothing
    (issue 30, item 3)."""
    return not makes_messages(event)


def makes_messages(event: AgentEvent) -> bool:
    """``not silent(event)``, with ``completed_frame``'s tests inline (per event)."""
    kind = event.kind
    if kind is _API_EVENT:
        payload = event.payload
        frame = payload.get("event")
        return (payload.get("direction") == "inbound" and isinstance(frame, dict)
                and frame.get("type") == "response.completed")
    return kind in MAPPED
