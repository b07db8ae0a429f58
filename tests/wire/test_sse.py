"""The SSE decoder at every byte split."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._errors import ProtocolError
from trio_agent._wire.sse import SseDecoder

BODY = (
    ": keep-alive comment\n"
    "event: response.created\n"
    'data: {"type":"response.created","response":{"id":"r"}}\n'
    "\n"
    'data: {"type":"response.output_text.delta",\r\n'
    'data: "delta":"h\u00e9llo \u2603"}\r\n'
    "\r\n"
    "id: 7\n"
    "retry: 100\n"
    "data: [DONE]\n"
    "\n"
    'data: {"type":"tail"}'
).encode()

EXPECTED = [
    '{"type":"response.created","response":{"id":"r"}}',
    '{"type":"response.output_text.delta",\n"delta":"h\u00e9llo \u2603"}',
    '{"type":"tail"}',
]


def decode(chunks: list[bytes]) -> list[str]:
    decoder = SseDecoder()
    events: list[str] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events + decoder.close()


def test_whole_body() -> None:
    assert decode([BODY]) == EXPECTED
    assert json.loads(EXPECTED[1])["delta"] == "h\u00e9llo \u2603"


@pytest.mark.parametrize("split", range(1, len(BODY)))
def test_every_two_way_split(split: int) -> None:
    assert decode([BODY[:split], BODY[split:]]) == EXPECTED


def test_byte_by_byte() -> None:
    assert decode([bytes([b]) for b in BODY]) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_arbitrary_splits(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [BODY[a:b] for a, b in zip([0, *points], [*points, len(BODY)], strict=True)]
    assert decode(chunks) == EXPECTED


def test_data_without_space_and_empty_data() -> None:
    assert decode([b"data:x\n\ndata:\n\n"]) == ["x", ""]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError) as info:
        decode([b"data: \xff\xfe\n\n"])
    assert info.value.error_class == "invalid_sse_utf8"
