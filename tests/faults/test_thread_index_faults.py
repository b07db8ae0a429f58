"""Fault matrix: the thread index (issue 23, item 4) is a cache of the records and
rollouts, so whatever happened to it -- damaged, of another version, removed while a
server runs, out of step after a server was killed or a file was edited, impossible to
open, or failing a query -- ``thread/list`` answers what the files say, with one
``ThreadIndexWarning`` saying what was rebuilt, and nothing committed is lost. Damaged
records and hostile file names or filter values cost only themselves.

Each case checks the listing against the oracle that reads every file
(``tests/serve/test_thread_index.oracle``); an index in step restarts without a word
(the positive control: ``filterwarnings = error`` makes any warning fail it)."""

from __future__ import annotations

import os
import sqlite3
import stat
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent._serve import _thread_index
from trio_agent._serve._shapes import ThreadMeta
from trio_agent._serve._thread_index import ThreadIndexWarning

from ..serve._harness import app_server
from ..serve._saved_threads import rename, save_thread
from ..serve.test_thread_index import oracle

Json = dict[str, Any]


@contextmanager
def one_warning(match: str) -> Iterator[None]:
    """Exactly one ``ThreadIndexWarning``, matching ``match``, inside the block."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    index_warnings = [str(w.message) for w in caught if issubclass(w.category, ThreadIndexWarning)]
    assert len(index_warnings) == 1 and match in index_warnings[0], index_warnings
    assert len(caught) == 1, [str(w.message) for w in caught]


def _index(tmp_path: Path) -> Path:
    return tmp_path / "home" / "app-server" / "index.sqlite3"


async def _listed_as_files_say(tmp_path: Path, *params: Json) -> list[str]:
    """Start a server, list with each of ``params`` and compare with the oracle; the ids
    of the first (default) listing."""
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        first: list[str] = []
        for asked in ({}, *params):
            got = await client.request("thread/list", asked)
            assert got == oracle(harness.app, asked), asked
            first = first or [thread["id"] for thread in got["data"]]
        return first


async def _indexed(tmp_path: Path, count: int = 4) -> list[ThreadMeta]:
    """``count`` saved threads, newest first, indexed by a first server (which says it
    built the index)."""
    saved = [save_thread(tmp_path / "home", prompt=f"task {n}", created_at=1000 + n) for n in range(count)][::-1]
    with one_warning("no thread index at"):
        assert await _listed_as_files_say(tmp_path) == _ids(saved)
    return saved


def _ids(metas: list[ThreadMeta]) -> list[str]:
    return [meta.thread_id for meta in metas]


async def test_an_index_in_step_restarts_without_a_word(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    listed = _ids(await _indexed(tmp_path))
    assert await _listed_as_files_say(tmp_path, {"searchTerm": "task 2"}) == listed


@pytest.mark.parametrize("damage", [b"not a database at all" * 300, b"SQLite format 3\x00" + b"\xff" * 8000, b""])
async def test_a_damaged_index_is_rebuilt_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, damage: bytes
) -> None:
    listed = _ids(await _indexed(tmp_path))
    path = _index(tmp_path)
    path.write_bytes(damage)
    for leftover in ("-wal", "-shm"):
        Path(f"{path}{leftover}").unlink(missing_ok=True)
    expected = "rebuilt from 4 threads" if damage else "no thread index at"  # an empty file is a new database
    with one_warning(expected):
        assert await _listed_as_files_say(tmp_path, {"sortDirection": "asc"}) == listed
    assert await _listed_as_files_say(tmp_path) == listed  # and it is a good index now


async def test_an_index_of_another_version_is_rebuilt_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    listed = _ids(await _indexed(tmp_path))
    with sqlite3.connect(_index(tmp_path)) as conn:
        conn.execute("UPDATE info SET value = '0' WHERE key = 'schema'")
        conn.execute("UPDATE threads SET name = 'from an old version', archived = 1")
    with one_warning("its schema is not version"):
        assert await _listed_as_files_say(tmp_path, {"archived": True}) == listed


async def test_an_index_out_of_step_at_start_is_read_again_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """While no server ran (or after one was killed before its last pass): a record
    renamed (the one stale row), a rollout removed, a thread known only by a new rollout."""
    saved = await _indexed(tmp_path, 5)
    home = tmp_path / "home"
    rename(home, saved[1], "renamed offline")
    next((home / "sessions").rglob(f"*{saved[3].thread_id}.jsonl")).unlink()
    bare = save_thread(home, record=False, prompt="rollout alone")
    with one_warning("1 threads of the thread index"):
        listed = await _listed_as_files_say(tmp_path, {"searchTerm": "renamed offline"}, {"searchTerm": "alone"})
    assert listed == [bare.thread_id, *_ids(saved[:3]), saved[4].thread_id]


async def test_an_index_removed_while_the_server_runs_is_rebuilt_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    listed = _ids(await _indexed(tmp_path))
    with one_warning("no thread index at"):
        async with app_server(tmp_path) as harness:
            client = await harness.client()
            assert [t["id"] for t in (await client.request("thread/list", {}))["data"]] == listed
            for suffix in ("", "-wal", "-shm"):
                Path(f"{_index(tmp_path)}{suffix}").unlink(missing_ok=True)
            again = await client.request("thread/list", {"sortDirection": "asc"})
            assert again == oracle(harness.app, {"sortDirection": "asc"})
            assert [t["id"] for t in again["data"]] == listed[::-1]
    assert _index(tmp_path).is_file()


async def test_an_index_that_cannot_be_opened_is_a_temporary_one_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    saved = [save_thread(tmp_path / "home", prompt=f"task {n}", created_at=1000 + n) for n in range(3)]
    _index(tmp_path).mkdir(parents=True)  # where the index goes is a folder: SQLite cannot open it
    with one_warning("using a temporary one for this run"):
        async with app_server(tmp_path) as harness:
            client = await harness.client()
            got = await client.request("thread/list", {})
            assert [t["id"] for t in got["data"]] == [meta.thread_id for meta in reversed(saved)]
            temporary = harness.app.index.path
            assert temporary.is_file() and not temporary.is_relative_to(tmp_path)
    assert not temporary.exists()  # removed with the server


async def test_a_query_that_finds_damage_rebuilds_and_answers_with_one_warning(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = _ids(await _indexed(tmp_path))
    select = _thread_index.select
    failures = [sqlite3.DatabaseError("database disk image is malformed")]

    def failing(conn: sqlite3.Connection, query: Any, **options: Any) -> Any:
        if failures:
            raise failures.pop()
        return select(conn, query, **options)

    monkeypatch.setattr(_thread_index, "select", failing)
    with one_warning("a listing found it damaged (database disk image is malformed)"):
        assert await _listed_as_files_say(tmp_path) == listed
    assert failures == []


async def test_a_row_that_is_not_a_threads_is_damage(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A row SQLite keeps intact but whose view is not one this code wrote (its
    fingerprints still match): the index is rebuilt, not the listing failed (-32603)."""
    saved = await _indexed(tmp_path)
    with sqlite3.connect(_index(tmp_path)) as conn:
        conn.execute("UPDATE threads SET meta = '{\"not\": \"a thread\"}' WHERE thread_id = ?", (saved[1].thread_id,))
    with one_warning("a listing found it damaged (a row's view is not a thread's"):
        assert await _listed_as_files_say(tmp_path) == _ids(saved)


