"""``thread/list`` from the thread index (issue 23, item 4): the same answers as reading
every file, without reading them on the event loop.

The oracle is the listing as it was before the index (``server.threads.stored()``,
each thread's view from its files or from memory, filtered, sorted and paged in
Python), computed from the same server at the same moment."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._ids import uuid7
from trio_agent._serve._index_db import catch_up, connect, settle_schema
from trio_agent._serve._index_files import Files
from trio_agent._serve._jsonrpc import InvalidRequest
from trio_agent._serve._off_loop import off_loop
from trio_agent._serve._params import Params
from trio_agent._serve._server import AppServer
from trio_agent._serve._shapes import ThreadMeta
from trio_agent._serve._store import ThreadStore
from trio_agent._serve._thread_index import FULL_CHECK_EVERY, WRITE_DELAY, ThreadIndex
from trio_agent._serve._thread_list import _SORT_KEYS, ListFilter
from trio_agent._serve._thread_methods import any_thread_view, page

from ._harness import Json, app_server, run_turn
from ._saved_threads import rename, save_thread


def _ancestors(meta: ThreadMeta, metas: dict[str, ThreadMeta]) -> list[str]:
    found: list[str] = []
    parent = meta.parent_thread_id
    while parent is not None and parent not in found:
        found.append(parent)
        above = metas.get(parent)
        parent = above.parent_thread_id if above is not None else None
    return found


def oracle(server: AppServer, params: Json) -> Json:
    """``thread/list`` by reading every file (the code before the index)."""
    request = Params("thread/list", params)
    wanted = ListFilter.of(request)
    candidates: list[tuple[Json, ThreadMeta]] = []
    for thread_id in server.threads.stored():
        try:
            candidates.append(any_thread_view(server, thread_id, turns=False))
        except (InvalidRequest, ta.AgentError):  # unreadable: not listed
            continue
    metas = {meta.thread_id: meta for _, meta in candidates}
    threads = [view for view, meta in candidates if wanted.keeps(view, meta)
               and (wanted.ancestor is None or wanted.ancestor in _ancestors(meta, metas))]
    key = _SORT_KEYS[params.get("sortKey") or "created_at"]
    threads.sort(key=lambda thread: thread[key] or 0, reverse=params.get("sortDirection") != "asc")
    data, next_cursor = page(request, threads)
    return {"data": data, "nextCursor": next_cursor, "backwardsCursor": None}


def _folders(tmp_path: Path) -> list[str]:
    found = []
    for name in "abc":
        (tmp_path / name).mkdir(exist_ok=True)
        found.append(str(tmp_path / name))
    return found


def _saved_home(tmp_path: Path) -> dict[str, ThreadMeta]:
    """A home with threads of every kind the filters tell apart (ties in every sort key)."""
    home = tmp_path / "home"
    folders = _folders(tmp_path)
    rng = random.Random(23)
    saved: dict[str, ThreadMeta] = {}
    prompts = ["beta task", "Gamma ray", "Überraschung", "plain", "BETA again"]
    for number in range(24):
        fields: dict[str, Any] = {
            "created_at": rng.choice([1000, 2000, 3000, 1000 + number]), "cwd": rng.choice(folders),
            "originator": rng.choice(["vscode", "codex_cli", None]), "model_provider": rng.choice(["openai", "other"]),
            "archived": number % 7 == 3, "name": rng.choice([None, None, "Alpha Project", "ÄRGER name"]),
        }
        completed = rng.choice([None, 2500, 4000])
        meta = save_thread(home, prompt=prompts[number % len(prompts)], completed_s=completed, **fields)
        saved[f"root{number}"] = meta
    root = saved["root0"].thread_id
    child = save_thread(home, parent_thread_id=root, agent_path="/root/worker", created_at=2000)
    grandchild = save_thread(home, parent_thread_id=child.thread_id, agent_path="/root/worker/sub", created_at=2000)
    sibling = save_thread(home, parent_thread_id=root, agent_path="/root/other", created_at=5000, archived=True)
    saved.update(child=child, grandchild=grandchild, sibling=sibling)
    saved["fork"] = save_thread(home, forked_from=root, created_at=3000)
    saved["bare"] = save_thread(home, record=False, prompt="no record", cwd=folders[0])  # known by its rollout alone
    damaged = saved["damaged"] = save_thread(home, prompt="damaged record")
    with (home / "app-server" / "threads" / f"{damaged.thread_id}.jsonl").open("ab") as record:
        record.write(b'{"type": "turn", "turn": 5}\n')
    ThreadStore(home).create(ThreadMeta(str(uuid7()), created_at=1, cwd="/a", model="m",
                                        model_provider="openai"))  # a record without a rollout: never listed
    return saved


def _combinations(saved: dict[str, ThreadMeta], folders: list[str], count: int) -> list[Json]:
    rng = random.Random(4)
    ids = [meta.thread_id for meta in saved.values()]
    choices: dict[str, list[Any]] = {
        "archived": [None, False, True],
        "sortKey": [None, "created_at", "updated_at", "recency_at", "section_position"],
        "sortDirection": [None, "asc", "desc"],
        "searchTerm": [None, "", "beta", "ä", "alpha", "RAY", "nothing like it"],
        "cwd": [None, folders[0], [folders[0], folders[2]], []],
        "modelProviders": [None, [], ["other"], ["openai", "other"]],
        "originators": [None, [], ["vscode"], ["codex_cli", "vscode"]],
        "sourceKinds": [None, [], ["subAgentThreadSpawn"], ["appServer", "subAgentThreadSpawn"], ["cli"], ["exec"]],
        "parentThreadId": [None, saved["root0"].thread_id, saved["child"].thread_id],
        "ancestorThreadId": [None, saved["root0"].thread_id, saved["child"].thread_id],
        "includedThreadIds": [None, [], rng.sample(ids, 8)],
        "excludedThreadIds": [None, [], rng.sample(ids, 8)],
        "sectionId": [None, None, None, "s1"],
        "limit": [None, 1, 3, 7, 200],
    }
    combos = []
    for _ in range(count):
        combo = {name: rng.choice(values) for name, values in choices.items() if rng.random() < 0.4}
        combos.append({name: value for name, value in combo.items() if value is not None or rng.random() < 0.5})
    return [{}, {"limit": 2}, {"sortDirection": "asc", "limit": 5}, {"archived": True}, *combos]


async def _compare_every_page(server: AppServer, client: Any, params: Json) -> int:
    pages = 0
    cursor = None
    while True:
        asked = {**params, **({"cursor": cursor} if cursor else {})}
        got = await client.request("thread/list", asked)
        assert got == oracle(server, asked), asked
        pages += 1
        cursor = got["nextCursor"]
        if cursor is None or pages > 40:
            return pages


async def test_every_filter_sort_and_page_matches_reading_every_file(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    saved = _saved_home(tmp_path)
    with pytest.warns(UserWarning, match="no thread index at"):  # built at start from the saved threads
        async with app_server(tmp_path) as harness:
            client = await harness.client()
            # Nothing loaded: a page past the first is read from the index alone (OFFSET).
            before = sum([await _compare_every_page(harness.app, client, params)
                          for params in _combinations(saved, _folders(tmp_path), 40)])
            assert before > 50
            # Loaded threads are listed from memory: two resumed, one of them after a new turn.
            for name in ("root1", "root2"):
                await client.request("thread/resume", {"threadId": saved[name].thread_id})
            await run_turn(client, saved["root2"].thread_id, "a new Beta prompt")
            # Changes made through the server reach the index before the next listing.
            await client.request("thread/name/set", {"threadId": saved["root3"].thread_id, "name": "beta renamed"})
            await client.request("thread/archive", {"threadId": saved["root4"].thread_id})
            pages = 0
            for params in _combinations(saved, _folders(tmp_path), 160):
                pages += await _compare_every_page(harness.app, client, params)
            assert pages > 200
            everything = await client.request("thread/list", {"limit": 200, "sourceKinds": ["appServer",
                                                                                             "subAgentThreadSpawn"]})
            listed = {thread["id"] for thread in everything["data"]}
            assert saved["bare"].thread_id in listed and saved["damaged"].thread_id not in listed  # the controls


async def _unloaded_home(tmp_path: Path, count: int) -> list[ThreadMeta]:
    home = tmp_path / "home"
    saved = [save_thread(home, prompt=f"task {number}", created_at=1000 + number) for number in range(count)]
    async with app_server(tmp_path) as harness:  # builds the index (threads older than the server: a warning)
        client = await harness.client()
        await client.request("thread/list", {})
    return saved


async def test_a_listing_reads_no_record_when_the_index_is_in_step(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the index every listing read every thread's record on the event loop."""
    with pytest.warns(UserWarning, match="no thread index at"):
        saved = await _unloaded_home(tmp_path, 30)
    reads: list[str] = []
    load = ThreadStore.load_since  # the index's read of a record

    def counted(self: ThreadStore, thread_id: str, cursor: Any) -> Any:
        reads.append(thread_id)
        return load(self, thread_id, cursor)

    monkeypatch.setattr(ThreadStore, "load_since", counted)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        first = await client.request("thread/list", {"limit": 200})
        assert [thread["id"] for thread in first["data"]] == [meta.thread_id for meta in reversed(saved)]
        second = await client.request("thread/list", {"searchTerm": "task 1", "sortDirection": "asc"})
        assert [thread["preview"] for thread in second["data"]][:3] == ["task 1", "task 10", "task 11"]
        assert reads == []
        # The positive control: a record another program changed is read again, and wins: at
        # once when the listing shows it, and within FULL_CHECK_EVERY seconds for any listing.
        rename(harness.home, saved[5], "renamed elsewhere")
        shown = await client.request("thread/list", {})
        assert shown["data"][24]["id"] == saved[5].thread_id and shown["data"][24]["name"] == "renamed elsewhere"
        assert reads == [saved[5].thread_id]
        rename(harness.home, saved[6], "renamed unseen")
        await trio.sleep(FULL_CHECK_EVERY)
        found = await client.request("thread/list", {"searchTerm": "UNSEEN"})
        assert [thread["id"] for thread in found["data"]] == [saved[6].thread_id]
        assert reads == [saved[5].thread_id, saved[6].thread_id]


