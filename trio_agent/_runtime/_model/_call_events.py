"""Payloads of the model-call events (nanocodex sec. 3.2), built in one place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ..._errors import ResponsesError
from ..._events import EventKind
from ..._units import ns
from ..._wire.stream import AssistantMessageDone, ReasoningDelta, ResponseOutcome, TextDelta

__all__ = [
    "attempt_failed",
    "attempt_started",
    "call_completed",
    "delta_payload",
    "omit_none",
    "retrying",
    "stream_event",
    "text_payload",
]

Emit = Callable[..., Any]


def omit_none(payload: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    kept = {}  # (a loop: no comprehension's code object on every model call)
    for k, v in payload.items():
        if v is not None or k in keep:
            kept[k] = v
    return kept


def text_payload(event: TextDelta | AssistantMessageDone, call_index: int | None) -> dict[str, Any]:
    """The payload of ``assistant.delta`` and ``assistant.message`` (absent fields omitted,
    in this order)."""
    return delta_payload(call_index, event.item_id, event.phase, event.text)


def delta_payload(call_index: int | None, item_id: str | None, phase: str | None, text: str) -> dict[str, Any]:
    """``text_payload`` from the fields. Built by hand, the usual shapes as one literal
    each: it is the per-delta path."""
    if call_index is not None and item_id is not None:
        if phase is None:
            return {"model_call_index": call_index, "item_id": item_id, "text": text}
        return {"model_call_index": call_index, "item_id": item_id, "phase": phase, "text": text}
    payload: dict[str, Any] = {}
    if call_index is not None:
        payload["model_call_index"] = call_index
    if item_id is not None:
        payload["item_id"] = item_id
    if phase is not None:
        payload["phase"] = phase
    payload["text"] = text
    return payload


def stream_event(emit: Emit, event: Any, call_index: int | None, turn_id: int | None) -> None:
    """``assistant.delta`` / ``assistant.message`` / ``reasoning.summary.delta``."""
    if isinstance(event, TextDelta | AssistantMessageDone):
        kind = EventKind.ASSISTANT_DELTA if isinstance(event, TextDelta) else EventKind.ASSISTANT_MESSAGE
        emit(kind, text_payload(event, call_index), turn_id)
    elif isinstance(event, ReasoningDelta):
        emit(EventKind.REASONING_SUMMARY_DELTA, {"model_call_index": call_index, "text": event.text}, turn_id)


def attempt_started(
    emit: Emit, body: dict[str, Any], *, phase: str, call_index: int | None, attempt: int, max_attempts: int,
    generation: int, turn_id: int | None,
) -> None:
    payload = {
        "phase": phase,
        "model_call_index": call_index,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "replay_mode": "incremental" if "previous_response_id" in body else "full_history",
        "previous_response_id": body.get("previous_response_id"),
        "connection_generation": generation,
    }
    emit(EventKind.MODEL_ATTEMPT_STARTED, omit_none(payload, keep=("model_call_index",)), turn_id)


def call_completed(
    emit: Emit, outcome: ResponseOutcome, *, model: str, call_index: int | None, attempt: int, generation: int,
    started: float, sent: float, first_event: float | None, first_output: float | None, turn_id: int | None,
    now: float | None = None,
) -> None:
    """``duration_ns`` covers the whole call (every attempt and backoff, like
    ``model.call.failed``); the first-event/first-output times count from when the
    successful ``attempt`` was sent (``now``: the caller's clock reading, else read here)."""
    if now is None:
        now = trio.current_time()
    emit(
        EventKind.MODEL_CALL_COMPLETED,
        {
            "call_index": call_index,
            "model": model,
            "response_id": outcome.response_id,
            "attempt": attempt,
            "connection_generation": generation,
            "status": outcome.status,
            "duration_ns": ns(now - started),
            "time_to_first_event_ns": ns((first_event or now) - sent),
            "time_to_first_output_ns": ns(first_output - sent) if first_output else None,
            "tool_calls": len(outcome.tool_calls),
            "usage": outcome.usage_raw,
        },
        turn_id,
    )


def _failure(
    exc: ResponsesError, call_index: int, attempt: int, max_attempts: int, generation: int, phase: str
) -> dict[str, Any]:
    return {
        "phase": phase, "model_call_index": call_index, "attempt": attempt, "max_attempts": max_attempts,
        "failure_phase": exc.failure_phase, "error_class": exc.error_class, "connection_generation": generation,
        "error": str(exc),
    }


def attempt_failed(
    emit: Emit, exc: ResponsesError, *, call_index: int, attempt: int, max_attempts: int, started: float,
    retryable: bool, generation: int, turn_id: int, phase: str = "generation",
) -> None:
    payload = _failure(exc, call_index, attempt, max_attempts, generation, phase)
    payload.update(duration_ns=ns(trio.current_time() - started), retryable=retryable)
    emit(EventKind.MODEL_ATTEMPT_FAILED, payload, turn_id)


def retrying(
    emit: Emit, exc: ResponsesError, *, call_index: int, attempt: int, max_attempts: int, delay: float,
    new_socket: bool, generation: int, turn_id: int, phase: str = "generation",
) -> None:
    payload = _failure(exc, call_index, attempt, max_attempts, generation, phase)
    payload.update(
        next_attempt=attempt + 1, delay_ns=ns(delay), server_requested_delay=exc.retry_after is not None,
        opens_new_socket=new_socket, replay_mode="full_history",
    )
    emit(EventKind.MODEL_ATTEMPT_RETRYING, payload, turn_id)