async def test_the_index_is_as_private_as_the_records(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """It holds every thread's preview, name and folder: 0600 like the records, its WAL
    files too, whatever the umask (another local user reads none of it)."""
    old = os.umask(0o022)
    try:
        await _indexed(tmp_path)
        path = _index(tmp_path)
        path.chmod(0o644)  # left readable by something else: made private again
        async with app_server(tmp_path) as harness:
            client = await harness.client()
            assert len((await client.request("thread/list", {}))["data"]) == 4  # the positive control
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            assert all(file.exists() for file in files)
            assert {file.name: stat.filemode(file.stat().st_mode) for file in files} == {
                file.name: "-rw-------" for file in files}
    finally:
        os.umask(old)


async def test_damaged_records_and_hostile_names_cost_only_themselves(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Before the index, one damaged record made every thread/list fail (-32600)."""
    home = tmp_path / "home"
    kept = [save_thread(home, prompt=f"task {n}", created_at=1000 + n) for n in range(3)]
    damaged = save_thread(home, prompt="damaged")
    (home / "app-server" / "threads" / f"{damaged.thread_id}.jsonl").write_bytes(b"[" * 100_000 + b"\n")
    bare = save_thread(home, record=False, prompt="rollout alone", created_at=1)
    day = next((home / "sessions").glob("*/*/*"))
    (day / "rollout-not-a-thread.jsonl").write_text("{}\n")  # no thread id in the name
    (day / "rollout-2025-01-01T00-00-00-..jsonl").mkdir()  # a folder, and no valid id
    (day / f"rollout-2025-01-01T00-00-00-{bare.thread_id}-copy.jsonl").write_bytes(b"\xff\xfe\n")
    (home / "sessions" / "2024").write_text("a file where a year folder goes")
    hostile = [{"searchTerm": "'; DROP TABLE threads; --"}, {"searchTerm": "%"}, {"searchTerm": "_"},
               {"cwd": ["' OR 1=1 --"]}, {"includedThreadIds": ["x' OR '1'='1"]},
               {"originators": ["\x00"]}, {"searchTerm": "task", "excludedThreadIds": [kept[0].thread_id]}]
    with one_warning("no thread index at"):
        listed = await _listed_as_files_say(tmp_path, *hostile)
    assert sorted(listed) == sorted([*_ids(kept), bare.thread_id])  # not the damaged one, nor the odd names
    rename(home, kept[1], "still readable")
    with one_warning("out of step"):
        assert await _listed_as_files_say(tmp_path, {"searchTerm": "readable"}) == listed
