"""Server-sent events decoder (sans-IO) for the HTTPS transport.

Feed it the bytes of a ``text/event-stream`` body in chunks of any size (every split
is handled: lines are cut on bytes, then decoded, so a multi-byte character split
across chunks is fine). It returns each event's data: multi-line ``data:`` fields are
joined with ``\\n``; comments and other fields are ignored; the ``[DONE]`` sentinel is
skipped; ``close()`` flushes an unterminated final event. Lines end with ``\\n`` or
``\\r\\n``.
"""

from __future__ import annotations

from .._errors import ProtocolError

__all__ = ["SseDecoder"]


class SseDecoder:
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[str]:
        """The data of every event completed by ``chunk``."""
        self._buffer += chunk
        events: list[str] = []
        start = 0
        while True:
            end = self._buffer.find(b"\n", start)
            if end < 0:
                break
            line = bytes(self._buffer[start:end])
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            self._line(line, events)
        del self._buffer[:start]
        return events

    def close(self) -> list[str]:
        """Flush what is left at the end of the body."""
        events: list[str] = []
        if self._buffer:
            line = bytes(self._buffer).rstrip(b"\r")
            self._buffer.clear()
            self._line(line, events)
        self._dispatch(events)
        return events

    def _line(self, line: bytes, events: list[str]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(b":"):
            return  # a comment
        name, _, value = line.partition(b":")
        if name != b"data":
            return  # event:, id:, retry: and unknown fields carry nothing we use
        if value.startswith(b" "):
            value = value[1:]
        try:
            self._data.append(value.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                "the Responses event stream is not valid UTF-8", error_class="invalid_sse_utf8"
            ) from exc
        self._has_data = True

    def _dispatch(self, events: list[str]) -> None:
        if not self._has_data:
            return
        data = "\n".join(self._data)
        self._data.clear()
        self._has_data = False
        if data != "[DONE]":
            events.append(data)
