"""The benchmarks' statistics: "added p99" is the p99 of paired differences, and the
interleaved variants rotate their order (no timing assertion: fixed numbers in, fixed
figures out)."""

from __future__ import annotations

import pytest

from benchmarks._common import Timing, added_row, paired_differences
from benchmarks.turn_overhead import interleave


def _timings(values: list[float]) -> list[Timing]:
    return [Timing(v, v, 0.0) for v in values]


def test_added_p99_is_the_p99_of_paired_differences_not_p99_minus_p99() -> None:
    # the two slow turns fall in different pairs: p99 minus p99 gives +0.00 (and the
    # old row printed that), the pairs say ours added up to 40 ms in one of them
    floor = [0.050, 0.010, 0.010, 0.010]
    ours = [0.011, 0.011, 0.011, 0.050]
    row = added_row("x", _timings(ours), _timings(floor))
    assert row[6] == "+40.00" and row[8] == "4"
    assert paired_differences([3.0, 1.0], [1.0, 2.0]) == [2.0, -1.0]


def test_unpaired_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in number"):
        added_row("x", _timings([1.0, 2.0]), _timings([1.0]))


async def test_interleaved_variants_take_turns_in_a_rotating_order() -> None:
    calls: list[str] = []

    def client(name: str) -> object:
        async def turn() -> Timing:
            calls.append(name)
            return Timing(0.0, float(len(calls)), 0.0)
        return turn

    a, b, c = await interleave([client("a"), client("b"), client("c")], 3)  # type: ignore[list-item]
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert [len(a), len(b), len(c)] == [3, 3, 3]
    assert [t.total for t in a] == [1.0, 6.0, 8.0]  # sample i of every list is round i's
