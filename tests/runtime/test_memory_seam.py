"""The in-memory seam under both transports (issue 7, Tests; DESIGN layer (b)).

``FakeResponsesServer.in_memory()`` + ``Responses(dialer=server.dial)`` (WebSocket) or
``http_client=server.http_client()`` (HTTPS): the same scripts as over loopback, with
no socket at all, under ``MockClock(autojump_threshold=0)`` -- so the virtual times
below are exact: a server that waits 5.0 s is seen 5.0 s later, and retries wait
exactly the pure ``backoff_delay`` values.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest
import trio
import trio.testing
import trustme

import trio_agent as ta
from trio_agent._transport.https import HttpsTransport
from trio_agent._transport.retry import backoff_delay
from trio_agent.testing import MEMORY_HOST, FakeResponsesServer, frames

from ..conftest import EventLog, assert_warmup, make_config, memory_config, scripted, warm

TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]
NS = 1_000_000_000


@asynccontextmanager
async def memory_agent(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, log: EventLog, **responses: Any
) -> AsyncIterator[ta.Agent]:
    """An agent on ``server``'s in-memory seam, its events collected into ``log``."""
    if transport is ta.Transport.WEBSOCKET:
        config = memory_config(server, workspace, responses=ta.Responses(
            profile=ta.Profile.OPENAI,
            websocket_url=server.url, dialer=server.dial, **responses))
        async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            yield agent
        return
    async with server.http_client() as client:
        config = make_config(server, workspace, responses=ta.Responses(
            profile=ta.Profile.OPENAI,
            transport=transport, api_base_url=server.http_base_url, http_client=client, **responses))
        async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            yield agent


