"""Retry policy: backoff_delay and should_retry (SPEC sec. 6, nanocodex sec. 4.9)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import ApiError, ConnectionLost, InvalidImageRequest, ProtocolError, ResponsesError
from trio_agent._transport.retry import (
    GENERATION_MAX_ATTEMPTS,
    WARMUP_MAX_ATTEMPTS,
    backoff_delay,
    should_retry,
)


def jitter(call_index: int, attempt: int) -> float:
    return 0.9 + ((call_index * 31 + attempt * 17) % 21) / 100


def test_attempt_limits() -> None:
    assert GENERATION_MAX_ATTEMPTS == 5
    assert WARMUP_MAX_ATTEMPTS == 1


@pytest.mark.parametrize("retry_after", [0.0, 0.25, 1, 11.054, 120.0])
@pytest.mark.parametrize("attempt", [1, 3, 10])
def test_server_hint_wins(retry_after: float, attempt: int) -> None:
    delay = backoff_delay(attempt, call_index=7, retry_after=retry_after)
    assert delay == float(retry_after)
    assert isinstance(delay, float)


@pytest.mark.parametrize("retry_after", [None, -1.0, -0.001])
def test_absent_or_negative_hint_uses_backoff(retry_after: float | None) -> None:
    assert backoff_delay(2, call_index=0, retry_after=retry_after) == pytest.approx(0.4 * jitter(0, 2))


@pytest.mark.parametrize(
    ("attempt", "base"),
    [(0, 0.2), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.6), (5, 3.2), (6, 3.2), (50, 3.2)],
)
@pytest.mark.parametrize("call_index", [0, 1, 2, 13])
def test_exponential_base_capped_at_3_2_seconds(attempt: int, base: float, call_index: int) -> None:
    delay = backoff_delay(attempt, call_index=call_index)
    assert delay == pytest.approx(base * jitter(call_index, attempt))


def test_known_values() -> None:
    # (0*31 + 1*17) % 21 = 17 -> 1.07;  (1*31 + 2*17) % 21 = 2 -> 0.92
    assert backoff_delay(1) == pytest.approx(0.2 * 1.07)
    assert backoff_delay(2, call_index=1) == pytest.approx(0.4 * 0.92)


@given(st.integers(min_value=1, max_value=100), st.integers(min_value=0, max_value=10_000))
def test_jitter_within_90_to_110_percent_and_deterministic(attempt: int, call_index: int) -> None:
    base = 0.2 * 2 ** min(attempt - 1, 4)
    delay = backoff_delay(attempt, call_index=call_index)
    assert base * 0.9 - 1e-12 <= delay <= base * 1.1 + 1e-12
    assert delay == backoff_delay(attempt, call_index=call_index)
    assert delay <= 3.2 * 1.1 + 1e-12


def test_jitter_varies_across_calls() -> None:
    delays = {backoff_delay(1, call_index=i) for i in range(21)}
    assert len(delays) == 21  # every residue mod 21 is hit once


@pytest.mark.parametrize(
    ("error", "attempt", "max_attempts", "expected"),
    [
        (ConnectionLost("closed"), 1, 5, True),
        (ConnectionLost("closed"), 4, 5, True),
        (ConnectionLost("closed"), 5, 5, False),
        (ConnectionLost("closed"), 1, 1, False),
        (ApiError("overloaded", error_class="api_server", retryable=True), 2, 5, True),
        (ApiError("bad request"), 1, 5, False),
        (InvalidImageRequest("bad image"), 1, 5, False),
        (ProtocolError("garbage"), 1, 5, False),
        (ResponsesError("x", retryable=True), 1, 2, True),
        (ResponsesError("x", retryable=True), 2, 2, False),
    ],
)
def test_should_retry(error: ResponsesError, attempt: int, max_attempts: int, expected: bool) -> None:
    assert should_retry(error, attempt, max_attempts) is expected
