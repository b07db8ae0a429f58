"""The thread store (issue 23, item 4): ``thread/list`` at 10,000 saved threads.

Setup: a real ``trio-agent serve --local --listen ws://127.0.0.1:0`` child process
(``--tree DIR``: the checkout whose server runs, e.g. ``/work/main`` for the contrast;
default this one) makes one thread with one turn; its record and rollout are the
template of ``--threads`` (default 10,000) saved threads written straight into a new
home (ids, times, cwd, preview, name, archived flag varied; about 25 a day over
``--threads / 25`` days, each file's and day folder's mtime set to its thread's time,
as a home that grew over months). Then, with two WebSocket clients of the same server:

- start: a new server on that home (no index yet: it is built), its first
  ``thread/list`` answered, from spawning the process; ``restart``: the same with the
  index there (it checks every row's fingerprints);
- ``thread/list`` with ``limit`` 25 and 200 (default filters and sort), then a
  ``searchTerm`` and a deep ``cursor`` (5,000): one at a time, ``--lists`` of each
  (default 200) or as many as ``--budget`` seconds allow (at least 3): p50, p99;
- ``thread/read`` of an unloaded thread (a different one each time): the lookup by
  id (through the index, or a glob over every day folder before it) and its record;
- meanwhile the other client sends ``model/list`` every 10 ms: each one's wait, p50,
  p99 and the worst, while each kind of listing runs (and while the server starts),
  against the same with nothing else running (idle).

The issue's goal: list p50 <= 20 ms, no other request delayed > 50 ms.

    /work/main/.venv/bin/python -m benchmarks.thread_store [--threads 10000] [--lists 200] [--budget 60] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio_websocket

from ._common import ms, record_summary, summary, table

Json = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
PING_EVERY = 0.01
DAY = 86_400
KINDS: dict[str, dict[str, Any]] = {"limit 25": {"limit": 25}, "limit 200": {"limit": 200},
                                    "search, limit 25": {"limit": 25, "searchTerm": "project 3"},
                                    "cursor 5000, limit 25": {"limit": 25, "cursor": "5000"}}


class Rpc:
    """A bare JSON-RPC client on one WebSocket (notifications are read and dropped)."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self.ws = ws
        self.last_id = 0

    async def request(self, method: str, params: Json | None = None) -> Any:
        self.last_id += 1
        wanted = self.last_id
        await self.ws.send_message(json.dumps({"id": wanted, "method": method, "params": params or {}}))
        while True:
            message = json.loads(await self.ws.get_message())
            if message.get("id") == wanted and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]


@asynccontextmanager
async def client(url: str) -> AsyncIterator[Rpc]:
    async with trio_websocket.open_websocket_url(url, max_message_size=64 << 20) as ws:
        rpc = Rpc(ws)
        await rpc.request("initialize", {"clientInfo": {"name": "bench", "title": "bench", "version": "1"}})
        await ws.send_message(json.dumps({"method": "initialized"}))
        yield rpc


@attrs.define
class Served:
    url: str
    spawned: float  # trio.current_time() when the process was started


