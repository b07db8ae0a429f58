"""Closing while the WebSocket handshake is in progress ends promptly (serve found it:
a thread unloaded before its first warmup finished kept the server from closing).

The race: the handshake's answer has been read -- the connection task is already
woken with it -- and in that same scheduling tick the agent closes. The cancellation
of the caller cannot reach a task that is no longer blocked, so the task reports its
link after ``Connections.close()`` has run and found none; nothing would ever abandon
that link, and the agent's nursery would wait for its task forever. A stream that
calls ``close()`` from the reader's next read (right after the handshake's answer was
parsed, before the connection task runs again) makes the race exact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._runtime._counters import TransportStats
from trio_agent._runtime._model._connections import Connections
from trio_agent._runtime._secrets import Redactor
from trio_agent.testing import FakeResponsesServer


class AnswerWatch(trio.abc.Stream):
    """Calls ``on_answer_read`` from the read after the one that returned the end of the
    handshake's HTTP answer: by then the reader has parsed it and woken the task."""

    def __init__(self, inner: trio.abc.Stream, on_answer_read: Callable[[], None]) -> None:
        self.inner = inner
        self.on_answer_read: Callable[[], None] | None = on_answer_read
        self.seen = b""
        self.answered = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self.answered and self.on_answer_read is not None:
            hook, self.on_answer_read = self.on_answer_read, None
            hook()
        data = await self.inner.receive_some(max_bytes)
        if not self.answered:
            self.seen += bytes(data)
            self.answered = b"\r\n\r\n" in self.seen
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_close_during_the_handshake_abandons_the_link_it_did_not_see(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = FakeResponsesServer.in_memory()
    holder: list[Connections] = []
    streams: list[AnswerWatch] = []

    async def dial(host: str, port: int) -> trio.abc.Stream:
        stream = AnswerWatch(await server.dial(host, port), lambda: holder[0].close())
        streams.append(stream)
        return stream

    config = ta.AgentConfig(auth="k", workspace=tmp_path,
                            responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=dial))
    events: list[tuple[ta.EventKind, dict[str, Any]]] = []
    disconnected: list[BaseException] = []

    async def model() -> None:
        conn = await server.accept()
        try:
            await conn.next_request()
        except Exception as exc:  # ClientDisconnected: the client closed the socket
            disconnected.append(exc)

    with trio.fail_after(60):
        async with trio.open_nursery() as outer:
            await outer.start(server.serve)
            outer.start_soon(model)
            async with trio.open_nursery() as agent_nursery:  # stands for the agent's nursery
                connections = Connections(config, lambda kind, payload, turn_id=None: events.append((kind, payload)),
                                          agent_nursery, TransportStats(), Redactor())
                holder.append(connections)
                with pytest.raises(ta.ConnectionFailed, match="the agent is closing"):
                    await connections.ensure(None)
                assert connections.link is None
            # The agent's nursery exited: the connection task closed its socket and ended.
            assert trio.current_time() < 1.0
            outer.cancel_scope.cancel()
    assert streams[0].on_answer_read is None  # the race happened as described
    assert len(disconnected) == 1
    kinds = [kind for kind, _ in events]
    assert kinds == [ta.EventKind.MODEL_CONNECTION_STARTED, ta.EventKind.MODEL_CONNECTION_FAILED]
    with pytest.raises(ta.ConnectionFailed, match="the agent is closing"):
        await connections.ensure(None)  # and no other socket opens


@pytest.mark.parametrize("warmup", [True, False])  # False: the early socket's handshake (EarlyLink)
async def test_an_agent_closed_while_its_handshake_is_delayed_exits_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, warmup: bool
) -> None:
    server = FakeResponsesServer.in_memory()
    outcome: list[str] = []

    async def slow_handshake() -> None:
        raw = await server.accept_raw()  # TCP accepted; the handshake is never answered
        request = b""
        while b"\r\n\r\n" not in request:
            request += await raw.stream.receive_some()
        with trio.move_on_after(30):
            while await raw.stream.receive_some():
                pass
            outcome.append(f"client went away at {trio.current_time()}")

    config = ta.AgentConfig(auth="k", workspace=tmp_path,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url, dialer=server.dial))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(slow_handshake)
        with trio.fail_after(60):
            async with ta.open_agent(config, warmup=warmup) as agent:
                await trio.sleep(1)
                assert agent.statistics().connection_attempts == 1
            assert trio.current_time() == 1.0  # closing cancelled the handshake at once
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert outcome == ["client went away at 1.0"]


async def test_no_socket_opens_after_close(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """``ensure`` after ``close`` refuses at once instead of dialing."""
    server = FakeResponsesServer.in_memory()
    dials: list[str] = []

    async def dial(host: str, port: int) -> trio.abc.Stream:
        dials.append(host)
        return await server.dial(host, port)

    config = ta.AgentConfig(auth="k", workspace=tmp_path,
                            responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=dial))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        connections = Connections(config, lambda *args, **kw: None, nursery, TransportStats(), Redactor())
        connections.close()
        with pytest.raises(ta.ConnectionFailed, match="the agent is closing"):
            await connections.ensure(None)
        nursery.cancel_scope.cancel()
    assert dials == []
