"""A running command's output as it arrives, for ``tool.progress`` events.

``exec_command`` and ``write_stdin`` return what a command printed only when the call
returns; a user watching a long build wants to see it while it runs. While a call waits
for its command, every read from the command's pipe (at most 64 KiB) is also given to
an :class:`OutputProgress`, which hands text to a callback (the dispatcher emits it as
``tool.progress`` with ``stream: "output"``):

- decoded as UTF-8 incrementally, so a character split across two reads is not mangled
  (invalid bytes become U+FFFD, as in results);
- with the command's secrets redacted, as in results (per read: a secret split across
  two reads is not caught, the same limit the results have);
- at most ``budget`` bytes per call (1 MiB, what a result keeps at most): past it, one
  last chunk says how many bytes were not streamed and the rest is dropped here. The
  call's result still carries its usual head and tail.

Pure and synchronous; one small object per call, a few string operations per read.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence

from ._shell_env import redact

__all__ = ["STREAMED_BYTES_PER_CALL", "OutputProgress"]

#: Bytes of output a single call streams at most (its result is capped at 1 MiB too).
STREAMED_BYTES_PER_CALL = 1024 * 1024


class OutputProgress:
    """Feeds decoded, redacted output chunks to ``emit`` for one call (see the module docstring)."""

    def __init__(
        self, emit: Callable[[str], None], secrets: Sequence[str], budget: int = STREAMED_BYTES_PER_CALL
    ) -> None:
        self._emit = emit
        self._secrets = secrets
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._budget = budget
        self._left = budget
        self._dropped = 0

    def feed(self, data: bytes) -> None:
        """One read from the command's pipe."""
        if self._left <= 0:
            self._dropped += len(data)
            return
        shown = data[: self._left]
        self._left -= len(shown)
        self._dropped += len(data) - len(shown)
        self._send(self._decoder.decode(shown, final=self._left <= 0))
        if self._left <= 0:
            self._send(f"\n[... output continues: only its first {self._budget} bytes are streamed ...]\n")

    def close(self) -> None:
        """The call returns: flush a character cut at the end, say what was not streamed."""
        if self._left > 0:
            self._send(self._decoder.decode(b"", final=True))
        if self._dropped:
            self._send(f"[... {self._dropped} bytes of output were not streamed ...]\n")
            self._dropped = 0

    def _send(self, text: str) -> None:
        if text:
            self._emit(redact(text, self._secrets))
