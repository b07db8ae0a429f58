"""The thread index's SQLite side: schema, opening and checking, bringing rows in step
with the files, and the ``thread/list`` query. Blocking: called in worker threads only
(``_thread_index`` owns the threads and the connections).

Tables. ``threads``: one row per thread with a rollout (``_index_files.Row``), indexed
for the default sorts. ``rollouts``: every rollout file seen (``Y/M/D/name``, its
thread), so a thread's newest rollout is ``max(rel)``. ``dirs``: every ``sessions/Y/M/D``
folder and its mtime when its names were last read (-1: changed too recently to trust,
read again next time). ``info``: the schema version.

Being in step. A write pass (``catch_up``) re-reads the rows of the threads whose
records this process wrote (the dirty ids), and the names of the day folders that
moved (``_moved_days``: the newest ``RECENT``, new and gone ones; a rollout created or
removed by anyone: another server, ``trio-agent exec``, codex). ``full=True`` (at start,
then now and then) also compares every row's fingerprints with its files and checks
every folder, which finds what changed while no index writer was running, or by a
program that does not index what it writes. Rows are derived inside
the write transaction (``BEGIN IMMEDIATE``: SQLite's write lock, which
serializes the index writers of every server on the home), so the last row written is
always from the newest reading of the files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._index_files import Files, Row, fingerprint, rollout_thread

__all__ = [
    "SCHEMA",
    "Answer",
    "CatchUp",
    "Page",
    "Query",
    "Selected",
    "Shown",
    "catch_up",
    "connect",
    "damaged",
    "details",
    "fresh",
    "select",
    "settle_schema",
    "unlink_database",
]

SCHEMA = "3"  # 3: a row keeps its Thread view (``_index_files.VIEW_KEYS``)
RECENT = 2  # day folders checked by every pass (today's and yesterday's); the others by a full pass
RACY_NS = 1_000_000_000  # a folder whose mtime is this recent may change again within the same timestamp
CHUNK = 500  # rows per write transaction in a rebuild (other servers' writers get the lock in between)
BUSY_TIMEOUT = 10.0  # seconds a writer waits for another server's write transaction

_TABLES = """
CREATE TABLE info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE dirs (rel TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL);
CREATE TABLE rollouts (rel TEXT PRIMARY KEY, thread_id TEXT);
CREATE INDEX rollouts_thread ON rollouts (thread_id);
CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY, rollout TEXT NOT NULL, record_fp TEXT, rollout_fp TEXT,
    listed INTEGER NOT NULL, archived INTEGER NOT NULL, kind TEXT NOT NULL, cwd TEXT NOT NULL, provider TEXT,
    originator TEXT, parent TEXT, created INTEGER NOT NULL, updated INTEGER NOT NULL, preview TEXT NOT NULL,
    name TEXT NOT NULL, meta TEXT NOT NULL
);
CREATE INDEX threads_created ON threads (listed, archived, kind, created, rollout);
CREATE INDEX threads_updated ON threads (listed, archived, kind, updated, rollout);
CREATE INDEX threads_created_any ON threads (listed, archived, created, rollout);
CREATE INDEX threads_updated_any ON threads (listed, archived, updated, rollout);
CREATE INDEX threads_parent ON threads (parent);
"""
_ROW_COLUMNS = ("thread_id, rollout, record_fp, rollout_fp, listed, archived, kind, cwd, provider, originator, "
                "parent, created, updated, preview, name, meta")


def connect(path: Path, *, writer: bool) -> sqlite3.Connection:
    """A connection to the index (autocommit; transactions are explicit). Raises
    ``sqlite3.DatabaseError`` for a file that is not a database. The writer makes the
    file private (0600, as the records are: it holds their previews and names); SQLite
    gives its -wal and -shm files the same mode."""
    if writer:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, 0o600)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
    try:
        if writer:
            _use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a power loss may drop the last commits, never corrupt
        else:
            conn.execute("PRAGMA query_only=ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL. Two servers opening a new home at once both try, and
    SQLite answers the loser "database is locked" at once, without its busy handler:
    retried (in the writer's thread) until the other's switch is done, within
    ``BUSY_TIMEOUT``."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def settle_schema(conn: sqlite3.Connection) -> str | None:
    """Make the index this version's: None when it already was; else why it was
    emptied (``"missing"``: no index yet; a schema of another version). Raises
    ``sqlite3.DatabaseError`` when the file is damaged."""
    conn.execute("BEGIN IMMEDIATE")  # two servers starting on a new home: the second sees the first's tables
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        found = conn.execute("SELECT value FROM info WHERE key = 'schema'").fetchone() if "info" in tables else None
        if found is not None and found[0] == SCHEMA:
            conn.execute("ROLLBACK")
            (check,) = conn.execute("PRAGMA quick_check").fetchone()
            if check != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check}")
            return None
        for name in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        for statement in _TABLES.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO info VALUES ('schema', ?)", (SCHEMA,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return "missing" if not tables else f"its schema is not version {SCHEMA}"


@attrs.frozen
class CatchUp:
    """What a write pass did: ``read`` rows derived, ``old`` of them from files last
    changed before ``since_ns`` and not of a thread in ``mine``, and ``stale``: rows
    found out of step by ``full``'s fingerprint check (not a dirty id or a new rollout)
    among the old ones (later changes, and the threads this server wrote, are the live
    writes of a running server)."""

    read: int = 0
    old: int = 0
    stale: int = 0


def catch_up(conn: sqlite3.Connection, files: Files, dirty: Iterable[str], *, full: bool = False,
             since_ns: int = 0, mine: Collection[str] = frozenset()) -> CatchUp:
    """Bring the index in step with the files (see the module docstring)."""
    wanted = set(dirty)
    stale = _out_of_step(conn, files) - wanted if full else set()  # a read: no lock held while it stats
    wanted |= stale
    if not (wanted or _moved_days(conn, files, full)):
        return CatchUp()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time_ns()
        for day, mtime in _moved_days(conn, files, full).items():  # again, under the write lock
            wanted |= _rescan_day(conn, files, day, mtime, now)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    ordered = sorted(wanted)
    rows: list[Row] = []
    for start in range(0, len(ordered), CHUNK):
        rows += _rederive(conn, files, ordered[start:start + CHUNK])
    old = [row for row in rows if row.changed_ns < since_ns and row.thread_id not in mine]
    return CatchUp(read=len(rows), old=len(old), stale=sum(row.thread_id in stale for row in old))


def _moved_days(conn: sqlite3.Connection, files: Files, full: bool) -> dict[str, int | None]:
    """The day folders whose names must be read again, with their mtime (None: gone).
    Rollouts are created in the folder of their day, so a pass checks only the newest
    ``RECENT`` folders, new ones, gone ones and those changed too recently to trust;
    ``full`` checks every one."""
    days = files.days()
    present = set(days)
    known: dict[str, int] = dict(conn.execute("SELECT rel, mtime_ns FROM dirs"))
    checked = present if full else {*days[-RECENT:], *(day for day in days if known.get(day, -1) < 0)}
    moved: dict[str, int | None] = {day: None for day in known if day not in present}
    for day in checked:
        mtime = files.mtime_ns(day)
        if mtime is None or known.get(day) != mtime:
            moved[day] = mtime
    return moved


def _rescan_day(conn: sqlite3.Connection, files: Files, day: str, mtime: int | None, now: int) -> set[str]:
    """Read the names in ``sessions/<day>`` (``mtime``: its mtime before reading; None:
    it is gone); the threads whose rollouts came or went."""
    lower, upper = f"{day}/", f"{day}0"  # '0' follows '/': every rel under the folder
    known = dict(conn.execute("SELECT rel, thread_id FROM rollouts WHERE rel >= ? AND rel < ?", (lower, upper)))
    present = {f"{day}/{name}": rollout_thread(name) for name in files.rollouts_in(day)} if mtime is not None else {}
    gone = [rel for rel in known if rel not in present]
    added = [(rel, thread_id) for rel, thread_id in present.items() if rel not in known]
    conn.executemany("DELETE FROM rollouts WHERE rel = ?", [(rel,) for rel in gone])
    conn.executemany("INSERT INTO rollouts VALUES (?, ?)", added)
    if mtime is None:
        conn.execute("DELETE FROM dirs WHERE rel = ?", (day,))
    else:
        trusted = mtime if mtime < now - RACY_NS else -1
        conn.execute("INSERT OR REPLACE INTO dirs VALUES (?, ?)", (day, trusted))
    touched = {known[rel] for rel in gone} | {thread_id for _, thread_id in added}
    return {thread_id for thread_id in touched if thread_id is not None}


def _out_of_step(conn: sqlite3.Connection, files: Files) -> set[str]:
    """Threads whose row's fingerprints differ from their files, or that have no row."""
    found = {thread_id for (thread_id,) in conn.execute(
        "SELECT DISTINCT thread_id FROM rollouts WHERE thread_id IS NOT NULL "
        "AND thread_id NOT IN (SELECT thread_id FROM threads)")}
    for thread_id, rollout, record_fp, rollout_fp in conn.execute(
            "SELECT thread_id, rollout, record_fp, rollout_fp FROM threads").fetchall():
        if not fresh(files, thread_id, rollout, record_fp, rollout_fp):
            found.add(thread_id)
    return found


