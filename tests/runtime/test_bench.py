"""The benchmark harness runs every path end to end (smoke tests, never a timing assertion)."""

from __future__ import annotations

import trio_agent as ta
from trio_agent import _bench


async def test_every_benchmark_path_reaches_a_first_token() -> None:
    # The optional openai SDK row measures a third-party client (not installed in CI);
    # this smoke test covers every path of our own.
    ours = [name for name in _bench.PATHS if name != "openai_sdk_https"]
    rows = await _bench.run(2, _bench.Settings(delay=0.0, think=0.0, deltas=3), ours)
    assert [row["path"] for row in rows] == ours
    assert all(row["first_recv_p50_ms"] > 0 and row["runs"] == 2 for row in rows)
    assert all(row["first_recv_p50_ms"] >= row["first_emit_p50_ms"] for row in rows)
    assert rows[0]["ratio_to_floor"] == 1.0
    table = _bench.format_table(rows)
    assert all(name in table for name in ours) and "p99" in table


async def test_the_https_server_keeps_connections_alive(tmp_path: object) -> None:
    # A shared httpx client reuses one connection, so the handshake delay is charged once.
    settings = _bench.Settings(delay=0.0, think=0.0, deltas=2)
    import httpx

    async with _bench.open_bench_server(settings) as server, httpx.AsyncClient() as client:
        config = _bench.bench_config(server, str(tmp_path), transport=ta.Transport.HTTPS, http_client=client)
        for _ in range(3):
            await _bench.agent_first_token(config, wait_for_warmup=False)
        counts = (await server.last_requests())["counts"]
    assert counts["http_requests"] == 3
    assert counts["http_connections"] == 1


async def test_a_configured_warmup_failure_is_served_once(tmp_path: object) -> None:
    settings = _bench.Settings(delay=0.0, think=0.0, deltas=2)
    async with _bench.open_bench_server(settings) as server:
        await server.configure(_bench.Settings(delay=0.0, think=0.0, deltas=2, fail_warmups=1))
        config = _bench.bench_config(server, str(tmp_path))
        await _bench.agent_first_token(config, wait_for_warmup=True)  # falls back to a second socket
        counts = (await server.last_requests())["counts"]
    assert counts["ws_connections"] == 2


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert _bench.pct(samples, 0.99) == 99.0
    assert _bench.pct(samples, 0.5) == 50.0
    assert _bench.pct([3.0], 0.99) == 3.0


def test_a_missing_reference_client_is_explained() -> None:
    reason = _bench.missing_reference()
    assert reason is None or "openai" in reason
    assert ("openai_sdk_https" in _bench.available_paths()) == (reason is None)
