"""The accumulator and streamed tool calls (issue 27 item 1; pure): which finished call
items it announces (``ToolCallReady``: the turn starts them while the response streams),
which it loses (after a mail cut or a preempting steer: codex.md 3.5) or discards
(``CallDiscarded``: no usable ``call_id``, or a repeated one), and how the completed
output is reconciled with what streamed (each announced call once, as it ran; no lost or
discarded call; any difference unchains the outcome)."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent._wire.frames import parse_frame
from trio_agent._wire.stream import (
    CallDiscarded,
    MailFlag,
    ResponseAccumulator,
    ResponseFinished,
    ResponseOutcome,
    StreamEvent,
    ToolCallReady,
)
from trio_agent.testing import frames as f

Raw = dict[str, Any]

A = f.function_call("call-a", "echo", "{}")
B = f.custom_tool_call("call-b", "exec", "text(1)")
MSG = f.assistant_message("after the calls")
INTERRUPTED: Raw = {"type": "response.incomplete", "response": {
    "id": "r", "incomplete_details": {"reason": "interrupted"}}}


def feed(acc: ResponseAccumulator, frames: list[Raw]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for raw in frames:
        events.extend(acc.feed(parse_frame(raw)))
    return events


def outcome(events: list[StreamEvent]) -> ResponseOutcome:
    [finished] = [e for e in events if isinstance(e, ResponseFinished)]
    return finished.outcome


def ready(events: list[StreamEvent]) -> list[Raw]:
    return [e.item for e in events if isinstance(e, ToolCallReady)]


def discarded(events: list[StreamEvent]) -> list[CallDiscarded]:
    return [e for e in events if isinstance(e, CallDiscarded)]


def test_each_finished_call_is_announced_as_it_streams_and_the_outcome_chains() -> None:
    acc = ResponseAccumulator()
    first = feed(acc, [f.response_created("r"), f.output_item_done(0, A)])
    assert ready(first) == [A]  # before anything else of the response has come
    rest = feed(acc, [f.output_item_done(1, B), f.output_item_done(2, MSG), f.completed("r", [A, B, MSG])])
    assert ready(rest) == [B]
    done = outcome(rest)
    assert done.output == (A, B, MSG) and done.chained and done.tool_calls == (A, B)
    assert acc.kept == (A, B, MSG)


def test_calls_only_in_the_completed_output_are_not_announced_and_kept() -> None:
    """A server that streams no items (the test kit's ``send_tool_call``): the calls come
    with the response's end and run then, as they always have."""
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.completed("r", [A, B])])
    assert ready(events) == []
    assert outcome(events).tool_calls == (A, B) and outcome(events).chained


def test_a_call_after_a_preempting_steer_is_lost_with_the_response() -> None:
    acc = ResponseAccumulator()
    feed(acc, [f.response_created("r"), f.output_item_done(0, A)])
    acc.want_interrupt()
    acc.interrupt_sent()  # DRAINING
    events = feed(acc, [f.output_item_done(1, B), INTERRUPTED])
    assert ready(events) == [] and discarded(events) == []  # lost, silently: the steer's doing
    done = outcome(events)
    assert done.output == (A,) and not done.chained  # the server's copy may hold B: replay in full


def test_a_call_once_the_interrupt_is_wanted_but_not_yet_due_is_lost_too() -> None:
    """The steer came before the response id: the interrupt waits for it, and whatever
    streams meanwhile is part of the preempted response."""
    acc = ResponseAccumulator()
    acc.want_interrupt()
    events = feed(acc, [f.output_item_done(0, A), f.response_created("r")])
    assert ready(events) == [] and acc.interrupt_due
    # The response completed before the interrupt went out: the call is still lost, even
    # when the terminal frame lists it.
    done = outcome(feed(acc, [f.completed("r", [A])]))
    assert done.output == () and not done.chained


