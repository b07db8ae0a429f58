"""A thread's rollout found by id through the thread index (issue 23, item 4).

Theory of operation. ``RolloutConfig.find`` globs ``sessions/*/*/*/rollout-*-<id>.jsonl``:
it lists every day folder, about 13 ms at 10,000 saved threads (a warm cache; far more
on a cold disk), and it runs on the event loop, several times per ``thread/read`` or
``thread/resume`` of an unloaded thread (the record, the view, the history). The
server's threads use ``IndexedRollouts`` instead, whose ``find`` answers from what
``ThreadIndex.locate`` found for the id, off the loop, before the request's handler ran
(``_router.dispatch``: every request naming a ``threadId`` that is not loaded):

- the index's newest rollout of the id (one query by key, in a reader thread), when
  that file is there (checked in the same thread);
- else the glob, in a worker thread: the index lags (a rollout another program made
  in an old day folder, less than ``FULL_CHECK_EVERY`` seconds ago), is being built,
  or is unusable; a rollout is never hidden by the index;
- no rollout at all is remembered for ``ABSENT_FOR`` seconds only (the request's own
  lookups), so a client asking for unknown ids costs no glob on the loop either.

``find`` checks a remembered file is still there (a stat) and globs, as before, for an
id nothing was located for (a thread this server is starting) or whose file went away.
At most ``REMEMBERED`` ids are remembered, the most recently located.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import attrs

from .._ids import session_id_problem
from .._rollout import RolloutConfig
from ._index_files import Files

__all__ = ["ABSENT_FOR", "REMEMBERED", "IndexedRollouts", "newest_rollout"]

ABSENT_FOR = 1.0  # seconds a located absence is believed
REMEMBERED = 1024


@attrs.frozen
class IndexedRollouts(RolloutConfig):
    """The server's ``RolloutConfig``: ``find`` as the module docstring says."""

    _located: dict[str, tuple[str | None, float]] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def find(self, thread_id: str) -> Path | None:
        # The "no rollout" answer expires by the OS clock, not Trio's: it is a claim about
        # files another process may create, and ``find`` is a plain function that may run
        # outside the event loop (where trio.current_time() is not available).
        path, until = self._located.get(thread_id, (None, 0.0))
        if path is not None and os.path.isfile(path):
            return Path(path)
        if path is None and time.monotonic() < until:
            return None
        return self.glob(thread_id)

    def glob(self, thread_id: str) -> Path | None:
        """``RolloutConfig.find``: the files themselves (for a worker thread)."""
        return RolloutConfig.find(self, thread_id)

    def remember(self, thread_id: str, path: str | None) -> None:
        """What ``ThreadIndex.locate`` found (``None``: no rollout)."""
        if session_id_problem(thread_id) is not None:
            return
        self._located.pop(thread_id, None)
        self._located[thread_id] = (path, time.monotonic() + ABSENT_FOR)
        while len(self._located) > REMEMBERED:
            del self._located[next(iter(self._located))]


def newest_rollout(conn: sqlite3.Connection, files: Files, thread_id: str) -> str | None:
    """In a reader thread: the path of the newest rollout the index knows of
    ``thread_id`` (as ``RolloutConfig.find`` orders them), None when it knows none or
    that file is gone."""
    found = conn.execute("SELECT max(rel) FROM rollouts WHERE thread_id = ?", (thread_id,)).fetchone()
    if found is None or found[0] is None:
        return None
    path = files.rollout(found[0])
    return path if os.path.isfile(path) else None
