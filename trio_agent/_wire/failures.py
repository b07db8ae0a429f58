"""Classify API failure frames into ``ResponsesError`` subclasses (pure).

Retry classes follow the reference (nanocodex sec. 4.9): overload and server errors
and rate limits are retryable; auth, invalid requests, images, quota and policy are
terminal. ``previous_response_not_found`` is ``CheckpointMissing`` (replayed once), and
so is a bare 404 "not found" (a server that names no code, such as llama-stack).

A frame's retry hint is, in this order: the error's ``retry_after``, a ``retry-after``
entry of its ``headers`` map, the frame's own ``retry_after``, and -- for a rate-limit
failure only -- a delay stated in the message ("Please try again in 11.054s", "in 250ms",
"in 2 seconds"; codex.md sec. 1.6, the same pattern codex uses). Every one of them goes
through ``retry_after_seconds``, the one place that turns a server's hint into seconds;
the policy it applies is stated in ``_transport/retry.py``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .._errors import (
    ApiError,
    CheckpointMissing,
    InvalidImageRequest,
    ResponsesError,
    UsageLimitExceeded,
)

__all__ = ["MAX_RETRY_DELAY", "failure_from_frame", "message_retry_after", "retry_after_seconds"]

_INVALID_IMAGE_TEXT = "The image data you provided does not represent a valid image"
_IMAGE_CODES = {"invalid_image", "invalid_image_format", "invalid_image_url", "image_parse_error"}
_USAGE_CODES = {"insufficient_quota", "usage_limit_reached", "usage_not_included", "quota_exceeded"}
#: The longest wait (seconds) a server's retry hint can cause; longer hints are capped.
MAX_RETRY_DELAY = 60.0
# A hint given as text: a plain decimal number of seconds (HTTP's delay-seconds, with the
# fractions and exponents servers put in JSON strings), of reasonable length.
# Both patterns are compiled on first use (by ``re``'s cache), not at import: they serve
# failures only.
_DECIMAL_SECONDS = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_MAX_HINT_CHARS = 32
# A delay stated in prose, as codex reads it from a ``rate_limit_exceeded`` message
# (``(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)``), with ASCII digits only.
# The alternation is tried in order, so "250ms" is milliseconds and "2 seconds" seconds.
_MESSAGE_DELAY = r"try again in\s*([0-9]+(?:\.[0-9]+)?)\s*(s|ms|seconds?)"
_SERVER_CODES = {
    "server_is_overloaded",
    "slow_down",
    "server_error",
    "websocket_connection_limit_reached",
}


def failure_from_frame(raw: dict[str, Any]) -> ResponsesError:
    """The error carried by an ``error``, ``response.failed`` or ``response.incomplete`` frame."""
    kind = raw.get("type", "error")
    error = _error_object(raw)
    code = _str(error.get("code")) or _str(error.get("type"))
    message = _str(error.get("message")) or _str(raw.get("message")) or _default_message(kind)
    status = raw.get("status") if type(raw.get("status")) is int else None
    retry_after = _retry_after(error)
    if retry_after is None:
        retry_after = _retry_after(raw)
    rate_limited = code == "rate_limit_exceeded" or status == 429
    if retry_after is None and rate_limited:
        retry_after = message_retry_after(message)
    text = json.dumps(raw, separators=(",", ":"))
    detail = f"Responses API {kind}: {message}" + (f" (code {code})" if code else "")
    common: dict[str, Any] = {"code": code, "event": raw, "retry_after": retry_after, "status": status}
    if _INVALID_IMAGE_TEXT in text or code in _IMAGE_CODES:
        return InvalidImageRequest(detail, **common)
    if code in _USAGE_CODES:
        return UsageLimitExceeded(detail, **common)
    if code == "previous_response_not_found" or _not_found(code, status, message):
        return CheckpointMissing(detail, **common)
    # A 4xx status the frame states (not 408/429) is the client's fault whatever error.type
    # says: some servers label a 400 "server_error" (issue 25). An explicit error.code of
    # the server's (e.g. websocket_connection_limit_reached) still retries, as codex does.
    said_client = (status is not None and 400 <= status < 500 and status not in (408, 429)
                   and _str(error.get("code")) not in _SERVER_CODES)
    if not said_client and (code in _SERVER_CODES or (status is not None and status >= 500)):
        return ApiError(detail, error_class="api_server", retryable=True, **common)
    if rate_limited:
        return ApiError(detail, error_class="api_rate_limit", retryable=True, **common)
    return ApiError(detail, **common)


def _not_found(code: str | None, status: int | None, message: str) -> bool:
    """A "not found" stated as a bare 404 (``{"error": {"code": "404", "message":
    "Response ... not found"}}``, llama-stack's way): in a stream, the only thing a
    request can name that is not there is the response it chains on."""
    return (code in ("404", "not_found") or status == 404) and "not found" in message.lower()


def _error_object(raw: dict[str, Any]) -> dict[str, Any]:
    """The nested error object (``error``, ``response.error`` or the incomplete reason)."""
    if isinstance(raw.get("error"), dict):
        return raw["error"]  # type: ignore[no-any-return]
    response = raw.get("response")
    if isinstance(response, dict):
        if isinstance(response.get("error"), dict):
            return response["error"]  # type: ignore[no-any-return]
        details = response.get("incomplete_details")
        if isinstance(details, dict):
            return {"code": details.get("reason"), "message": f"incomplete: {details.get('reason')}"}
    # A flat error frame: its own fields, but never its frame ``type`` as a code.
    return {key: raw[key] for key in ("code", "message", "retry_after") if key in raw}


def _default_message(kind: str) -> str:
    return f"the server ended the response with {kind!r}"


def _retry_after(error: dict[str, Any]) -> float | None:
    value = error.get("retry_after")
    if value is None and isinstance(error.get("headers"), dict):
        headers = {str(k).lower(): v for k, v in error["headers"].items()}
        value = headers.get("retry-after")
    return retry_after_seconds(value)


def retry_after_seconds(value: object) -> float | None:
    """A server's retry hint as seconds to wait, or ``None`` for "no usable hint".

    An ``int``/``float`` (never a ``bool``) or a decimal string (``"2"``, ``" 4.5 "``,
    ``"1e3"``; at most 32 characters) is a hint: a value above ``MAX_RETRY_DELAY``,
    ``inf`` included, is capped to it. Negative values, NaN and anything else (other
    types, other text such as HTTP dates, ``"inf"`` or ``"nan"``) are ``None``. The
    result is always finite, ``0 <= seconds <= MAX_RETRY_DELAY``; this never raises.
    """
    if isinstance(value, str):
        text = value.strip()
        if len(text) > _MAX_HINT_CHARS or re.fullmatch(_DECIMAL_SECONDS, text) is None:
            return None
        value = float(text)  # "1e400" is inf, capped below
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):  # compared as an int: float(10**400) would overflow
        return float(min(value, MAX_RETRY_DELAY)) if value >= 0 else None
    if math.isnan(value) or value < 0:
        return None
    return min(value, MAX_RETRY_DELAY) + 0.0  # + 0.0 turns -0.0 into 0.0


def message_retry_after(message: str | None) -> float | None:
    """The delay a failure's message asks for ("try again in 60s", "... in 250ms",
    "Please try again in 1.5 seconds"; case-insensitive), as seconds capped like any
    other hint (``retry_after_seconds``), or ``None`` when the message states none.
    Other units ("in 5 minutes") and numbers longer than 32 characters are no hint.
    Never raises."""
    if not isinstance(message, str):
        return None
    match = re.search(_MESSAGE_DELAY, message, re.IGNORECASE)
    if match is None or len(match.group(1)) > _MAX_HINT_CHARS:  # as for a textual retry_after
        return None
    amount = float(match.group(1))  # ASCII digits and one dot: always parses, always finite
    return retry_after_seconds(amount / 1000 if match.group(2).lower() == "ms" else amount)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
