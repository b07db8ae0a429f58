"""The benchmark harness runs every path end to end (a smoke test, not a timing assertion)."""

from __future__ import annotations

from trio_agent import _bench


async def test_every_benchmark_path_reaches_a_first_token() -> None:
    # The optional openai SDK row measures a third-party client (not installed in CI);
    # this smoke test covers every path of our own.
    ours = [name for name in _bench.PATHS if name != "openai_sdk_https"]
    rows = await _bench.run(2, _bench.Settings(delay=0.0, think=0.0, deltas=3), ours)
    assert [row["path"] for row in rows] == ours
    assert all(row["p50_ms"] > 0 and row["runs"] == 2 for row in rows)
    assert rows[0]["ratio_to_floor"] == 1.0
