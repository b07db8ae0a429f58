"""Rollouts: a session's committed history as a JSONL file, and loading it back.

Layout (Codex-compatible): ``<home>/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<thread id>.jsonl``.
Every line is ``{"timestamp": <RFC 3339 UTC>, "type": ..., "payload": {...}}``: one
``session_meta`` line (written once per thread, also across resumes), then one
``response_item`` line per committed history item, appended as history is committed,
and a ``compacted`` line with ``replacement_history`` whenever history is rewritten
(compaction, or truncating tool outputs that no longer fit), so the file always
describes exactly the live history. ``load_session`` rebuilds a ``SessionSnapshot``
from it (``response_item`` lines append, a ``compacted`` line replaces).

Theory of operation (durability, issue 8):

- *In the OS when committed.* Each history change is one ``os.write`` of whole lines
  on an ``O_APPEND`` descriptor, on the Trio thread (no worker thread, no Python-side
  buffer), so a committed item survives the process being killed as soon as it is
  committed. ``fsync`` is the only call that may wait on the disk: on
  ``flush_rollout()`` and close, or after every commit with ``fsync="commit"``.
- *A line is committed when its newline is.* A process killed in the middle of a
  write can leave a *torn last line* (bytes without their newline). Readers skip it
  with a ``RolloutWarning``; a writer resuming the file cuts it off before appending.
  Anything unreadable before the last newline is damage: ``InvalidSessionSnapshot``
  naming the file, line and what was wrong (what counts as damage: ``_lines``).
- *A failed write is rolled back.* The writer knows where its last whole line ends
  and cuts the file back there when a write fails part-way (disk full, file size
  limit), so later appends never glue onto a fragment.
- *A killed turn is closed on load.* The journal's lines (``TurnJournal``) say which
  turn began and never ended; ``load_session`` answers its open calls, commits its
  prompt if it had not reached the file, and adds the ``<turn_aborted>`` marker
  (once; ``_closing``), so the next request tells the model what the thread
  view (``trio-agent serve``) shows: that turn, interrupted, with what it committed.
- *One writer per thread.* A writer holds ``flock(LOCK_EX | LOCK_NB)`` on its file for
  its whole life; a second writer of the same thread, in this process or another, is
  refused with ``RolloutError``. The kernel drops the lock when the descriptor is closed
  or its process dies, SIGKILL included (descriptors are not inherited by commands).
- *Codex's files stay codex's.* A resumed codex rollout is appended to in its own
  format: a *paginated* one (``history_mode: "paginated"``, every line numbered by an
  envelope ``ordinal``) gets the ordinals that continue its sequence on every line we
  write -- codex refuses a file whose last line has none -- and only a write that
  reached the file uses one up; a legacy one gets none, as codex writes it.

Resuming (issue 24): ``RolloutConfig.load_session`` or ``load_file`` give a
``DurableSession`` whose ``resume_config(config)`` continues the session (``_home``).

The modules, from the bottom: ``_errors`` (``RolloutError``, ``RolloutWarning``),
``_lines`` (the line format: writing one, parsing a file's), ``_files`` (where the
files sit in their home), ``_closing`` (what a killed turn left open, closed on load),
``_reading`` (a file's history), ``_home`` (``RolloutConfig``), ``_writer``
(``RolloutWriter``); ``_durable`` (``DurableSession``, a session's snapshot: the resume
path) is imported by the first load or read of ``DurableSession``, not with the package.
"""

from typing import TYPE_CHECKING

from ._closing import INTERRUPTED_OUTPUT, INTERRUPTED_TEXT
from ._errors import RolloutError, RolloutWarning
from ._home import FsyncPolicy, RolloutConfig
from ._lines import rollout_timestamp
from ._reading import read_history
from ._writer import RolloutWriter

__all__ = ["INTERRUPTED_OUTPUT", "INTERRUPTED_TEXT", "DurableSession", "FsyncPolicy", "RolloutConfig", "RolloutError",
           "RolloutWarning", "RolloutWriter", "read_history", "rollout_timestamp"]

if TYPE_CHECKING:
    from ._durable import DurableSession
else:  # a module __getattr__ would make a type checker accept any name

    def __getattr__(name: str) -> object:
        """``DurableSession`` from its module (``_durable``), imported by the first read:
        a run that starts a new session needs neither it nor the snapshots' module."""
        if name == "DurableSession":
            from ._durable import DurableSession

            return DurableSession
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
