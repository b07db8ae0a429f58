"""The WebSocket exchange with a stub link: who sends the interrupt, and when steer() returns.

The interrupt frame is sent by the exchange's own side (the task reading the response),
shielded and bounded; a steering caller only signals and waits until the frame is on
the wire (issue 7, bug 3).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent._errors import ConnectionLost
from trio_agent._runtime._model._response_feed import ResponseFeed
from trio_agent._runtime._model._websocket_exchange import WebSocketExchange
from trio_agent._runtime._turns._turn import Preemption
from trio_agent._wire.stream import Phase


class StubLink:
    """Delivers scripted frames. The interrupt send can fail, or block until released."""

    def __init__(self, *, fail_interrupt: bool = False, hold_interrupt: bool = False, hold_create: bool = False
                 ) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail_interrupt = fail_interrupt
        self.release_interrupt = trio.Event()
        if not hold_interrupt:
            self.release_interrupt.set()
        self.release_create = trio.Event()
        if not hold_create:
            self.release_create.set()
        self.abandoned = False
        self.inbox_send, self.inbox = trio.open_memory_channel[str](10)
        self.sender_tasks: list[trio.lowlevel.Task] = []
        self.send_timeout = 30.0
        self.waiting = None  # no queue of its own to take from: every frame through receive_text

    def deliver_bursts(self, eager: bool) -> None:
        pass  # a scripted inbox has no reader to tune

    async def send_text(self, text: str) -> None:
        frame = json.loads(text)
        if frame.get("type") == "response.create":
            await self.release_create.wait()
        if frame.get("type") == "response.interrupt":
            self.sender_tasks.append(trio.lowlevel.current_task())
            await self.release_interrupt.wait()
            if self.fail_interrupt:
                raise ConnectionLost("failed to send a Responses WebSocket frame: the connection closed")
        self.sent.append(frame)

    async def receive_text(self) -> str:
        try:
            return await self.inbox.receive()
        except trio.EndOfChannel:  # abandoned: the socket is closed under the reader
            raise ConnectionLost("failed to receive a Responses WebSocket frame: the connection closed") from None

    def abandon(self) -> None:
        self.abandoned = True
        self.inbox_send.close()


def exchange(link: StubLink, preemption: Preemption) -> WebSocketExchange:
    feed = ResponseFeed(
        transport="responses_websocket_v2", emit=lambda *args: None, on_stream_event=lambda event: None,
        phase="generation", call_index=1, turn_id=1,
    )
    return WebSocketExchange(link, feed, idle_timeout=300, preemption=preemption)  # type: ignore[arg-type]


CREATED = json.dumps({"type": "response.created", "response": {"id": "r1"}})
INTERRUPTED = json.dumps({"type": "response.incomplete", "response": {
    "id": "r1", "incomplete_details": {"reason": "interrupted"}}})


async def test_a_failing_interrupt_send_never_raises_out_of_steer_and_drops_the_socket() -> None:
    link = StubLink(fail_interrupt=True)
    preemption = Preemption()
    ex = exchange(link, preemption)
    failures: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        async def run() -> None:
            try:
                await ex.run({"type": "response.create", "input": []})
            except ConnectionLost as exc:
                failures.append(exc)

        nursery.start_soon(run)
        await link.inbox_send.send(CREATED)
        await trio.testing.wait_all_tasks_blocked()
        await preemption.request()  # the interrupt send fails: not raised here
    assert link.abandoned  # a socket whose interrupt may be half-written is not reused
    assert [type(exc) for exc in failures] == [ConnectionLost]  # an ordinary retryable loss
    assert [frame["type"] for frame in link.sent] == ["response.create"]


async def test_the_interrupt_is_sent_once_even_when_requested_twice() -> None:
    link = StubLink()
    preemption = Preemption()
    ex = exchange(link, preemption)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ex.run, {"type": "response.create", "input": []})
        await link.inbox_send.send(CREATED)
        await trio.testing.wait_all_tasks_blocked()
        await preemption.request()
        await preemption.request()
        await link.inbox_send.send(INTERRUPTED)
    assert [frame["type"] for frame in link.sent] == ["response.create", "response.interrupt"]


async def test_steer_returns_only_once_the_interrupt_is_on_the_wire_and_never_sends_it_itself() -> None:
    link = StubLink(hold_interrupt=True)
    preemption = Preemption()
    ex = exchange(link, preemption)
    returned = trio.Event()
    readers: list[trio.lowlevel.Task] = []

    async def run() -> None:
        readers.append(trio.lowlevel.current_task())
        await ex.run({"type": "response.create", "input": []})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await link.inbox_send.send(CREATED)
        await trio.testing.wait_all_tasks_blocked()

        async def steer() -> None:
            await preemption.request()
            returned.set()

        nursery.start_soon(steer)
        await trio.testing.wait_all_tasks_blocked()
        assert not returned.is_set()  # the frame is not on the wire yet
        assert ex.feed.accumulator.phase is Phase.STREAMING
        link.release_interrupt.set()
        await trio.testing.wait_all_tasks_blocked()
        assert returned.is_set()
        assert ex.feed.accumulator.phase is Phase.DRAINING
        await link.inbox_send.send(INTERRUPTED)
    (sender,) = link.sender_tasks
    assert readers == [sender]  # the exchange's own task, not the steerer


async def test_a_cancelled_steering_caller_does_not_stop_the_interrupt(autojump_clock: trio.testing.MockClock) -> None:
    """``move_on_after`` around ``steer(interrupt=True)``: the caller gives up waiting, but
    the interrupt still goes out from the exchange's side and the response drains."""
    link = StubLink(hold_interrupt=True)
    preemption = Preemption()
    ex = exchange(link, preemption)
    outcomes: list[Any] = []
    async with trio.open_nursery() as nursery:
        async def run() -> None:
            outcomes.append(await ex.run({"type": "response.create", "input": []}))

        nursery.start_soon(run)
        await link.inbox_send.send(CREATED)
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1) as scope:
            await preemption.request()
        assert scope.cancelled_caught
        link.release_interrupt.set()
        await trio.testing.wait_all_tasks_blocked()
        assert [frame["type"] for frame in link.sent] == ["response.create", "response.interrupt"]
        await link.inbox_send.send(INTERRUPTED)
    (outcome,) = outcomes
    assert outcome.response_id == "r1" and outcome.status == "incomplete" and outcome.chained


@pytest.mark.parametrize("sending", [True, False])
async def test_a_steer_while_the_request_is_being_sent_waits_for_its_interrupt(sending: bool) -> None:
    """The signal is registered before the request is sent: a steer that lands while the
    body is still going out (or after it, before the id arrives) is answered by an interrupt."""
    link = StubLink(hold_create=sending)
    preemption = Preemption()
    ex = exchange(link, preemption)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ex.run, {"type": "response.create", "input": []})
        await trio.testing.wait_all_tasks_blocked()  # sending (held) or reading
        assert [frame["type"] for frame in link.sent] == ([] if sending else ["response.create"])
        steered = trio.Event()

        async def steer() -> None:
            await preemption.request()
            steered.set()

        nursery.start_soon(steer)
        await trio.testing.wait_all_tasks_blocked()
        link.release_create.set()
        await trio.testing.wait_all_tasks_blocked()
        assert not steered.is_set()  # no response id yet: nothing could be sent
        await link.inbox_send.send(CREATED)
        await trio.testing.wait_all_tasks_blocked()
        assert steered.is_set()
        await link.inbox_send.send(INTERRUPTED)
    assert [frame["type"] for frame in link.sent] == ["response.create", "response.interrupt"]
