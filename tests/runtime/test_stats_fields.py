"""The hand-written field lists of the counters (``TokenUsage`` arithmetic and JSON,
``TransportStats`` copies and deltas) stay the attrs fields, in order."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._runtime._counters import TransportStats
from trio_agent._wire.usage import TokenUsage

usages = st.builds(TokenUsage, *[st.integers(0, 10**9) for _ in attrs.fields(TokenUsage)])
stats = st.builds(
    TransportStats, *[st.integers(0, 10**9) for _ in attrs.fields(TransportStats)[:-1]], usages
)


@given(usages, usages)
def test_token_usage_arithmetic_and_json_are_field_by_field(a: TokenUsage, b: TokenUsage) -> None:
    pairs = list(zip(attrs.astuple(a), attrs.astuple(b), strict=True))
    assert attrs.astuple(a + b) == tuple(x + y for x, y in pairs)
    assert attrs.astuple(a - b) == tuple(x - y for x, y in pairs)
    assert a.to_json() == attrs.asdict(a)
    assert list(a.to_json()) == [field.name for field in attrs.fields(TokenUsage)]


@given(stats, stats)
def test_transport_stats_copy_and_delta_cover_every_field(now: TransportStats, mark: TransportStats) -> None:
    copy = now.copy()
    assert copy == now and copy is not now
    assert attrs.astuple(now - mark, recurse=False) == tuple(
        a - b for a, b in zip(attrs.astuple(now, recurse=False), attrs.astuple(mark, recurse=False), strict=True)
    )
