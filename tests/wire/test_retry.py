"""Retry policy: backoff_delay, the retry-hint cap, parse_retry_after and should_retry (SPEC sec. 6)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import ApiError, ConnectionLost, InvalidImageRequest, ProtocolError, ResponsesError
from trio_agent._transport.retry import (
    GENERATION_MAX_ATTEMPTS,
    MAX_RETRY_DELAY,
    WARMUP_MAX_ATTEMPTS,
    backoff_delay,
    parse_retry_after,
    should_retry,
)
from trio_agent._wire.failures import failure_from_frame, message_retry_after


def jitter(call_index: int, attempt: int) -> float:
    return 0.9 + ((call_index * 31 + attempt * 17) % 21) / 100


def test_attempt_limits() -> None:
    assert GENERATION_MAX_ATTEMPTS == 5
    assert WARMUP_MAX_ATTEMPTS == 1


INF = float("inf")
NAN = float("nan")

# (server hint, delay; None when the hint is unusable and the computed backoff applies)
HINTS: list[tuple[object, float | None]] = [
    (0.0, 0.0),
    (-0.0, 0.0),
    (0, 0.0),
    (0.25, 0.25),
    (1, 1.0),
    (11.054, 11.054),
    (MAX_RETRY_DELAY, MAX_RETRY_DELAY),
    (60.0001, MAX_RETRY_DELAY),
    (120.0, MAX_RETRY_DELAY),
    (1e300, MAX_RETRY_DELAY),
    (INF, MAX_RETRY_DELAY),
    (10**400, MAX_RETRY_DELAY),  # an int too large for a float
    (None, None),
    (-1, None),
    (-1.0, None),
    (-0.001, None),
    (-1e300, None),
    (-INF, None),
    (NAN, None),
    (True, None),
    (False, None),
]


@pytest.mark.parametrize(("retry_after", "expected"), HINTS)
@pytest.mark.parametrize("attempt", [1, 3, 10])
def test_server_hint_is_capped_and_unusable_hints_use_the_backoff(
    retry_after: object, expected: float | None, attempt: int
) -> None:
    delay = backoff_delay(attempt, call_index=7, retry_after=retry_after)
    if expected is None:
        expected = backoff_delay(attempt, call_index=7)
        assert expected == pytest.approx(0.2 * 2 ** min(attempt - 1, 4) * jitter(7, attempt))
    assert delay == expected
    assert type(delay) is float
    assert math.copysign(1.0, delay) == 1.0  # never -0.0


def test_max_retry_delay_is_a_minute() -> None:
    assert MAX_RETRY_DELAY == 60.0


# (Retry-After header, seconds or None)
HEADERS: list[tuple[str | None, float | None]] = [
    ("3", 3.0),
    (" 4.5 ", 4.5),
    ("0", 0.0),
    (".5", 0.5),
    ("5.", 5.0),
    ("1e-3", 0.001),
    ("60", 60.0),
    ("61", MAX_RETRY_DELAY),
    ("1e300", MAX_RETRY_DELAY),
    ("1e400", MAX_RETRY_DELAY),  # float() says inf
    ("9" * 32, MAX_RETRY_DELAY),
    ("9" * 33, None),  # too long to be a delay anyone meant
    ("1" * 1_000_000, None),
    (None, None),
    ("", None),
    ("-1", None),
    ("-0", None),
    ("nan", None),
    ("NaN", None),
    ("inf", None),
    ("Infinity", None),
    ("+5", None),
    ("1_000", None),  # float() would accept these three; HTTP does not
    ("\u0663", None),  # ARABIC-INDIC DIGIT THREE
    ("0x10", None),
    ("3s", None),
    ("Wed, 21 Oct 2015 07:28:00 GMT", None),  # HTTP dates are not used by the API
]


@pytest.mark.parametrize(("header", "expected"), HEADERS)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header) == expected


@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=40),
        st.from_regex(r"\A\s*[0-9]{0,40}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,4})?\s*\Z"),
    ),
    st.integers(min_value=1, max_value=100),
)
def test_every_hint_gives_a_bounded_finite_delay(hint: object, attempt: int) -> None:
    if isinstance(hint, str):
        parsed = parse_retry_after(hint)
        assert parsed is None or 0.0 <= parsed <= MAX_RETRY_DELAY
        hint = parsed
    delay = backoff_delay(attempt, call_index=3, retry_after=hint)
    assert math.isfinite(delay)
    assert 0.0 <= delay <= MAX_RETRY_DELAY


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


@given(st.text(max_size=80), st.integers(min_value=1, max_value=100))
def test_a_delay_stated_in_a_message_is_bounded_like_any_hint(text: str, attempt: int) -> None:
    for message in (text, f"Please try again in {text}", f"try again in {text}s", f"try again in {text}ms"):
        hint = message_retry_after(message)
        assert hint is None or 0.0 <= hint <= MAX_RETRY_DELAY
        delay = backoff_delay(attempt, retry_after=hint)
        assert math.isfinite(delay) and 0.0 <= delay <= MAX_RETRY_DELAY


@pytest.mark.parametrize(
    ("message", "delay"),
    [("Please try again in 60s.", 60.0), ("try again in 250ms", 0.25), ("Please try again in 600s.", MAX_RETRY_DELAY)],
)
def test_the_backoff_honours_the_delay_a_rate_limit_message_states(message: str, delay: float) -> None:
    frame = {"type": "response.failed", "response": {"id": "r", "error": {"code": "rate_limit_exceeded",
                                                                          "message": message}}}
    error = failure_from_frame(frame)
    assert should_retry(error, 1, 2)
    assert backoff_delay(1, call_index=3, retry_after=error.retry_after) == delay
