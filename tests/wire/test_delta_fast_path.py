"""The text-delta fast path (``text_delta_fields`` + ``feed_text_delta``/``text_delta_ids``) is the general
path (``feed(parse_frame(raw))``) for every delta frame: the same ``TextDelta``, the same
phase, the same refusal. A frame the fast path does not take must be one that the
general path refuses or reads the same way."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import ProtocolError
from trio_agent._runtime._model._call_events import delta_payload, text_payload
from trio_agent._wire.frames import parse_frame, text_delta_fields
from trio_agent._wire.stream import ResponseAccumulator, TextDelta
from trio_agent.testing import frames as f

Raw = dict[str, Any]
ADDED = f.output_item_added(1, {"type": "message", "id": "msg-1", "phase": "commentary", "content": []})
DELTAS: list[Raw] = [
    f.text_delta(0, "plain"),
    f.text_delta(1, "into a known message"),
    {"type": "response.output_text.delta", "delta": "with its own id", "output_index": 4, "item_id": "own"},
    {"type": "response.output_text.delta"},  # every field defaulted
    {"type": "response.output_text.delta", "delta": "the API's shape", "output_index": 1, "content_index": 0,
     "item_id": "msg-1", "logprobs": [], "sequence_number": 7},
    {"type": "response.output_text.delta", "delta": "", "output_index": 1, "item_id": None, "extra": [1]},
]
MALFORMED: list[Raw] = [
    {"type": "response.output_text.delta", "delta": 5},
    {"type": "response.output_text.delta", "delta": None},
    {"type": "response.output_text.delta", "delta": "x", "output_index": "0"},
    {"type": "response.output_text.delta", "delta": "x", "output_index": True},
    {"type": "response.output_text.delta", "delta": "x", "content_index": 1.5},
    {"type": "response.output_text.delta", "delta": "x", "item_id": 7},
    {"type": "response.output_text.delta", "delta": "x", "output_index": 0, "content_index": "0", "item_id": "m"},
    {"type": "response.output_text.delta", "delta": ["x"], "output_index": 0, "content_index": 0, "item_id": "m"},
]


def _accumulator(*before: Raw) -> ResponseAccumulator:
    acc = ResponseAccumulator()
    for raw in before:
        acc.feed(parse_frame(raw))
    return acc


@pytest.mark.parametrize("raw", DELTAS)
@pytest.mark.parametrize("before", [(), (f.response_created("resp-1"), ADDED)])
def test_the_fast_path_gives_what_the_general_path_gives(raw: Raw, before: tuple[Raw, ...]) -> None:
    fields = text_delta_fields(raw)
    assert fields is not None
    fast, general = _accumulator(*before), _accumulator(*before)
    assert [fast.feed_text_delta(*fields)] == general.feed(parse_frame(raw))
    assert fast.phase is general.phase
    # text_delta_ids (what the response feed takes) is feed_text_delta without the value.
    ids, (event,) = _accumulator(*before).text_delta_ids(fields[1], fields[2]), general.feed(parse_frame(raw))
    assert isinstance(event, TextDelta)
    assert ids == (event.item_id, event.phase)


@pytest.mark.parametrize("call_index", [None, 0, 3])
@pytest.mark.parametrize("item_id", [None, "", "msg-1"])
@pytest.mark.parametrize("phase", [None, "commentary"])
def test_the_delta_payload_is_the_text_payload(call_index: int | None, item_id: str | None, phase: str | None) -> None:
    payload = delta_payload(call_index, item_id, phase, "t")
    expected = text_payload(TextDelta("t", item_id, phase), call_index)
    assert list(payload.items()) == list(expected.items())  # the same keys in the same order
    assert list(expected) == [k for k in ("model_call_index", "item_id", "phase", "text") if k in expected]


@pytest.mark.parametrize("raw", MALFORMED)
def test_a_malformed_delta_is_left_to_the_general_path_which_refuses_it(raw: Raw) -> None:
    assert text_delta_fields(raw) is None
    with pytest.raises(ProtocolError, match=r"malformed 'response\.output_text\.delta' frame"):
        parse_frame(raw)


def test_a_delta_after_the_response_ended_is_refused_on_both_paths() -> None:
    raw = f.text_delta(0, "late")
    fields = text_delta_fields(raw)
    assert fields is not None
    fast, general = _accumulator(f.completed("resp-1", [])), _accumulator(f.completed("resp-1", []))
    with pytest.raises(ProtocolError, match="frame OutputTextDelta after the response ended"):
        fast.feed_text_delta(*fields)
    with pytest.raises(ProtocolError, match="frame OutputTextDelta after the response ended"):
        general.feed(parse_frame(raw))


def test_after_a_cut_the_fast_path_yields_nothing_like_the_general_path() -> None:
    raw = f.text_delta(0, "discarded")
    fields = text_delta_fields(raw)
    assert fields is not None
    fast, general = _accumulator(f.response_created("resp-1")), _accumulator(f.response_created("resp-1"))
    fast.cut()
    general.cut()
    assert fast.feed_text_delta(*fields) is None
    assert fast.text_delta_ids(0, None) is None
    assert general.feed(parse_frame(raw)) == []
