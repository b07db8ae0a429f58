"""failure_from_frame: API failure frames -> ResponsesError subclasses and retry classes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_agent import ApiError, CheckpointMissing, InvalidImageRequest, ResponsesError, UsageLimitExceeded
from trio_agent._wire.failures import failure_from_frame

INVALID_IMAGE_TEXT = "The image data you provided does not represent a valid image"


def error_frame(**error: Any) -> dict[str, Any]:
    return {"type": "error", "error": error}


def failed_frame(**error: Any) -> dict[str, Any]:
    return {"type": "response.failed", "response": {"id": "resp-1", "status": "failed", "error": error}}


# (frame, class, error_class, retryable, code)
TABLE: list[tuple[dict[str, Any], type[ResponsesError], str, bool, str | None]] = [
    # invalid images: by message text or by code; never retried
    (
        failed_frame(code="invalid_request_error", message=f"{INVALID_IMAGE_TEXT}."),
        InvalidImageRequest,
        "invalid_image_request",
        False,
        "invalid_request_error",
    ),
    (error_frame(message=INVALID_IMAGE_TEXT), InvalidImageRequest, "invalid_image_request", False, None),
    (failed_frame(code="invalid_image", message="bad"), InvalidImageRequest, "invalid_image_request", False, None),
    (error_frame(code="invalid_image_format"), InvalidImageRequest, "invalid_image_request", False, None),
    (error_frame(code="invalid_image_url"), InvalidImageRequest, "invalid_image_request", False, None),
    (error_frame(code="image_parse_error"), InvalidImageRequest, "invalid_image_request", False, None),
    # quota / usage limits; never retried
    (error_frame(code="insufficient_quota"), UsageLimitExceeded, "usage_limit", False, None),
    (failed_frame(code="usage_limit_reached"), UsageLimitExceeded, "usage_limit", False, None),
    (error_frame(code="usage_not_included"), UsageLimitExceeded, "usage_limit", False, None),
    (error_frame(code="quota_exceeded"), UsageLimitExceeded, "usage_limit", False, None),
    # codex puts the usage-limit kind in error.type
    (
        {"type": "error", "status": 429, "error": {"type": "usage_limit_reached", "message": "limit"}},
        UsageLimitExceeded,
        "usage_limit",
        False,
        "usage_limit_reached",
    ),
    # the chained response is gone: replayed once in full
    (error_frame(code="previous_response_not_found"), CheckpointMissing, "checkpoint_missing", True, None),
    # server-side trouble: retryable
    (error_frame(code="server_is_overloaded"), ApiError, "api_server", True, None),
    (error_frame(code="slow_down"), ApiError, "api_server", True, None),
    (failed_frame(code="server_error"), ApiError, "api_server", True, None),
    (error_frame(code="websocket_connection_limit_reached"), ApiError, "api_server", True, None),
    (error_frame(code="rate_limit_exceeded"), ApiError, "api_rate_limit", True, None),
    # a 4xx the frame states is terminal even when error.type says server_error (issue 25; a
    # third-party server's 400 was retried 5 times); the server's own codes still retry
    ({"type": "error", "status": 400, "error": {"type": "server_error", "message": "bad field"}},
     ApiError, "api", False, "server_error"),
    ({"type": "error", "status": 400, "error": {"code": "websocket_connection_limit_reached"}},
     ApiError, "api_server", True, "websocket_connection_limit_reached"),
    ({"type": "error", "status": 503, "error": {"type": "server_error", "message": "busy"}},
     ApiError, "api_server", True, "server_error"),
    ({"type": "error", "status": 408, "error": {"type": "server_error", "message": "timeout"}},
     ApiError, "api_server", True, "server_error"),
    # everything else: terminal ApiError
    (error_frame(code="context_length_exceeded"), ApiError, "api", False, None),
    (error_frame(code="invalid_prompt", message="no"), ApiError, "api", False, None),
    (error_frame(code="cyber_policy"), ApiError, "api", False, None),
    (error_frame(message="unknown failure"), ApiError, "api", False, None),
    (failed_frame(code="something_new"), ApiError, "api", False, None),
    (
        {"type": "response.incomplete", "response": {"id": "r", "incomplete_details": {"reason": "max_output_tokens"}}},
        ApiError,
        "api",
        False,
        "max_output_tokens",
    ),
]


@pytest.mark.parametrize(("raw", "cls", "error_class", "retryable", "code"), TABLE)
def test_failure_table(
    raw: dict[str, Any], cls: type[ResponsesError], error_class: str, retryable: bool, code: str | None
) -> None:
    error = failure_from_frame(raw)
    assert type(error) is cls
    assert isinstance(error, ApiError)
    assert error.error_class == error_class
    assert error.retryable is retryable
    assert error.event is raw
    assert error.failure_phase == "api"
    expected_code = code
    if expected_code is None:
        inner = raw.get("error") or raw["response"].get("error")
        expected_code = inner.get("code")
    assert error.code == expected_code
    if expected_code is not None:
        assert f"(code {expected_code})" in str(error)


def test_message_names_the_frame_kind_and_server_message() -> None:
    error = failure_from_frame(failed_frame(code="server_error", message="An error occurred"))
    assert str(error) == "Responses API response.failed: An error occurred (code server_error)"
    assert error.message == str(error)


def test_error_without_message_says_how_the_response_ended() -> None:
    error = failure_from_frame(error_frame(code="weird"))
    assert str(error) == "Responses API error: the server ended the response with 'error' (code weird)"


def test_incomplete_message_names_the_reason() -> None:
    raw = {"type": "response.incomplete", "response": {"id": "r", "incomplete_details": {"reason": "content_filter"}}}
    error = failure_from_frame(raw)
    assert error.code == "content_filter"
    assert "incomplete: content_filter" in str(error)
    assert str(error).startswith("Responses API response.incomplete:")


def test_error_object_may_be_the_frame_itself() -> None:
    # a flat frame without an ``error`` object: fields are read from the frame
    error = failure_from_frame({"type": "error", "code": "server_is_overloaded", "message": "busy"})
    assert error.error_class == "api_server"
    assert error.retryable is True
    assert "busy" in str(error)


@pytest.mark.parametrize(
    ("error", "retry_after"),
    [
        ({"code": "rate_limit_exceeded", "retry_after": 7}, 7.0),
        ({"code": "rate_limit_exceeded", "retry_after": 0.5}, 0.5),
        ({"code": "rate_limit_exceeded", "retry_after": "2"}, 2.0),
        ({"code": "rate_limit_exceeded", "retry_after": 0}, 0.0),
        ({"code": "server_is_overloaded", "headers": {"retry-after": "3"}}, 3.0),
        ({"code": "server_is_overloaded", "headers": {"Retry-After": "4.5"}}, 4.5),
        ({"code": "server_is_overloaded", "headers": {"RETRY-AFTER": 6}}, 6.0),
        # error.retry_after wins over the headers map
        ({"code": "rate_limit_exceeded", "retry_after": 1, "headers": {"retry-after": "9"}}, 1.0),
        # absent, unparseable or negative hints are ignored
        ({"code": "rate_limit_exceeded"}, None),
        ({"code": "rate_limit_exceeded", "retry_after": None}, None),
        ({"code": "rate_limit_exceeded", "retry_after": "soon"}, None),
        ({"code": "rate_limit_exceeded", "retry_after": -1}, None),
        ({"code": "rate_limit_exceeded", "retry_after": [1]}, None),
        ({"code": "rate_limit_exceeded", "headers": {"x-request-id": "r"}}, None),
        ({"code": "rate_limit_exceeded", "headers": "retry-after: 3"}, None),
        # server-controlled: capped to MAX_RETRY_DELAY, or ignored, never an absurd sleep
        ({"code": "rate_limit_exceeded", "retry_after": 60}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": 61}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": 1e300}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": float("inf")}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": 10**400}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": "1e400"}, 60.0),
        ({"code": "rate_limit_exceeded", "retry_after": "9" * 100_000}, None),
        ({"code": "rate_limit_exceeded", "retry_after": float("-inf")}, None),
        ({"code": "rate_limit_exceeded", "retry_after": float("nan")}, None),
        ({"code": "rate_limit_exceeded", "retry_after": "nan"}, None),
        ({"code": "rate_limit_exceeded", "retry_after": "inf"}, None),
        ({"code": "rate_limit_exceeded", "retry_after": "-1"}, None),
        ({"code": "rate_limit_exceeded", "retry_after": True}, None),
        ({"code": "rate_limit_exceeded", "retry_after": {"seconds": 3}}, None),
        ({"code": "server_is_overloaded", "headers": {"retry-after": "1e400"}}, 60.0),
        ({"code": "server_is_overloaded", "headers": {"retry-after": float("inf")}}, 60.0),
        ({"code": "server_is_overloaded", "headers": {"retry-after": -5}}, None),
        ({"code": "server_is_overloaded", "headers": {"retry-after": "NaN"}}, None),
        ({"code": "server_is_overloaded", "headers": {"retry-after": ["3"]}}, None),
    ],
)
def test_retry_after(error: dict[str, Any], retry_after: float | None) -> None:
    result = failure_from_frame({"type": "error", "error": error})
    assert result.retry_after == retry_after
    result = failure_from_frame({"type": "response.failed", "response": {"id": "r", "error": error}})
    assert result.retry_after == retry_after


def test_response_failed_reads_the_nested_error() -> None:
    raw = failed_frame(code="rate_limit_exceeded", message="slow", retry_after=2)
    error = failure_from_frame(raw)
    assert error.error_class == "api_rate_limit"
    assert error.code == "rate_limit_exceeded"
    assert error.retry_after == 2.0
    assert "slow" in str(error)


def test_top_level_error_object_wins_over_response_error() -> None:
    raw = {
        "type": "response.failed",
        "error": {"code": "server_error"},
        "response": {"error": {"code": "insufficient_quota"}},
    }
    assert failure_from_frame(raw).error_class == "api_server"


@pytest.mark.parametrize("code", [5, "", None, ["server_error"]])
def test_non_string_or_empty_codes_are_not_codes(code: Any) -> None:
    error = failure_from_frame({"type": "error", "error": {"code": code, "message": "m"}})
    assert error.code is None
    assert type(error) is ApiError
    assert error.retryable is False
    assert str(error) == "Responses API error: m"


@pytest.mark.parametrize(
    ("text", "retry_after"),
    [
        ('{"type":"error","error":{"code":"rate_limit_exceeded","retry_after":1e400}}', 60.0),  # json: inf
        ('{"type":"error","error":{"code":"rate_limit_exceeded","retry_after":' + "9" * 400 + "}}", 60.0),
        ('{"type":"error","error":{"code":"rate_limit_exceeded","retry_after":-1e400}}', None),
        ('{"type":"error","error":{"code":"rate_limit_exceeded","retry_after":NaN}}', None),
        ('{"type":"error","code":"rate_limit_exceeded","retry_after":Infinity}', 60.0),  # a flat frame
        ('{"type":"error","error":{"code":"rate_limit_exceeded"},"retry_after":1e400}', 60.0),  # on the frame
    ],
)
def test_retry_after_of_decoded_frames_is_finite_and_capped(text: str, retry_after: float | None) -> None:
    error = failure_from_frame(json.loads(text))
    assert error.retry_after == retry_after
    assert error.retryable is True
    assert error.error_class == "api_rate_limit"


# codex.md sec. 1.6: a rate-limit failure may state its delay only in its message.
@pytest.mark.parametrize(
    ("message", "retry_after"),
    [
        ("Rate limit exceeded. Please try again in 60s.", 60.0),  # the seed's exact message
        ("Please try again in 11.054s", 11.054),
        ("try again in 250ms", 0.25),
        ("Please try again in 1.5 seconds.", 1.5),
        ("Try again in 1 second", 1.0),
        ("TRY AGAIN IN 3S", 3.0),
        ("try again in2s", 2.0),  # codex's pattern allows no space
        ("try again in 7 ms", 0.007),
        ("try again in 0s", 0.0),
        # the same cap as every other hint
        ("Please try again in 120s.", 60.0),
        ("try again in 90000ms", 60.0),
        ("try again in " + "9" * 32 + "s", 60.0),
        ("try again in " + "9" * 33 + "s", None),  # too long to be a delay, as for retry_after
        # no stated delay, or a unit the pattern does not read: the computed backoff applies
        ("Rate limit exceeded.", None),
        ("Please try again in 5 minutes.", None),
        ("Please try again later.", None),
        ("try again in -3s", None),
        ("try again in .5s", None),
        ("try again in ٣s", None),  # ASCII digits only
    ],
)
def test_rate_limit_message_states_the_retry_delay(message: str, retry_after: float | None) -> None:
    for raw in (failed_frame(code="rate_limit_exceeded", message=message),
                error_frame(code="rate_limit_exceeded", message=message),
                {"type": "error", "status": 429, "error": {"message": message}},
                {"type": "error", "code": "rate_limit_exceeded", "message": message}):
        error = failure_from_frame(raw)
        assert error.error_class == "api_rate_limit" and error.retryable is True
        assert error.retry_after == retry_after, raw


def test_a_retry_after_field_wins_over_the_message() -> None:
    said = {"code": "rate_limit_exceeded", "message": "Please try again in 60s."}
    assert failure_from_frame(failed_frame(**said, retry_after=2)).retry_after == 2
    assert failure_from_frame(error_frame(**said, headers={"retry-after": "3"})).retry_after == 3
    flat = {"type": "error", "error": said, "retry_after": 4}
    assert failure_from_frame(flat).retry_after == 4


@pytest.mark.parametrize("code", ["server_is_overloaded", "server_error", "something_new", "insufficient_quota"])
def test_only_rate_limits_read_a_delay_from_the_message(code: str) -> None:
    # codex parses the message only for rate_limit_exceeded (codex.md sec. 1.6)
    error = failure_from_frame(failed_frame(code=code, message="Please try again in 30s."))
    assert error.retry_after is None
