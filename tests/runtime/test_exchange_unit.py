"""The WebSocket exchange with a stub link: interrupt sending from a steering task."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from trio_agent._errors import ConnectionLost
from trio_agent._runtime._exchange import Exchange
from trio_agent._runtime._turn import Preemption


class StubLink:
    """Delivers scripted frames; fails sends after the first one when told to."""

    def __init__(self, *, fail_interrupt: bool) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail_interrupt = fail_interrupt
        self.inbox_send, self.inbox = trio.open_memory_channel[str](10)

    async def send_text(self, text: str) -> None:
        frame = json.loads(text)
        if frame.get("type") == "response.interrupt" and self.fail_interrupt:
            raise ConnectionLost("failed to send a Responses WebSocket frame: the connection closed")
        self.sent.append(frame)

    async def receive_text(self) -> str:
        return await self.inbox.receive()


async def test_a_failing_interrupt_send_never_raises_out_of_steer() -> None:
    link = StubLink(fail_interrupt=True)
    preemption = Preemption()
    exchange = Exchange(
        link,  # type: ignore[arg-type]
        emit=lambda *args: None, on_stream_event=lambda event: None, phase="generation", call_index=1,
        turn_id=1, idle_timeout=300, preemption=preemption,
    )
    outcome: list[Any] = []
    async with trio.open_nursery() as nursery:
        async def run() -> None:
            outcome.append(await exchange.run({"type": "response.create", "input": []}))

        nursery.start_soon(run)
        await link.inbox_send.send(json.dumps({"type": "response.created", "response": {"id": "r1"}}))
        await trio.testing.wait_all_tasks_blocked()
        await preemption.request()  # the interrupt send fails: swallowed, not raised here
        await link.inbox_send.send(json.dumps({"type": "response.completed", "response": {"id": "r1", "output": []}}))
    assert outcome[0].response_id == "r1"
    assert [frame["type"] for frame in link.sent] == ["response.create"]


async def test_the_interrupt_is_sent_once_even_when_requested_twice() -> None:
    link = StubLink(fail_interrupt=False)
    preemption = Preemption()
    exchange = Exchange(
        link,  # type: ignore[arg-type]
        emit=lambda *args: None, on_stream_event=lambda event: None, phase="generation", call_index=1,
        turn_id=1, idle_timeout=300, preemption=preemption,
    )
    async with trio.open_nursery() as nursery:
        async def run() -> None:
            await exchange.run({"type": "response.create", "input": []})

        nursery.start_soon(run)
        await link.inbox_send.send(json.dumps({"type": "response.created", "response": {"id": "r1"}}))
        await trio.testing.wait_all_tasks_blocked()
        await preemption.request()
        await preemption.request()
        await link.inbox_send.send(json.dumps({"type": "response.incomplete", "response": {
            "id": "r1", "incomplete_details": {"reason": "interrupted"}}}))
    assert [frame["type"] for frame in link.sent] == ["response.create", "response.interrupt"]
