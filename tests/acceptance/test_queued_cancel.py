"""Cancelling a queued turn ends it at once (issue 7, bug 2; SPEC sec. 4).

``cancel()`` removes the turn from the queue and emits its terminal event before it
returns -- while another turn is still running -- with zero transport counters of
its own, and the turn no longer counts as input pending for the running turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm


def drain(events: ta.AgentEvents) -> list[ta.AgentEvent]:
    seen: list[ta.AgentEvent] = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            return seen


async def test_a_cancelled_queued_turn_ends_before_cancel_returns(server: FakeResponsesServer, workspace: Path) -> None:
    first_seen, finish_first = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        first_seen.set()
        await finish_first.wait()
        await conn.send_final("resp-1", "first done")
        third = await conn.next_request()
        assert third["input"][-1]["content"][0]["text"] == "third"
        await conn.send_final("resp-3", "third done")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        first = await agent.prompt("first")
        second = await agent.prompt("second")
        third = await agent.prompt("third")
        await first_seen.wait()
        before = drain(agent.events)
        assert [e.kind.value for e in before if e.turn_id == 2] == []
        await second.cancel()
        ended = [e for e in drain(agent.events) if e.turn_id == 2]
        assert [e.kind.value for e in ended] == ["run.started", "run.failed"]  # a cancel is no run.error
        failed = ended[-1].payload
        assert failed["status"] == "cancelled"
        assert "cancel" in failed["reason"]
        counters = ("model_calls", "connection_attempts", "websocket_reconnects", "response_attempts",
                    "response_retries", "tool_calls", "steers")
        assert {key: failed[key] for key in counters} == dict.fromkeys(counters, 0)
        assert second.status is ta.TurnStatus.CANCELLED
        with pytest.raises(ta.TurnCancelled):
            await second.result()
        with pytest.raises(ta.TurnNotCancellable):
            await second.cancel()
        assert first.status is ta.TurnStatus.RUNNING  # the running turn is untouched
        finish_first.set()
        assert (await first.result()).final_message == "first done"
        assert (await third.result()).final_message == "third done"
        rest = drain(agent.events)
    first_terminal = next(e for e in rest if e.turn_id == 1 and e.kind.is_terminal)
    # The first turn's counters include the warmup: the cancelled turn took none of them.
    assert (first_terminal.payload["connection_attempts"], first_terminal.payload["response_attempts"]) == (1, 2)
    assert [e.turn_id for e in rest if e.kind.is_terminal] == [1, 3]


async def test_a_cancelled_queued_turn_is_not_pending_input(server: FakeResponsesServer, workspace: Path) -> None:
    seen = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen.set()
        await trio.sleep_forever()  # the running turn is interrupted by the test

    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        running = await agent.prompt("running")
        queued = await agent.prompt("queued")
        await seen.wait()
        assert await agent.interrupt_if_no_pending_input(running.turn_id) is False  # a prompt waits
        await queued.cancel()
        assert await agent.interrupt_if_no_pending_input(running.turn_id) is True
        with pytest.raises(ta.TurnCancelled):
            await running.result()
        nursery.cancel_scope.cancel()