@asynccontextmanager
async def serve(tree: Path, home: Path, workspace: Path) -> AsyncIterator[Served]:
    """``trio-agent serve --local`` of ``tree`` on ``home``; SIGTERM when leaving."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    env.update(PYTHONPATH=str(tree), CODEX_HOME=str(home / "no-codex"))
    command = [sys.executable, "-m", "trio_agent", "serve", "--local", "--home", str(home), "--workspace",
               str(workspace), "--listen", "ws://127.0.0.1:0"]
    log = home.parent / "serve.stderr"
    with log.open("wb") as stderr:
        spawned = trio.current_time()
        process = await trio.lowlevel.open_process(command, env=env, cwd=tree, stdin=subprocess.DEVNULL,
                                                   stderr=stderr)  # cwd: ``-m`` puts it first on sys.path
    try:
        while True:
            match = re.search(r"listening on ws://127\.0\.0\.1:(\d+)", log.read_text())
            if match or process.poll() is not None:
                break
            await trio.sleep(0.005)
        if not match:
            raise RuntimeError(f"trio-agent serve exited: {log.read_text()}")
        yield Served(f"ws://127.0.0.1:{match.group(1)}", spawned)
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


# -- the saved threads ---------------------------------------------------------------------


async def template(tree: Path, work: Path) -> tuple[str, list[Json], list[Json]]:
    """One real thread (one turn on the local model): its id, record lines, rollout lines."""
    home = work / "template-home"
    home.mkdir()
    async with serve(tree, home, work) as served, client(served.url) as rpc:
        thread_id = (await rpc.request("thread/start", {}))["thread"]["id"]
        await rpc.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "template",
                                                                                "text_elements": []}]})
        for _ in range(200):  # until the turn's record line is written
            read = await rpc.request("thread/read", {"threadId": thread_id, "includeTurns": True})
            if read["thread"]["turns"] and read["thread"]["turns"][-1]["status"] != "inProgress":
                break
            await trio.sleep(0.05)
    record = home / "app-server" / "threads" / f"{thread_id}.jsonl"
    rollout = next((home / "sessions").rglob(f"rollout-*-{thread_id}.jsonl"))
    return thread_id, _lines(record), _lines(rollout)


def _lines(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def generate(home: Path, count: int, thread_id: str, record: list[Json], rollout: list[Json]) -> list[str]:
    """``count`` copies of the template thread (see the module docstring); their ids."""
    from trio_agent._ids import uuid7

    now = int(time.time())
    spread = max(count // 25, 1) * DAY
    record_text = "\n".join(json.dumps(line) for line in record)
    rollout_text = "\n".join(json.dumps(line) for line in rollout)
    threads = home / "app-server" / "threads"
    threads.mkdir(parents=True)
    folders: dict[Path, int] = {}
    ids = []
    for number in range(count):
        created = now - spread + number * spread // count
        new_id = str(uuid7())
        ids.append(new_id)
        project = f"/work/project {number % 7}"
        lines = [json.loads(line) for line in record_text.replace(thread_id, new_id).splitlines()]
        history = [json.loads(line) for line in rollout_text.replace(thread_id, new_id).splitlines()]
        for line in history:
            if line.get("type") == "session_meta":
                line["payload"].update(cwd=project, timestamp=time.strftime("%Y-%m-%dT%H:%M:%S.000Z",
                                                                            time.gmtime(created)))
        for line in lines:
            if line.get("type") == "meta":
                line["meta"].update(created_at=created, cwd=project, preview=f"task {number} in project {number % 7}",
                                    name=f"named {number}" if number % 10 == 0 else None,
                                    archived=number % 20 == 0)
            elif line.get("type") == "turn":
                line["turn"].update(started_at_ms=created * 1000, completed_at_ms=created * 1000 + 5000)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(created))
        folder = home / "sessions" / time.strftime("%Y/%m/%d", time.localtime(created))
        folder.mkdir(parents=True, exist_ok=True)
        rollout_path = folder / f"rollout-{stamp}-{new_id}.jsonl"
        rollout_path.write_text("".join(json.dumps(line) + "\n" for line in history))
        record_path = threads / f"{new_id}.jsonl"
        record_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        for path in (rollout_path, record_path):
            os.utime(path, (created + 5, created + 5))
        folders[folder] = created + 5
    for folder, mtime in folders.items():
        os.utime(folder, (mtime, mtime))
    os.utime(threads, (now - 60, now - 60))
    return ids


# -- measuring ---------------------------------------------------------------------------


@attrs.define
class Pinger:
    """``model/list`` every ``PING_EVERY`` s; each one's (sent at, wait)."""

    rpc: Rpc
    waits: list[tuple[float, float]] = attrs.field(factory=list)

    async def run(self) -> None:
        while True:
            start = trio.current_time()
            await self.rpc.request("model/list", {})
            self.waits.append((start, trio.current_time() - start))
            await trio.sleep(PING_EVERY)

    def between(self, start: float, end: float) -> list[float]:
        return [wait for sent, wait in self.waits if start <= sent < end]


async def first_list(tree: Path, home: Path, work: Path) -> tuple[float, list[float]]:
    """Spawn to the first ``thread/list`` answered; the pings' waits meanwhile."""
    async with serve(tree, home, work) as served, client(served.url) as lister, client(served.url) as other:
        pinger = Pinger(other)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pinger.run)
            begin = trio.current_time()
            await lister.request("thread/list", {"limit": 25})
            end = trio.current_time()
            await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        return end - served.spawned, pinger.between(begin, end)


