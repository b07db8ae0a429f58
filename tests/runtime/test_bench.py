"""The benchmark harness runs every path end to end (smoke tests, never a timing assertion)."""

from __future__ import annotations

import json
import time

import h11
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.cli._bench import _measure, _server


async def test_every_benchmark_path_reaches_a_first_token() -> None:
    # The optional openai SDK row measures a third-party client (not installed in CI);
    # this smoke test covers every path of our own.
    ours = [name for name in _measure.PATHS if name != "openai_sdk_https"]
    rows = await _measure.run(2, _server.Settings(delay=0.0, think=0.0, deltas=3), ours)
    assert [row["path"] for row in rows] == ours
    assert ours[:2] == ["bare_socket_floor", "bare_https_floor"]
    assert all(row["first_recv_p50_ms"] > 0 and row["runs"] == 2 for row in rows)
    assert all(row["first_recv_p50_ms"] >= row["first_emit_p50_ms"] for row in rows)
    assert rows[0]["ratio_to_floor"] == 1.0 and rows[1]["ratio_to_floor"] == 1.0
    table = _measure.format_table(rows)
    assert all(name in table for name in ours) and "p99" in table


async def test_https_rows_are_divided_by_the_bare_https_floor() -> None:
    # Each transport against its own wire's floor measured in the same run: HTTP/SSE
    # rows over the bare httpx client, WebSocket rows over the bare trio-websocket one.
    paths = ["bare_socket_floor", "bare_https_floor", "cold_connect", "https_shared_client"]
    rows = {r["path"]: r for r in await _measure.run(2, _server.Settings(delay=0.0, think=0.0, deltas=3), paths)}
    assert rows["https_shared_client"]["floor"] == "bare_https_floor"
    assert rows["cold_connect"]["floor"] == "bare_socket_floor"
    for name in ("https_shared_client", "cold_connect"):
        floor = rows[rows[name]["floor"]]["first_recv_p50_ms"]
        assert rows[name]["ratio_to_floor"] == pytest.approx(rows[name]["first_recv_p50_ms"] / floor)
    assert _measure.floor_of("openai_sdk_https") == "bare_https_floor"


async def test_the_https_server_keeps_connections_alive(tmp_path: object) -> None:
    # A shared httpx client reuses one connection, so the handshake delay is charged once.
    settings = _server.Settings(delay=0.0, think=0.0, deltas=2)
    import httpx

    async with _server.open_bench_server(settings) as server, httpx.AsyncClient() as client:
        config = _measure.bench_config(server, str(tmp_path), transport=ta.Transport.HTTPS, http_client=client)
        for _ in range(3):
            await _measure.agent_first_token(config, wait_for_warmup=False)
        counts = (await server.last_requests())["counts"]
    assert counts["http_requests"] == 3
    assert counts["http_connections"] == 1


async def test_a_configured_warmup_failure_is_served_once(tmp_path: object) -> None:
    settings = _server.Settings(delay=0.0, think=0.0, deltas=2)
    async with _server.open_bench_server(settings) as server:
        await server.configure(_server.Settings(delay=0.0, think=0.0, deltas=2, fail_warmups=1))
        config = _measure.bench_config(server, str(tmp_path))
        await _measure.agent_first_token(config, wait_for_warmup=True)  # falls back to a second socket
        counts = (await server.last_requests())["counts"]
    assert counts["ws_connections"] == 2


async def test_cold_connect_sends_its_prompt_without_a_warmup(tmp_path: object) -> None:
    # The prompt in hand at the opening (as ``trio-agent run``): one request on the
    # socket, the prompt's; startup_prewarm's agent warms up first and then prompts.
    settings = _server.Settings(delay=0.0, think=0.0, deltas=2)
    async with _server.open_bench_server(settings) as server:
        await _measure.PATHS["cold_connect"](_measure._Run(server, str(tmp_path), {}))
        cold = dict((await server.last_requests())["counts"])
        await _measure.PATHS["startup_prewarm"](_measure._Run(server, str(tmp_path), {}))
        warm = (await server.last_requests())["counts"]
    assert (cold["ws_connections"], cold["ws_requests"]) == (1, 1)
    assert (warm["ws_connections"], warm["ws_requests"]) == (2, 3)


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert _measure.pct(samples, 0.99) == 99.0
    assert _measure.pct(samples, 0.5) == 50.0
    assert _measure.pct([3.0], 0.99) == 3.0


