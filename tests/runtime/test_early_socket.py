"""The early socket of an agent opened with its prompt in hand (``open_agent(config,
warmup=False)``, ``trio-agent run``; ``_connections.EarlyLink``): its handshake is on
the wire before the agent is built, and it is the very socket the prompt then goes out
on -- one handshake, the prompt its first request. An agent opened as before
(``warmup=True``) dials only once it is built. Observed through a dialer that records
the first bytes sent, and a tools factory (called while the agent is built) that looks
at that record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
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