def test_the_interrupted_frame_never_brings_back_a_lost_call() -> None:
    acc = ResponseAccumulator()
    feed(acc, [f.response_created("r"), f.output_item_done(0, A)])
    acc.want_interrupt()
    acc.interrupt_sent()
    feed(acc, [f.output_item_done(1, B)])
    listed = {**INTERRUPTED, "response": {**INTERRUPTED["response"], "output": [A, B]}}
    done = outcome(feed(acc, [listed]))
    assert done.output == (A,) and not done.chained


def test_a_call_after_a_mail_cut_is_never_announced_nor_kept() -> None:
    acc = ResponseAccumulator()
    acc.mail = flag = MailFlag()
    flag.waiting = True
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    events = feed(acc, [f.response_created("r"), f.output_item_done(0, reasoning), f.output_item_done(1, A),
                        f.completed("r", [reasoning, A])])
    assert acc.was_cut and ready(events) == []
    assert outcome(events).output == (reasoning,) and not outcome(events).chained


@pytest.mark.parametrize("call_id", [None, "", 7, ["x"]], ids=["missing", "empty", "number", "list"])
def test_a_call_without_a_usable_call_id_is_discarded_and_reported(call_id: Any) -> None:
    bad = {k: v for k, v in A.items() if k != "call_id"}
    if call_id is not None:
        bad["call_id"] = call_id
    acc = ResponseAccumulator()
    events = feed(acc, [f.response_created("r"), f.output_item_done(0, bad), f.output_item_done(1, B),
                        f.completed("r", [bad, B])])
    assert ready(events) == [B]
    assert [d.call_id for d in discarded(events)] == [repr(call_id)]  # once, when it streamed... and
    assert outcome(events).output == (B,) and not outcome(events).chained


def test_a_call_without_a_usable_call_id_only_in_the_completed_output_is_discarded_too() -> None:
    bad = {k: v for k, v in A.items() if k != "call_id"}
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.completed("r", [bad, B])])
    assert [d.reason for d in discarded(events)] == ["its call_id is not a non-empty string"]
    assert outcome(events).output == (B,) and not outcome(events).chained


def test_a_repeated_call_id_is_discarded_the_first_call_stays() -> None:
    twin = f.function_call("call-a", "echo", '{"other": 1}')
    acc = ResponseAccumulator()
    events = feed(acc, [f.response_created("r"), f.output_item_done(0, A), f.output_item_done(1, twin),
                        f.completed("r", [A, twin])])
    assert ready(events) == [A]
    assert [(d.call_id, d.reason) for d in discarded(events)] == [
        ("call-a", "an earlier call of this response has the same call_id")]
    assert outcome(events).output == (A,) and not outcome(events).chained


def test_a_repeated_call_id_only_in_the_completed_output_is_discarded_too() -> None:
    twin = f.function_call("call-a", "echo", '{"other": 1}')
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.completed("r", [A, twin])])
    assert outcome(events).output == (A,) and len(discarded(events)) == 1


def test_a_dispatched_call_missing_from_the_completed_output_stays() -> None:
    """It ran: history keeps it, answered by its output; the server's copy lacks it."""
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.output_item_done(0, A), f.completed("r", [MSG])])
    done = outcome(events)
    assert done.output == (MSG, A) and done.tool_calls == (A,) and not done.chained


def test_a_listed_call_that_differs_from_the_streamed_one_is_kept_as_it_ran() -> None:
    """The server's copy holds the same call (by call_id): the response stays chained."""
    changed = {**A, "status": "completed", "arguments": '{"changed": true}'}
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.output_item_done(0, A),
                                          f.completed("r", [changed, MSG])])
    done = outcome(events)
    assert done.output == (A, MSG) and done.chained


def test_a_listed_call_that_never_streamed_is_kept_beside_the_streamed_ones() -> None:
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.output_item_done(0, A),
                                          f.completed("r", [A, B])])
    done = outcome(events)
    assert ready(events) == [A] and done.tool_calls == (A, B) and done.chained


def test_a_response_without_calls_is_unchanged() -> None:
    events = feed(ResponseAccumulator(), [f.response_created("r"), f.output_item_done(0, MSG),
                                          f.completed("r", [MSG])])
    assert ready(events) == [] and discarded(events) == []
    assert outcome(events).output == (MSG,) and outcome(events).chained
