"""The thread index: ``thread/list`` answered from SQLite, its I/O off the event loop.

Theory of operation (issue 23, item 4).

*Where.* ``<home>/app-server/index.sqlite3`` (WAL mode), beside the thread records. It
is a cache: every row is derived from a record or a rollout (``_index_files``), and a
row that disagrees with its files loses (it is read again). Deleting the file loses
nothing; the next start rebuilds it.

*One writer.* A single task (``run``, in the server's nursery) owns the write
connection and runs every write in a worker thread: the rebuild or check at start,
then a *pass* (``_index_db.catch_up``) ``WRITE_DELAY`` after a record was written
(``ThreadStore`` calls ``touched``: create, update, append, rollback), at once when a
listing asks for one or the server closes. Passes are coalesced: one pass serves every
write and request made before it began -- a pass per turn was most of ``serve``'s CPU
per warm turn (issue 30: ~3 ms, in a worker thread), and a pass reads each dirty
thread's whole record, so its cost grows with the thread: the delay bounds it per
second, not per turn. Listings read on their own connections (at most ``READERS`` at
once), each in a worker thread.

*In step.* A listing first waits for a pass that began after it (so what this server
wrote before is listed: read-your-writes). A pass also reads the names in the newest
two ``sessions/Y/M/D`` folders when their mtime moved, and in any folder that is new or
gone: threads created or removed by anyone (another server, ``trio-agent exec``,
codex: rollouts are created in the folder of their day). The rows a listing answers
with are checked against their files' fingerprints (``size:mtime_ns:inode``) and read
again, and the listing redone, when one differs (a record another program changed).
Every ``FULL_CHECK_EVERY`` seconds, and at start, every row's fingerprints and every day
folder are checked: that catches what happened while no server ran, before a killed
server's last pass, or by a program that does not index what it writes (a row hidden
by a filter is then corrected within those seconds).

*Missing, stale or damaged.* A missing index, one of another schema version or one
SQLite finds damaged (at open, ``quick_check``, or any later query) is rebuilt from the
records and rollouts, with one ``ThreadIndexWarning`` saying why; so are rows found
out of step at start. Lists wait for the rebuild (other requests do not: it runs in a
thread). If the file cannot be opened at all (a read-only home), the index is a
temporary file for this run, with a warning.

*Several servers on one home.* Each server has its writer; SQLite's write lock
(``BEGIN IMMEDIATE``, waiting up to ``BUSY_TIMEOUT``) serializes them, and rows are
derived under that lock, so the last row written is from the newest reading. A server
whose index file was replaced (another server rebuilt it) reopens it. Readers never
wait for writers (WAL).

*Found by id.* ``locate`` finds an unloaded thread's rollout for a request naming it,
so the handler's ``find`` needs no glob over every saved session (``_thread_lookup``).

*Loaded threads* are listed from memory, as before: ``thread/list`` leaves them out of
the query and merges them in (``page``).

*Cancellation.* Every call runs in a worker thread (``_off_loop.off_loop``); a
cancelled wait interrupts the connection's running statement
(``sqlite3.Connection.interrupt``) and waits, shielded, for the thread to return, so no
thread outlives the call that started it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import trio

from .._ids import session_id_problem
from .._private_dirs import make_private_dirs
from .._threads import ThreadStatus
from ._index_db import (
    Answer,
    CatchUp,
    Page,
    Query,
    Selected,
    Shown,
    catch_up,
    connect,
    damaged,
    details,
    fresh,
    select,
    settle_schema,
    unlink_database,
)
from ._index_files import Files
from ._jsonrpc import InvalidRequest
from ._off_loop import off_loop
from ._shapes import ThreadMeta, thread_json
from ._store import ThreadStore
from ._thread_lookup import IndexedRollouts, newest_rollout

__all__ = ["Shown", "ThreadIndex", "ThreadIndexWarning"]

T = TypeVar("T")
Json = dict[str, Any]
READERS = 4
WRITE_DELAY = 2.0  # seconds from a record's write to the pass that indexes it (unless a listing asks first)
FULL_CHECK_EVERY = 30.0  # seconds between two checks of every row's fingerprints (``catch_up(full=True)``)
RETRIES = 3  # listings redone at most this often while the rows they answer with are stale


class ThreadIndexWarning(UserWarning):
    """The thread index was rebuilt or repaired (missing, damaged, out of step) or is
    only temporary."""


class ThreadIndex:
    """See the module docstring. ``model``/``provider``: the server's, shown for a
    thread known only by its rollout."""

    def __init__(self, home: Path, store: ThreadStore, *, model: str, provider: str) -> None:
        self.path = home / "app-server" / "index.sqlite3"
        self.files = Files(home, store)
        # Files changed before this were not written by this server, nor were the threads
        # it did not write itself: the kernel stamps a file's mtime from its coarse clock,
        # up to one tick behind time_ns(), so a thread this server creates at once can
        # look older than the server.
        self._since_ns = time.time_ns()
        self._mine: set[str] = set()
        self._model = model
        self._provider = provider
        store.before_write = self.claim
        store.on_write = self.touched
        self._dirty: set[str] = set()
        self._dirty_at = math.inf  # when the writer first saw ``_dirty`` non-empty
        self._requested = 0  # passes asked for; ``_done``: the last one asked for before a pass began
        self._done = 0
        self._wake = trio.Event()
        self._progress = trio.Event()
        self._ready = trio.Event()
        self._stopped = trio.Event()
        self._running = False
        self._closing = False
        self._damaged: str | None = None  # what found the index damaged: the writer rebuilds it
        self._broken: str | None = None
        self._writer: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file the connections use
        self._generation = 0
        self._readers: list[tuple[int, sqlite3.Connection]] = []
        self._reading = trio.CapacityLimiter(READERS)
        self._temporary: Path | None = None
        self.rollouts = IndexedRollouts(home)  # the server's threads' (``locate``)

    # -- writes --------------------------------------------------------------------------

    def claim(self, thread_id: str) -> None:
        """A thread this server is creating: its files, whenever the writer thread first
        sees them, are the server's own live writes, never "old" (call it before the
        thread's first file is written: its rollout, then its record)."""
        self._mine.add(thread_id)

    def touched(self, thread_id: str) -> None:
        """A record was written: read its row again in the next pass."""
        if not self._dirty:
            self._wake.set()  # the writer starts the WRITE_DELAY of the next pass
        self._dirty.add(thread_id)
        self._mine.add(thread_id)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer (until ``aclose``): opens or rebuilds the index, then runs passes."""
        self._running = True
        task_status.started()
        try:
            self._warn(await off_loop(self._open))
            self._ready.set()
            checked = trio.current_time()
            while True:
                now = trio.current_time()
                full = now >= checked + FULL_CHECK_EVERY
                if self._dirty and self._dirty_at == math.inf:
                    self._dirty_at = now
                due = self._dirty and (self._closing or now >= self._dirty_at + WRITE_DELAY)
                if not (full or due or self._requested > self._done or self._damaged):
                    if self._closing:
                        return
                    with trio.move_on_at(min(checked + FULL_CHECK_EVERY, self._dirty_at + WRITE_DELAY)):
                        await self._wake.wait()
                    self._wake = trio.Event()
                    continue
                if full:
                    checked = trio.current_time()
                await self._pass(full=full)
        except (OSError, sqlite3.Error) as exc:
            self._broken = f"the thread index {self.path} cannot be used: {exc}"
            print(f"trio-agent serve: {self._broken}; thread/list is refused until the server restarts",
                  file=sys.stderr)
        finally:
            self._done = sys.maxsize
            self._ready.set()
            self._progress.set()
            self._stopped.set()
            self._close_writer()
            for _generation, conn in self._readers:
                conn.close()
            self._readers.clear()
            if self._temporary is not None:
                shutil.rmtree(self._temporary, ignore_errors=True)

    async def aclose(self) -> None:
        """Write what is pending, then stop the writer (idempotent)."""
        self._closing = True
        self._wake.set()
        if self._running:
            with trio.CancelScope(shield=True):
                await self._stopped.wait()

    async def _pass(self, *, full: bool = False) -> None:
        wanted, batch, rebuild = self._requested, self._dirty, self._damaged
        self._dirty, self._damaged, self._dirty_at = set(), None, math.inf
        writer = self._writer
        try:
            self._warn(await off_loop(lambda: self._step(batch, rebuild, full),
                                      writer.interrupt if writer is not None else None))
        except (OSError, sqlite3.DatabaseError) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and damaged(exc):
                self._damaged = f"writing found it damaged ({exc})"
            else:  # busy past the timeout, a full disk: these rows stay as they were until they are checked
                print(f"trio-agent serve: the thread index {self.path} was not updated: {exc}", file=sys.stderr)
        self._done = wanted
        self._progress.set()
        self._progress = trio.Event()

    async def _sync(self) -> None:
        """Until a pass that began after this call has ended."""
        await self._ready.wait()
        self._requested += 1
        wanted = self._requested
        self._wake.set()
        while self._done < wanted:
            await self._progress.wait()
        if self._broken is not None:
            raise InvalidRequest(self._broken)

    def _warn(self, message: str | None) -> None:
        if message is not None:
            warnings.warn(ThreadIndexWarning(message), stacklevel=1)

    # -- in the writer's thread ----------------------------------------------------------

    def _open(self) -> str | None:
        """Open (or create) the index and bring it in step; the warning to give, if any."""
        try:
            make_private_dirs(self.path.parent)
            self._connect(self.path)
        except (OSError, sqlite3.OperationalError) as exc:  # cannot be created or opened here
            wanted, self._temporary = self.path, Path(tempfile.mkdtemp(prefix="trio-agent-index-"))
            self.path = self._temporary / "index.sqlite3"
            self._connect(self.path)
            assert self._writer is not None
            settle_schema(self._writer)
            self._catch_up((), full=True)
            return f"cannot keep the thread index at {wanted} ({exc}); using a temporary one for this run"
        except sqlite3.DatabaseError as exc:
            return self._rebuild(f"it was damaged ({exc})")
        return self._settle()

    def _connect(self, path: Path) -> None:
        self._close_writer()
        self._writer = connect(path, writer=True)
        st = os.stat(path)
        self._identity = (st.st_dev, st.st_ino)
        self._generation += 1

    def _settle(self) -> str | None:
        """The schema checked (and made), the rows brought in step; the warning to give."""
        assert self._writer is not None
        reason = settle_schema(self._writer)
        result = self._catch_up((), full=True)
        if reason == "missing":
            if not result.old:
                return None  # a new home (or only threads this server just made): nothing to say
            return f"no thread index at {self.path}; built it from the records and rollouts of {result.read} threads"
        if reason is not None:
            return self._rebuilt(result, reason)
        if result.stale:
            return (f"{result.stale} threads of the thread index {self.path} were out of step with their records or "
                    "rollouts (written while no server indexed them, e.g. by a server that was killed); read them "
                    "again")
        return None

    def _rebuild(self, reason: str) -> str:
        self._close_writer()
        unlink_database(self.path)
        self._connect(self.path)
        assert self._writer is not None
        settle_schema(self._writer)
        return self._rebuilt(self._catch_up((), full=True), reason)

    def _rebuilt(self, result: CatchUp, reason: str) -> str:
        return f"the thread index {self.path} was rebuilt from {result.read} threads' records and rollouts: {reason}"

    def _catch_up(self, dirty: Iterable[str], *, full: bool = False) -> CatchUp:
        assert self._writer is not None
        return catch_up(self._writer, self.files, dirty, full=full, since_ns=self._since_ns,
                        mine=self._mine)

    def _step(self, dirty: set[str], rebuild: str | None, full: bool) -> str | None:
        """One pass; the index rebuilt first if it was found damaged (``rebuild``: how),
        reopened if its file was replaced or removed."""
        if rebuild is not None:
            return self._rebuild(rebuild)
        try:
            st = os.stat(self.path)
            replaced = (st.st_dev, st.st_ino) != self._identity  # another server rebuilt it: use the new one
        except FileNotFoundError:  # removed: what it left (its -wal, -shm) must not be read into a new one
            self._close_writer()
            unlink_database(self.path)
            replaced = True
        if replaced or self._writer is None:
            self._connect(self.path)
            return self._settle()
        self._catch_up(dirty, full=full)
        return None

    def _close_writer(self) -> None:
        """(Readers of an older generation are closed by the trio thread, ``_read_once``.)"""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # -- reads ---------------------------------------------------------------------------

    async def locate(self, thread_id: str) -> None:
        """Find ``thread_id``'s rollout off the loop, through the index, else by the glob
        (``_thread_lookup``), for ``self.rollouts.find``. Waits for no pass or rebuild."""
        if session_id_problem(thread_id) is not None:
            return  # ``find`` says what is wrong with it
        path = None
        if self._ready.is_set() and self._broken is None and self._damaged is None:
            try:
                path = await self._read_once(partial(newest_rollout, files=self.files, thread_id=thread_id))
            except sqlite3.DatabaseError as exc:
                if damaged(exc):
                    self._damaged = f"a lookup found it damaged ({exc})"
                    self._wake.set()
        if path is None:
            found = await off_loop(partial(self.rollouts.glob, thread_id))
            path = str(found) if found is not None else None
            if path is not None:  # the index lags behind the files: a pass brings it in step
                self._requested += 1
                self._wake.set()
        self.rollouts.remember(thread_id, path)

    async def page(self, query: Query, shown: list[Shown], start: int) -> Page:
        """Threads ``start`` to ``query.limit - 1`` (in ``query``'s order) of the index's
        unloaded threads that ``query`` keeps merged with ``shown`` (the loaded ones its
        filters kept, but for an ancestor: the index knows the family)."""
        await self._sync()
        for attempt in range(RETRIES):
            answer = await self._read(partial(self._answer, query=query, shown=shown, start=start,
                                              check=attempt < RETRIES - 1))
            if answer.page is not None:
                return answer.page
            self._dirty.update(answer.stale)
            await self._sync()
        raise AssertionError("unreachable: the last attempt does not check")

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on a reader connection in a worker thread; a damaged index is rebuilt
        (by the writer) and ``fn`` run once more."""
        for attempt in (1, 2):
            try:
                return await self._read_once(fn)
            except sqlite3.DatabaseError as exc:
                if not damaged(exc) or attempt == 2:
                    raise
                self._damaged = f"a listing found it damaged ({exc})"
                await self._sync()
        raise AssertionError("unreachable")

    async def _read_once(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._reading:
            generation = self._generation
            for old in [entry for entry in self._readers if entry[0] != generation]:  # the file was replaced
                self._readers.remove(old)
                old[1].close()
            conn = self._readers.pop()[1] if self._readers else None
            opened: list[sqlite3.Connection] = [conn] if conn is not None else []

            def work() -> T:
                if not opened:
                    opened.append(connect(self.path, writer=False))
                return fn(opened[0])

            def interrupt() -> None:
                if opened:
                    opened[0].interrupt()

            try:
                return await off_loop(work, interrupt)
            finally:
                if opened and generation == self._generation and not self._stopped.is_set():
                    self._readers.append((generation, opened[0]))
                elif opened:
                    opened[0].close()

    def _answer(self, conn: sqlite3.Connection, query: Query, shown: list[Shown], start: int, *,
                check: bool) -> Answer:
        """In a reader thread: the page, or the rows of it that are stale (one read
        transaction: one snapshot of the index)."""
        skip = 0 if shown else start  # loaded threads are merged by position: then the rows before the page are read
        conn.execute("BEGIN")
        try:
            selected: Selected = select(conn, query, skip=skip)
            family = selected.family
            entries: list[tuple[int, str, Any]] = [(row[2], row[1], row) for row in selected.rows]
            entries += [(item.sort, item.rollout, item) for item in shown
                        if family is None or item.view["id"] in family]
            entries.sort(key=lambda entry: entry[1], reverse=True)
            entries.sort(key=lambda entry: entry[0], reverse=query.descending)
            chosen = [entry[2] for entry in entries[start - skip:query.limit - 1 - skip]]
            rows = details(conn, [item[0] for item in chosen if isinstance(item, tuple)])
        finally:
            conn.execute("COMMIT")
        if check:
            stale = [item[0] for item in chosen if isinstance(item, tuple)
                     and (item[0] not in rows or not fresh(self.files, item[0], item[1], *rows[item[0]][:2]))]
            if stale:
                return Answer(None, stale)
        views = [item.view if isinstance(item, Shown) else self._view(item[1], rows[item[0]][2]) for item in chosen]
        return Answer(Page(views, more=skip + len(entries) >= query.limit), [])

    def _view(self, rollout: str, meta_json: str) -> Json:
        try:
            meta = ThreadMeta(**json.loads(meta_json))  # VIEW_FIELDS: every one a ThreadMeta field
        except (ValueError, TypeError) as exc:  # a row SQLite kept but that is not what this code wrote
            raise sqlite3.DatabaseError(f"a row's view is not a thread's: {exc}") from exc
        meta.model = meta.model or self._model
        meta.model_provider = meta.model_provider or self._provider
        return thread_json(meta, ThreadStatus.NOT_LOADED, path=self.files.rollout(rollout))
