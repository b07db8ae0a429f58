"""``parse_frame`` against a corpus of hostile frames: every field of every known frame
type given every wrong type, left out, or next to extra keys. Each case states its
outcome -- the frame value, or ``ProtocolError`` -- and these are the outcomes the cattrs
converter gave when it structured frames (recorded against it before the readers in
``_wire/frames.py`` replaced it), so a frame it took is taken and one it refused is refused.

The corpus holds JSON values only: ``parse_frame`` reads what ``decode_frame`` made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from trio_agent import ProtocolError
from trio_agent._wire import frames, request, sse, stream, stream_events
from trio_agent._wire.frames import (
    CompletedResponse,
    Frame,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    ResponseCompleted,
    ResponseCreated,
    ResponseMetadata,
    ResponseRef,
    parse_frame,
)

REFUSED = "ProtocolError"

# Every value each field is given in turn.
HOSTILE: list[Any] = [
    None, "", "s", "abc", True, False, 0, 1, -3, 1.0, 1.5,
    [], [1], ["ab"], [None], [{}], [{"a": 1}], [["a", 1]], [{"a": 1}, 2], [{"a": 1}, "x"],
    {}, {"a": 1}, {"a": None}, {"type": "message"},
]

# What a field of each kind takes, and what each such value becomes; it refuses every
# other value of HOSTILE.
_OBJECTS = [({}, {}), ({"a": 1}, {"a": 1}), ({"a": None}, {"a": None}), ({"type": "message"}, {"type": "message"})]
TAKES: dict[str, list[tuple[Any, Any]]] = {
    "str": [("", ""), ("s", "s"), ("abc", "abc")],  # not null, not a number
    "int": [(0, 0), (1, 1), (-3, -3)],  # not a bool, not 1.0
    "str|null": [(None, None), ("", ""), ("s", "s"), ("abc", "abc")],
    "bool|null": [(None, None), (True, True), (False, False)],  # not 0 or 1
    "object": _OBJECTS,  # not null, not a list of pairs
    "object|null": [(None, None), *_OBJECTS],
    # a list whose every element is an object; an empty string or object was taken by
    # the converter as an empty list (it iterated them), and still is
    "objects|null": [(None, None), ([], []), ([{}], [{}]), ([{"a": 1}], [{"a": 1}]), ("", []), ({}, [])],
    # a nested response object is read for some of its fields: any object is taken (the
    # ones here carry none of those fields), anything else is refused
    "response-object": [(value, None) for value, _ in _OBJECTS],
}
MISSING = object()  # the field is required: leaving it out is refused

# (frame type, path of the field, its kind, what it is when left out, the good frame the
# field is set in, and the frame expected for a value the field takes)
Row = tuple[str, tuple[str, ...], str, Any, dict[str, Any], Callable[[Any], Frame]]
DELTA = {"type": "response.output_text.delta", "delta": "d", "output_index": 2, "content_index": 1, "item_id": "m"}
OUTPUT = [{"type": "message"}]
USAGE = {"input_tokens": 1}
COMPLETED = {
    "type": "response.completed",
    "response": {"id": "r", "status": "completed", "end_turn": True, "output": OUTPUT, "usage": USAGE},
}


def _completed(**fields: Any) -> ResponseCompleted:
    values: dict[str, Any] = {"id": "r", "status": "completed", "end_turn": True, "output": OUTPUT, "usage": USAGE}
    return ResponseCompleted(CompletedResponse(**{**values, **fields}))


ROWS: list[Row] = [
    ("response.created", ("response",), "response-object", ResponseRef(None),
     {"type": "response.created", "response": {"id": "r"}}, lambda _: ResponseCreated(ResponseRef(None))),
    ("response.created", ("response", "id"), "str|null", None,
     {"type": "response.created", "response": {"id": "r"}}, lambda v: ResponseCreated(ResponseRef(v))),
    ("response.in_progress", ("response", "id"), "str|null", None,
     {"type": "response.in_progress", "response": {"id": "r"}}, lambda v: ResponseCreated(ResponseRef(v))),
    ("response.output_item.added", ("item",), "object", MISSING,
     {"type": "response.output_item.added", "item": {"type": "message"}, "output_index": 1},
     lambda v: OutputItemAdded(v, 1)),
    ("response.output_item.added", ("output_index",), "int", 0,
     {"type": "response.output_item.added", "item": {"type": "message"}, "output_index": 1},
     lambda v: OutputItemAdded({"type": "message"}, v)),
    ("response.output_item.done", ("item",), "object", MISSING,
     {"type": "response.output_item.done", "item": {"type": "message"}, "output_index": 1},
     lambda v: OutputItemDone(v, 1)),
    ("response.output_item.done", ("output_index",), "int", 0,
     {"type": "response.output_item.done", "item": {"type": "message"}, "output_index": 1},
     lambda v: OutputItemDone({"type": "message"}, v)),
    ("response.output_text.delta", ("delta",), "str", "", DELTA, lambda v: OutputTextDelta(v, 2, 1, "m")),
    ("response.output_text.delta", ("output_index",), "int", 0, DELTA, lambda v: OutputTextDelta("d", v, 1, "m")),
    ("response.output_text.delta", ("content_index",), "int", 0, DELTA, lambda v: OutputTextDelta("d", 2, v, "m")),
    ("response.output_text.delta", ("item_id",), "str|null", None, DELTA, lambda v: OutputTextDelta("d", 2, 1, v)),
    ("response.reasoning_summary_text.delta", ("delta",), "str", "",
     {"type": "response.reasoning_summary_text.delta", "delta": "d"}, ReasoningSummaryDelta),
    ("response.reasoning_summary.delta", ("delta",), "str", "",
     {"type": "response.reasoning_summary.delta", "delta": "d"}, ReasoningSummaryDelta),
    ("response.metadata", ("headers",), "object", {},
     {"type": "response.metadata", "headers": {"h": "v"}}, ResponseMetadata),
    ("response.completed", ("response",), "response-object", MISSING, COMPLETED,
     lambda _: ResponseCompleted(CompletedResponse())),
    ("response.completed", ("response", "id"), "str|null", None, COMPLETED, lambda v: _completed(id=v)),
    ("response.completed", ("response", "status"), "str|null", None, COMPLETED, lambda v: _completed(status=v)),
    ("response.completed", ("response", "end_turn"), "bool|null", None, COMPLETED, lambda v: _completed(end_turn=v)),
    ("response.completed", ("response", "output"), "objects|null", None, COMPLETED, lambda v: _completed(output=v)),
    ("response.completed", ("response", "usage"), "object|null", None, COMPLETED, lambda v: _completed(usage=v)),
]


def _with(frame: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A deep enough copy of ``frame`` with the field at ``path`` set (or, for MISSING
    as the value, left out)."""
    head, *rest = path
    copy = dict(frame)
    if rest:
        copy[head] = _with(copy[head], tuple(rest), value)
    elif value is MISSING:
        del copy[head]
    else:
        copy[head] = value
    return copy


