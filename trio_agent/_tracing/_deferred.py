"""The SDK work of ended turns and calls, queued and run later in one batch.

What a turn's end asks of the OpenTelemetry SDK -- its model calls' spans (``_calls.emit``),
the histogram recordings (``_metrics``), the turn span's end attributes and its
``end(end_time=...)`` -- needs nothing from the moment it is asked: every time was
taken from the events, every parent and exemplar context captured then. So the tracer
queues it here (small closures) and it runs later, all at once: when the process is
otherwise idle (``run``: a task of the agent's own nursery that waits, only while
something is queued, for Trio's "every task is blocked" --
``trio.testing.wait_all_tasks_blocked`` -- or ``MAX_DELAY`` at most: a busy server's
spans still reach the exporter within a second), at once in the queuing task when ``LIMIT``
closures wait (a process that never idles: bounded), and always before the agent span
ends (the tracer's ``close``: every path -- close, cancellation, errors). Spans that
are the parents of live work (the agent, a turn, a tool call) still start at once.

Each closure runs once (taken off the queue first). One that raises -- a span
processor or exporter of the application's that raises on ``end``, a provider that
fails -- stops neither the others nor tracing: the batch goes on, and a
``RuntimeWarning`` names the first error of the batch. (The same error raised from a
span's *start*, which runs in the emitting task, stops that agent's tracing, as any
error of the tracer does: its endings queued so far still run.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import trio
import trio.testing

__all__ = ["CUSHION", "LIMIT", "MAX_DELAY", "Deferred"]

#: Closures queued before the queuing task runs them itself (about 64 plain turns: a
#: turn queues its call's spans and recordings, and its own end).
LIMIT = 128
#: ``wait_all_tasks_blocked``'s cushion: 0 -- the first moment no task can run and no
#: I/O is ready (on a model's turn, the wait for the server's reply).
CUSHION = 0.0
#: Seconds (Trio's clock) queued work waits for an idle moment before it runs anyway: a
#: process busy with other work (a server with many agents) still exports promptly.
MAX_DELAY = 1.0

Work = Callable[[], object]


class Deferred:
    def __init__(self, session_id: str, limit: int = LIMIT) -> None:
        self._session_id = session_id
        self._work: list[Work] = []
        self._limit = limit
        self._wake: trio.Event | None = None  # set by ``run`` while it waits for work

    def __len__(self) -> int:
        return len(self._work)

    def add(self, work: Work) -> None:
        """Queue ``work``; the batch runs now when the queue is full."""
        self._work.append(work)
        if len(self._work) >= self._limit:
            self.flush()
        elif self._wake is not None:
            self._wake.set()
            self._wake = None

    def flush(self) -> None:
        """Run every queued closure now, in order (see the module docstring on errors)."""
        first: Exception | None = None
        while self._work:
            work, self._work = self._work, []
            for item in work:
                try:
                    item()
                except Exception as exc:
                    if first is None:
                        first = exc
        if first is not None:
            warnings.warn(
                f"trio_agent: tracing of agent session {self._session_id}: a deferred span or metric "
                f"recording failed: {first!r}",
                RuntimeWarning,
                stacklevel=2,
            )

    async def run(self) -> None:
        """Forever (a task of the agent's nursery, cancelled when it shuts down): once
        work is queued, wait until the process is idle (``MAX_DELAY`` at most), then
        run the batch."""
        while True:
            if not self._work:
                self._wake = wake = trio.Event()
                await wake.wait()
            with trio.move_on_after(MAX_DELAY):
                await trio.testing.wait_all_tasks_blocked(CUSHION)
            self.flush()
