"""Server-sent events decoder (sans-IO) for the HTTPS transport.

Theory of operation (WHATWG HTML, "Server-sent events", *parsing an event stream*):

* **Lines.** A ``text/event-stream`` body arrives in chunks of any size. Each chunk is
  scanned once, from where the previous scan stopped, for a line terminator: ``\\r\\n``,
  ``\\n`` or a bare ``\\r``. Only the tail of a chunk after its last terminator is kept
  (``_partial``) and it is never scanned again, so decoding is linear in the body however
  it is split. A ``\\r`` that ends a chunk ends its line at once (no waiting for the next
  chunk); if the next chunk starts with ``\\n``, that byte is the rest of the same
  ``\\r\\n`` and is skipped (``_after_cr``). Lines are cut on bytes and decoded one at a
  time, so a multi-byte character split across chunks is fine (CR and LF never occur
  inside a UTF-8 sequence); a leading byte-order mark is ignored.
* **Events.** The values of an event's ``data`` fields are joined with ``\\n`` and the
  event is dispatched by a blank line. Comments (``:``) and the other fields (``event``,
  ``id``, ``retry``, unknown names) carry nothing the Responses API needs and are
  ignored; the ``[DONE]`` sentinel is skipped.
* **End of body.** Pending data at the end of the body is *discarded*, as the standard
  says: an event is only ever delivered by its blank line. ``close()`` records whether
  the body was cut inside an event in ``truncated``; a caller treats that as a lost
  connection (retryable), never as a malformed frame.
* **Bounds.** One line holds at most ``max_line_bytes`` and one event's data at most
  ``max_event_bytes`` (defaults ``MAX_LINE_BYTES`` and ``MAX_EVENT_BYTES``: 64 MiB of
  data, the WebSocket transport's message limit, plus room for the field name on its
  line). Past either, ``feed()`` raises ``ProtocolError`` (``sse_line_too_long`` /
  ``sse_event_too_large``) before storing the excess, so the unfinished line never
  holds more than ``max_line_bytes``.
"""

from __future__ import annotations

import re

from .._errors import ProtocolError
from .._record import Record

__all__ = ["MAX_EVENT_BYTES", "MAX_LINE_BYTES", "SseDecoder", "SseStatistics"]

#: Data bytes of one event (the JSON of one frame): the WebSocket transport's 64 MiB.
MAX_EVENT_BYTES = 64 << 20
#: Bytes of one line: a whole event's data plus its ``data: `` field name, with room.
MAX_LINE_BYTES = MAX_EVENT_BYTES + 1024

_TERMINATOR = re.compile(rb"\r\n?|\n")
_BOM = b"\xef\xbb\xbf"
_DONE = "[DONE]"


class SseStatistics(Record):
    """A snapshot of an ``SseDecoder``'s buffers and work.

    ``buffered_bytes``: bytes of the unfinished line held. ``event_bytes``: data bytes of
    the event not yet dispatched. ``scanned_bytes``: bytes examined in the search for line
    terminators, in total (each byte fed is examined once: at most the bytes fed).
    """

    __slots__ = ("buffered_bytes", "event_bytes", "scanned_bytes")
    __match_args__ = ("buffered_bytes", "event_bytes", "scanned_bytes")

    def __init__(self, buffered_bytes: int, event_bytes: int, scanned_bytes: int) -> None:
        self.buffered_bytes = buffered_bytes
        self.event_bytes = event_bytes
        self.scanned_bytes = scanned_bytes


