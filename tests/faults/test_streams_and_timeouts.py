"""Fault matrix, classes 8 and 9: SSE streams that end badly, and timeouts a user sets.

- An event stream cut inside an event (EOF before the blank line that dispatches it)
  discards that event and is a retryable connection loss, not a terminal protocol
  error; bare-CR line endings decode as the SSE standard says; an endless line fails
  with a clear error instead of growing without bound.
- ``Responses(connect_timeout=, handshake_timeout=, idle_timeout=)`` are what the
  transports use, on Trio's clock (exact under ``MockClock``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from ._peer import Peer

FINAL = frames.completed("resp-1", [frames.assistant_message("complete answer")])


async def send_raw(request: Any, data: bytes) -> None:
    await request._send(h11.Data(data=data))


@pytest.mark.parametrize("tail", [b"\n", b"", b"\r"], ids=["one_newline", "no_newline", "one_cr"])
async def test_a_stream_cut_inside_an_event_is_retried_not_fatal(
    server: FakeResponsesServer, workspace: Path, tail: bytes
) -> None:
    peer = Peer(server, ta.Transport.HTTPS)

    async def script() -> None:
        await peer.next_request()
        assert peer.http is not None
        await peer.http.start_stream()
        await send_raw(peer.http, b"data: " + json.dumps(FINAL).encode() + tail)  # never dispatched
        await peer.http.finish()
        await peer.next_request()
        await peer.send([FINAL])

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "complete answer"
    (failed,) = log.payloads("model.attempt.failed")
    assert (failed["error_class"], failed["retryable"]) == ("premature_close", True)
    assert "cut inside an event" in failed["error"]
    assert peer.connections == 2


async def test_bare_cr_line_endings_are_line_endings(server: FakeResponsesServer, workspace: Path) -> None:
    peer = Peer(server, ta.Transport.HTTPS)

    async def script() -> None:
        await peer.next_request()
        assert peer.http is not None
        await peer.http.start_stream()
        await send_raw(peer.http, b": comment\rdata: " + json.dumps(FINAL).encode() + b"\r\r")
        await peer.http.finish()

    async with scripted(script), ta.open_agent(peer.config(workspace)) as agent:
        assert (await (await agent.prompt("go")).result()).final_message == "complete answer"


async def test_an_endless_line_fails_clearly_instead_of_growing(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    from trio_agent._runtime._model import _https_exchange
    from trio_agent._wire.sse import SseDecoder

    # The same rule at a size a test can send (the 64 MiB default and the memory bound
    # are tested on the decoder itself, tests/wire/test_sse_limits.py).
    small = functools.partial(SseDecoder, max_line_bytes=64 << 10, max_event_bytes=64 << 10)
    monkeypatch.setattr(_https_exchange, "SseDecoder", small)
    peer = Peer(server, ta.Transport.HTTPS)
    closed: list[bool] = []

    async def script() -> None:
        await peer.next_request()
        assert peer.http is not None
        await peer.http.start_stream()
        chunk = b"x" * 8192
        try:
            for _ in range(64):  # 512 KiB without a newline
                await send_raw(peer.http, chunk)
            while await peer.http.stream.receive_some():
                pass  # until EOF
        except trio.BrokenResourceError:
            pass
        closed.append(True)  # the client gave up on the stream instead of buffering it

    config = peer.config(workspace, responses={"max_attempts": 1})
    async with scripted(script), ta.open_agent(config) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("go")).result()
    error = info.value.responses_error
    assert isinstance(error, ta.ProtocolError) and error.error_class == "sse_line_too_long"
    assert closed == [True]


async def test_the_idle_timeout_is_the_configured_one(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)
    times: list[float] = []

    async def script() -> None:
        await peer.next_request()
        times.append(trio.current_time())
        await peer.next_request(new_connection=True)  # the retry, after the idle timeout
        times.append(trio.current_time())
        await peer.send([FINAL])

    log = EventLog()
    config = peer.config(workspace, responses={"idle_timeout": 7.5})
    async with scripted(script, 60) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "complete answer"
    from trio_agent._transport.retry import backoff_delay

    assert times[1] - times[0] == pytest.approx(7.5 + backoff_delay(1, call_index=1), abs=1e-9)
    (failed,) = log.payloads("model.attempt.failed")
    assert (failed["error_class"], failed["duration_ns"]) == ("event_idle_timeout", 7_500_000_000)


async def test_frames_keep_a_websocket_response_alive_and_the_timeout_counts_from_the_last(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Frames 5 s apart keep a response alive well past the 7.5 s idle timeout; after the
    last one the attempt fails exactly 7.5 s later (the read re-arms its deadline from
    the latest frame when the first one expires)."""
    times: list[float] = []

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()  # the warmup
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send(frames.response_created("resp-1"))
        for index in range(4):
            await trio.sleep(5.0)
            await conn.send(frames.text_delta(0, f"part {index} "))
        times.append(trio.current_time())
        retry = await server.accept()
        await retry.next_request()
        times.append(trio.current_time())
        await retry.send_final("resp-2", "complete answer")

    log = EventLog()
    config = ta.AgentConfig(auth="test", workspace=workspace,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url, idle_timeout=7.5))
    async with scripted(script, 120) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "complete answer"
    from trio_agent._transport.retry import backoff_delay

    assert times[1] - times[0] == pytest.approx(7.5 + backoff_delay(1, call_index=1), abs=1e-9)
    (failed,) = log.payloads("model.attempt.failed")
    assert (failed["error_class"], failed["duration_ns"]) == ("event_idle_timeout", 27_500_000_000)
    assert len(log.payloads("assistant.delta")) == 4


