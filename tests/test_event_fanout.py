"""``agent.events.subscribe()``: watch an agent's events and write JSONL at once (issue 12)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._events import EventSink
from trio_agent.testing import FakeResponsesServer, scripted

from .conftest import make_config, warm


async def test_a_subscriber_sees_what_write_jsonl_writes(server: FakeResponsesServer, workspace: Path) -> None:
    async def model() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", 'text("hi")')
        await conn.next_request()
        await conn.send_final("resp-2", "done")

    out = io.StringIO()
    watched: list[ta.AgentEvent] = []

    async def watch(events: ta.EventSubscription) -> None:
        async with events:
            async for event in events:
                watched.append(event)

    async with scripted(model) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(ta.write_jsonl, agent.events, out)
            nursery.start_soon(watch, agent.events.subscribe())
            assert (await (await agent.prompt("say hi")).result()).final_message == "done"
    written = [json.loads(line)["seq"] for line in out.getvalue().splitlines()]
    assert [event.seq for event in watched] == written[-len(watched):]  # everything since subscribing
    assert "tool.call" in [event.kind.value for event in watched] and watched[-1].kind.is_terminal


async def test_a_subscription_starts_now_and_ends_with_the_agent() -> None:
    sink = EventSink("s")
    sink.emit(ta.EventKind.API_WARNING, {"code": "early", "message": "before"})
    subscription = sink.stream.subscribe()
    sink.emit(ta.EventKind.API_WARNING, {"code": "late", "message": "after"})
    sink.close()

    assert [event.payload["code"] async for event in subscription] == ["late"]
    assert [event.payload["code"] for event in _drain_main(sink)] == ["early", "late"]


def _drain_main(sink: EventSink) -> list[ta.AgentEvent]:
    events = []
    while True:
        try:
            events.append(sink.stream.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return events


async def test_a_subscriber_that_falls_behind_is_dropped_and_told() -> None:
    sink = EventSink("s")
    slow = sink.stream.subscribe(max_buffer=2)
    for index in range(5):
        sink.emit(ta.EventKind.API_WARNING, {"code": str(index), "message": "m"})
    seen = [await slow.receive(), await slow.receive()]
    assert [event.payload["code"] for event in seen] == ["0", "1"]
    with pytest.raises(ta.EventsOverflowed, match="more than 2 events behind"):
        await slow.receive()
    assert [event.payload["code"] for event in _drain_main(sink)] == ["0", "1", "2", "3", "4"]


async def test_closing_a_subscription_unsubscribes_it() -> None:
    sink = EventSink("s")
    async with sink.stream.subscribe(max_buffer=1) as subscription:
        pass
    for index in range(3):  # a closed subscriber is no longer offered anything
        sink.emit(ta.EventKind.API_WARNING, {"code": str(index), "message": "m"})
    with pytest.raises(trio.ClosedResourceError):
        await subscription.receive()
    sink.close()
    late = sink.stream.subscribe()
    with pytest.raises(trio.EndOfChannel):
        await late.receive()
    late.close()  # idempotent after the agent closed


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_buffer_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_buffer must be a positive int"):
        EventSink("s").stream.subscribe(max_buffer=bad)  # type: ignore[arg-type]