def fresh(files: Files, thread_id: str, rollout: str, record_fp: str | None, rollout_fp: str | None) -> bool:
    """Whether a row's fingerprints still match its files."""
    if fingerprint(files.record(thread_id)) != record_fp:
        return False
    return rollout_fp is None or fingerprint(files.rollout(rollout)) == rollout_fp


def _rederive(conn: sqlite3.Connection, files: Files, thread_ids: Sequence[str]) -> list[Row]:
    """Derive the rows of ``thread_ids`` again, in one write transaction; the rows."""
    rows = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for thread_id in thread_ids:
            found = conn.execute("SELECT max(rel) FROM rollouts WHERE thread_id = ?", (thread_id,)).fetchone()
            if found[0] is None:
                conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
                continue
            row = files.row(thread_id, found[0])
            conn.execute(f"INSERT OR REPLACE INTO threads ({_ROW_COLUMNS}) VALUES ({', '.join('?' * 16)})",
                         row.values())
            rows.append(row)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return rows


# -- thread/list -------------------------------------------------------------------------


@attrs.frozen
class Query:
    """``thread/list``'s filters as the index applies them (None: no such filter)."""

    archived: bool
    kinds: list[str]  # of ROOT, CHILD (``_index_files``): the kinds asked for that this server's threads have
    cwds: list[str] | None
    search: str  # lowered; "" matches all
    providers: list[str] | None
    originators: list[str] | None
    parent: str | None
    ancestor: str | None
    included: list[str] | None
    excluded: list[str]
    loaded: list[str]  # left out: the server shows them from memory
    sort: str  # "created" or "updated"
    descending: bool
    limit: int
    server_provider: str


