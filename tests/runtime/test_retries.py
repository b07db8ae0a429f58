"""Retries, backoff on Trio's clock, bad frames and closing cleanly (real loopback, MockClock)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio
import trio.testing
import trio_websocket

import trio_agent as ta
from trio_agent._transport.retry import backoff_delay
from trio_agent.testing import ClientDisconnected, FakeResponsesServer, frames

from ..conftest import events_of, make_config, run_model, scripted, warm


async def test_server_suggested_retry_delay_is_honoured_on_trios_clock(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        times.append(trio.current_time())
        await conn.send_error("overloaded", code="server_is_overloaded", retry_after=7)
        retry = await server.accept()
        replay = await retry.next_request()
        times.append(trio.current_time())
        assert "previous_response_id" not in replay
        assert len(replay["input"]) == 5
        await retry.send_final("resp-final")

    async with scripted(script, 60):
        output = await run_model(server, workspace, "retry please")
    assert times[1] - times[0] == 7.0
    (retrying,) = events_of(output, "model.attempt.retrying")
    assert retrying["error_class"] == "api_server"
    assert retrying["server_requested_delay"] is True
    assert retrying["delay_ns"] == 7_000_000_000
    (completed,) = events_of(output, "run.completed")
    assert completed["response_retries"] == 1
    assert completed["retry_backoff_duration_ns"] == 7_000_000_000
    (call,) = events_of(output, "model.call.completed")
    assert call["attempt"] == 2  # the attempt that succeeded
    assert call["duration_ns"] == 7_000_000_000  # the whole call, backoff included (virtual time)
    assert call["time_to_first_event_ns"] == 0  # counted from the successful attempt's send


async def test_backoff_doubles_with_jitter_and_gives_up_after_max_attempts(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    arrivals: list[float] = []

    async def script() -> None:
        conn = await warm(server)
        for attempt in range(3):
            if attempt:
                conn = await server.accept()
            await conn.next_request()
            arrivals.append(trio.current_time())
            await conn.send_error("boom", code="server_error")

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, max_attempts=3)
    async with scripted(script, 60):
        async with ta.open_agent(make_config(server, workspace, responses=responses)) as agent:
            turn = await agent.prompt("fail three times")
            with pytest.raises(ta.TurnFailed) as info:
                await turn.result()
    assert isinstance(info.value.responses_error, ta.ApiError)
    assert info.value.responses_error.code == "server_error"
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # 200 ms then 400 ms, each with the jitter derived from (call_index 1, attempt):
    # 0.192 s and 0.368 s; approx only for the float subtraction.
    assert gaps == [
        pytest.approx(backoff_delay(1, call_index=1), abs=1e-9),
        pytest.approx(backoff_delay(2, call_index=1), abs=1e-9),
    ]


async def test_terminal_api_error_is_not_retried_and_fails_the_turn(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.error_frame("quota gone", code="insufficient_quota"))

    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            collected: list[ta.AgentEvent] = []

            async def collect() -> None:
                async for event in agent.events:
                    collected.append(event)

            nursery.start_soon(collect)
            turn = await agent.prompt("spend")
            with pytest.raises(ta.TurnFailed) as info:
                await turn.result()
    assert isinstance(info.value.responses_error, ta.UsageLimitExceeded)
    kinds = [event.kind.value for event in collected]
    assert "model.attempt.retrying" not in kinds
    assert kinds[-3:] == ["model.call.failed", "run.error", "run.failed"]
    assert collected[-1].payload["status"] == "failed"
    assert len(server.handshakes) == 1


async def test_a_frame_that_is_not_json_fails_the_turn_with_a_clear_error(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn._ws.send_message("this is not json")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("garbage in")
            with pytest.raises(ta.TurnFailed, match="not JSON") as info:
                await turn.result()
    assert isinstance(info.value.responses_error, ta.ProtocolError)
    assert info.value.responses_error.error_class == "invalid_json"


async def test_next_prompt_works_after_a_failed_turn(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.error_frame("bad request", code="invalid_request_error"))
        follow = await conn.next_request()
        assert follow["input"][-1]["content"][0]["text"] == "second"
        await conn.send_final("resp-2", "recovered")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            with pytest.raises(ta.TurnFailed):
                await (await agent.prompt("first")).result()
            result = await (await agent.prompt("second")).result()
    assert result.final_message == "recovered"


async def test_open_agent_closes_its_socket_on_exit(server: FakeResponsesServer, workspace: Path) -> None:
    closed = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1")
        with pytest.raises(ClientDisconnected):
            await conn.next_request()
        closed.set()

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            await (await agent.prompt("hi")).result()
        # By the time the block has exited the client has closed the socket.
        await closed.wait()


async def test_leaving_the_block_waits_for_queued_turns(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        for index in range(3):
            await conn.next_request()
            await conn.send_final(f"resp-{index}", f"answer {index}")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turns = [await agent.prompt(f"prompt {i}") for i in range(3)]
        # The block exited only after all three ran, in order.
        results = [await turn.result() for turn in turns]
    assert [r.final_message for r in results] == ["answer 0", "answer 1", "answer 2"]
    with pytest.raises(ta.AgentClosed):
        await agent.prompt("too late")


async def test_idle_timeout_on_trios_clock_reconnects_and_replays(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        times.append(trio.current_time())
        # Say nothing: the client's idle timeout (300 s of Trio time) must fire.
        retry = await server.accept()
        times.append(trio.current_time())
        replay = await retry.next_request()
        assert "previous_response_id" not in replay
        await retry.send_final("resp-final")

    async with scripted(script, 1000):
        output = await run_model(server, workspace, "anyone there?")
    # The 300 s idle timeout, then the first backoff (call 1, attempt 1: 0.192 s).
    assert times[1] - times[0] == pytest.approx(300.0 + backoff_delay(1, call_index=1), abs=1e-9)
    (failed,) = events_of(output, "model.attempt.failed")
    assert failed["error_class"] == "event_idle_timeout"
    assert failed["duration_ns"] == 300_000_000_000
    (retrying,) = events_of(output, "model.attempt.retrying")
    assert retrying["delay_ns"] == 192_000_000
    assert [p["purpose"] for p in events_of(output, "model.connection.started")] == ["initial", "reconnect"]
    assert [p["status"] for p in events_of(output, "run.completed")] == ["completed"]


async def test_closing_the_agent_during_the_startup_warmup_is_prompt(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    warmup_sent = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()  # never answered
        warmup_sent.set()

    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            events = agent.events
            await warmup_sent.wait()
            closing = trio.current_time()
        # The warmup was still waiting: leaving the block cancels nothing the user
        # accepted, but the agent shut its socket and ended its events -- at once, on
        # the virtual clock (no timeout had to expire).
        kinds = [event.kind.value async for event in events]
        assert trio.current_time() - closing == 0.0
        nursery.cancel_scope.cancel()
    assert kinds[:2] == ["model.warmup.started", "model.connection.started"]


async def test_an_error_in_the_block_cancels_the_turn_and_propagates_unwrapped(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()  # never answered

    events: list[ta.AgentEvent] = []
    async with scripted(script) as nursery:
        with pytest.raises(KeyError, match="boom"):
            async with ta.open_agent(make_config(server, workspace)) as agent:
                stream = agent.events
                turn = await agent.prompt("work")
                raise KeyError("boom")
        events = [event async for event in stream]
        nursery.cancel_scope.cancel()
    assert events[-1].kind is ta.EventKind.RUN_FAILED
    assert events[-1].payload["status"] == "cancelled"
    with pytest.raises(ta.TurnCancelled):
        await turn.result()


async def test_a_rejected_handshake_says_what_to_do_and_is_not_retried(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        for _ in range(2):  # the warmup's connection, then the first request's
            raw = await server.accept_raw()
            await raw.reject(401, '{"error":{"message":"invalid api key"}}')

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            with pytest.raises(ta.TurnFailed, match=r"HTTP 401.*check the API key") as info:
                await (await agent.prompt("hi")).result()
    error = info.value.responses_error
    assert isinstance(error, ta.AuthenticationError)  # by cause, as over HTTPS (issue 8, item 10)
    assert error.status == 401 and error.error_class == "handshake_rejected" and not error.retryable


async def test_a_rate_limited_handshake_retries_after_the_servers_delay(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times: list[float] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.close()  # the next request needs a new socket
        raw = await server.accept_raw()
        times.append(trio.current_time())
        await raw.reject(429, "slow down", headers=[("retry-after", "3")])
        retry = await server.accept()
        times.append(trio.current_time())
        await retry.next_request()
        await retry.send_final("resp-1")

    async with scripted(script, 60):
        output = await run_model(server, workspace, "hi")
    assert times[1] - times[0] == pytest.approx(3.0, abs=1e-9)  # the first reconnect may back off first
    retries = events_of(output, "model.attempt.retrying")
    rate_limited = [(p["delay_ns"], p["server_requested_delay"]) for p in retries
                    if p["error_class"] == "handshake_rate_limit"]
    assert rate_limited == [(3_000_000_000, True)]


async def test_a_two_megabyte_frame_is_received_whole(server: FakeResponsesServer, workspace: Path) -> None:
    big = "x" * (2 << 20)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-big", big)

    async with scripted(script, 20):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            result = await (await agent.prompt("say a lot")).result()
    assert result.final_message == big


async def test_the_fake_server_survives_a_client_leaving_mid_handshake(server: FakeResponsesServer) -> None:
    with trio.fail_after(5):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(b"GET /v1/responses HTTP/1.1\r\nHost: x\r\n")  # half a handshake
        await stream.aclose()
        with pytest.raises(trio.BrokenResourceError, match="went away"):
            await server.accept()
        # ...and it still serves the next client.
        client = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.accept)
            await trio_websocket.wrap_client_stream(nursery, client, "127.0.0.1", "/v1/responses")
            nursery.cancel_scope.cancel()
        await client.aclose()


@pytest.mark.parametrize("body", [
    # llama-stack's shape: the useful part far past 500 characters, and no error.message
    '{"detail": [' + '{"loc": ["body"], "msg": "x"}, ' * 30 + '{"msg": "THE-USEFUL-PART"}]}',
    '{"error": {"message": "THE-USEFUL-PART: unknown tag additional_tools", "type": "invalid_request_error"}}',
])
async def test_a_rejected_handshake_shows_the_servers_message_or_the_start_of_its_body(
    server: FakeResponsesServer, workspace: Path, body: str
) -> None:
    """Issue 25, item 4: a rejection shows ``error.message`` when the body has one, else
    the body up to 4 KiB (it was cut at 500 characters, before llama-stack's message)."""
    assert len(body) > 500 or "error" in body

    async def script() -> None:
        for _ in range(2):  # the warmup's connection, then the first request's
            await (await server.accept_raw()).reject(400, body)

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            with pytest.raises(ta.TurnFailed) as info:
                await (await agent.prompt("hi")).result()
    message = str(info.value.responses_error)
    assert "HTTP 400: " in message and "THE-USEFUL-PART" in message
    if '"message"' in body:
        assert '"type"' not in message  # the message itself, not the JSON around it
