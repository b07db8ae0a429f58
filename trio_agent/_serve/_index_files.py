"""The files behind the thread index (``_thread_index``): which rollouts exist, and the
row of one thread, derived from its record (``_store``) or, without one, its rollout.

Everything here is blocking file I/O and runs in the index's worker threads, never on
the event loop. A row says what ``thread/list`` showed for an unloaded thread when it
read every file itself: the record's last ``meta`` (``updated_at`` falling back to the
last turn's end), else the rollout's ``session_meta`` with the rollout's mtime as its
creation time. A thread whose record or rollout cannot be read (damaged: the error
``thread/read`` would give) gets a row that is not listed, so it is not read again
until its file changes.

A fingerprint (``size:mtime_ns:inode``) is taken *before* the file is read: a file
written while it is read is newer than its fingerprint, so it is read again on the
next check, never the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from .._errors import AgentError
from .._ids import session_id_problem
from .._jsontext import dumps
from .._rollout import read_history
from ._shapes import ThreadMeta
from ._store import RecordCursor, StoredThread, ThreadStore

__all__ = ["Files", "Row", "fingerprint", "rollout_thread"]

ROOT, CHILD = "appServer", "subAgentThreadSpawn"  # the source kinds of this server's threads
CURSORS = 256  # records whose read position the index keeps (a turn-light state each)
# What a row keeps of a ThreadMeta: the fields a ``Thread`` view shows (not the
# instructions, tools or sandbox a resume needs; those stay in the record).
VIEW_FIELDS = ("thread_id", "created_at", "cwd", "model", "model_provider", "ephemeral", "forked_from",
               "originator", "preview", "updated_at", "parent_thread_id", "agent_path", "name", "archived")


def fingerprint(path: str) -> str | None:
    """``size:mtime_ns:inode`` of ``path``, None when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def rollout_thread(name: str) -> str | None:
    """The thread id of a rollout file name (``rollout-YYYY-MM-DDTHH-MM-SS-<id>.jsonl``,
    as ``ThreadManager.stored`` reads it), None when it names no valid thread."""
    if not (name.startswith("rollout-") and name.endswith(".jsonl")):
        return None
    parts = name[: -len(".jsonl")].split("-", 6)
    if len(parts) != 7 or session_id_problem(parts[6]) is not None:
        return None
    return parts[6]


@attrs.frozen
class Row:
    """One thread's row (see ``_index_db`` for the columns)."""

    thread_id: str
    rollout: str  # its newest rollout, relative to sessions/
    record_fp: str | None
    rollout_fp: str | None  # only for a thread without a record: the rollout is its view
    listed: bool
    archived: bool = False
    kind: str = ROOT
    cwd: str = ""
    provider: str | None = None  # None: the server's (a rollout alone names none)
    originator: str | None = None
    parent: str | None = None
    created: int = 0
    updated: int = 0
    preview: str = ""  # lowered, for searchTerm
    name: str = ""  # lowered, for searchTerm
    meta: str = "{}"  # VIEW_FIELDS as JSON

    def values(self) -> tuple[object, ...]:
        return attrs.astuple(self)

    @property
    def changed_ns(self) -> int:
        """When its record (else its rollout) last changed, in ns (0: unknown)."""
        fp = self.record_fp or self.rollout_fp
        return int(fp.split(":")[1]) if fp else 0


