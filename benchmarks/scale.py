"""Many idle warmed agents in one process (issue 13, item 3).

For each N (default 1,000 and 10,000), in a fresh child process each (so RSS starts
from the same baseline): open N agents at once in one nursery (at most ``IN_FLIGHT`` =
1,000 of them connecting at a time, so 1,000 is "all at once") (WebSocket, no tools,
against ``trio_agent.cli._bench``'s child-process server with no injected delay), wait
until every one reported ``model.warmup.completed``, then read the process's RSS
(``/proc/self/status`` VmRSS) while they sit idle. The floor does the same with N bare
trio-websocket connections, each sending one ``generate: false`` warmup body and
reading its reply. Reported (tasks: live Trio tasks per agent or socket, each counting the
benchmark's own task that holds it open): time from the first open to all warm, RSS growth over
the process's baseline (measured after importing everything and opening and closing
one agent), and bytes per agent; ratios to the floor.

Each agent has a small task that waits for its warmup event and then returns (its
events are not drained afterwards, as an idle agent's would not be).

``--tracemalloc N`` instead opens N agents under ``tracemalloc`` (slow) and prints the
top allocation sites (file:line, grouped) of the idle agents, bytes per agent each.

    /work/main/.venv/bin/python -m benchmarks.scale [--counts 1000,10000] [--tracemalloc 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import trio
import trio_websocket

import trio_agent as ta

from ._common import Settings, bench_config, open_bench_server, record_summary, table


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


# At most this many agents (or sockets) are connecting at once: 10,000 simultaneous
# connects to one Python server on 2 busy cores outlast the agent's 30 s connect timeout.
IN_FLIGHT = 1000


async def open_agents(server: Any, workspace: str, count: int, on_warm: Any) -> None:
    """Open ``count`` agents (``IN_FLIGHT`` connecting at a time); call ``on_warm()`` once
    all are warm, then close them."""
    all_warm = trio.Event()
    done = trio.Event()
    warm = 0
    limiter = trio.CapacityLimiter(IN_FLIGHT)

    async def one() -> None:
        nonlocal warm
        token = object()
        await limiter.acquire_on_behalf_of(token)
        held = True
        try:
            async with ta.open_agent(bench_config(server, workspace)) as agent:
                async for event in agent.events:
                    if event.kind is ta.EventKind.MODEL_WARMUP_COMPLETED:
                        break
                    if event.kind is ta.EventKind.MODEL_WARMUP_FAILED:
                        raise RuntimeError(f"warmup failed: {event.payload}")
                limiter.release_on_behalf_of(token)
                held = False
                warm += 1
                if warm == count:
                    all_warm.set()
                await done.wait()
        finally:
            if held:
                limiter.release_on_behalf_of(token)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        await all_warm.wait()
        await on_warm()
        done.set()


async def open_bare(server: Any, count: int, on_warm: Any) -> None:
    all_warm = trio.Event()
    done = trio.Event()
    warm = 0
    body = json.dumps({"type": "response.create", "model": "gpt-5.5", "generate": False, "input": [], "store": True})
    limiter = trio.CapacityLimiter(IN_FLIGHT)

    async def one() -> None:
        nonlocal warm
        async with limiter:
            cm = trio_websocket.open_websocket_url(server.ws_url, max_message_size=64 << 20)
            ws = await cm.__aenter__()
            await ws.send_message(body)
            json.loads(await ws.get_message())
        try:
            warm += 1
            if warm == count:
                all_warm.set()
            await done.wait()
        finally:
            await cm.__aexit__(None, None, None)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        await all_warm.wait()
        await on_warm()
        done.set()


async def child(kind: str, count: int, trace: bool) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=1)) as server:
            await open_agents(server, workspace, 1, trio.lowlevel.checkpoint)  # imports, first-use caches
            await open_bare(server, 1, trio.lowlevel.checkpoint)
            base = rss_bytes()
            if trace:
                tracemalloc.start(25)
                before = tracemalloc.take_snapshot()
            start = trio.current_time()

            async def on_warm() -> None:
                result["seconds"] = trio.current_time() - start
                result["rss"] = rss_bytes() - base
                result["tasks"] = count_tasks()
                if trace:
                    result["top"] = _top(tracemalloc.take_snapshot().compare_to(before, "traceback"), count)

            if kind == "agents":
                await open_agents(server, workspace, count, on_warm)
            else:
                await open_bare(server, count, on_warm)
    return result


def count_tasks() -> int:
    """Every live Trio task of the run (the root task's tree)."""
    def walk(task: Any) -> int:
        return 1 + sum(walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

    return walk(trio.lowlevel.current_root_task())


def _short(frame: Any) -> str:
    name = frame.filename.split("site-packages/")[-1].split("wt-bench/")[-1].split("python3.11/")[-1]
    return f"{name}:{frame.lineno}"


def _package(filename: str) -> str:
    for name in ("trio_agent", "trio_websocket", "wsproto", "trio", "attr", "cattrs", "h11", "httpx", "benchmarks"):
        if f"/{name}/" in filename:
            return name
    return "other"


def _top(diffs: list[Any], count: int, limit: int = 20) -> list[str]:
    """Group the growth by the innermost trio_agent frame of each allocation (else the
    allocating line itself), and by the package that allocated."""
    total = sum(d.size_diff for d in diffs)
    by_site: dict[str, list[float]] = {}
    by_package: dict[str, float] = {}
    by_owner: dict[str, float] = {}
    for diff in diffs:
        frames = list(diff.traceback)  # oldest first
        ours = [f for f in frames if "/trio_agent/" in f.filename]
        alloc = frames[-1]
        key = f"{_short(ours[-1])} -> {_short(alloc)}" if ours and ours[-1] is not alloc else _short(alloc)
        entry = by_site.setdefault(key, [0.0, 0.0])
        entry[0] += diff.size_diff
        entry[1] += diff.count_diff
        owner = _short(ours[-1]) if ours else f"(no trio_agent frame) {_package(alloc.filename)}"
        by_owner[owner] = by_owner.get(owner, 0.0) + diff.size_diff
        package = _package(alloc.filename)
        by_package[package] = by_package.get(package, 0.0) + diff.size_diff
    lines = [f"traced growth {total / count:.0f} B/agent over {count} idle warmed agents "
             "(RSS per agent is higher: allocator overhead and fragmentation)",
             "by allocating package: " + ", ".join(
                 f"{k} {v / count:.0f} B" for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])),
             f"by innermost trio_agent frame (what made the runtime allocate), top {limit // 2}, per agent:"]
    for key, size in sorted(by_owner.items(), key=lambda kv: -kv[1])[: limit // 2]:
        lines.append(f"  {size / count:7.0f} B  {key}")
    lines.append(f"top {limit} sites (innermost trio_agent frame -> allocating line), per agent:")
    for key, (size, blocks) in sorted(by_site.items(), key=lambda kv: -kv[1][0])[:limit]:
        lines.append(f"  {size / count:7.0f} B  {blocks / count:5.1f} blocks  {key}")
    return lines


def run_child(kind: str, count: int, trace: bool = False) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.scale", "--child", kind, str(count)] + (["--trace"] if trace else [])
    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--counts", default="1000,10000")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(trio.run(child, args.child[0], int(args.child[1]), args.trace)))
        return 0
    if args.tracemalloc:
        result = run_child("agents", args.tracemalloc, trace=True)
        print("\n".join(result["top"]))
        print(f"live Trio tasks: {result['tasks']} for {args.tracemalloc} agents (incl. the benchmark's own)")
        return 0
    rows = []
    for count in (int(c) for c in args.counts.split(",")):
        wall = time.perf_counter()
        ours, bare = run_child("agents", count), run_child("bare", count)
        rows.append([count, f"{ours['seconds']:.2f}", f"{bare['seconds']:.2f}",
                     f"{ours['seconds'] / bare['seconds']:.2f}",
                     f"{ours['rss'] / 2**20:.0f}", f"{bare['rss'] / 2**20:.0f}", f"{ours['rss'] / count / 1e3:.1f}",
                     f"{bare['rss'] / count / 1e3:.1f}", f"{ours['rss'] / bare['rss']:.2f}",
                     f"{ours['tasks'] / count:.1f}", f"{bare['tasks'] / count:.1f}",
                     f"{time.perf_counter() - wall:.0f}"])
    last = rows[-1]
    record_summary([[f"{last[0]} idle warmed agents: RSS", f"{last[4]} MB ({last[6]} kB/agent)",
                     f"{last[5]} MB", f"{last[8]}x", "< 600 MB at 10,000"],
                    [f"{rows[0][0]} agents opened at once: all warm", f"{rows[0][1]} s", f"{rows[0][2]} s",
                     f"{rows[0][3]}x", "report"]])
    print(table(f"N idle warmed agents in one process vs N bare sockets (cpus: {os.cpu_count()})",
                ["N", "all warm s", "bare s", "x", "RSS MB", "bare MB", "kB/agent", "kB/bare", "x", "tasks/agent",
                 "tasks/bare", "bench s"],
                rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
