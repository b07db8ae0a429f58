"""ResponseAccumulator: table-driven transitions of the per-response state machine."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import ApiError, CheckpointMissing, InvalidImageRequest, ProtocolError, UsageLimitExceeded
from trio_agent._wire.frames import parse_frame
from trio_agent._wire.stream import (
    AssistantMessageDone,
    ForeignFrame,
    MailFlag,
    Phase,
    ReasoningDelta,
    ResponseAccumulator,
    ResponseFinished,
    ResponseOutcome,
    ResponseStarted,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    TurnStateSeen,
    message_text,
)
from trio_agent._wire.usage import TokenUsage
from trio_agent.testing import frames as f

Raw = dict[str, Any]


def feed_all(acc: ResponseAccumulator, frames: list[Raw]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for raw in frames:
        events.extend(acc.feed(parse_frame(raw)))
    return events


def run(frames: list[Raw]) -> tuple[ResponseAccumulator, list[StreamEvent]]:
    acc = ResponseAccumulator()
    return acc, feed_all(acc, frames)


def outcome_of(events: list[StreamEvent]) -> ResponseOutcome:
    finished = [e for e in events if isinstance(e, ResponseFinished)]
    assert len(finished) == 1
    assert events[-1] is finished[0]
    return finished[0].outcome


MSG = f.assistant_message("hello", item_id="msg_a", phase="final_answer")
TOOL = f.custom_tool_call("call-1", "exec", "1+1", item_id="item-exec")
FUNC = f.function_call("call-2", "wait", "{}", item_id="fc_2")


# -- phases ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "phase"),
    [
        ([], Phase.WAITING),
        ([{"type": "response.metadata", "headers": {}}], Phase.WAITING),
        ([{"type": "response.queued"}], Phase.WAITING),
        ([f.response_created("r")], Phase.STREAMING),
        ([{"type": "response.in_progress", "response": {"id": "r"}}], Phase.STREAMING),
        ([f.output_item_added(0, MSG)], Phase.STREAMING),
        ([f.text_delta(0, "x")], Phase.STREAMING),
        ([{"type": "response.reasoning_summary_text.delta", "delta": "r"}], Phase.STREAMING),
        ([f.output_item_done(0, MSG)], Phase.STREAMING),
        ([f.response_created("r"), f.completed("r")], Phase.DONE),
        ([f.completed("r")], Phase.DONE),
    ],
)
def test_phase_after_frames(frames: list[Raw], phase: Phase) -> None:
    acc, _ = run(frames)
    assert acc.phase is phase


def test_full_transition_sequence() -> None:
    acc = ResponseAccumulator()
    assert acc.phase is Phase.WAITING
    assert acc.response_id is None
    assert acc.feed(parse_frame(f.response_created("resp-1"))) == [ResponseStarted("resp-1")]
    assert acc.phase is Phase.STREAMING
    assert acc.response_id == "resp-1"
    # a second created/in_progress with the same id does not restart
    assert acc.feed(parse_frame({"type": "response.in_progress", "response": {"id": "resp-1"}})) == []
    assert acc.feed(parse_frame(f.output_item_added(0, MSG))) == []
    assert acc.feed(parse_frame(f.text_delta(0, "hel"))) == [TextDelta("hel", "msg_a", "final_answer")]
    assert acc.feed(parse_frame(f.text_delta(0, "lo"))) == [TextDelta("lo", "msg_a", "final_answer")]
    assert acc.feed(parse_frame(f.output_item_done(0, MSG))) == [AssistantMessageDone("hello", "msg_a", "final_answer")]
    events = acc.feed(parse_frame(f.completed("resp-1", [MSG])))
    assert acc.phase is Phase.DONE
    outcome = outcome_of(events)
    assert outcome.response_id == "resp-1"
    assert outcome.final_message == "hello"
    assert events == [ResponseFinished(outcome)]  # no second ResponseStarted


def test_completed_without_created_reports_started_then_finished() -> None:
    _, events = run([f.completed("resp-9", [MSG])])
    assert events[0] == ResponseStarted("resp-9")
    assert outcome_of(events).response_id == "resp-9"


def test_completed_id_falls_back_to_created_id() -> None:
    _, events = run([f.response_created("resp-c"), {"type": "response.completed", "response": {"output": []}}])
    outcome = outcome_of(events)
    assert outcome.response_id == "resp-c"
    assert outcome.status == "completed"


@pytest.mark.parametrize(
    "frames",
    [
        [{"type": "response.completed", "response": {}}],
        [{"type": "response.completed", "response": {"id": ""}}],
        [{"type": "response.created", "response": {}}, {"type": "response.completed", "response": {"status": "x"}}],
    ],
)
def test_completed_without_any_id_raises(frames: list[Raw]) -> None:
    acc = ResponseAccumulator()
    with pytest.raises(ProtocolError, match="did not carry a response id"):
        feed_all(acc, frames)
    assert acc.phase is Phase.FAILED


# -- text deltas -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        # item id and phase come from output_item.added by output_index
        (
            [
                f.output_item_added(0, {"type": "reasoning", "id": "rs_1"}),
                f.output_item_added(1, f.assistant_message("", item_id="msg_c", phase="commentary")),
                f.output_item_added(2, f.assistant_message("", item_id="msg_f", phase="final_answer")),
                f.text_delta(2, "B"),
                f.text_delta(1, "A"),
            ],
            [TextDelta("B", "msg_f", "final_answer"), TextDelta("A", "msg_c", "commentary")],
        ),
        # no added frame: the delta's own item_id, no phase
        (
            [{"type": "response.output_text.delta", "output_index": 4, "delta": "z", "item_id": "msg_own"}],
            [TextDelta("z", "msg_own", None)],
        ),
        ([f.text_delta(0, "q")], [TextDelta("q", None, None)]),
        # added message without an id: the delta's item_id fills in, phase kept
        (
            [
                f.output_item_added(0, f.assistant_message("", phase="final_answer")),
                {"type": "response.output_text.delta", "output_index": 0, "delta": "w", "item_id": "msg_d"},
            ],
            [TextDelta("w", "msg_d", "final_answer")],
        ),
        # a non-message item at that index is not recorded
        (
            [f.output_item_added(0, TOOL), f.text_delta(0, "t")],
            [TextDelta("t", None, None)],
        ),
    ],
)
def test_text_deltas_carry_item_id_and_phase(frames: list[Raw], expected: list[TextDelta]) -> None:
    _, events = run(frames)
    assert [e for e in events if isinstance(e, TextDelta)] == expected


@pytest.mark.parametrize("kind", ["response.reasoning_summary_text.delta", "response.reasoning_summary.delta"])
def test_reasoning_deltas_from_both_frame_names(kind: str) -> None:
    _, events = run([f.response_created("r"), {"type": kind, "delta": "because"}])
    assert events == [ResponseStarted("r"), ReasoningDelta("because")]


# -- output_item.done ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (MSG, [AssistantMessageDone("hello", "msg_a", "final_answer")]),
        (
            {"type": "message", "content": [{"type": "output_text", "text": "no role"}]},
            [AssistantMessageDone("no role", None, None)],
        ),
        (
            {
                "type": "message",
                "role": "assistant",
                "id": "m",
                "content": [
                    {"type": "output_text", "text": "a"},
                    {"type": "refusal", "refusal": "no"},
                    {"type": "text", "text": "b"},
                    "junk",
                ],
            },
            [AssistantMessageDone("ab", "m", None)],
        ),
        ({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}, []),
        (TOOL, [ToolCallReady(TOOL)]),  # a finished call may start at once (issue 27 item 1)
        ({"type": "reasoning", "id": "rs_1", "summary": []}, []),
    ],
)
def test_output_item_done_events(item: Raw, expected: list[AssistantMessageDone | ToolCallReady]) -> None:
    _, events = run([f.response_created("r"), f.output_item_done(0, item)])
    assert events[1:] == expected


@pytest.mark.parametrize(
    ("content", "text"),
    [(None, ""), ([], ""), ([{"type": "output_text"}], ""), ([{"type": "input_text", "text": "x"}], "")],
)
def test_message_text_edge_cases(content: Any, text: str) -> None:
    assert message_text({"type": "message", "content": content}) == text


# -- response.metadata turn state ------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-codex-turn-state": "sticky-test"}, [TurnStateSeen("sticky-test")]),
        ({"X-Codex-Turn-State": "upper"}, [TurnStateSeen("upper")]),
        ({"other": "1", "X-CODEX-TURN-STATE": "shout"}, [TurnStateSeen("shout")]),
        ({"x-codex-turn-state": 5}, []),
        ({"x-codex-turn-state": None}, []),
        ({"x-request-id": "req"}, []),
        ({}, []),
    ],
)
def test_metadata_turn_state(headers: Raw, expected: list[TurnStateSeen]) -> None:
    acc, events = run([{"type": "response.metadata", "headers": headers}])
    assert events == expected
    assert acc.phase is Phase.WAITING


# -- completed output and outcome ------------------------------------------------------


def test_completed_output_prefers_response_output() -> None:
    other = f.assistant_message("streamed", item_id="msg_s")
    _, events = run([f.output_item_done(0, other), f.completed("r", [MSG, TOOL])])
    assert outcome_of(events).output == (MSG, TOOL)


@pytest.mark.parametrize("output", [[], None])
def test_completed_output_falls_back_to_done_items(output: list[Raw] | None) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    response: Raw = {"id": "r", "status": "completed"}
    if output is not None:
        response["output"] = output
    _, events = run(
        [
            f.output_item_done(0, reasoning),
            f.output_item_done(1, TOOL),
            f.output_item_done(2, MSG),
            {"type": "response.completed", "response": response},
        ]
    )
    assert outcome_of(events).output == (reasoning, TOOL, MSG)


def test_completed_with_nothing_has_empty_output() -> None:
    _, events = run([f.completed("r", [])])
    outcome = outcome_of(events)
    assert outcome.output == ()
    assert outcome.tool_calls == ()
    assert outcome.history_items == ()
    assert outcome.final_message is None


@pytest.mark.parametrize(("end_turn", "expected"), [(False, False), (True, True), (None, None)])
def test_end_turn(end_turn: bool | None, expected: bool | None) -> None:
    _, events = run([f.completed("r", [MSG], end_turn=end_turn)])
    assert outcome_of(events).end_turn is expected


@pytest.mark.parametrize(
    ("usage_block", "expected"),
    [
        (None, TokenUsage()),
        (
            {
                "input_tokens": 10,
                "input_tokens_details": None,
                "output_tokens": 2,
                "output_tokens_details": None,
                "total_tokens": 12,
            },
            TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12),
        ),
        ("default", TokenUsage(10, 5, 0, 2, 1, 12)),
    ],
)
def test_usage_null_and_null_details(usage_block: Raw | str | None, expected: TokenUsage) -> None:
    _, events = run([f.completed("r", [MSG], usage_block=usage_block)])
    outcome = outcome_of(events)
    assert outcome.usage == expected
    assert outcome.usage_raw == (f.usage() if usage_block == "default" else usage_block)


def test_status_is_kept() -> None:
    _, events = run([{"type": "response.completed", "response": {"id": "r", "status": "incomplete"}}])
    assert outcome_of(events).status == "incomplete"


def test_outcome_properties() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    unknown = {"type": "mystery_item", "id": "x_1"}
    compaction = {"type": "compaction", "id": "cmp-server", "encrypted_content": "e"}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}
    first = f.assistant_message("first", item_id="msg_1")
    last = f.assistant_message("last", item_id="msg_2")
    output = (reasoning, first, TOOL, unknown, FUNC, compaction, last, user)
    _, events = run([f.completed("r", list(output))])
    outcome = outcome_of(events)
    assert outcome.output == output
    assert outcome.tool_calls == (TOOL, FUNC)
    assert outcome.history_items == (reasoning, first, TOOL, FUNC, compaction, last, user)
    assert unknown not in outcome.history_items
    # the last *assistant* message, skipping user messages
    assert outcome.final_message == "last"


def test_final_message_none_without_assistant_message() -> None:
    _, events = run([f.completed("r", [TOOL, {"type": "reasoning", "id": "rs_1"}])])
    assert outcome_of(events).final_message is None


def test_final_message_of_message_without_role() -> None:
    item = {"type": "message", "content": [{"type": "output_text", "text": "implicit"}]}
    _, events = run([f.completed("r", [item])])
    assert outcome_of(events).final_message == "implicit"


# -- failures --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cls", "error_class"),
    [
        (f.error_frame("boom"), ApiError, "api"),
        (f.error_frame("overloaded", code="server_is_overloaded"), ApiError, "api_server"),
        (f.error_frame("gone", code="previous_response_not_found"), CheckpointMissing, "checkpoint_missing"),
        (
            {"type": "response.failed", "response": {"id": "r", "error": {"code": "invalid_image", "message": "bad"}}},
            InvalidImageRequest,
            "invalid_image_request",
        ),
        (
            {"type": "response.failed", "response": {"id": "r", "error": {"code": "insufficient_quota"}}},
            UsageLimitExceeded,
            "usage_limit",
        ),
        (
            {"type": "response.incomplete", "response": {"id": "r", "incomplete_details": {"reason": "max_tokens"}}},
            ApiError,
            "api",
        ),
    ],
)
def test_failure_frames_raise_and_end_the_response(raw: Raw, cls: type[ApiError], error_class: str) -> None:
    acc = ResponseAccumulator()
    acc.feed(parse_frame(f.response_created("r")))
    with pytest.raises(cls) as info:
        acc.feed(parse_frame(raw))
    assert type(info.value) is cls
    assert info.value.error_class == error_class
    assert info.value.event == raw
    assert acc.phase is Phase.FAILED
    assert acc.error is info.value
    with pytest.raises(ProtocolError, match="after the response ended"):
        acc.feed(parse_frame(f.completed("r")))


def test_failure_before_any_response_frame() -> None:
    acc = ResponseAccumulator()
    with pytest.raises(ApiError):
        acc.feed(parse_frame(f.error_frame("nope")))
    assert acc.phase is Phase.FAILED


@pytest.mark.parametrize(
    "late",
    [
        f.response_created("r2"),
        f.text_delta(0, "late"),
        f.output_item_done(0, MSG),
        f.completed("r"),
        f.error_frame("late error"),
        {"type": "response.metadata", "headers": {"x-codex-turn-state": "s"}},
        {"type": "response.something_new"},
    ],
)
def test_frames_after_done_raise_protocol_error(late: Raw) -> None:
    acc, _ = run([f.response_created("r"), f.completed("r", [MSG])])
    assert acc.phase is Phase.DONE
    with pytest.raises(ProtocolError, match="after the response ended") as info:
        acc.feed(parse_frame(late))
    assert info.value.error_class == "invalid_payload"
    assert acc.phase is Phase.DONE


def test_unknown_frames_are_ignored_mid_stream() -> None:
    acc, events = run(
        [
            f.response_created("r"),
            {"type": "response.content_part.added", "output_index": 0},
            {"type": "response.output_text.done", "text": "x"},
            f.completed("r", [MSG]),
        ]
    )
    assert acc.phase is Phase.DONE
    assert [type(e) for e in events] == [ResponseStarted, ResponseFinished]


# -- interrupt-and-drain phase and response isolation (pure) ----------------------------


def test_an_interrupt_is_due_once_the_id_is_known_and_drains_to_the_terminal_frame() -> None:
    acc = ResponseAccumulator()
    acc.want_interrupt()
    assert not acc.interrupt_due  # no response id yet
    assert acc.feed(parse_frame(f.response_created("resp-1"))) == [ResponseStarted("resp-1")]
    assert acc.interrupt_due
    assert acc.interrupt_frame() == {"type": "response.interrupt", "response_id": "resp-1",
                                     "mode": "discard_partial_items"}
    acc.interrupt_sent()
    assert acc.phase is Phase.DRAINING and not acc.interrupt_due
    feed_all(acc, [f.text_delta(0, "late")])
    assert acc.phase is Phase.DRAINING
    incomplete = {"type": "response.incomplete", "response": {
        "id": "resp-1", "incomplete_details": {"reason": "interrupted"}, "usage": {"total_tokens": 7}}}
    (finished,) = acc.feed(parse_frame(incomplete))
    assert isinstance(finished, ResponseFinished)
    assert (finished.outcome.status, finished.outcome.end_turn, finished.outcome.usage.total_tokens) == (
        "incomplete", False, 7)
    assert acc.phase is Phase.DONE


def test_a_drain_without_its_terminal_frame_is_abandoned_unchained() -> None:
    acc, _ = run([f.response_created("resp-1"), f.output_item_done(0, f.assistant_message("kept"))])
    acc.want_interrupt()
    acc.interrupt_sent()
    outcome = acc.abandoned_outcome()
    assert (outcome.response_id, outcome.chained, outcome.final_message) == ("resp-1", False, "kept")


def test_no_interrupt_is_due_without_a_request_or_after_the_end() -> None:
    acc, _ = run([f.response_created("resp-1")])
    assert not acc.interrupt_due
    feed_all(acc, [f.completed("resp-1", [])])
    acc.want_interrupt()
    assert not acc.interrupt_due


@pytest.mark.parametrize(
    ("stale", "frames", "expected_foreign"),
    [
        (("resp-old",), [f.completed("resp-old", [])], [("ResponseCompleted", "resp-old", None)]),
        ((), [f.response_created("resp-1"), f.completed("resp-2", [])], [("ResponseCompleted", "resp-2", "resp-1")]),
        ((), [f.response_created("resp-1"), {"type": "response.failed", "response": {"id": "resp-9"}}],
         [("ResponseFailed", "resp-9", "resp-1")]),
        (("resp-old",), [{"type": "response.created", "response": {"id": "resp-old"}}],
         [("ResponseCreated", "resp-old", None)]),
        ((), [f.response_created("resp-1"), f.completed("resp-1", [])], []),
    ],
)
def test_frames_naming_another_response_are_foreign_and_change_nothing(
    stale: tuple[str, ...], frames: list[Raw], expected_foreign: list[tuple[str, str, str | None]]
) -> None:
    acc = ResponseAccumulator(stale)
    events = feed_all(acc, frames)
    foreign = [(e.frame_type, e.response_id, e.live_response_id) for e in events if isinstance(e, ForeignFrame)]
    assert foreign == expected_foreign
    if expected_foreign:
        assert acc.phase in (Phase.WAITING, Phase.STREAMING)  # still waiting for its own end
        assert not any(isinstance(e, ResponseFinished) for e in events)


# -- waiting mail cuts at a reasoning item or a commentary message (given as data) ------------

REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
COMMENTARY = f.assistant_message("looking", item_id="msg_c", phase="commentary")


@pytest.mark.parametrize(
    ("item", "waiting", "cut"),
    [
        (REASONING, True, True),
        (COMMENTARY, True, True),
        (MSG, True, False),  # a final answer is never a cut point
        (TOOL, True, False),
        (REASONING, False, False),
        (COMMENTARY, False, False),
    ],
)
def test_the_mail_flag_decides_a_cut_at_a_cut_point(item: Raw, waiting: bool, cut: bool) -> None:
    acc = ResponseAccumulator()
    acc.mail = flag = MailFlag()
    flag.waiting = waiting
    feed_all(acc, [f.response_created("r"), f.output_item_done(0, item)])
    assert acc.was_cut is cut and acc.interrupt_wanted is cut
    flag.waiting = not waiting  # read when an item finishes, never later
    assert acc.was_cut is cut
    # A second call of its own (one repeating the first one's call_id would be discarded).
    late = f.custom_tool_call("call-late", "exec", "2+2")
    events = feed_all(acc, [f.output_item_done(1, late), f.completed("r")])
    outcome = outcome_of(events)
    assert outcome.output == ((item,) if cut else (item, late)) and outcome.chained is not cut


def test_without_a_mail_flag_nothing_cuts() -> None:
    acc, _ = run([f.response_created("r"), f.output_item_done(0, REASONING)])
    assert acc.mail is None and not acc.was_cut