@pytest.mark.parametrize("which", ["connect", "handshake"])
async def test_connect_and_handshake_timeouts_are_the_configured_ones(
    workspace: Path, autojump_clock: trio.testing.MockClock, which: str
) -> None:
    """A server that accepts TCP and never answers the handshake: the attempt fails
    after the configured time exactly (the smaller of the two limits)."""
    async with trio.open_nursery() as nursery:
        server = FakeResponsesServer()
        await nursery.start(server.serve)
        limits = {"connect_timeout": 12.0, "handshake_timeout": 4.0} if which == "handshake" else {
            "connect_timeout": 9.0}

        async def silent() -> None:
            while True:
                await server.accept_raw()  # and never answer

        nursery.start_soon(silent)
        log = EventLog()
        config = ta.AgentConfig(auth="k", workspace=workspace, responses=ta.Responses(
            profile=ta.Profile.OPENAI,
            websocket_url=server.url, max_attempts=1, **limits))  # type: ignore[arg-type]
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            with pytest.raises(ta.TurnFailed) as info:
                await (await agent.prompt("go")).result()
        nursery.cancel_scope.cancel()
    assert isinstance(info.value.responses_error, ta.ConnectionFailed)
    assert info.value.responses_error.error_class == "handshake_timeout"
    expected = 4.0 if which == "handshake" else 9.0
    durations = [p["duration_ns"] for p in log.payloads("model.connection.failed")]
    assert durations == [int(expected * 1e9)] * 2  # the warmup's connection, then the turn's


async def test_an_https_response_head_that_never_comes_times_out_at_the_handshake_timeout(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The request is read whole and never answered: the attempt fails after
    ``handshake_timeout`` exactly (a retryable ``ResponseTimeout``), the retry is answered."""
    peer = Peer(server, ta.Transport.HTTPS)
    times: list[float] = []

    async def script() -> None:
        await peer.next_request()  # held: no head, ever
        times.append(trio.current_time())
        await peer.next_request()
        times.append(trio.current_time())
        await peer.send([FINAL])

    log = EventLog()
    config = peer.config(workspace, responses={"handshake_timeout": 4.0, "idle_timeout": 60.0})
    async with scripted(script, 60) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "complete answer"
    from trio_agent._transport.retry import backoff_delay

    assert times[1] - times[0] == pytest.approx(4.0 + backoff_delay(1, call_index=1), abs=1e-9)
    (failed,) = log.payloads("model.attempt.failed")
    assert (failed["error_class"], failed["retryable"]) == ("https_head_timeout", True)
    assert "no response head within 4 s" in str(failed["error"])


async def test_an_interrupting_steer_while_the_https_head_is_awaited_is_no_timeout(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A steer with ``interrupt=True`` before the head arrives closes the request at once
    (no head timeout, no failed attempt); the next request carries the steer."""
    peer = Peer(server, ta.Transport.HTTPS)
    held = trio.Event()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        await peer.next_request()  # held: no head
        held.set()
        bodies.append(await peer.next_request())
        await peer.send([FINAL])

    log = EventLog()
    config = peer.config(workspace, responses={"handshake_timeout": 4.0})
    async with scripted(script, 60) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("go")
        await held.wait()
        await trio.sleep(1.0)
        await turn.steer("change course", interrupt=True)
        assert (await turn.result()).final_message == "complete answer"
    assert log.payloads("model.attempt.failed") == []
    assert "change course" in json.dumps(bodies[0]["input"])
