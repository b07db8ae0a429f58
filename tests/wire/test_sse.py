"""The SSE decoder: every byte split, every line terminator, end of body, fields."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._errors import ProtocolError
from trio_agent._wire.sse import SseDecoder

BODY = (
    "\ufeff: keep-alive comment after a byte-order mark\n"
    "event: response.created\n"
    'data: {"type":"response.created","response":{"id":"r"}}\n'
    "\n"
    'data: {"type":"response.output_text.delta",\r\n'
    'data: "delta":"h\u00e9llo \u2603"}\r\n'
    "\r\n"
    "id: 7\r"
    "retry: 100\r"
    "data: [DONE]\r"
    "\r"
    'data: {"type":"cr",\r'
    'data: "only":true}\r'
    "\r"
    'data: {"type":"tail"}\n'
    "\n"
).encode()

EXPECTED = [
    '{"type":"response.created","response":{"id":"r"}}',
    '{"type":"response.output_text.delta",\n"delta":"h\u00e9llo \u2603"}',
    '{"type":"cr",\n"only":true}',
    '{"type":"tail"}',
]


def decode(chunks: list[bytes], **limits: int) -> tuple[list[str], bool]:
    """The events of a body fed as ``chunks``, and whether ``close()`` found it truncated."""
    decoder = SseDecoder(**limits)
    events: list[str] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    assert decoder.close() == []
    return events, decoder.truncated


def splits(body: bytes) -> list[list[bytes]]:
    """``body`` whole, cut in two at every offset, and byte by byte."""
    ways = [[body], [bytes([b]) for b in body]]
    ways.extend([body[:cut], body[cut:]] for cut in range(1, len(body)))
    return ways


def test_whole_body() -> None:
    assert decode([BODY]) == (EXPECTED, False)
    assert json.loads(EXPECTED[1])["delta"] == "h\u00e9llo \u2603"


@pytest.mark.parametrize("chunks", splits(BODY), ids=lambda c: f"{len(c)}-chunks-{len(c[0])}")
def test_every_split(chunks: list[bytes]) -> None:
    assert decode(chunks) == (EXPECTED, False)


@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_arbitrary_splits(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [BODY[a:b] for a, b in zip([0, *points], [*points, len(BODY)], strict=True)]
    assert decode(chunks) == (EXPECTED, False)


# -- line terminators: CRLF, LF and bare CR; a CRLF is one terminator even when split --

TERMINATORS = [
    (b"data: a\ndata: b\n\n", ["a\nb"]),
    (b"data: a\r\ndata: b\r\n\r\n", ["a\nb"]),
    (b"data: a\rdata: b\r\r", ["a\nb"]),
    (b"data: a\rdata: b\n\r\n", ["a\nb"]),
    (b"data: a\r\ndata: b\rdata: c\n\r", ["a\nb\nc"]),
    (b"data: a\r\rdata: b\r\r", ["a", "b"]),
    (b"data: a\n\rdata: b\n\r", ["a", "b"]),  # LF then CR: two terminators, a blank line
    (b"data: a\r\n\rdata: b\r\r\n", ["a", "b"]),
    (b"data: a\r\r\n\n\r\r\n", ["a"]),  # extra blank lines dispatch nothing
    (b"\r\n\r\n\n\r", []),
]


@pytest.mark.parametrize(("body", "expected"), TERMINATORS)
def test_line_terminators_at_every_two_way_split(body: bytes, expected: list[str]) -> None:
    for chunks in splits(body):
        assert decode(chunks) == (expected, False), chunks


@pytest.mark.parametrize(("body", "expected"), TERMINATORS)
def test_line_terminators_at_every_three_way_split(body: bytes, expected: list[str]) -> None:
    for a, b in itertools.combinations(range(len(body) + 1), 2):
        chunks = [body[:a], body[a:b], body[b:]]  # empty chunks included
        assert decode(chunks) == (expected, False), chunks


def test_cr_at_the_end_of_a_chunk_ends_the_line_at_once() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == ["a"]  # no waiting for a chunk that might start with LF
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\ndata: b\r") == []  # the LF after "\r" is a blank line, not part of a CRLF
    assert decoder.feed(b"") == []  # an empty chunk keeps the pending CR
    assert decoder.feed(b"\n\r\n") == ["b"]


# -- end of body: an unterminated event is discarded, and close() says so --

END_OF_BODY = [
    (b"", [], False),
    (b"data: a\n\n", ["a"], False),
    (b"data: a\r\r", ["a"], False),
    (b"data: a\n\n\r", ["a"], False),
    (b": keep-alive\n", [], False),
    (b"data: a\n\n: keep-alive\r\n", ["a"], False),
    (b"data: a", [], True),  # an unfinished line
    (b"data: a\n", [], True),  # a data line without the blank line that dispatches it
    (b"data: a\r", [], True),
    (b"data: a\r\n", [], True),
    (b"event: response.completed\n", [], True),  # a field line of an unfinished event
    (b": keep-al", [], True),  # cut inside a line, even a comment
    (b'data: a\n\ndata: {"type":"response.comp', ["a"], True),
    (b'data: a\n\ndata: {"type":"response.completed"}\n', ["a"], True),
]


@pytest.mark.parametrize(("body", "expected", "truncated"), END_OF_BODY)
def test_end_of_body_at_every_split(body: bytes, expected: list[str], truncated: bool) -> None:
    for chunks in splits(body) if body else [[]]:
        assert decode(chunks) == (expected, truncated), chunks


def test_truncated_is_false_until_close_and_close_is_idempotent() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.truncated is False
    assert decoder.close() == []
    assert decoder.truncated is True
    assert decoder.close() == []
    assert decoder.truncated is True
    assert decoder.statistics().buffered_bytes == 0
    assert decoder.statistics().event_bytes == 0


def test_feed_after_close_is_a_bug() -> None:
    decoder = SseDecoder()
    decoder.close()
    with pytest.raises(RuntimeError, match=r"feed\(\) called after close\(\)"):
        decoder.feed(b"data: a\n\n")


# -- fields --

FIELDS = [
    (b"data:x\n\n", ["x"]),
    (b"data:\n\n", [""]),
    (b"data\n\n", [""]),  # no colon: the whole line is the field name, the value is empty
    (b"data\ndata\n\n", ["\n"]),
    (b"data:  x \n\n", [" x "]),  # only one space after the colon is dropped
    (b"data: a:b: c\n\n", ["a:b: c"]),
    (b"data: [DONE]\n\n", []),
    (b"data: [DONE]\ndata: x\n\n", ["[DONE]\nx"]),  # the sentinel is a whole event
    (b"DATA: x\n\n", []),  # field names are case-sensitive
    (b"datas: x\ndat: y\ndata : z\n\n", []),
    (b"event: e\nid: 1\nretry: 5\nfoo: bar\nfoo\n\n", []),  # an event without data is not dispatched
    (b": comment\ndata: x\n:\n\n", ["x"]),
    (b"data: a\n\n\n\ndata: b\n\n", ["a", "b"]),
    (b"\xef\xbb\xbfdata: a\n\n", ["a"]),  # a byte-order mark opening the body is ignored
    (b"data: a\n\n\xef\xbb\xbfdata: b\n\n", ["a"]),  # ... elsewhere it is part of a field name
    (b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n", []),  # only one is ignored
    ("data: h\u00e9llo \u2603 \U0001f600\n\n".encode(), ["h\u00e9llo \u2603 \U0001f600"]),
]


@pytest.mark.parametrize(("body", "expected"), FIELDS)
def test_fields_at_every_split(body: bytes, expected: list[str]) -> None:
    for chunks in splits(body):
        assert decode(chunks) == (expected, False), chunks


@pytest.mark.parametrize("body", [b"data: \xff\xfe\n\n", b"data: \xe2\x98\n\n", b"data: a\ndata: \xc3(\n\n"])
def test_invalid_utf8_is_a_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decode([body])
    assert info.value.error_class == "invalid_sse_utf8"
    assert info.value.retryable is False


def test_invalid_utf8_in_an_ignored_field_is_ignored() -> None:
    assert decode([b": \xff\nevent: \xfe\ndata: ok\n\n"]) == (["ok"], False)


# -- round trip: any events, any terminators, any splits --

line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8)
noise = st.sampled_from([b"", b": ping", b"event: x", b"id: 3", b"retry: 1"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A body with random terminators and noise lines, and the events it carries."""
    body = bytearray()
    expected: list[str] = []

    def line(content: bytes) -> None:
        # A blank line right after a bare CR must not start with LF: "\r" + "\n" is one CRLF.
        choices = [b"\r", b"\r\n"] if not content and body.endswith(b"\r") else [b"\n", b"\r\n", b"\r"]
        body.extend(content + draw(st.sampled_from(choices)))

    for data_lines in draw(st.lists(st.lists(line_text, min_size=1, max_size=3), max_size=5)):
        for value in data_lines:
            if (extra := draw(noise)) != b"":
                line(extra)
            line(b"data: " + value.encode())
        line(b"")
        if (data := "\n".join(data_lines)) != "[DONE]":
            expected.append(data)
    return bytes(body), expected


@given(streams(), st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_round_trip(stream: tuple[bytes, list[str]], cuts: list[int]) -> None:
    body, expected = stream
    points = sorted({cut for cut in cuts if cut <= len(body)})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert decode(chunks) == (expected, False)
