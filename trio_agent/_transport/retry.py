"""Retry policy as pure functions (SPEC sec. 6, nanocodex sec. 4.9).

Backoff: the server's suggested delay when it gave one; otherwise
200 ms x 2^(attempt-1), exponent capped at 4 (3.2 s), times a deterministic jitter
of 90-110% derived from (call_index, attempt) -- deterministic so that scripted
tests under ``MockClock`` see the same delays every run.
"""

from __future__ import annotations

from .._errors import ResponsesError

__all__ = [
    "GENERATION_MAX_ATTEMPTS",
    "WARMUP_MAX_ATTEMPTS",
    "backoff_delay",
    "classify_status",
    "parse_retry_after",
    "should_retry",
]

GENERATION_MAX_ATTEMPTS = 5
WARMUP_MAX_ATTEMPTS = 1
_BASE_DELAY = 0.2
_MAX_EXPONENT = 4


def backoff_delay(attempt: int, *, call_index: int = 0, retry_after: float | None = None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
    if retry_after is not None and retry_after >= 0:
        return float(retry_after)
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    jitter = 0.9 + ((call_index * 31 + attempt * 17) % 21) / 100
    return float(_BASE_DELAY * (2**exponent) * jitter)


def should_retry(error: ResponsesError, attempt: int, max_attempts: int) -> bool:
    return error.retryable and attempt < max_attempts


def parse_retry_after(value: str | None) -> float | None:
    """An HTTP ``Retry-After`` header in seconds (dates are not used by the API)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def classify_status(status: int, prefix: str) -> tuple[str, bool]:
    """``(error_class, retryable)`` of an HTTP rejection: 429 and 5xx are worth retrying."""
    if status == 429:
        return f"{prefix}_rate_limit", True
    if status >= 500:
        return f"{prefix}_server", True
    return f"{prefix}_rejected", False
