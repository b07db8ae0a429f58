"""A loaded thread's record keeps its descriptor open between appends (``_store.
ThreadStore.hold``; issue 30 item 3): one open per loaded thread however many lines
its turns write, at most one descriptor per loaded thread, closed when the thread
closes and when the server shuts down; a thread not loaded opens and closes the
file per line, as before. What is written, and when it reaches the OS, is unchanged.

Checked without the change (every append opening and closing the path): the served
thread's record is opened once per line (5 opens over two turns where the test wants
1) and no descriptor is open on it while the thread is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent._serve._store import ThreadStore

from ._harness import app_server, run_turn, start_thread
from ._saved_threads import save_thread

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")


def _descriptors_on(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                count += 1
        except OSError:
            pass  # the listing's own descriptor, gone
    return count


def _count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real = os.open

    def counted(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        fd = real(path, flags, mode, **kwargs)
        if flags & os.O_APPEND:  # an append's, and it opened (the index reads records too)
            opened.append(os.fspath(path))
        return fd

    monkeypatch.setattr(os, "open", counted)  # the store calls os.open (as does the rollout)
    return opened


async def test_a_loaded_threads_record_is_opened_once_and_closed_when_it_closes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _count_opens(monkeypatch)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client, cwd=str(harness.workspace)))["id"]
        other_id = (await start_thread(client, cwd=str(harness.workspace)))["id"]
        record = harness.home / "app-server" / "threads" / f"{thread_id}.jsonl"
        for text in ("one", "two"):
            completed = await run_turn(client, thread_id, text)
            assert completed["turn"]["status"] == "completed"
        assert opened.count(str(record)) == 1  # meta, turn_started and turn lines of two turns: one open
        assert _descriptors_on(record) == 1
        stored = harness.app.store.load(thread_id)
        assert stored is not None and len(stored.turns) == 2 and not stored.unfinished  # every line is there
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
        assert _descriptors_on(record) == 0  # unloaded: closed
        await client.request("thread/name/set", {"threadId": thread_id, "name": "renamed while unloaded"})
        assert _descriptors_on(record) == 0  # an append for a thread not loaded keeps nothing open
        assert opened.count(str(record)) == 2
        other = harness.home / "app-server" / "threads" / f"{other_id}.jsonl"
        assert _descriptors_on(other) == 1
    assert _descriptors_on(other) == 0  # shutdown closes every held descriptor
    stored = ThreadStore(harness.home).load(thread_id)
    assert stored is not None and stored.meta.name == "renamed while unloaded" and len(stored.turns) == 2


def test_held_appends_reach_the_file_as_written_and_release_closes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    meta = save_thread(home, record=False)
    store = ThreadStore(home)
    record = store.folder / f"{meta.thread_id}.jsonl"
    opened = _count_opens(monkeypatch)
    store.hold(meta.thread_id)
    store.create(meta)
    for name in ("a", "b"):
        meta.name = name
        store.update(meta)
        assert store.load(meta.thread_id).meta.name == name  # type: ignore[union-attr]  # in the file at once
    assert opened == [str(record)] and _descriptors_on(record) == 1
    store.release(meta.thread_id)
    assert _descriptors_on(record) == 0
    meta.name = "released"
    store.update(meta)  # not held: opened and closed for the line
    assert len(opened) == 2 and _descriptors_on(record) == 0
    store.hold(meta.thread_id)
    store.update(meta)
    store.close()  # shutdown: every held descriptor closed, nothing held any more
    assert _descriptors_on(record) == 0
    store.update(meta)
    assert len(opened) == 4 and _descriptors_on(record) == 0


def test_a_held_descriptor_that_fails_is_reported_and_reopened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Hostile: the held descriptor stops working (closed behind the store's back): the
    line is lost and reported once, as any write error is, and the next append opens the
    file again instead of failing on the dead descriptor forever."""
    home = tmp_path / "home"
    meta = save_thread(home, record=False)
    store = ThreadStore(home)
    record = store.folder / f"{meta.thread_id}.jsonl"
    store.hold(meta.thread_id)
    store.create(meta)
    held = store._held[meta.thread_id]
    assert held is not None
    os.close(held)
    meta.name = "lost"
    store.update(meta)
    assert "cannot write the thread record" in capsys.readouterr().err
    meta.name = "after the failure"
    store.update(meta)
    stored = store.load(meta.thread_id)
    assert stored is not None and stored.meta.name == "after the failure"
    assert _descriptors_on(record) == 1
    store.close()