def _cases() -> list[Any]:
    cases = []
    for kind, path, field_kind, default, good, expected in ROWS:
        field = ".".join(path)
        taken = TAKES[field_kind]
        for value in HOSTILE:
            results = [result for candidate, result in taken if type(candidate) is type(value) and candidate == value]
            outcome = expected(results[0]) if results else REFUSED
            cases.append(pytest.param(_with(good, path, value), outcome, id=f"{kind}.{field}={value!r}"))
        missing = REFUSED if default is MISSING else expected(default)
        cases.append(pytest.param(_with(good, path, MISSING), missing, id=f"{kind}.{field}=<left out>"))
    return cases


CASES = _cases()


def test_the_corpus_refuses_and_takes_values_of_every_row() -> None:
    # a guard on the tables above: each row sees values it takes and values it refuses
    assert len(CASES) == len(ROWS) * (len(HOSTILE) + 1)
    refused = sum(1 for case in CASES if case.values[1] == REFUSED)
    assert 0 < refused < len(CASES)


@pytest.mark.parametrize(("raw", "outcome"), CASES)
def test_hostile_frame(raw: dict[str, Any], outcome: Frame | str) -> None:
    if outcome == REFUSED:
        with pytest.raises(ProtocolError) as info:
            parse_frame(raw)
        assert str(info.value).startswith(f"malformed {raw['type']!r} frame: ")
        assert info.value.event is raw
        assert info.value.error_class == "invalid_payload"
    else:
        assert parse_frame(raw) == outcome


