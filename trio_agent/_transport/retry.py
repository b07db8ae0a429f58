"""Retry policy as pure functions (SPEC sec. 6, nanocodex sec. 4.9).

Backoff: the server's suggested delay when it gave a usable one; otherwise
200 ms x 2^(attempt-1), exponent capped at 4 (3.2 s), times a deterministic jitter
of 90-110% derived from (call_index, attempt) -- deterministic so that scripted
tests under ``MockClock`` see the same delays every run.

Server-suggested delays are server-controlled data, so one policy bounds them
whatever their source (an error frame's ``retry_after`` or its ``headers`` map, the
"try again in 60s" / "in 250ms" of a rate-limit failure's message (codex.md sec. 1.6),
an HTTP ``Retry-After`` header): ``retry_after_seconds`` (in ``_wire.failures``, so the
pure frame parser shares it) applies it when the hint is parsed, and
``backoff_delay`` applies it again to whatever it is given.

* A hint of ``0 <= s <= MAX_RETRY_DELAY`` (60 s) seconds is honoured as it is.
* A larger hint -- ``1e300``, ``inf``, ``"1e400"`` -- waits ``MAX_RETRY_DELAY``:
  the server asked for a long wait, and a minute is the longest a turn sleeps on a
  server's word (a retry that still fails counts an attempt like any other).
* A negative or NaN hint, a ``bool``, a non-number, or text that is not a plain
  decimal number (HTTP dates included: the API does not send them) or is longer than
  32 characters is no hint: the computed backoff applies.

So a retry never sleeps more than ``MAX_RETRY_DELAY``, every delay is a finite
non-negative float, and no hint makes these functions raise.
"""

from __future__ import annotations

from .._errors import ResponsesError
from .._wire.failures import MAX_RETRY_DELAY, retry_after_seconds

__all__ = [
    "GENERATION_MAX_ATTEMPTS",
    "MAX_RETRY_DELAY",
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
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1):
    ``retry_after`` capped to ``MAX_RETRY_DELAY`` when it is a usable hint, else the
    jittered exponential backoff (see the module docstring)."""
    hint = retry_after_seconds(retry_after)
    if hint is not None:
        return hint
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    jitter = 0.9 + ((call_index * 31 + attempt * 17) % 21) / 100
    return float(_BASE_DELAY * (2**exponent) * jitter)


def should_retry(error: ResponsesError, attempt: int, max_attempts: int) -> bool:
    return error.retryable and attempt < max_attempts


def parse_retry_after(value: str | None) -> float | None:
    """An HTTP ``Retry-After`` header as seconds, capped to ``MAX_RETRY_DELAY``; ``None``
    when absent or not a usable number (dates are not used by the API)."""
    return retry_after_seconds(value)


def classify_status(status: int, prefix: str) -> tuple[str, bool]:
    """``(error_class, retryable)`` of an HTTP rejection: 429 and 5xx are worth retrying."""
    if status == 429:
        return f"{prefix}_rate_limit", True
    if status >= 500:
        return f"{prefix}_server", True
    return f"{prefix}_rejected", False