@attrs.frozen
class Selected:
    """``(thread_id, rollout, sort value)`` rows, in order; ``family``: the ancestor's
    descendants when the query names one."""

    rows: list[tuple[str, str, int]]
    family: frozenset[str] | None


_FAMILY = ("WITH RECURSIVE family(id) AS (SELECT thread_id FROM threads WHERE listed = 1 AND parent = :ancestor "
           "UNION SELECT t.thread_id FROM threads t JOIN family f ON t.parent = f.id WHERE t.listed = 1) ")


def _conditions(query: Query) -> list[str]:
    def among(column: str, name: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(:{name}))"

    # Equalities first, as the indexes have them (an IN over json_each would hide them from the planner).
    wanted = ["listed = 1", "archived = :archived"]
    if len(query.kinds) == 1:
        wanted.append("kind = :kind")
    elif len(query.kinds) != 2:
        wanted.append("0")
    if query.loaded:
        wanted.append(f"NOT {among('thread_id', 'loaded')}")
    optional = {
        "cwds": among("cwd", "cwds"),
        "providers": among("coalesce(provider, :server_provider)", "providers"),
        "originators": among("originator", "originators"),
        "parent": "parent = :parent",
        "ancestor": "thread_id IN family",
        "included": among("thread_id", "included"),
    }
    wanted += [condition for name, condition in optional.items() if getattr(query, name) is not None]
    if query.search:
        wanted.append("(instr(preview, :search) > 0 OR instr(name, :search) > 0)")
    if query.excluded:
        wanted.append(f"NOT {among('thread_id', 'excluded')}")
    return wanted


def select(conn: sqlite3.Connection, query: Query, *, skip: int = 0) -> Selected:
    """The first ``limit`` threads of the index that ``query`` keeps, in its order (ties:
    newest rollout first, as ``ThreadManager.stored`` orders them), but the first ``skip``."""
    if query.sort not in ("created", "updated"):
        raise ValueError(f"no such sort column: {query.sort!r}")
    direction = "DESC" if query.descending else "ASC"
    family = _FAMILY if query.ancestor is not None else ""
    sql = (f"{family}SELECT thread_id, rollout, {query.sort} FROM threads "
           f"WHERE {' AND '.join(_conditions(query))} ORDER BY {query.sort} {direction}, rollout DESC "
           "LIMIT :rows OFFSET :skip")
    params = {name: json.dumps(value) if isinstance(value, list) else value
              for name, value in attrs.asdict(query).items()}
    kind = query.kinds[0] if query.kinds else None
    rows = conn.execute(sql, {**params, "archived": int(query.archived), "kind": kind, "rows": query.limit - skip,
                              "skip": skip}).fetchall()
    members = None
    if query.ancestor is not None:
        members = frozenset(thread_id for (thread_id,) in conn.execute(f"{_FAMILY}SELECT id FROM family",
                                                                        {"ancestor": query.ancestor}))
    return Selected(rows, members)


def details(conn: sqlite3.Connection, thread_ids: list[str]) -> dict[str, tuple[str | None, str | None, str]]:
    """``(record_fp, rollout_fp, meta)`` of each of ``thread_ids`` (a page's: fetched for
    those only, so a deep cursor costs the ids before it, not their rows)."""
    found = conn.execute("SELECT thread_id, record_fp, rollout_fp, meta FROM threads "
                         "WHERE thread_id IN (SELECT value FROM json_each(?))", (json.dumps(thread_ids),))
    return {thread_id: (record_fp, rollout_fp, meta) for thread_id, record_fp, rollout_fp, meta in found}


def unlink_database(path: Path) -> None:
    """Remove a database and its WAL files."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def damaged(exc: sqlite3.DatabaseError) -> bool:
    """A damaged database (not a busy lock, a full disk or an interrupt)."""
    return not isinstance(exc, sqlite3.OperationalError)


@attrs.frozen
class Shown:
    """A loaded thread a listing may show: its view (from memory), sort value and
    newest rollout (the tie-break)."""

    view: dict[str, Any]
    sort: int
    rollout: str


@attrs.frozen
class Page:
    views: list[dict[str, Any]]
    more: bool  # threads follow this page


@attrs.frozen
class Answer:
    page: Page | None
    stale: list[str]  # rows of the page that disagree with their files (then no page)
