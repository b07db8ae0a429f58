"""The early socket of an agent opened with its prompt in hand (``open_agent(config,
warmup=False)``, ``trio-agent run``; ``_connections.EarlyLink``): its handshake is on
the wire before the agent is built, and it is the very socket the prompt then goes out
on -- one handshake, the prompt its first request. An agent opened as before
(``warmup=True``) dials only once it is built. Observed through a dialer that records
the first bytes sent, and a tools factory (called while the agent is built) that looks
at that record.
"""

from __future__ import annotations

import select
import socket
import urllib.parse
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._transport._early_dial import early_dial_endpoint
from trio_agent.testing import FakeResponsesServer

from ..acceptance.test_warmup import assert_full_first_request
from ..conftest import make_config, warm


class SentRecord(trio.abc.Stream):
    """A TCP stream that notes its first send (the handshake request's bytes)."""

    def __init__(self, inner: trio.abc.Stream, log: list[str]) -> None:
        self.inner = inner
        self.log = log

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)
        if bytes(data).startswith(b"GET "):
            self.log.append("handshake sent")

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


def observed_config(server: FakeResponsesServer, workspace: Path, log: list[str]) -> ta.AgentConfig:
    async def dial(host: str, port: int) -> trio.abc.Stream:
        log.append("dial")
        return SentRecord(await trio.open_tcp_stream(host, port), log)

    def tools(_handle: object) -> ta.Tools:
        log.append("agent built")
        return ta.Tools.default()

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=dial)
    return make_config(server, workspace, responses=responses, tools_factory=tools)


async def test_with_the_prompt_in_hand_the_handshake_leaves_before_the_agent_is_built(
    server: FakeResponsesServer, workspace: Path
) -> None:
    log: list[str] = []

    async def script() -> None:
        conn = await server.accept()
        assert_full_first_request(await conn.next_request())  # the socket's first request: the prompt
        await conn.send_final("resp-1", "early")

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(observed_config(server, workspace, log), warmup=False) as agent:
                result = await (await agent.prompt("hello")).result()
    assert log == ["dial", "handshake sent", "agent built"]
    assert result.final_message == "early"
    assert len(server.handshakes) == 1
    assert agent.statistics().connection_attempts == 1


async def test_an_agent_that_warms_up_dials_once_it_is_built_as_before(
    server: FakeResponsesServer, workspace: Path
) -> None:
    log: list[str] = []

    async def script() -> None:
        await warm(server)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(observed_config(server, workspace, log)):
                await trio.testing.wait_all_tasks_blocked()
    assert log == ["agent built", "dial", "handshake sent"]


@pytest.mark.parametrize("fails", ["tools_factory", "sandbox"])
async def test_a_construction_that_fails_after_the_early_handshake_closes_its_socket(
    server: FakeResponsesServer, workspace: Path, fails: str
) -> None:
    """The early socket's task ends with the failed opening: open_agent raises the
    construction's error, nothing of the agent outlives it, the server sees the socket go."""
    closed = trio.Event()

    async def script() -> None:
        raw = await server.accept_raw()
        while await raw.stream.receive_some():
            pass
        closed.set()

    def broken(_handle: object) -> ta.Tools:
        raise ta.ConfigError("no tools today")

    config = make_config(server, workspace)
    if fails == "tools_factory":
        config = make_config(server, workspace, tools_factory=broken)
    else:  # a configured sandbox that cannot work: refused at startup
        config = make_config(server, workspace, sandbox=ta.Sandbox(bwrap="/nonexistent/bwrap"))
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            with pytest.raises((ta.ConfigError, ta.SandboxUnavailable)):
                async with ta.open_agent(config, warmup=False):
                    pytest.fail("the agent opened")
            await closed.wait()
    assert server.requests == []  # nothing was sent on it


# -- HTTPS: the first TCP connection (``_transport._early_dial``) ---------------------------


class Relay:
    """A plain listening socket in front of the fake server's HTTP port: the test can
    see a connection waiting in its backlog (``pending``) before anything accepted it,
    then relays what is accepted to the fake server, byte for byte."""

    def __init__(self, server: FakeResponsesServer) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.upstream = urllib.parse.urlsplit(server.http_base_url)
        self.accepted = 0
        self.closed = trio.Event()  # a relayed client closed its side

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.upstream.path}"

    def pending(self) -> bool:
        return bool(select.select([self.listener], [], [], 0)[0])

    async def serve(self) -> None:
        with trio.socket.from_stdlib_socket(self.listener) as listener:  # closed when the test ends
            await self._accept(listener)

    async def _accept(self, listener: trio.socket.SocketType) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                conn, _ = await listener.accept()
                self.accepted += 1
                nursery.start_soon(self._relay, trio.SocketStream(conn))

    async def _relay(self, client: trio.SocketStream) -> None:
        host, port = self.upstream.hostname or "", self.upstream.port or 80
        async with client, await trio.open_tcp_stream(host, port) as upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._copy, upstream, client, False)
            await self._copy(client, upstream, True)
            nursery.cancel_scope.cancel()

    async def _copy(self, source: trio.SocketStream, sink: trio.SocketStream, client: bool) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except trio.BrokenResourceError:
            pass
        if client:
            self.closed.set()