def test_a_missing_reference_client_is_explained() -> None:
    reason = _measure.missing_reference()
    assert reason is None or "openai" in reason
    assert ("openai_sdk_https" in _measure.available_paths()) == (reason is None)


async def _one_http_exchange(stream: trio.abc.Stream, client: h11.Connection) -> bytes:
    body = json.dumps({"model": "m", "input": []}).encode()
    request = h11.Request(method="POST", target="/v1/responses", headers=[
        ("host", "bench"), ("content-type", "application/json"), ("content-length", str(len(body)))])
    await stream.send_all(client.send(request) + client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
    received = b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Data):
            received += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            client.start_next_cycle()
            return received


async def test_the_https_server_charges_the_handshake_delay_once_per_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # On Trio's virtual clock: a new connection pays the TCP+TLS round trip (2 x delay)
    # once; every request pays delay + think + delay, on the first connection and on a
    # kept-alive one alike.
    delay, think = 0.010, 0.020
    state = _server._ServerState(_server.Settings(delay=delay, think=think, deltas=2))
    for _ in range(2):  # a second connection pays its handshake again
        client_stream, server_stream = trio.testing.memory_stream_pair()
        client = h11.Connection(h11.CLIENT)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_server._http_connection, server_stream, state)
            took = []
            for _ in range(3):
                start = trio.current_time()
                body = await _one_http_exchange(client_stream, client)
                took.append(trio.current_time() - start)
                assert body.endswith(b"data: [DONE]\n\n") and b"response.completed" in body
            await client_stream.aclose()
        assert took == pytest.approx([2 * delay + delay + think + delay, delay + think + delay,
                                      delay + think + delay])
    assert state.counts["http_connections"] == 2 and state.counts["http_requests"] == 6


def test_the_table_shows_emit_and_received_first_tokens_cpu_and_the_samples_behind_p99() -> None:
    row = {"path": "startup_prewarm", "first_emit_p50_ms": 1.0, "first_recv_p50_ms": 1.25, "first_recv_p99_ms": 3.5,
           "ratio_to_floor": 1.1, "cpu_ms_per_turn": 0.75, "runs": 30, "floor": "bare_socket_floor"}
    table = _measure.format_table([row])
    head, units, line = table.splitlines()
    assert head.split() == ["path", "first", "emit", "first", "recv", "p99", "recv", "x", "floor", "cpu/turn", "n",
                            "floor"]
    assert line.split() == ["startup_prewarm", "1.00", "1.25", "3.50", "1.10", "0.75", "30", "socket"]
    assert "p50 ms" in units


async def test_the_paths_are_interleaved_round_by_round(monkeypatch: pytest.MonkeyPatch) -> None:
    # One discarded round, then every round runs each path once, the order rotated.
    calls: list[str] = []

    def fake(name: str) -> object:
        async def client(_: object) -> _measure.Sample:
            calls.append(name)
            return _measure.Sample(0.001, 0.001, 0.0)
        return client

    for name in ("a", "b", "c"):
        monkeypatch.setitem(_measure.PATHS, name, fake(name))

    class Server:
        async def configure(self, settings: _server.Settings) -> None:
            pass

    run_ = _measure._Run(Server(), "", {})  # type: ignore[arg-type]
    samples = await _measure._measure(["a", "b", "c"], run_, _server.Settings(), 2)
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {name: len(s) for name, s in samples.items()} == {"a": 2, "b": 2, "c": 2}


async def test_a_request_arrives_when_the_kernel_received_it_not_when_the_server_read_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bench server's answer is due at the request's arrival plus its delays; the
    # arrival is the kernel's receive timestamp (SO_TIMESTAMPNS), so a server that reads
    # late does not delay the answer. Here the wall clock is made to read 5 s after the
    # kernel's stamp: the arrival is 5 s before the read, not the read itself.
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = _server._Arrivals(await listeners[0].accept())
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + 5.0)
    # The kernel turns receive stamps on lazily (a deferred work item, after the first
    # socket asks): the first segments may come unstamped, so send until one is.
    for _ in range(10_000):
        await client.send_all(b"request")
        assert await server.receive_some() == b"request"
        if trio.current_time() - server.arrival > 4.0:
            break
    assert trio.current_time() - server.arrival > 4.0
    await client.aclose()
    assert await server.receive_some() == b""
    await server.aclose()
    await listeners[0].aclose()
