"""Bursts cost one scheduler round, not one per frame or per event (issue 13, item 1).

Frames that wait in trio-websocket's queue and events that wait in ``agent.events``
are taken without a schedule point each; a cancelled reader still sees ``Cancelled``
at once, and an event consumer yields for real at least every ``_BURST`` events.
Counted with an instrument (task steps), never timed.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._event_queue import _BURST
from trio_agent._events import EventSink
from trio_agent._transport._eager import EagerSend
from trio_agent._transport.websocket import WebSocketOptions, open_connection
from trio_agent.testing import FakeConnection, FakeResponsesServer


class Steps(trio.abc.Instrument):
    """Counts the steps of one task (each is a return from a schedule point)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


def counting() -> Steps:
    steps = Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    return steps


async def test_frames_that_wait_are_read_without_a_round_each(
    memory_server: FakeResponsesServer, autojump_clock: trio.testing.MockClock
) -> None:
    accepted: list[FakeConnection] = []

    async def accept() -> None:
        accepted.append(await memory_server.accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        link = await open_connection(nursery, WebSocketOptions(url=memory_server.url, dialer=memory_server.dial))
        # This trio-websocket has the layout the fast path needs (else: one round per frame).
        assert isinstance(link._ws._send_channel, EagerSend)
        await trio.testing.wait_all_tasks_blocked()
        frames = [{"type": "response.output_text.delta", "delta": str(i)} for i in range(10)]
        await accepted[0].send_all(frames)
        await trio.testing.wait_all_tasks_blocked()  # all ten wait in the queue
        steps = counting()
        texts = [await link.receive_text() for _ in frames]
        trio.lowlevel.remove_instrument(steps)
        assert [f'"delta":"{i}"' in text for i, text in enumerate(texts)] == [True] * 10
        assert steps.steps == 0
        with trio.move_on_after(1) as scope:  # nothing waits: an ordinary blocking read
            await link.receive_text()
        assert scope.cancelled_caught
        link.abandon()


async def test_the_reader_end_delivers_at_once_while_the_queue_has_room() -> None:
    send, receive = trio.open_memory_channel[str | bytes](2)
    eager = EagerSend(send)
    steps = counting()
    await eager.send("a")
    await eager.send("b")
    trio.lowlevel.remove_instrument(steps)
    assert steps.steps == 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(eager.send, "c")  # full: waits like the channel's own send
        await trio.testing.wait_all_tasks_blocked()
        assert [receive.receive_nowait(), receive.receive_nowait()] == ["a", "b"]
    assert receive.receive_nowait() == "c"
    await eager.aclose()
    with pytest.raises(trio.EndOfChannel):
        receive.receive_nowait()


async def test_until_the_first_output_the_reader_yields_only_after_a_frame_that_may_mean_an_event() -> None:
    """``deliver_bursts(False)``: the frames leading up to a response's first output go to
    the model call without a round each; after a frame that may mean an event for the
    application (a text or reasoning delta, a finished item, the end, a frame of another
    layout or type, a binary message) the reader yields, so the model call takes it before
    the rest of a burst is parsed."""
    send, receive = trio.open_memory_channel[str | bytes](16)
    eager = EagerSend(send)
    eager.eager = False
    leading = ['{"type":"response.created","response":{"id":"r"}}',
               '{"type":"response.in_progress","response":{"id":"r"}}',
               '{"type":"response.output_item.added","output_index":0,"item":{}}',
               '{"type":"response.content_part.added","output_index":0}',
               '{"type":"response.function_call_arguments.delta","delta":"{"}']
    steps = counting()
    for frame in leading:
        await eager.send(frame)
    assert steps.steps == 0
    maybe_event: list[str | bytes] = [
        '{"type":"response.output_text.delta","delta":"a"}',
        '{"type":"response.reasoning_summary_text.delta","delta":"a"}',
        '{"type":"response.output_item.done","item":{"type":"message"}}',
        '{"type":"response.completed","response":{"id":"r"}}',
        '{"type":"response.created_later"}',  # an unknown type that starts like a leading one
        '{"delta":"a","type":"response.output_text.delta"}',  # another layout
        '{"type": "response.created"}', b"binary",
    ]
    for count, message in enumerate(maybe_event, 1):
        await eager.send(message)
        assert steps.steps == count
    trio.lowlevel.remove_instrument(steps)
    assert [receive.receive_nowait() for _ in range(13)] == [*leading, *maybe_event]


async def test_events_that_wait_are_received_in_one_round_and_cancellation_still_wins() -> None:
    sink = EventSink("s")
    for i in range(_BURST + 1):
        sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": str(i)})
    steps = counting()
    received = [await sink.stream.receive() for _ in range(_BURST + 1)]
    trio.lowlevel.remove_instrument(steps)
    assert [e.seq for e in received] == list(range(1, _BURST + 2))
    assert steps.steps == 1  # a real schedule point after _BURST events in a row
    sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": "late"})
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await sink.stream.receive()  # an event waits, but the consumer is cancelled
    assert (await sink.stream.receive()).payload["message"] == "late"
    # The same through the iterator (``async for``), which takes a waiting event itself.
    for i in range(_BURST + 1):
        sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": str(i)})
    steps = counting()
    iterated = [await sink.stream.__anext__() for _ in range(_BURST + 1)]
    trio.lowlevel.remove_instrument(steps)
    assert [e.payload["message"] for e in iterated] == [str(i) for i in range(_BURST + 1)]
    assert steps.steps == 1
    sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": "late"})
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await sink.stream.__anext__()
    assert (await sink.stream.__anext__()).payload["message"] == "late"
    sink.close()
    assert [e async for e in sink.stream] == []


async def test_a_subscription_receives_a_burst_in_one_round_too() -> None:
    sink = EventSink("s")
    async with sink.stream.subscribe(max_buffer=16) as events:
        for i in range(10):
            sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": str(i)})
        steps = counting()
        received = [await events.receive() for _ in range(10)]
        trio.lowlevel.remove_instrument(steps)
        assert [e.payload["message"] for e in received] == [str(i) for i in range(10)]
        assert steps.steps == 0
        sink.close()
        assert [e async for e in events] == []


async def test_deferred_events_keep_their_place_in_the_stream() -> None:
    sink = EventSink("s")

    def announce(message: str) -> None:
        sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": message})

    sink.defer(lambda: announce("a"))
    sink.defer(lambda: announce("b"))
    with pytest.raises(trio.WouldBlock):
        sink.stream.receive_nowait()  # nothing is emitted before the flush ...
    announce("c")  # ... or before anything else is
    sink.defer(lambda: announce("d"))
    sink.flush()
    sink.flush()  # once each
    sink.defer(lambda: announce("e"))
    sink.close()  # the close emits what waits
    events = [e async for e in sink.stream]
    assert [(e.seq, e.payload["message"]) for e in events] == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]


