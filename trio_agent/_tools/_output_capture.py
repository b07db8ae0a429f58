"""Bounded head/tail capture of a byte stream, for ``exec_command`` output.

A command may print gigabytes; the model only ever sees ``max_output_tokens * 4`` bytes
of it (reference: ``nanocodex.md`` sec. 5.4). Two layers keep memory and output bounded:

1. :class:`HeadTailBuffer` holds what a running command printed since its output was
   last read. It keeps the first ``capacity // 2`` bytes and the most recent
   ``capacity - capacity // 2`` bytes (512 KiB each by default) and counts the bytes it
   dropped in between.
2. :meth:`HeadTailBuffer.excerpt` cuts that down again to a byte budget with the same
   head/tail idea. The resulting :class:`Excerpt` renders as
   ``head + "\\n... N bytes omitted ...\\n" + tail``, where ``N`` counts *every* byte
   that is not shown, whether the buffer or the budget dropped it.

Everything here is pure and synchronous; decoding and redaction happen in the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["DEFAULT_CAPACITY", "Excerpt", "HeadTailBuffer", "omitted_notice"]

#: Bytes a :class:`HeadTailBuffer` keeps by default: 512 KiB head + 512 KiB tail.
DEFAULT_CAPACITY = 1024 * 1024


def omitted_notice(omitted: int) -> str:
    """The marker that stands in for ``omitted`` bytes cut out of the middle."""
    return f"\n... {omitted} bytes omitted ...\n"


@attrs.frozen
class Excerpt:
    """The part of a byte stream that is shown: ``head``, then ``tail``.

    ``total`` is the length of the whole stream and ``omitted`` the number of bytes
    between ``head`` and ``tail`` that are not shown (0 means ``head + tail`` is the
    whole stream).
    """

    head: bytes
    tail: bytes
    total: int

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    @property
    def truncated(self) -> bool:
        return self.omitted > 0

    def to_bytes(self) -> bytes:
        """Render with the omission notice (UTF-8) when anything was dropped."""
        if not self.truncated:
            return self.head + self.tail
        return self.head + omitted_notice(self.omitted).encode() + self.tail

    def to_text(self, transform: Callable[[str], str] = str) -> str:
        """Decode head and tail as UTF-8 (``errors="replace"``), each passed through
        ``transform`` (e.g. redaction), joined by the omission notice if truncated."""
        if not self.truncated:
            return transform((self.head + self.tail).decode("utf-8", "replace"))
        head = transform(self.head.decode("utf-8", "replace"))
        tail = transform(self.tail.decode("utf-8", "replace"))
        return head + omitted_notice(self.omitted) + tail


class HeadTailBuffer:
    """Keep the first and the last bytes written to it, and count the rest.

    ``write()`` is O(len(data)) and memory never exceeds ``capacity`` bytes. While
    fewer than ``capacity`` bytes have been written, nothing is dropped and
    ``head + tail`` is exactly what was written.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2 bytes, got {capacity}")
        self._head_capacity = capacity // 2
        self._tail_capacity = capacity - self._head_capacity
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    @property
    def total(self) -> int:
        """Number of bytes written since creation or the last :meth:`clear`."""
        return self._total

    def write(self, data: bytes) -> None:
        self._total += len(data)
        room = self._head_capacity - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_capacity:
            self._tail[:] = data[-self._tail_capacity :]
            return
        self._tail += data
        excess = len(self._tail) - self._tail_capacity
        if excess > 0:
            del self._tail[:excess]

    def clear(self) -> None:
        self._head.clear()
        self._tail.clear()
        self._total = 0

    def excerpt(self, max_bytes: int | None = None) -> Excerpt:
        """Return at most ``max_bytes`` bytes (``None``: all that is kept) as head + tail.

        With a budget, the first ``max_bytes // 2`` and the last ``max_bytes -
        max_bytes // 2`` bytes of the stream are shown (fewer if they were not kept).
        """
        kept = bytes(self._head) + bytes(self._tail)
        if max_bytes is None or len(kept) <= max_bytes:
            return Excerpt(head=bytes(self._head), tail=bytes(self._tail), total=self._total)
        max_bytes = max(0, max_bytes)
        head_budget = max_bytes // 2
        tail_budget = max_bytes - head_budget
        contiguous = len(kept) == self._total
        head_source = kept if contiguous else bytes(self._head)
        tail_source = kept if contiguous else bytes(self._tail)
        tail = tail_source[len(tail_source) - tail_budget :] if tail_budget else b""
        return Excerpt(head=head_source[:head_budget], tail=tail, total=self._total)