def https_config(relay: Relay, workspace: Path, log: list[str],
                 transport: ta.Transport = ta.Transport.HTTPS) -> ta.AgentConfig:
    def tools(_handle: object) -> ta.Tools:
        # waiting in the backlog, or already taken by the relay (a WebSocket's handshake went out)
        log.append("connected" if relay.pending() or relay.accepted else "not connected")
        return ta.Tools.default()

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=transport, api_base_url=relay.base_url,
                             websocket_url=relay.base_url.replace("http:", "ws:") + "/responses")
    return make_config(FakeResponsesServer(), workspace, responses=responses, tools_factory=tools)


@pytest.mark.parametrize("transport", [ta.Transport.HTTPS, ta.Transport.WEBSOCKET])
@pytest.mark.parametrize("warmup", [False, True])
async def test_the_first_connection_is_made_before_the_agent_is_built(
    server: FakeResponsesServer, workspace: Path, warmup: bool, transport: ta.Transport
) -> None:
    """Without a dialer of the application's: the TCP connection (an IP literal's, from
    the opening task) exists while the agent is built."""
    log: list[str] = []
    relay = Relay(server)

    async def script() -> None:
        if transport is ta.Transport.WEBSOCKET:
            conn = await server.accept()
            if warmup:
                await conn.next_request()  # the warmup
                await conn.send_final("resp-w", "")
            await conn.next_request()
            await conn.send_final("resp-1", "over the early connection")
            return
        request = await server.accept_http()
        await request.send_final("resp-1", "over the early connection")

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.serve)
            nursery.start_soon(script)
            async with ta.open_agent(https_config(relay, workspace, log, transport), warmup=warmup) as agent:
                result = await (await agent.prompt("hello")).result()
            nursery.cancel_scope.cancel()
    assert log == ["connected" if not warmup else "not connected"]
    assert result.final_message == "over the early connection"
    assert relay.accepted == 1  # the request went over that one connection


async def test_an_unclaimed_early_connection_is_closed_with_the_agent(
    server: FakeResponsesServer, workspace: Path
) -> None:
    relay = Relay(server)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.serve)
            async with ta.open_agent(https_config(relay, workspace, []), warmup=False):
                pass  # no prompt: nothing claims it
            await relay.closed.wait()
            nursery.cancel_scope.cancel()
    assert relay.accepted == 1 and server.requests == []


@pytest.mark.parametrize("transport", [ta.Transport.HTTPS, ta.Transport.WEBSOCKET])
async def test_an_early_connection_refused_fails_the_first_request_as_an_ordinary_connect(
    workspace: Path, transport: ta.Transport
) -> None:
    """Nothing listens: the early connect's refusal is the first request's connect error,
    mapped and retried as before -- the same outcome as an agent that dials late."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # a port nothing listens on
    outcomes: list[str] = []
    for warmup in (False, True):
        responses = ta.Responses(profile=ta.Profile.OPENAI, transport=transport, max_attempts=2,
                                 api_base_url=f"http://127.0.0.1:{port}/v1",
                                 websocket_url=f"ws://127.0.0.1:{port}/v1/responses")
        with trio.fail_after(30):
            async with ta.open_agent(make_config(FakeResponsesServer(), workspace, responses=responses),
                                     warmup=warmup) as agent:
                turn = await agent.prompt("hello")
                with pytest.raises(ta.TurnFailed) as failed:
                    await turn.result()
                outcomes.append(f"{type(failed.value.__cause__).__name__}: {failed.value}")
    assert outcomes[0] == outcomes[1]
    assert "127.0.0.1" in outcomes[0]


def test_no_early_connection_where_proxy_variables_route_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    assert early_dial_endpoint("https://api.example.com/v1") == ("api.example.com", 443)
    assert early_dial_endpoint("http://127.0.0.1:8000/v1") == ("127.0.0.1", 8000)
    monkeypatch.setenv("https_proxy", "http://proxy.local:3128")
    assert early_dial_endpoint("https://api.example.com/v1") is None