class Files:
    """Where a home keeps its rollouts and records (paths as strings: a listing checks
    hundreds, and ``pathlib`` would be most of its cost)."""

    def __init__(self, home: Path, store: ThreadStore) -> None:
        self.home = home
        self.store = store
        self.sessions = str(home / "sessions")
        self._records = str(store.folder)
        # Where the last pass stopped in each record (the most recently read ``CURSORS``):
        # a pass reads only what a thread appended since (issue 30). Used by the writer's
        # thread alone (``row``).
        self._cursors: dict[str, RecordCursor] = {}

    def record(self, thread_id: str) -> str:
        return f"{self._records}/{thread_id}.jsonl"

    def rollout(self, rel: str) -> str:
        """The path of a rollout (``rel``: ``Y/M/D/name``), as ``RolloutConfig.find`` gives it."""
        return f"{self.sessions}/{rel}"

    def days(self) -> list[str]:
        """Every ``sessions/Y/M/D`` folder, relative (``Y/M/D``), oldest first (names only:
        no folder is stat'ed)."""
        return sorted(_subdirs(self.sessions, "", 3))

    def mtime_ns(self, day: str) -> int | None:
        """The mtime of ``sessions/<day>`` in ns, None when it is gone."""
        try:
            return os.stat(f"{self.sessions}/{day}").st_mtime_ns
        except OSError:
            return None

    def rollouts_in(self, day: str) -> list[str]:
        """The rollout file names in ``sessions/<day>`` (what the glob ``rollout-*.jsonl`` matches)."""
        try:
            with os.scandir(f"{self.sessions}/{day}") as entries:
                return [e.name for e in entries if e.name.startswith("rollout-") and e.name.endswith(".jsonl")]
        except OSError:
            return []

    def row(self, thread_id: str, rollout: str) -> Row:
        """The row of ``thread_id``, whose newest rollout is ``rollout``."""
        record_fp = fingerprint(self.record(thread_id))
        try:
            stored = self._load(thread_id) if record_fp is not None else None
            if stored is not None:
                return _row(thread_id, rollout, record_fp, None, _record_meta(stored))
            path = Path(self.rollout(rollout))
            st = os.stat(path)
            rollout_fp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            return _row(thread_id, rollout, record_fp, rollout_fp, _rollout_meta(thread_id, path, st.st_mtime_ns))
        except (AgentError, OSError):  # damaged or unreadable: not listed until it changes
            return Row(thread_id, rollout, record_fp, fingerprint(self.rollout(rollout)), listed=False)

    def _load(self, thread_id: str) -> StoredThread | None:
        """The record, read from where the last pass stopped (``ThreadStore.load_since``)."""
        cursors = self._cursors
        cursor = cursors.pop(thread_id, None)
        stored, cursor = self.store.load_since(thread_id, cursor)  # damaged: raises, the cursor dropped
        if cursor is not None:
            cursors[thread_id] = cursor  # the most recent last
            if len(cursors) > CURSORS:
                del cursors[next(iter(cursors))]
        return stored


def _subdirs(folder: str, rel: str, depth: int) -> Iterator[str]:
    """The folders ``depth`` levels below ``folder`` (strings, not Paths: this runs often)."""
    try:
        with os.scandir(folder) as entries:
            found = [(entry.path, entry.name) for entry in entries if entry.is_dir()]
    except OSError:
        return
    for path, name in found:
        child = f"{rel}/{name}" if rel else name
        if depth == 1:
            yield child
        else:
            yield from _subdirs(path, child, depth - 1)


def _record_meta(stored: StoredThread) -> ThreadMeta:
    """The meta an unloaded thread's view shows (as ``_thread_methods.stored_meta``)."""
    meta = stored.meta
    if stored.turns and meta.updated_at is None:
        meta.updated_at = (stored.turns[-1].completed_at_ms or 0) // 1000 or None
    return meta


def _rollout_meta(thread_id: str, path: Path, mtime_ns: int) -> ThreadMeta:
    """A thread known only by its rollout (as ``stored_meta``); its model and provider
    are left empty: the server's fill them in when it is shown."""
    session_meta, _history = read_history(path)
    session_meta = session_meta or {}
    return ThreadMeta(thread_id, created_at=mtime_ns // 1_000_000_000, cwd=str(session_meta.get("cwd") or ""),
                      model=str(session_meta.get("model") or ""), model_provider="", instructions=None)


def _row(thread_id: str, rollout: str, record_fp: str | None, rollout_fp: str | None, meta: ThreadMeta) -> Row:
    data = meta.to_json()
    view = {name: data[name] for name in VIEW_FIELDS}
    updated = meta.updated_at if meta.updated_at is not None else meta.created_at
    return Row(
        thread_id, rollout, record_fp, rollout_fp, listed=True, archived=meta.archived,
        kind=CHILD if meta.parent_thread_id is not None else ROOT, cwd=meta.cwd,
        provider=meta.model_provider or None, originator=meta.originator, parent=meta.parent_thread_id,
        created=meta.created_at or 0, updated=updated or 0, preview=meta.preview.lower(),
        name=(meta.name or "").lower(), meta=dumps(view),
    )
