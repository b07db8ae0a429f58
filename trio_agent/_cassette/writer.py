"""``CassetteWriter``: the cassette file of one agent tree (the agent, its forks and
children share it).

Theory of operation: an observation is one compact JSON line appended to an
in-memory buffer -- the frame path never touches the file. The buffer is written
with one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, on the Trio
thread (no worker thread, as the rollout does), at *boundaries*: when a connection
opens or closes, when the agent sends a request or frame, when a turn is accepted,
steered or ends, and when the agent closes. Between two boundaries the buffer holds
at most what the server streamed for one request. ``close()`` -- run once the root
agent's nursery has finished, also when it was cancelled -- writes the ``end`` line
and fsyncs, so a closed cassette is always whole lines ending with ``end``.

A write that fails (a full disk) stops the recording: the agent goes on, the file
keeps the whole lines written so far and no end line, so loading it says it is
incomplete. Times are Trio's clock (``MockClock`` records virtual seconds).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import trio

from .._jsontext import dumps
from .format import FORMAT, VERSION

__all__ = ["CassetteWriter"]


class CassetteWriter:
    def __init__(self, path: Path, *, transport: str, session: dict[str, Any], trio_agent: str) -> None:
        """Create (truncate) ``path`` and write the header line; ``OSError`` if it cannot."""
        self.path = path
        self.error: OSError | None = None
        self._start = trio.current_time()
        self._buffer: list[str] = []
        self._conns = 0
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self._buffer.append(dumps({
            "format": FORMAT, "version": VERSION, "trio_agent": trio_agent, "created": created,
            "transports": [transport], "session": session,
        }))
        self.flush()
        if self.error is not None:
            raise self.error

    def new_conn(self) -> int:
        """The next connection number (WebSocket sockets and HTTPS requests share them)."""
        self._conns += 1
        return self._conns

    def add(self, kind: str, fields: dict[str, Any]) -> None:
        """Buffer one observation (no I/O)."""
        if self._fd is None:
            return
        t = round(trio.current_time() - self._start, 6)
        self._buffer.append(dumps({"t": t, "kind": kind, **fields}))

    def flush(self) -> None:
        """Write the buffered lines (one ``os.write`` of whole lines)."""
        if not self._buffer or self._fd is None:
            return
        data = ("\n".join(self._buffer) + "\n").encode()
        self._buffer.clear()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self.error = exc
            self._abort()

    def close(self) -> None:
        """Write the end line, fsync and close (idempotent)."""
        if self._fd is None:
            return
        self.add("end", {})
        self.flush()
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self.error = exc
        self._abort()

    @property
    def closed(self) -> bool:
        return self._fd is None

    def _abort(self) -> None:
        fd, self._fd = self._fd, None
        self._buffer.clear()
        if fd is not None:
            os.close(fd)