async def listings(tree: Path, home: Path, work: Path, lists: int, budget: float,
                   ids: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    """Per kind of listing: its times, and the pings' waits while it ran (``idle``: none
    ran); ``read by id``: ``thread/read`` of unloaded threads (``ids``, in a shuffled order)."""
    results: dict[str, tuple[list[float], list[float]]] = {}
    async with serve(tree, home, work) as served, client(served.url) as lister, client(served.url) as other:
        await lister.request("thread/list", {"limit": 25})  # started and in step
        pinger = Pinger(other)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pinger.run)
            begin = trio.current_time()
            await trio.sleep(2.0)
            results["idle"] = ([], pinger.between(begin, trio.current_time()))
            reads = random.Random(23).sample(ids, min(len(ids), lists))
            kinds: list[tuple[str, dict[str, Any] | None]] = [*KINDS.items(), ("read by id", None)]
            for kind, params in kinds:
                times: list[float] = []
                begin = trio.current_time()
                while len(times) < lists and (len(times) < 3 or trio.current_time() - begin < budget):
                    start = trio.current_time()
                    if params is None:
                        await lister.request("thread/read", {"threadId": reads[len(times) % len(reads)]})
                    else:
                        await lister.request("thread/list", params)
                    times.append(trio.current_time() - start)
                results[kind] = (times, pinger.between(begin, trio.current_time()))
            nursery.cancel_scope.cancel()
    return results


def waits_cells(waits: list[float]) -> list[str]:
    if not waits:
        return ["-", "-", "-", "0"]
    p50, p99, n = summary(waits)
    return [ms(p50), ms(p99), ms(max(waits)), str(n)]


async def measure(args: argparse.Namespace, work: Path) -> None:
    tree = args.tree
    generating = time.perf_counter()
    thread_id, record, rollout = await template(tree, work)
    home = work / "home"
    ids = generate(home, args.threads, thread_id, record, rollout)
    print(f"tree {tree}: {args.threads} saved threads generated in {time.perf_counter() - generating:.1f} s")
    start, start_waits = await first_list(tree, home, work)
    restart, restart_waits = await first_list(tree, home, work)
    results = await listings(tree, home, work, args.lists, args.budget, ids)
    rows = [["start (no index): spawn to first list", ms(start), "", "", "", *waits_cells(start_waits)],
            ["restart (index there): spawn to first list", ms(restart), "", "", "", *waits_cells(restart_waits)]]
    for kind, (times, waits) in results.items():
        cells = [ms(summary(times)[0]), ms(summary(times)[1]), str(len(times))] if times else ["", "", ""]
        what = {"idle": "nothing else running", "read by id": "thread/read of an unloaded thread"}.get(kind)
        rows.append([what or f"thread/list {kind}", "", *cells,
                     *waits_cells(waits)])
    print(table(f"thread/list at {args.threads} saved threads (ms; model/list from another client every 10 ms)",
                ["what", "once", "list p50", "list p99", "lists", "model/list p50", "p99", "worst", "n"], rows))
    worst = max((max(waits) for times, waits in results.values() if times and waits), default=0.0)
    record_summary([
        [f"thread/list p50, {args.threads} threads, limit 25", f"{ms(summary(results['limit 25'][0])[0])} ms",
         "-", "-", "<= 20 ms"],
        [f"thread/list p50, {args.threads} threads, limit 200", f"{ms(summary(results['limit 200'][0])[0])} ms",
         "-", "-", "<= 20 ms"],
        [f"thread/read p50, {args.threads} threads, unloaded", f"{ms(summary(results['read by id'][0])[0])} ms",
         "-", "-", "-"],
        ["another request's worst wait during lists", f"{ms(worst)} ms", "-", "-", "<= 50 ms"],
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--lists", type=int, default=200)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per kind of listing at most")
    parser.add_argument("--tree", default=str(REPO), help="the checkout whose trio-agent serve runs")
    args = parser.parse_args(argv)
    args.tree = Path(args.tree).resolve()
    work = Path(tempfile.mkdtemp(prefix="thread-store-"))
    try:
        (work / "workspace").mkdir()
        trio.run(measure, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
