"""parse_frame / decode_frame: every known frame type, unknown types, malformed frames."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_agent import ProtocolError
from trio_agent._wire.frames import (
    FRAME_DEPTH,
    CompletedResponse,
    ErrorFrame,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseMetadata,
    ResponseRef,
    UnknownFrame,
    decode_frame,
    parse_frame,
)

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
USAGE = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}

# (raw frame, expected value)
KNOWN: list[tuple[dict[str, Any], object]] = [
    ({"type": "response.created", "response": {"id": "resp-1"}}, ResponseCreated(ResponseRef("resp-1"))),
    (
        {"type": "response.created", "response": {"id": "resp-1", "status": "in_progress", "model": "m"}},
        ResponseCreated(ResponseRef("resp-1")),
    ),
    ({"type": "response.created", "response": {}}, ResponseCreated(ResponseRef(None))),
    ({"type": "response.in_progress", "response": {"id": "resp-2"}}, ResponseCreated(ResponseRef("resp-2"))),
    (
        {"type": "response.in_progress", "sequence_number": 3, "response": {"id": "resp-2", "status": "in_progress"}},
        ResponseCreated(ResponseRef("resp-2")),
    ),
    (
        {"type": "response.output_item.added", "output_index": 1, "item": MESSAGE},
        OutputItemAdded(MESSAGE, 1),
    ),
    ({"type": "response.output_item.added", "item": {"type": "reasoning"}}, OutputItemAdded({"type": "reasoning"}, 0)),
    (
        {"type": "response.output_text.delta", "output_index": 2, "content_index": 1, "delta": "abc", "item_id": "m"},
        OutputTextDelta("abc", 2, 1, "m"),
    ),
    (
        {"type": "response.output_text.delta", "delta": "x", "logprobs": [], "sequence_number": 9, "obfuscation": "z"},
        OutputTextDelta("x", 0, 0, None),
    ),
    ({"type": "response.reasoning_summary_text.delta", "delta": "think"}, ReasoningSummaryDelta("think")),
    (
        {"type": "response.reasoning_summary_text.delta", "delta": "t", "item_id": "rs_1", "summary_index": 0},
        ReasoningSummaryDelta("t"),
    ),
    ({"type": "response.reasoning_summary.delta", "delta": "legacy"}, ReasoningSummaryDelta("legacy")),
    (
        {"type": "response.output_item.done", "output_index": 3, "item": MESSAGE, "extra": True},
        OutputItemDone(MESSAGE, 3),
    ),
    (
        {
            "type": "response.completed",
            "response": {
                "id": "resp-3",
                "status": "completed",
                "end_turn": False,
                "output": [MESSAGE],
                "usage": USAGE,
                "model": "gpt",
                "created_at": 1,
            },
        },
        ResponseCompleted(CompletedResponse("resp-3", "completed", False, [MESSAGE], USAGE)),
    ),
    (
        {"type": "response.completed", "response": {"id": "resp-4", "usage": None, "end_turn": None}},
        ResponseCompleted(CompletedResponse("resp-4", None, None, None, None)),
    ),
    (
        {"type": "response.metadata", "headers": {"x-codex-turn-state": "sticky"}},
        ResponseMetadata({"x-codex-turn-state": "sticky"}),
    ),
    ({"type": "response.metadata"}, ResponseMetadata({})),
]


@pytest.mark.parametrize(("raw", "expected"), KNOWN, ids=lambda v: v["type"] if isinstance(v, dict) else "")
def test_parse_known_frames(raw: dict[str, Any], expected: object) -> None:
    assert parse_frame(raw) == expected


@pytest.mark.parametrize(
    ("raw", "cls"),
    [
        ({"type": "response.failed", "response": {"id": "r", "error": {"code": "x"}}}, ResponseFailed),
        ({"type": "response.incomplete", "response": {"incomplete_details": {"reason": "r"}}}, ResponseIncomplete),
        ({"type": "error", "error": {"message": "boom"}}, ErrorFrame),
        ({"type": "error"}, ErrorFrame),
    ],
)
def test_raw_frames_keep_the_whole_object(raw: dict[str, Any], cls: type) -> None:
    frame = parse_frame(raw)
    assert type(frame) is cls
    assert frame.raw == raw  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kind",
    [
        "response.content_part.added",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.done",
        "response.queued",
        "session.updated",
        "",
    ],
)
def test_unknown_frame_types_are_kept_not_fatal(kind: str) -> None:
    raw = {"type": kind, "whatever": [1, 2, {"nested": None}]}
    assert parse_frame(raw) == UnknownFrame(kind, raw)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ({"type": "response.output_item.added"}, "response.output_item.added"),
        ({"type": "response.output_item.added", "item": None}, "response.output_item.added"),
        ({"type": "response.output_item.added", "item": "message"}, "response.output_item.added"),
        ({"type": "response.output_item.done", "output_index": 0}, "response.output_item.done"),
        ({"type": "response.output_item.done", "item": [1, 2]}, "response.output_item.done"),
        ({"type": "response.output_text.delta", "delta": "x", "output_index": "abc"}, "response.output_text.delta"),
        ({"type": "response.completed"}, "response.completed"),
        ({"type": "response.completed", "response": None}, "response.completed"),
        ({"type": "response.completed", "response": {"id": "r", "output": "abc"}}, "response.completed"),
        ({"type": "response.completed", "response": {"id": "r", "output": [1]}}, "response.completed"),
        ({"type": "response.completed", "response": {"id": "r", "usage": 7}}, "response.completed"),
        ({"type": "response.metadata", "headers": None}, "response.metadata"),
        ({"type": "response.metadata", "headers": [1]}, "response.metadata"),
    ],
)
def test_malformed_known_frames_raise_protocol_error(raw: dict[str, Any], kind: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_frame(raw)
    error = info.value
    assert f"malformed {kind!r} frame" in str(error)
    assert json.dumps(raw, separators=(",", ":")) in str(error)  # the excerpt names the offending frame
    assert error.event == raw
    assert error.error_class == "invalid_payload"
    assert error.retryable is False


@pytest.mark.parametrize("raw", [{}, {"type": None}, {"type": 5}, {"type": ["error"]}, {"delta": "x"}])
def test_frames_without_a_string_type_raise(raw: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="without a string 'type'") as info:
        parse_frame(raw)
    assert info.value.event == raw


def test_malformed_frame_excerpt_is_bounded() -> None:
    raw = {"type": "response.completed", "response": {"id": "r", "output": "x" * 5000}}
    with pytest.raises(ProtocolError) as info:
        parse_frame(raw)
    message = str(info.value)
    assert message.endswith("...")
    assert len(message) < 400


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type":"response.created","response":{"id":"r"}}', {"type": "response.created", "response": {"id": "r"}}),
        ("{}", {}),
        ('  {"a": "\\u00e9"}\n', {"a": "é"}),
        ('{"a": [1, {"b": null}]} \n', {"a": [1, {"b": None}]}),  # an object, then whitespace
    ],
)
def test_decode_frame_objects(text: str, expected: dict[str, Any]) -> None:
    assert decode_frame(text) == expected


@pytest.mark.parametrize(
    ("text", "error_class", "fragment"),
    [
        (b'{"type":"error"}', "unexpected_binary", "binary frame"),
        (b"", "unexpected_binary", "binary frame"),
        ("not json", "invalid_json", "not JSON"),
        ("", "invalid_json", "not JSON"),
        ('{"type": "response.created"', "invalid_json", "not JSON"),
        ('{"type": "x"} {"type": "y"}', "invalid_json", "not JSON"),  # an object, then more
        ('{"type": "x"}]', "invalid_json", "not JSON"),
        ('{"a": NaN}', "invalid_json", "not JSON"),
        ('{"a": Infinity}', "invalid_json", "not JSON"),
        ("[1, 2]", "invalid_payload", "JSON list, expected an object"),
        ('"text"', "invalid_payload", "JSON str, expected an object"),
        ("42", "invalid_payload", "JSON int, expected an object"),
        ("null", "invalid_payload", "JSON NoneType, expected an object"),
    ],
)
def test_decode_frame_errors(text: str | bytes, error_class: str, fragment: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_frame(text)
    assert info.value.error_class == error_class
    assert fragment in str(info.value)
    assert info.value.failure_phase == "protocol"
    assert info.value.retryable is False


def test_decode_frame_quotes_a_bounded_excerpt_of_bad_json() -> None:
    text = "x" * 1000
    with pytest.raises(ProtocolError) as info:
        decode_frame(text)
    assert repr("x" * 200) in str(info.value)
    assert "x" * 201 not in str(info.value)


def _done_frame(extra: object) -> str:
    item = {"type": "message", "role": "assistant", "content": [], "extra": extra}
    return json.dumps({"type": "response.output_item.done", "output_index": 0, "item": item})


def _nested(levels: int) -> object:
    value: object = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("extra", "deep"),
    [
        # The frame, its item and the list: FRAME_DEPTH levels in all is kept, one more is not.
        (_nested(FRAME_DEPTH - 2), False),
        (_nested(FRAME_DEPTH - 1), True),
        # Many brackets but shallow: wide lists, and brackets inside strings (decode_frame
        # counts brackets in the text before walking; the count only decides whether to walk).
        ([[] for _ in range(300)], False),
        ("[" * 300 + "{" * 300, False),
    ],
)
def test_decode_frame_depth_limit_is_the_nesting_not_the_bracket_count(extra: object, deep: bool) -> None:
    text = _done_frame(extra)
    if not deep:
        assert decode_frame(text)["item"]["extra"] == extra
        return
    with pytest.raises(ProtocolError) as info:
        decode_frame(text)
    assert info.value.error_class == "invalid_payload"
    assert f"deeper than {FRAME_DEPTH} levels" in str(info.value)