class SseDecoder:
    """Decode a ``text/event-stream`` body into the data of its events.

    ``feed(chunk)`` returns the data (a ``str``) of every event that ``chunk`` completes;
    ``close()`` ends the body, after which ``truncated`` says whether it was cut inside
    an event. Raises ``ProtocolError`` for a body that is not UTF-8 (``invalid_sse_utf8``),
    a line over ``max_line_bytes`` (``sse_line_too_long``) or an event over
    ``max_event_bytes`` of data (``sse_event_too_large``); after such an error the
    body is not an event stream and is abandoned, not fed further.
    """

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        if max_line_bytes < 1 or max_event_bytes < 1:
            raise ValueError(f"SseDecoder limits must be positive, got {max_line_bytes=} and {max_event_bytes=}")
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        self._partial = bytearray()  # the unfinished line: already scanned, no terminator in it
        self._after_cr = False  # the last byte fed was a CR that ended a line
        self._at_start = True  # no line completed yet (a byte-order mark may open the body)
        self._data: list[str] = []
        self._event_bytes = 0
        self._in_event = False  # a field line arrived since the last blank line
        self._scanned = 0
        self._closed = False
        self._truncated = False

    @property
    def truncated(self) -> bool:
        """True once ``close()`` found the body cut inside an event: an unfinished line,
        or field lines without the blank line that dispatches them. That data was
        discarded. False before ``close()``."""
        return self._truncated

    def statistics(self) -> SseStatistics:
        return SseStatistics(
            buffered_bytes=len(self._partial), event_bytes=self._event_bytes, scanned_bytes=self._scanned
        )

    def feed(self, chunk: bytes) -> list[str]:
        """The data of every event completed by ``chunk`` (which may be empty)."""
        if self._closed:
            raise RuntimeError("SseDecoder.feed() called after close()")
        if not self._after_cr and b"\r" not in chunk:
            if not self._at_start:
                return self._feed_lf(chunk)
            if not self._partial and chunk[:1] != _BOM[:1] and b"\n" in chunk:
                self._at_start = False  # the first line completes here, without a mark to strip
                return self._feed_lf(chunk)
        events: list[str] = []
        start = 0
        if chunk and self._after_cr:
            self._after_cr = False
            if chunk[0] == 0x0A:  # the LF of a CRLF split across chunks: not a second line break
                start = 1
                self._scanned += 1
        while (match := _TERMINATOR.search(chunk, start)) is not None:
            self._scanned += match.end() - start
            self._complete_line(chunk, start, match.start(), events)
            start = match.end()
            if match.end() == len(chunk) and chunk[-1] == 0x0D:
                self._after_cr = True
        self._scanned += len(chunk) - start
        self._check_line_length(len(self._partial) + len(chunk) - start)
        self._partial += chunk[start:]
        return events

    def _feed_lf(self, chunk: bytes) -> list[str]:
        """``feed`` for a chunk with no CR (what servers send): the same result, with the
        lines cut by ``bytes.split`` and ``data:`` lines handled inline."""
        events: list[str] = []
        lines = chunk.split(b"\n")
        tail = lines.pop()  # after the last LF: the next unfinished line
        self._scanned += len(chunk)
        if lines and self._partial:
            self._complete_line(lines[0], 0, len(lines[0]), events)
            del lines[0]
        max_line = self._max_line
        data = self._data
        for line in lines:
            if not line:
                if len(data) == 1:  # the usual event, one data line: _dispatch, inline
                    self._in_event = False
                    self._event_bytes = 0
                    value = data.pop()
                    if value != _DONE:
                        events.append(value)
                else:
                    self._dispatch(events)
            elif line.startswith(b"data: ") and self._event_bytes == 0 and not data:
                # the first data line of an event (the usual one): _add_data, inline
                size = len(line)
                if size > max_line:
                    self._check_line_length(size)
                if size - 6 > self._max_event:
                    self._add_data(line[6:])  # raises sse_event_too_large
                try:
                    data.append(line[6:].decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise ProtocolError(
                        "the Responses event stream is not valid UTF-8", error_class="invalid_sse_utf8"
                    ) from exc
                self._event_bytes = size - 6
                self._in_event = True
            else:
                self._check_line_length(len(line))
                self._line(line, events)
        self._check_line_length(len(self._partial) + len(tail))
        self._partial += tail
        return events

    def close(self) -> list[str]:
        """End the body; idempotent.

        Nothing is dispatched at the end of a body (the standard discards an event that
        its blank line did not complete), so this always returns ``[]``; the list keeps
        ``for data in decoder.close()`` callers working. Check ``truncated`` afterwards.
        """
        if not self._closed:
            self._closed = True
            self._truncated = bool(self._partial) or self._in_event
            self._partial = bytearray()
            self._data.clear()
            self._event_bytes = 0
        return []

    def _complete_line(self, chunk: bytes, start: int, end: int, events: list[str]) -> None:
        """Process the line made of ``_partial`` and ``chunk[start:end]``."""
        self._check_line_length(len(self._partial) + end - start)
        line: bytes | bytearray
        if self._partial:
            line = self._partial
            line += chunk[start:end]
            self._partial = bytearray()
        else:
            line = chunk[start:end]
        if self._at_start:
            self._at_start = False
            line = line.removeprefix(_BOM)
        self._line(line, events)

    def _check_line_length(self, length: int) -> None:
        if length > self._max_line:
            raise ProtocolError(
                f"the Responses event stream sent a line longer than {self._max_line} bytes; "
                "this is not an event stream the API sends (a corrupt or hostile body)",
                error_class="sse_line_too_long",
            )

    def _line(self, line: bytes | bytearray, events: list[str]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == 0x3A:
            return  # a comment (keep-alives)
        self._in_event = True
        colon = line.find(b":")
        name_end = colon if colon >= 0 else len(line)  # no colon: the whole line names a field
        if name_end != 4 or not line.startswith(b"data"):
            return  # event:, id:, retry: and unknown fields carry nothing we use
        start = name_end + 1  # past the colon; ``data`` alone on its line has an empty value
        if line[start : start + 1] == b" ":
            start += 1
        self._add_data(line[start:])

    def _add_data(self, value: bytes | bytearray) -> None:
        size = self._event_bytes + len(value) + (1 if self._data else 0)  # + the joining newline
        if size > self._max_event:
            raise ProtocolError(
                f"the Responses event stream sent an event with more than {self._max_event} bytes of data; "
                "no Responses frame is that large (a corrupt or hostile body)",
                error_class="sse_event_too_large",
            )
        try:
            self._data.append(value.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                "the Responses event stream is not valid UTF-8", error_class="invalid_sse_utf8"
            ) from exc
        self._event_bytes = size

    def _dispatch(self, events: list[str]) -> None:
        self._in_event = False
        if not self._data:
            return  # an event without data fields is not dispatched (the standard)
        data = "\n".join(self._data)
        self._data.clear()
        self._event_bytes = 0
        if data != _DONE:
            events.append(data)