async def test_other_requests_are_answered_while_a_listing_waits_for_the_disk(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record read blocks (a slow disk); another client's request is answered meanwhile,
    and the listing then answers with what the record says. Before the index the read
    ran on the event loop, and nothing was answered until it returned."""
    with pytest.warns(UserWarning, match="no thread index at"):
        saved = await _unloaded_home(tmp_path, 5)
    target = saved[2]
    entered, release = threading.Event(), threading.Event()
    load = ThreadStore.load_since  # the index's read of a record

    def slow(self: ThreadStore, thread_id: str, cursor: Any) -> Any:
        if thread_id == target.thread_id:
            entered.set()
            release.wait(5)
        return load(self, thread_id, cursor)

    async with app_server(tmp_path) as harness:
        lister, other = await harness.client(), await harness.client()
        await lister.request("thread/list", {})
        rename(harness.home, target, "slow disk")
        monkeypatch.setattr(ThreadStore, "load_since", slow)
        answers: list[Json] = []

        async def listing() -> None:
            answers.append(await lister.request("thread/list", {}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listing)
            assert await off_loop(lambda: entered.wait(5))
            assert (await other.request("model/list", {}))["data"]
            assert answers == []  # the listing still waits for its read
            release.set()
        assert [thread["name"] for thread in answers[0]["data"]] == [None, None, "slow disk", None, None]


async def test_two_servers_on_one_home_list_each_others_threads(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Each server has its own index writer; SQLite's lock serializes them."""
    async with app_server(tmp_path) as first, app_server(tmp_path) as second:
        assert first.home == second.home
        one, two = await first.client(), await second.client()
        made = (await one.request("thread/start", {"model": "mock-model"}))["thread"]["id"]
        await run_turn(one, made, "made by the first")
        await one.request("thread/name/set", {"threadId": made, "name": "first's"})
        # The first's listing waits for its own index writer's pass: after it, the row is in
        # the shared file (another server sees a thread once its maker's writer has written it).
        mine = (await one.request("thread/list", {}))["data"][0]
        assert mine["status"] == {"type": "idle"} and mine["preview"] == "made by the first"  # from memory
        listed = await two.request("thread/list", {})
        assert [(thread["id"], thread["name"]) for thread in listed["data"]] == [(made, "first's")]
        assert listed["data"][0]["status"] == {"type": "notLoaded"}  # not loaded there: from the index


def test_a_thread_this_server_wrote_never_counts_as_older_than_the_server(tmp_path: Path) -> None:
    """The kernel stamps a file's mtime from its coarse clock, up to a tick behind the
    clock the server reads at start, so a thread the server writes at once can carry an
    mtime before the server's start (seen as a stray "no thread index" warning under
    load). The threads the server wrote itself are never "old"; the same files written
    by another program are (the positive control)."""
    home = tmp_path / "home"
    meta = save_thread(home, prompt="written just now")
    store = ThreadStore(home)
    conn = connect(home / "app-server" / "index.sqlite3", writer=True)
    try:
        settle_schema(conn)
        files = Files(home, store)
        since = time.time_ns() + 1_000_000_000  # the files are older than the server, as a tick behind
        assert catch_up(conn, files, (), full=True, since_ns=since, mine={meta.thread_id}).old == 0
        assert catch_up(conn, files, (meta.thread_id,), since_ns=since).old == 1
    finally:
        conn.close()


async def test_a_thread_the_server_creates_is_its_own_before_any_file_of_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """The index's writer thread may read the home while a new thread's rollout and
    record are written (a server's first thread/start races the index's opening): the
    thread is claimed as this server's before its first file exists, so it is never
    counted as an "old" thread (the stray 'no thread index ... built it from 1 threads'
    warning that failed tests/faults/test_serve_hostile_clients.py in CI)."""
    from trio_agent._rollout._writer import RolloutWriter

    claimed_at_write: list[bool] = []
    original_open = RolloutWriter.open.__func__  # type: ignore[attr-defined]
    async with app_server(tmp_path) as harness:
        index = harness.app.index

        def rollout_open(cls: type[RolloutWriter], config: ta.RolloutConfig, thread_id: str, *args: Any) -> Any:
            claimed_at_write.append(thread_id in index._mine)
            return original_open(cls, config, thread_id, *args)

        monkeypatch.setattr(RolloutWriter, "open", classmethod(rollout_open))
        original_before = harness.app.store.before_write

        def before_record(thread_id: str) -> None:
            if original_before is not None:
                original_before(thread_id)
            claimed_at_write.append(thread_id in index._mine and not harness.app.store._path(thread_id).exists())

        harness.app.store.before_write = before_record
        client = await harness.client()
        await client.request("thread/start", {"model": "mock-model"})
    assert claimed_at_write[:2] == [True, True]  # the rollout, then the record


async def test_writes_close_together_share_one_pass_and_a_listing_never_waits_for_the_delay(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass per record written (one per turn) was most of serve's CPU per warm turn
    (issue 30, ~3 ms each): the writes of WRITE_DELAY seconds share one pass. A listing
    still sees every write made before it, without waiting for the delay."""
    home = tmp_path / "home"
    saved = [save_thread(home, prompt=f"task {number}") for number in range(4)]
    passes: list[set[str]] = []
    step = ThreadIndex._step

    def counted(self: ThreadIndex, dirty: set[str], rebuild: str | None, full: bool) -> str | None:
        passes.append(set(dirty))
        return step(self, dirty, rebuild, full)

    monkeypatch.setattr(ThreadIndex, "_step", counted)
    index = ThreadIndex(home, ThreadStore(home), model="m", provider="openai")
    async with trio.open_nursery() as nursery:
        await nursery.start(index.run)
        with pytest.warns(UserWarning, match="no thread index at"):
            await index._sync()
        passes.clear()
        for meta in saved[:3]:
            index.touched(meta.thread_id)
            await trio.sleep(WRITE_DELAY / 10)
        assert passes == []
        await trio.sleep(WRITE_DELAY)
        assert passes == [{meta.thread_id for meta in saved[:3]}]
        index.touched(saved[3].thread_id)
        before = trio.current_time()
        await index._sync()  # what a listing waits for
        assert passes[1:] == [{saved[3].thread_id}] and trio.current_time() == before
        await index.aclose()
