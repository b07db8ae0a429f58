"""The WebSocket connection task maps only expected foreign failures (issue 7, bug 5).

On the in-memory seam (``FakeResponsesServer.in_memory()`` + a dialer that wraps its
streams) under ``MockClock``: a bug or ``KeyboardInterrupt`` raised inside the
connection's stream propagates unchanged, before and after the handshake; a group
that mixes ``Cancelled`` with a socket failure keeps its ``Cancelled``; expected
failures become ``ConnectionFailed`` before the handshake and a dead link after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._transport.websocket import (
    WebSocketLink,
    WebSocketOptions,
    _connection_task,
    open_connection,
    split_expected,
)
from trio_agent.testing import FakeConnection, FakeResponsesServer


class Bug(Exception):
    """Stands for a bug in our code or in a dialer's stream."""


class FaultyStream(trio.abc.Stream):
    """Passes through until armed: after ``fail_next_receive(action)`` the next received
    bytes run ``action`` and raise what it returns instead of returning them; after
    ``fail_next_send(action)`` the next send does. Closing is shielded, as a stream that
    must release its socket would do (and so never masks the error in flight)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.action: Callable[[], BaseException] | None = None
        self.send_action: Callable[[], BaseException] | None = None

    def fail_next_receive(self, action: Callable[[], BaseException]) -> None:
        self.action = action

    def fail_next_send(self, action: Callable[[], BaseException]) -> None:
        self.send_action = action

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.send_action is not None:
            raise self.send_action()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if self.action is not None:
            raise self.action()
        return data

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.inner.aclose()


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def wrapping_dialer(server: FakeResponsesServer, streams: list[FaultyStream]) -> Callable[
    [str, int], Awaitable[trio.abc.Stream]
]:
    async def dial(host: str, port: int) -> trio.abc.Stream:
        stream = FaultyStream(await server.dial(host, port))
        streams.append(stream)
        return stream

    return dial


async def connect(
    nursery: trio.Nursery, server: FakeResponsesServer, options: WebSocketOptions
) -> tuple[WebSocketLink, FakeConnection]:
    accepted: list[FakeConnection] = []

    async def accept() -> None:
        accepted.append(await server.accept())

    nursery.start_soon(accept)
    link = await open_connection(nursery, options)
    await trio.testing.wait_all_tasks_blocked()
    return link, accepted[0]


@pytest.mark.parametrize("error", [Bug("our own bug"), KeyboardInterrupt()], ids=["bug", "keyboard-interrupt"])
async def test_a_failure_inside_the_stream_after_the_handshake_propagates_unchanged(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock, error: BaseException
) -> None:
    streams: list[FaultyStream] = []
    options = WebSocketOptions(url=memory_server.url, dialer=wrapping_dialer(memory_server, streams))
    with pytest.raises(BaseException) as info:  # inspected below
        async with trio.open_nursery() as nursery:
            link, conn = await connect(nursery, memory_server, options)
            streams[0].fail_next_receive(lambda: error)
            await conn.send({"type": "response.created", "response": {"id": "resp-1"}})
            await link.wait_abandoned()  # never reached: the reader's failure cancels this
    assert leaves(info.value) == [error]  # not swallowed, not a ConnectionFailed


@pytest.mark.parametrize("error", [Bug("a dialer bug"), KeyboardInterrupt()], ids=["bug", "keyboard-interrupt"])
async def test_a_failure_of_the_dialer_propagates_unchanged(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock, error: BaseException
) -> None:
    async def dial(host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        raise error

    with pytest.raises(BaseException) as info:  # inspected below
        async with trio.open_nursery() as nursery:
            await open_connection(nursery, WebSocketOptions(url=memory_server.url, dialer=dial))
    assert leaves(info.value) == [error]


async def test_a_bug_in_the_stream_during_the_handshake_propagates_unchanged(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    streams: list[FaultyStream] = []
    real_dial = wrapping_dialer(memory_server, streams)

    async def dial(host: str, port: int) -> trio.abc.Stream:
        stream = await real_dial(host, port)
        streams[-1].fail_next_receive(lambda: Bug("while reading the handshake reply"))
        return stream

    async def accept() -> None:
        await memory_server.accept()

    with pytest.raises(BaseException) as info:  # inspected below
        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept)
            await open_connection(nursery, WebSocketOptions(url=memory_server.url, dialer=dial))
    (bug,) = [leaf for leaf in leaves(info.value) if not isinstance(leaf, trio.BrokenResourceError)]
    assert isinstance(bug, Bug)  # not ConnectionFailed("failed unexpectedly")
    assert not any(isinstance(leaf, ta.ResponsesError) for leaf in leaves(info.value))


async def test_a_mixed_group_keeps_its_cancelled(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    """Closing the socket hits a bug at the moment the enclosing scope is cancelled: the
    task's group holds the bug (its own body) and ``Cancelled`` (the reader). Both must
    leave the task -- the ``Cancelled`` for the scope being cancelled, the bug for the
    test -- instead of the whole group being dropped."""
    streams: list[FaultyStream] = []
    options = WebSocketOptions(url=memory_server.url, dialer=wrapping_dialer(memory_server, streams))
    raised: list[BaseException] = []
    bug = Bug("while sending the close frame")

    async def recording(*, task_status: trio.TaskStatus[WebSocketLink]) -> None:
        try:
            await _connection_task(options, task_status=task_status)
        except BaseException as exc:
            raised.append(exc)
            raise

    with pytest.raises(BaseException) as info:  # inspected below
        with trio.CancelScope() as outer:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(memory_server.accept)
                link = await nursery.start(recording)
                await trio.testing.wait_all_tasks_blocked()

                def cancel_and_fail() -> BaseException:
                    outer.cancel()
                    return bug

                streams[0].fail_next_send(cancel_and_fail)
                link.abandon()  # the task closes the socket: the close frame's send fails
                await trio.sleep_forever()
    (exc,) = raised
    assert {type(leaf) for leaf in leaves(exc)} == {Bug, trio.Cancelled}
    assert outer.cancelled_caught  # the Cancelled reached its scope
    assert leaves(info.value) == [bug]  # and the bug reached the test


def _captured_cancelled() -> trio.Cancelled:
    captured: list[trio.Cancelled] = []

    async def capture() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                captured.append(exc)
                raise

    trio.run(capture)
    return captured[0]


def test_split_expected_keeps_every_cancelled_of_a_group() -> None:
    cancelled, reset = _captured_cancelled(), ConnectionResetError("reset")
    failure, rest = split_expected(BaseExceptionGroup("g", [cancelled, reset]))
    assert failure is reset
    assert rest is not None and leaves(rest) == [cancelled]
    assert split_expected(cancelled) == (None, cancelled)


async def test_an_expected_failure_after_the_handshake_only_kills_the_link(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    streams: list[FaultyStream] = []
    options = WebSocketOptions(url=memory_server.url, dialer=wrapping_dialer(memory_server, streams))
    async with trio.open_nursery() as nursery:
        link, conn = await connect(nursery, memory_server, options)
        assert link.usable
        streams[0].fail_next_receive(lambda: ConnectionResetError("connection reset by peer"))
        await conn.send({"type": "response.created", "response": {"id": "resp-1"}})
        with pytest.raises(ta.ConnectionLost, match="failed to receive a Responses WebSocket frame"):
            await link.receive_text()
        assert not link.usable  # the next request opens a new socket
    # the nursery closed normally: the connection task ended without raising


async def test_a_refused_dial_is_a_retryable_connection_failed(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    options = WebSocketOptions(url="ws://elsewhere.invalid/v1/responses", dialer=memory_server.dial)
    async with trio.open_nursery() as nursery:
        with pytest.raises(ta.ConnectionFailed, match="check that the server is reachable") as info:
            await open_connection(nursery, options)
    assert info.value.retryable and info.value.error_class == "handshake_transport"
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


@pytest.mark.parametrize("stage", ["dial", "handshake"])
async def test_one_connect_deadline_covers_dialing_and_the_handshake(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock, stage: str
) -> None:
    async def slow_dial(host: str, port: int) -> trio.abc.Stream:
        await trio.sleep(4.0)  # a slow TCP connect: 4 of the 10 s are gone
        if stage == "dial":
            await trio.sleep_forever()
        return await memory_server.dial(host, port)

    async def silent_server() -> None:
        await memory_server.accept_raw()  # takes the TCP connection, never answers

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(silent_server)
        expected = r"timed out \(connect_timeout 10 s, handshake within 10 s\)"
        with pytest.raises(ta.ConnectionFailed, match=expected) as info:
            await open_connection(
                nursery, WebSocketOptions(url=memory_server.url, dialer=slow_dial, connect_timeout=10.0)
            )
        nursery.cancel_scope.cancel()
    assert trio.current_time() - start == 10.0
    assert info.value.error_class == "handshake_timeout" and info.value.retryable


def test_split_expected_keeps_everything_that_is_not_a_socket_failure() -> None:
    reset, bug, other = ConnectionResetError("reset"), Bug("bug"), ValueError("value")
    assert split_expected(reset) == (reset, None)
    assert split_expected(bug) == (None, bug)
    failure, rest = split_expected(ExceptionGroup("g", [bug, ExceptionGroup("inner", [reset, other])]))
    assert failure is reset
    assert rest is not None and leaves(rest) == [bug, other]
    group = ExceptionGroup("g", [bug])
    assert split_expected(group) == (None, group)  # unchanged: the very same object
    failure, rest = split_expected(ExceptionGroup("g", [trio.BrokenResourceError(), reset]))
    assert isinstance(failure, trio.BrokenResourceError) and rest is None