async def test_a_parked_consumer_is_woken_once_and_a_cancelled_one_leaves_nothing_behind() -> None:
    sink = EventSink("s")
    queue = sink._queue
    received: list[str] = []

    async def consume(count: int) -> None:
        for _ in range(count):
            received.append(str((await sink.stream.receive()).payload["message"]))

    async with trio.open_nursery() as nursery:
        # Cancelled while parked (no event came): it leaves the queue's waiting tasks.
        with trio.CancelScope() as scope:
            nursery.start_soon(trio.sleep_forever)  # (keeps the nursery open)
            async with trio.open_nursery() as inner:
                inner.start_soon(consume, 1)
                await trio.testing.wait_all_tasks_blocked()
                assert len(queue._waiting) == 1
                inner.cancel_scope.cancel()
        assert not scope.cancelled_caught
        assert len(queue._waiting) == 0 and received == []
        # A burst while a consumer is parked wakes it once: the later puts find no one to wake.
        nursery.start_soon(consume, 3)
        await trio.testing.wait_all_tasks_blocked()
        assert len(queue._waiting) == 1
        for i in range(3):
            sink.emit(ta.EventKind.API_WARNING, {"code": "c", "message": str(i)})
            assert len(queue._waiting) == 0
        await trio.testing.wait_all_tasks_blocked()
        assert received == ["0", "1", "2"]
        # Two consumers parked: close wakes both, and each sees the end.
        ended: list[str] = []

        async def until_end(name: str) -> None:
            with pytest.raises(trio.EndOfChannel):
                await sink.stream.receive()
            ended.append(name)

        nursery.start_soon(until_end, "a")
        nursery.start_soon(until_end, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert len(queue._waiting) == 2
        sink.close()
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(ended) == ["a", "b"]
        nursery.cancel_scope.cancel()