async def test_a_warm_websocket_turn_at_exact_virtual_times(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    seen: dict[str, float] = {}

    async def script() -> None:
        conn = await memory_server.accept()
        assert_warmup(await conn.next_request())
        await trio.sleep(2.0)  # a slow warmup: the first prompt waits for it
        await conn.send_warmup("resp-warmup")
        request = await conn.next_request()
        seen["request"] = trio.current_time()
        assert request["previous_response_id"] == "resp-warmup" and len(request["input"]) == 3
        await trio.sleep(5.0)
        await conn.send_final("resp-1", "in memory")

    log = EventLog()
    async with scripted(script), memory_agent(memory_server, workspace, ta.Transport.WEBSOCKET, log) as agent:
        result = await (await agent.prompt("hello")).result()
        seen["result"] = trio.current_time()
    assert result.final_message == "in memory"
    assert seen == {"request": 2.0, "result": 7.0}
    (warmup,) = log.payloads("model.warmup.completed")
    assert warmup["duration_ns"] == 2 * NS
    (call,) = log.payloads("model.call.completed")
    assert call["time_to_first_event_ns"] == 5 * NS  # from the request on the wire
    (done,) = [event for event in log.events if event.kind is ta.EventKind.RUN_COMPLETED]
    assert done.time == 7.0
    assert memory_server.dialed == [(MEMORY_HOST, 80)] and memory_server.port is None


async def test_an_https_turn_at_exact_virtual_times(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    seen: dict[str, float] = {}

    async def script() -> None:
        request = await memory_server.accept_http()
        seen["request"] = trio.current_time()
        assert request.path == "/v1/responses" and request.headers["host"] == MEMORY_HOST
        await trio.sleep(5.0)
        await request.start_stream()
        await request.send_event(frames.response_created("resp-1"))
        await trio.sleep(1.5)
        await request.send_event(frames.completed("resp-1", [frames.assistant_message("over https")]))
        await request.finish()

    log = EventLog()
    async with scripted(script), memory_agent(memory_server, workspace, ta.Transport.HTTPS, log) as agent:
        result = await (await agent.prompt("hello")).result()
        seen["result"] = trio.current_time()
    assert result.final_message == "over https"
    assert seen == {"request": 0.0, "result": 6.5}
    (call,) = log.payloads("model.call.completed")
    assert call["time_to_first_event_ns"] == 5 * NS and call["duration_ns"] == int(6.5 * NS)  # nothing waited
    assert memory_server.dialed == [(MEMORY_HOST, 80)]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
async def test_retries_wait_exactly_the_backoff_delays(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport,
) -> None:
    """Two retryable failures, then an answer: each retry starts exactly
    ``backoff_delay(attempt, call_index=...)`` after the failure before it."""
    arrivals: list[float] = []
    websocket = transport is ta.Transport.WEBSOCKET

    async def script() -> None:
        if websocket:
            conn = await warm(memory_server)
            for _ in range(2):
                await conn.next_request()
                arrivals.append(trio.current_time())
                await conn.send_error("overloaded", code="server_is_overloaded")
                conn = await memory_server.accept()  # a retry opens a new socket
            await conn.next_request()
            arrivals.append(trio.current_time())
            await conn.send_final("resp-ok")
            return
        for _ in range(2):
            request = await memory_server.accept_http()
            arrivals.append(trio.current_time())
            await request.respond(503, '{"error":{"message":"overloaded"}}')
        request = await memory_server.accept_http()
        arrivals.append(trio.current_time())
        await request.send_final("resp-ok")

    log = EventLog()
    async with scripted(script, 60), memory_agent(memory_server, workspace, transport, log) as agent:
        await (await agent.prompt("hello")).result()
    retrying = log.payloads("model.attempt.retrying")
    call_index = retrying[0]["model_call_index"]
    delays = [backoff_delay(attempt, call_index=call_index) for attempt in (1, 2)]
    assert [p["delay_ns"] for p in retrying] == [int(d * NS) for d in delays]
    assert arrivals == [0.0, delays[0], delays[0] + delays[1]]
    assert len(memory_server.dialed) == 3


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
async def test_no_real_socket_is_opened(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every way of opening a socket patched to fail, a whole turn still runs."""

    def no_sockets(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a real socket was opened on the in-memory seam")

    for module, name in [(trio, "open_tcp_stream"), (trio, "open_ssl_over_tcp_stream"),
                         (trio, "open_tcp_listeners"), (trio.socket, "socket")]:
        monkeypatch.setattr(module, name, no_sockets)

    async def script() -> None:
        if transport is ta.Transport.WEBSOCKET:
            conn = await warm(memory_server)
            await conn.next_request()
            await conn.send_final("resp-1", "no sockets")
        else:
            await (await memory_server.accept_http()).send_final("resp-1", "no sockets")

    log = EventLog()
    async with scripted(script), memory_agent(memory_server, workspace, transport, log) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "no sockets"
    assert memory_server.dialed == [(MEMORY_HOST, 80)]


async def test_a_server_that_is_not_serving_refuses_the_dial(
    workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = FakeResponsesServer.in_memory()  # never served: nothing "listens"
    config = memory_config(server, workspace, responses=ta.Responses(
        profile=ta.Profile.OPENAI,
        websocket_url=server.url, dialer=server.dial, max_attempts=1))
    async with ta.open_agent(config) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    error = info.value.responses_error
    assert isinstance(error, ta.ConnectionFailed) and error.error_class == "handshake_transport"
    assert "is not serving" in str(error.__cause__)
    assert server.dialed == []


# -- TLS is layered on the dialed stream ---------------------------------------------


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_memory_server(nursery: trio.Nursery, ca: trustme.CA) -> FakeResponsesServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(MEMORY_HOST).configure_cert(context)
    server = FakeResponsesServer.in_memory(ssl_context=context)
    await nursery.start(server.serve)
    return server


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_wss_and_https_over_the_memory_seam(
    tls_memory_server: FakeResponsesServer, ca: trustme.CA, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = tls_memory_server
    assert server.url.startswith("wss://") and server.http_base_url.startswith("https://")

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "secure websocket")
        await (await server.accept_http()).send_final("resp-2", "secure https")

    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             websocket_url=server.url, dialer=server.dial, ssl_context=trusting(ca))
    async with scripted(script):
        async with ta.open_agent(memory_config(server, workspace, responses=responses)) as agent:
            assert (await (await agent.prompt("hi")).result()).final_message == "secure websocket"
        async with server.http_client(ssl_context=trusting(ca)) as client:
            config = make_config(server, workspace, session_id="https", responses=ta.Responses(
                profile=ta.Profile.OPENAI,
                transport=ta.Transport.HTTPS, api_base_url=server.http_base_url, http_client=client))
            async with ta.open_agent(config) as agent:
                assert (await (await agent.prompt("hi")).result()).final_message == "secure https"
    assert server.dialed == [(MEMORY_HOST, 443), (MEMORY_HOST, 443)]


# -- HttpsTransport(dialer=...): the path the agent's own HTTPS client takes ---------------


async def _post(transport: HttpsTransport) -> list[bytes]:
    async with transport.open_stream({"type": "response.create"}, [("Authorization", "Bearer k")]) as chunks:
        return [chunk async for chunk in chunks]


async def test_https_transport_dials_and_times_out_on_trio_time(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    transport = HttpsTransport(memory_server.http_base_url, dialer=memory_server.dial, idle_timeout=7.0)

    async def script() -> None:
        request = await memory_server.accept_http()
        assert request.headers["authorization"] == "Bearer k"
        await request.start_stream()
        await request.send_event(frames.response_created("resp-1"))
        await trio.sleep_forever()  # then silence

    start = trio.current_time()
    async with scripted(script, 60) as nursery:
        with pytest.raises(ta.ResponseTimeout, match="timed out"):
            await _post(transport)
        nursery.cancel_scope.cancel()
    assert trio.current_time() - start == 7.0
    await transport.aclose()


@pytest.mark.parametrize(
    ("make_dialer", "expected"),
    [
        (lambda server: server.dial, ta.ConnectionFailed),  # the server below is not serving
        (lambda server: _raising(ConnectionResetError("reset by peer")), ta.ConnectionFailed),
        (lambda server: _raising(trio.BrokenResourceError("broken")), ta.ConnectionFailed),
        (lambda server: _raising(LookupError("a dialer bug")), LookupError),
    ],
    ids=["refused", "reset", "broken", "bug"],
)
async def test_https_dial_failures_are_mapped_and_bugs_are_not(
    autojump_clock: trio.testing.MockClock,
    make_dialer: Callable[[FakeResponsesServer], Any],
    expected: type[BaseException],
) -> None:
    server = FakeResponsesServer.in_memory()
    transport = HttpsTransport(server.http_base_url, dialer=make_dialer(server))
    with pytest.raises(expected) as info:
        await _post(transport)
    if expected is ta.ConnectionFailed:
        assert isinstance(info.value, ta.ConnectionFailed)
        assert info.value.error_class == "https_connect" and info.value.retryable
    await transport.aclose()


def _raising(error: BaseException) -> Callable[[str, int], Any]:
    async def dial(host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        raise error

    return dial


async def test_an_interrupting_steer_gives_up_an_https_stream_on_the_memory_seam(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Closing a response stream early (a preempting steer) closes the dialed stream:
    the server's next send fails, and the steer goes out on a new connection."""
    streaming = trio.Event()

    async def script() -> None:
        first = await memory_server.accept_http()
        await first.start_stream()
        await first.send_event(frames.response_created("resp-1"))
        await first.send_event(frames.text_delta(0, "partial"))
        streaming.set()
        second = await memory_server.accept_http()  # the client gave the first stream up
        assert second.body["input"][-1]["content"][0]["text"] == "stop"
        await second.send_final("resp-2")
        with pytest.raises(trio.BrokenResourceError):
            await first.send_event(frames.text_delta(0, "ignored"))

    log = EventLog()
    async with scripted(script), memory_agent(memory_server, workspace, ta.Transport.HTTPS, log) as agent:
        turn = await agent.prompt("start")
        await streaming.wait()
        await trio.testing.wait_all_tasks_blocked()
        await turn.steer("stop", interrupt=True)
        assert (await turn.result()).final_message == "done"
    assert len(memory_server.dialed) == 2