# Hand-picked frames the tables do not reach: elements and nesting.
PICKED: list[tuple[dict[str, Any], Frame | str]] = [
    ({"type": "response.created"}, ResponseCreated(ResponseRef(None))),
    ({"type": "response.created", "response": {"id": "r", "status": 5, "output": "x"}},
     ResponseCreated(ResponseRef("r"))),  # only the id is read
    ({"type": "response.completed", "response": {"id": "r", "output": [{"type": "message"}, None]}}, REFUSED),
    ({"type": "response.completed", "response": {"id": "r", "output": [{"type": "message"}, []]}}, REFUSED),
    ({"type": "response.completed", "response": {"id": "r", "output": {"a": {"type": "message"}}}}, REFUSED),
    ({"type": "response.completed", "response": {"id": "r", "output": " "}}, REFUSED),
    ({"type": "response.completed", "response": {"id": "r", "usage": {"input_tokens": "many"}}},
     ResponseCompleted(CompletedResponse("r", usage={"input_tokens": "many"}))),  # usage is read leniently later
    ({"type": "response.completed", "response": {"id": "r", "output": [{"content": None}]}},
     ResponseCompleted(CompletedResponse("r", output=[{"content": None}]))),  # an item's inside is not checked here
    ({"type": "response.output_item.done", "item": {"type": "message", "content": 5}},
     OutputItemDone({"type": "message", "content": 5})),
    ({"type": "response.output_text.delta", "delta": "x", "output_index": 10**30}, OutputTextDelta("x", 10**30)),
    ({"type": "response.output_text.delta", "delta": "x", "logprobs": None, "extra": {"deep": [1]}},
     OutputTextDelta("x")),
    ({"type": "response.metadata", "headers": {"x-codex-turn-state": 5}}, ResponseMetadata({"x-codex-turn-state": 5})),
    ({"type": "response.metadata", "headers": [["x-codex-turn-state", "s"]]}, REFUSED),
]


@pytest.mark.parametrize(("raw", "outcome"), PICKED, ids=lambda v: json.dumps(v)[:60] if isinstance(v, dict) else "")
def test_picked_frame(raw: dict[str, Any], outcome: Frame | str) -> None:
    test_hostile_frame(raw, outcome)


def test_objects_are_copied_one_level_deep() -> None:
    # as the converter did: a frame's own dicts and lists are new, what they hold is shared
    content = [{"type": "output_text", "text": "hi"}]
    item = {"type": "message", "content": content}
    done = parse_frame({"type": "response.output_item.done", "item": item})
    assert isinstance(done, OutputItemDone) and done.item == item and done.item is not item
    assert done.item["content"] is content
    output, usage = [item], {"input_tokens": 1}
    completed = parse_frame({"type": "response.completed", "response": {"id": "r", "output": output, "usage": usage}})
    assert isinstance(completed, ResponseCompleted)
    assert completed.response.output == output and completed.response.output is not output
    assert completed.response.output[0] is not item and completed.response.usage is not usage


def test_frames_match_compare_and_show_their_fields() -> None:
    frame = parse_frame(DELTA)
    match frame:
        case OutputTextDelta(delta, output_index, content_index, item_id):
            assert (delta, output_index, content_index, item_id) == ("d", 2, 1, "m")
        case _:
            pytest.fail(f"not a text delta: {frame!r}")
    assert repr(frame) == "OutputTextDelta(delta='d', output_index=2, content_index=1, item_id='m')"
    assert frame != ReasoningSummaryDelta("d") and hash(frame) == hash(OutputTextDelta("d", 2, 1, "m"))
    assert ResponseMetadata() == ResponseMetadata({}) and ResponseCreated() == ResponseCreated(ResponseRef())


def test_wire_values_are_not_attrs_classes() -> None:
    # attrs builds each class when its module is imported; these are on every turn's path
    classes = [value for module in (frames, request, sse, stream, stream_events) for value in vars(module).values()
               if isinstance(value, type) and value.__module__ == module.__name__]
    assert len(classes) > 20
    assert [cls.__name__ for cls in classes if attrs.has(cls)] == []
