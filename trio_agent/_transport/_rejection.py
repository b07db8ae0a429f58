"""An HTTP rejection -> a ``ResponsesError``, by cause and the same for both transports
(issue 8, item 10): 401/403 is ``AuthenticationError`` (with ``status`` and the API's
``code``) whether it answered the WebSocket handshake or an HTTPS request; other
statuses keep the transport's class (``ConnectionFailed`` for a handshake, ``ApiError``
for HTTPS) with ``classify_status``'s retry decision and the server's ``Retry-After``.
"""

from __future__ import annotations

import json

from .._errors import AuthenticationError, CheckpointMissing, ResponsesError
from .retry import classify_status, parse_retry_after

__all__ = ["AUTH_STATUSES", "SHOWN_BODY_CHARS", "error_code", "rejection_error", "shown_body"]

AUTH_STATUSES = (401, 403)
#: How much of a rejection's body an error message shows when the body has no
#: ``error.message``: third-party servers put the useful part far in (llama-stack's
#: validation errors start near character 920).
SHOWN_BODY_CHARS = 4096


def shown_body(body: str) -> str:
    """What an error message shows of a rejection's body: its ``error.message`` when it
    is a JSON error document with one (``{"error": {"message": "..."}}``: OpenAI's and
    most servers' shape), else the body's first ``SHOWN_BODY_CHARS`` characters."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError, RecursionError):
        error = None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message.strip():
        return message[:SHOWN_BODY_CHARS]
    return body[:SHOWN_BODY_CHARS]


def error_code(body: str) -> str | None:
    """``error.code`` of a JSON error body (``{"error": {"code": ...}}``), else None."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def rejection_error(
    status: int,
    body: str,
    retry_after: str | None,
    *,
    prefix: str,
    message: str,
    other: type[ResponsesError],
) -> ResponsesError:
    """The error for HTTP ``status``; ``prefix`` names the transport in ``error_class``
    (``handshake_rejected``, ``https_rate_limit``, ...); ``other`` is the class of a
    rejection that is not about credentials."""
    error_class, retryable = classify_status(status, prefix)
    code = error_code(body)
    if status in AUTH_STATUSES:
        return AuthenticationError(
            f"{message}; check the API key (or log in to ChatGPT again)",
            error_class=error_class, status=status, code=code,
        )
    if code == "previous_response_not_found":
        # The chained response is gone (HTTP 400 over HTTPS): replayed once in full, as
        # the same error inside a stream is.
        return CheckpointMissing(message, status=status, code=code)
    return other(
        message, error_class=error_class, retryable=retryable, retry_after=parse_retry_after(retry_after),
        status=status, code=code, failure_phase="connect",
    )
