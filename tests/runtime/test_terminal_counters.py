"""The terminal payload reads the transport counters straight off ``TransportStats``
(``_reporter._counters``, a hand-written list): it stays every field, in order."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._runtime._counters import TransportStats
from trio_agent._runtime._turns import _reporter
from trio_agent._wire.usage import TokenUsage

usages = st.builds(TokenUsage, *[st.integers(0, 10**9) for _ in attrs.fields(TokenUsage)])
stats = st.builds(
    TransportStats, *[st.integers(0, 10**9) for _ in attrs.fields(TransportStats)[:-1]], usages
)


@given(stats)
def test_the_terminal_counters_are_every_transport_field_in_order(now: TransportStats) -> None:
    assert _reporter._counters(now) == attrs.astuple(now, recurse=False)
