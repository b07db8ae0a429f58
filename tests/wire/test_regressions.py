"""Regression tests for wire/session bugs found by review (each failed before its fix)."""

from __future__ import annotations

import json

import pytest

from trio_agent._errors import ApiError, ProtocolError
from trio_agent._events import AgentEvent, EventKind
from trio_agent._session.history import History
from trio_agent._wire.failures import failure_from_frame
from trio_agent._wire.frames import parse_frame


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "response.output_text.delta", "delta": None},
        {"type": "response.output_text.delta", "delta": 5},
        {"type": "response.output_text.delta", "delta": "x", "output_index": 1.7},
        {"type": "response.output_text.delta", "delta": "x", "output_index": True},
        {"type": "response.completed", "response": {"id": "r", "end_turn": "false"}},
        {"type": "response.completed", "response": {"id": 5}},
        {"type": "response.created", "response": "x"},
        {"type": "response.output_item.done", "item": "not an object"},
    ],
)
def test_wrongly_typed_fields_are_protocol_errors_not_coerced(raw: dict) -> None:
    with pytest.raises(ProtocolError, match="malformed"):
        parse_frame(raw)


def test_jsonl_lines_escape_unicode_line_separators() -> None:
    text = "a\u2028b\u2029c\u0085d"
    line = AgentEvent(EventKind.ASSISTANT_DELTA, {"text": text}, 1, "s").to_json_line()
    assert len(line.splitlines()) == 1
    assert json.loads(line)["payload"]["text"] == text


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "response.failed", "response": {"id": "r", "error": None}},
        {"type": "error", "message": "x"},
    ],
)
def test_failure_code_is_never_the_frame_type(raw: dict) -> None:
    assert failure_from_frame(raw).code is None


def test_boolean_retry_after_is_ignored() -> None:
    error = failure_from_frame({"type": "error", "error": {"code": "rate_limit_exceeded", "retry_after": True}})
    assert error.retry_after is None
    assert error.retryable


def test_wrapped_http_status_and_headers_are_honoured() -> None:
    raw = {
        "type": "error",
        "status": 429,
        "error": {"type": "requests", "message": "slow down please"},
        "headers": {"Retry-After": "3"},
    }
    error = failure_from_frame(raw)
    assert isinstance(error, ApiError)
    assert error.error_class == "api_rate_limit"
    assert error.retryable
    assert error.retry_after == 3.0
    assert error.status == 429
    server = failure_from_frame({"type": "error", "status": 503, "error": {"message": "down"}})
    assert server.error_class == "api_server" and server.retryable


def test_history_since_accepts_negative_starts_like_slicing() -> None:
    history = History([{"n": 1}, {"n": 2}]).extend([{"n": 3}])
    assert history.since(-1) == [{"n": 3}]
    assert history.since(-10) == [{"n": 1}, {"n": 2}, {"n": 3}]
