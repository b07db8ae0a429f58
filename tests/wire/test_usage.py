"""TokenUsage.from_api (null usage and null details count as 0) and addition."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._wire.usage import TokenUsage

FULL = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 3},
    "output_tokens": 2,
    "output_tokens_details": {"reasoning_tokens": 1},
    "total_tokens": 12,
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, TokenUsage(0, 0, 0, 0, 0, 0)),
        ({}, TokenUsage()),
        ("not a dict", TokenUsage()),
        ([1, 2], TokenUsage()),
        (FULL, TokenUsage(10, 5, 3, 2, 1, 12)),
        ({"input_tokens": 7}, TokenUsage(input_tokens=7)),
        ({"output_tokens": 4, "total_tokens": 4}, TokenUsage(output_tokens=4, total_tokens=4)),
        (
            {"input_tokens": 10, "input_tokens_details": None, "output_tokens_details": None, "total_tokens": 10},
            TokenUsage(input_tokens=10, total_tokens=10),
        ),
        ({"input_tokens_details": {"cached_tokens": None}}, TokenUsage()),
        ({"input_tokens_details": {}, "output_tokens_details": {}}, TokenUsage()),
        ({"input_tokens_details": [5], "output_tokens_details": "x"}, TokenUsage()),
        ({"output_tokens_details": {"reasoning_tokens": 9}}, TokenUsage(reasoning_output_tokens=9)),
        # non-integer counts are not trusted
        ({"input_tokens": None, "output_tokens": "3", "total_tokens": 1.5}, TokenUsage()),
        ({"input_tokens": True, "output_tokens": False}, TokenUsage()),
        # unknown fields are ignored
        ({"input_tokens": 1, "future_tokens": 99, "total_tokens": 1}, TokenUsage(input_tokens=1, total_tokens=1)),
    ],
)
def test_from_api(raw: Any, expected: TokenUsage) -> None:
    assert TokenUsage.from_api(raw) == expected


def test_to_json_names_every_field() -> None:
    assert TokenUsage.from_api(FULL).to_json() == {
        "input_tokens": 10,
        "cached_input_tokens": 5,
        "cache_write_input_tokens": 3,
        "output_tokens": 2,
        "reasoning_output_tokens": 1,
        "total_tokens": 12,
    }


def test_addition_is_fieldwise() -> None:
    a = TokenUsage(1, 2, 3, 4, 5, 6)
    b = TokenUsage(10, 20, 30, 40, 50, 60)
    assert a + b == TokenUsage(11, 22, 33, 44, 55, 66)
    assert a + TokenUsage() == a
    assert a == TokenUsage(1, 2, 3, 4, 5, 6)  # operands unchanged


counts = st.integers(min_value=0, max_value=10**12)
maybe_counts = st.one_of(st.none(), counts)


@st.composite
def api_usage(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if draw(st.booleans()):
            raw[key] = draw(maybe_counts)
    for key, inner in (
        ("input_tokens_details", ("cached_tokens", "cache_write_tokens")),
        ("output_tokens_details", ("reasoning_tokens",)),
    ):
        choice = draw(st.sampled_from(["absent", "null", "dict"]))
        if choice == "null":
            raw[key] = None
        elif choice == "dict":
            raw[key] = {name: draw(maybe_counts) for name in inner if draw(st.booleans())}
    return raw


def _count(value: Any) -> int:
    return value if isinstance(value, int) else 0


@given(api_usage())
def test_from_api_matches_a_straightforward_reading(raw: dict[str, Any]) -> None:
    inputs = raw.get("input_tokens_details") or {}
    outputs = raw.get("output_tokens_details") or {}
    assert TokenUsage.from_api(raw) == TokenUsage(
        input_tokens=_count(raw.get("input_tokens")),
        cached_input_tokens=_count(inputs.get("cached_tokens")),
        cache_write_input_tokens=_count(inputs.get("cache_write_tokens")),
        output_tokens=_count(raw.get("output_tokens")),
        reasoning_output_tokens=_count(outputs.get("reasoning_tokens")),
        total_tokens=_count(raw.get("total_tokens")),
    )


usages = st.builds(TokenUsage, counts, counts, counts, counts, counts, counts)


@given(usages, usages, usages)
def test_addition_is_associative_commutative_with_zero(a: TokenUsage, b: TokenUsage, c: TokenUsage) -> None:
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert a + TokenUsage() == a
    assert attrs.astuple(a + b) == tuple(x + y for x, y in zip(attrs.astuple(a), attrs.astuple(b), strict=True))


@given(usages)
def test_to_json_round_trips_through_from_api_shape(usage: TokenUsage) -> None:
    data = usage.to_json()
    raw = {
        "input_tokens": data["input_tokens"],
        "input_tokens_details": {
            "cached_tokens": data["cached_input_tokens"],
            "cache_write_tokens": data["cache_write_input_tokens"],
        },
        "output_tokens": data["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": data["reasoning_output_tokens"]},
        "total_tokens": data["total_tokens"],
    }
    assert TokenUsage.from_api(raw) == usage
