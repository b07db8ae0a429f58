"""The SSE decoder's bounds: one line and one event are limited, and the scan is linear."""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Iterator

import pytest

from trio_agent._errors import ProtocolError
from trio_agent._wire.sse import MAX_EVENT_BYTES, MAX_LINE_BYTES, SseDecoder

MiB = 1 << 20


def test_default_limits_are_the_websocket_message_limit() -> None:
    assert MAX_EVENT_BYTES == 64 * MiB  # trio-websocket's max_message_size in this project
    assert MAX_EVENT_BYTES < MAX_LINE_BYTES <= MAX_EVENT_BYTES + 4096


def feed_all(decoder: SseDecoder, chunks: list[bytes]) -> list[str]:
    return [event for chunk in chunks for event in decoder.feed(chunk)]


# (body, max_line_bytes, max_event_bytes, error_class or None when it decodes)
LIMITS: list[tuple[bytes, int, int, str | None]] = [
    (b"data: " + b"x" * 14 + b"\n\n", 20, 100, None),  # a line of exactly the limit
    (b"data: " + b"x" * 15 + b"\n\n", 20, 100, "sse_line_too_long"),
    (b"data: " + b"x" * 15 + b"\r\r", 20, 100, "sse_line_too_long"),
    (b"data: " + b"x" * 15, 20, 100, "sse_line_too_long"),  # no terminator yet
    (b": " + b"x" * 19 + b"\n", 20, 100, "sse_line_too_long"),  # comments too
    (b"x" * 21 + b"\n", 20, 100, "sse_line_too_long"),  # a field name without a colon
    (b"data: 12345\ndata: 1234\n\n", 100, 10, None),  # 5 + joining newline + 4 = 10
    (b"data: 12345\ndata: 12345\n\n", 100, 10, "sse_event_too_large"),
    (b"data: 12345678901\n\n", 100, 10, "sse_event_too_large"),
    (b"data: 1234567890\n\ndata: 1234567890\n\n", 100, 10, None),  # the limit is per event
    (b"event: " + b"e" * 50 + b"\nid: 1\ndata: 1234567890\n\n", 100, 10, None),  # only data counts
]


@pytest.mark.parametrize(("body", "max_line", "max_event", "error_class"), LIMITS)
@pytest.mark.parametrize("chunking", ["whole", "bytes", "halves"])
def test_limits(body: bytes, max_line: int, max_event: int, error_class: str | None, chunking: str) -> None:
    chunks = {
        "whole": [body],
        "bytes": [bytes([b]) for b in body],
        "halves": [body[: len(body) // 2], body[len(body) // 2 :]],
    }[chunking]
    decoder = SseDecoder(max_line_bytes=max_line, max_event_bytes=max_event)
    if error_class is None:
        assert feed_all(decoder, chunks)
        return
    with pytest.raises(ProtocolError) as info:
        feed_all(decoder, chunks)
    assert info.value.error_class == error_class
    assert info.value.retryable is False
    limit = max_line if error_class == "sse_line_too_long" else max_event
    assert f"more than {limit} bytes" in str(info.value) or f"longer than {limit} bytes" in str(info.value)


@pytest.mark.parametrize("limits", [{"max_line_bytes": 0}, {"max_event_bytes": 0}, {"max_line_bytes": -5}])
def test_limits_must_be_positive(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="limits must be positive"):
        SseDecoder(**limits)


def huge_line(chunk_size: int) -> Iterator[bytes]:
    """The start of a 300 MB line without a line break, lazily (never held at once)."""
    yield b"data: "
    chunk = b"x" * chunk_size
    for _ in range(300 * 10**6 // chunk_size):
        yield chunk


def test_a_300_mb_line_fails_at_the_limit_in_bounded_memory() -> None:
    decoder = SseDecoder()
    fed = 0
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError) as info:
            for chunk in huge_line(MiB):
                decoder.feed(chunk)
                fed += len(chunk)
                assert decoder.statistics().buffered_bytes <= MAX_LINE_BYTES
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.error_class == "sse_line_too_long"
    assert "longer than 67109888 bytes" in str(info.value)
    assert MAX_LINE_BYTES - MiB < fed <= MAX_LINE_BYTES  # it failed on the chunk that went over
    assert peak < MAX_LINE_BYTES * 1.25 + 4 * MiB  # one line buffer (with its growth slack) and a chunk


def test_an_event_of_many_lines_fails_at_the_limit_in_bounded_memory() -> None:
    decoder = SseDecoder()
    line = b"data: " + b"x" * (MiB - 7) + b"\n"  # 1 MiB of data per line, with its joining newline
    lines = 0
    with pytest.raises(ProtocolError) as info:
        for _ in range(300):
            decoder.feed(line)
            lines += 1
            assert decoder.statistics().event_bytes <= MAX_EVENT_BYTES
            assert decoder.statistics().buffered_bytes == 0
    assert info.value.error_class == "sse_event_too_large"
    assert lines == 64


@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
def test_every_byte_is_scanned_once(chunk_size: int) -> None:
    # A long line arriving in small chunks is not rescanned from its start on each chunk.
    body = b"data: " + b"x" * (64 * 1024) + b"\r\n" + b"data: y\r" + b"\r"
    decoder = SseDecoder()
    events: list[str] = []
    for start in range(0, len(body), chunk_size):
        events.extend(decoder.feed(body[start : start + chunk_size]))
        assert decoder.statistics().scanned_bytes == min(start + chunk_size, len(body))
    assert events == ["x" * (64 * 1024) + "\ny"]
    assert decoder.statistics().buffered_bytes == 0


def test_a_long_line_in_small_chunks_decodes_quickly() -> None:
    # 16 MiB in 4 KiB chunks: rescanning the buffer on each chunk would read ~32 GiB.
    decoder = SseDecoder()
    chunk = b"x" * 4096
    chunks = itertools.chain([b"data: "], itertools.repeat(chunk, 4096), [b"\n\n"])
    events = [event for piece in chunks for event in decoder.feed(piece)]
    assert len(events) == 1
    assert len(events[0]) == 16 * MiB
