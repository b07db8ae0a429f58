"""Classify API failure frames into ``ResponsesError`` subclasses (pure).

Retry classes follow the reference (nanocodex sec. 4.9): overload and server errors
and rate limits are retryable; auth, invalid requests, images, quota and policy are
terminal. ``previous_response_not_found`` is ``CheckpointMissing`` (replayed once).
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import (
    ApiError,
    CheckpointMissing,
    InvalidImageRequest,
    ResponsesError,
    UsageLimitExceeded,
)

__all__ = ["failure_from_frame"]

_INVALID_IMAGE_TEXT = "The image data you provided does not represent a valid image"
_IMAGE_CODES = {"invalid_image", "invalid_image_format", "invalid_image_url", "image_parse_error"}
_USAGE_CODES = {"insufficient_quota", "usage_limit_reached", "usage_not_included", "quota_exceeded"}
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
    text = json.dumps(raw, separators=(",", ":"))
    detail = f"Responses API {kind}: {message}" + (f" (code {code})" if code else "")
    common: dict[str, Any] = {"code": code, "event": raw, "retry_after": retry_after, "status": status}
    if _INVALID_IMAGE_TEXT in text or code in _IMAGE_CODES:
        return InvalidImageRequest(detail, **common)
    if code in _USAGE_CODES:
        return UsageLimitExceeded(detail, **common)
    if code == "previous_response_not_found":
        return CheckpointMissing(detail, **common)
    if code in _SERVER_CODES or (status is not None and status >= 500):
        return ApiError(detail, error_class="api_server", retryable=True, **common)
    if code == "rate_limit_exceeded" or status == 429:
        return ApiError(detail, error_class="api_rate_limit", retryable=True, **common)
    return ApiError(detail, **common)


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
    if isinstance(value, bool):
        return None
    if value is None and isinstance(error.get("headers"), dict):
        headers = {str(k).lower(): v for k, v in error["headers"].items()}
        value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
