"""An unloaded thread found by id through the thread index (issue 23, item 4): no glob
over every saved session on the event loop, and the rollout still wins over the index.

Before the index ``thread/read`` and ``thread/resume`` of an unloaded thread ran
``RolloutConfig.find`` (a glob listing every day folder) on the event loop, several
times per request."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._serve._off_loop import off_loop
from trio_agent.testing import AppServerError

from ._harness import app_server
from ._saved_threads import save_thread

MISSING = "01a230c2-7dc6-7f80-89ae-df3d5f8ebcde"


def _count_globs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every glob for a thread's rollouts: ``(thread id, on the event loop's thread)``."""
    globs: list[tuple[str, bool]] = []
    files = ta.RolloutConfig._files
    loop = threading.current_thread()

    def counted(self: ta.RolloutConfig, thread_id: str) -> Any:
        globs.append((thread_id, threading.current_thread() is loop))
        return files(self, thread_id)

    monkeypatch.setattr(ta.RolloutConfig, "_files", counted)
    return globs


async def _indexed_home(tmp_path: Path, count: int) -> list[Any]:
    home = tmp_path / "home"
    saved = [save_thread(home, prompt=f"task {number}", created_at=1000 + number) for number in range(count)]
    with pytest.warns(UserWarning, match="no thread index at"):
        async with app_server(tmp_path) as harness:  # builds the index
            await (await harness.client()).request("thread/list", {})
    return saved


async def test_reading_and_resuming_an_unloaded_thread_globs_nothing_on_the_loop(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = await _indexed_home(tmp_path, 20)
    target = saved[7]
    rollout = ta.RolloutConfig(tmp_path / "home").find(target.thread_id)
    globs = _count_globs(monkeypatch)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        await client.request("thread/list", {})  # the index is open (until then a lookup globs, off the loop)
        read = await client.request("thread/read", {"threadId": target.thread_id, "includeTurns": True})
        assert read["thread"]["path"] == str(rollout) and read["thread"]["preview"] == "task 7"
        assert [turn["status"] for turn in read["thread"]["turns"]] == ["completed"]
        resumed = await client.request("thread/resume", {"threadId": target.thread_id})
        assert resumed["thread"]["path"] == str(rollout) and len(resumed["thread"]["turns"]) == 1
        assert globs == []
        # The positive control: an id without a rollout is looked for in the files (the
        # index is never trusted to say a thread does not exist), off the loop.
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/read", {"threadId": MISSING})
        assert caught.value.code == -32600 and "thread not found" in caught.value.message
        assert globs == [(MISSING, False)]


async def test_a_rollout_moved_behind_the_index_is_still_found(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index says the rollout is in today's folder; it was moved to an old day folder
    (no pass has looked there): the lookup finds it where it is, off the loop."""
    saved = await _indexed_home(tmp_path, 3)
    target = saved[1]
    home = tmp_path / "home"
    old = ta.RolloutConfig(home).find(target.thread_id)
    assert old is not None
    moved = home / "sessions" / "2020" / "01" / "01" / old.name
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        await client.request("thread/list", {})
        moved.parent.mkdir(parents=True)
        shutil.move(old, moved)
        globs = _count_globs(monkeypatch)
        read = await client.request("thread/read", {"threadId": target.thread_id})
        assert read["thread"]["path"] == str(moved)
        resumed = await client.request("thread/resume", {"threadId": target.thread_id})
        assert resumed["thread"]["path"] == str(moved) and len(resumed["thread"]["turns"]) == 1
        assert globs and set(globs) == {(target.thread_id, False)}  # in a worker thread
        # The lookup asked for a pass, which read the new folder: the index knows it now.
        await client.request("thread/list", {})
        globs.clear()
        read = await client.request("thread/read", {"threadId": target.thread_id})
        assert read["thread"]["path"] == str(moved) and globs == []


async def test_a_thread_manager_refuses_rollouts_of_another_home(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="test-key", workspace=tmp_path)
    with pytest.raises(ValueError, match="whose home is"):
        async with ta.open_thread_manager(tmp_path / "a", config=config, rollouts=ta.RolloutConfig(tmp_path / "b")):
            pass
    async with ta.open_thread_manager(tmp_path / "a", config=config, rollouts=ta.RolloutConfig(tmp_path / "a")):
        pass  # the control: its own home


async def test_a_cancelled_query_is_interrupted_and_its_thread_waited_for() -> None:
    """``off_loop`` (every SQLite call of the index): a cancelled caller interrupts the
    statement (here one that never ends) and returns once its thread has; uncancelled,
    the same call answers (the control)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    finished: list[str] = []

    def query() -> Any:
        try:
            return conn.execute(forever).fetchone()
        finally:
            finished.append(threading.current_thread().name)

    start = trio.current_time()
    with trio.move_on_after(0.2) as scope:
        await off_loop(query, conn.interrupt)
    assert scope.cancelled_caught and finished and trio.current_time() - start < 5
    assert await off_loop(lambda: conn.execute("SELECT 41 + 1").fetchone()) == (42,)
