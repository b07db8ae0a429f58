"""History-size costs (issue 13, item 2).

A real two-turn session's snapshot is extended with synthetic history items
(alternating user and assistant messages, ~80 bytes of JSON each, so that 10,000 of
them stay under the auto-compact limit of a 272k-token window) and resumed with
``AgentConfig(resume=...)`` against ``trio_agent.cli._bench``'s child-process server
(0 ms delay, no think time, 20 deltas). For 100, 1,000 and 10,000 items it measures:

- **warm turn CPU** (incremental): this process's CPU from ``prompt()`` to
  ``turn.result()`` for follow-on turns chained on the previous response, p50, beside a
  bare trio-websocket client doing the same frames (the agent's own warm body);
- **first turn after resume**: the resumed agent's first turn (a full replay of every
  item; a new agent each time, so a new connection too), CPU and wall
  time, beside the bare client sending the same captured body (``json.dumps`` of it
  included) on a warm socket and reading the answer -- p50 of 11 each, the two
  alternating turn by turn so that a busy machine weighs on both alike; plus the
  ``AgentConfig(resume=...)`` construction (snapshot checks) on its own;
- **fork() / fork_from()**: the synchronous call (it fixes the boundary, the path and the
  parent's current settings; the child's config -- a new session id, the copy of the
  parent's -- is built on entering the block), and opening + closing the fork
  (``async with``, which includes that), in us;
- **snapshot**: ``result.snapshot()``, ``.to_json()`` and ``.to_json_text()`` against
  ``json.dumps`` of the same history list (the floor), interleaved: each of 30 reps times
  the four in turn (the order rotated per rep); the times are p50s, the ratios the p50 of
  each rep's own ratio (timed one after the other, 20 reps each, run_all's 10,000-item row
  once read 1.99x for a copy that is ~1.0x: a burst of other work inside to_json's reps).

``--profile`` prints cProfile's top functions by self time for each 10,000-item outlier
(first turn after resume, warm turn, fork, to_json).

    /work/main/.venv/bin/python -m benchmarks.history_size [--sizes 100,1000,10000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio

import trio_agent as ta

from ._common import (
    Settings,
    Timing,
    ms,
    open_bare_websocket,
    open_bench_server,
    open_warm_agent,
    record_summary,
    summary,
    table,
)

WARM_TURNS = 60
FIRST_TURNS = 11


def synthetic_items(count: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(count):
        if i % 2 == 0:
            items.append({"type": "message", "id": f"msg_u{i}", "role": "user", "content": f"q{i}"})
        else:
            items.append({"id": f"msg_a{i}", "type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": f"a{i}"}]})
    return items


def config(server: Any, workspace: str, resume: ta.SessionSnapshot | None = None) -> ta.AgentConfig:
    return ta.AgentConfig(auth="bench", workspace=workspace, responses=ta.Responses(websocket_url=server.ws_url,
                                                                                profile=ta.Profile.OPENAI),
                          tools=ta.Tools.empty(), resume=resume)


async def base_snapshot(server: Any, workspace: str) -> dict[str, Any]:
    async with open_warm_agent(config(server, workspace)) as agent:
        await agent.turn("first")
        await agent.turn("second")
        snapshot_result = await (await agent.agent.prompt("third")).result()
        return snapshot_result.snapshot().to_json()


def grown(base: dict[str, Any], count: int) -> ta.SessionSnapshot:
    history = list(base["history"])
    history[2:2] = synthetic_items(count - len(history))  # keep the real context items first
    return ta.SessionSnapshot.from_json({**base, "history": history})


SNAPSHOT_REPS = 30


def timeit_us(fn: Callable[[], object], reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def one_size(server: Any, workspace: str, base: dict[str, Any], count: int, profile: bool) -> dict[str, Any]:
    snapshot = grown(base, count)
    out: dict[str, Any] = {"items": len(snapshot.history)}
    out["config_us"] = timeit_us(lambda: config(server, workspace, snapshot), 5)
    first: list[Timing] = []
    bare_first: list[Timing] = []
    profiles: dict[str, cProfile.Profile] = {}
    async with open_bare_websocket(server.ws_url) as bare:
        # One discarded resumed turn (first-use caches) gives the body the bare client
        # sends; then the two alternate, turn by turn, so that both see the same load.
        async with open_warm_agent(config(server, workspace, snapshot)) as agent:
            await agent.turn("resumed")
        body = (await server.last_requests())["last"]["ws"]
        await bare.turn(body)  # discarded likewise
        for i in range(FIRST_TURNS + profile):
            async with open_warm_agent(config(server, workspace, snapshot)) as agent:
                prof = cProfile.Profile() if i == FIRST_TURNS else None  # only with profile
                if prof:
                    prof.enable()
                timing = await agent.turn("resumed")
                if prof:
                    prof.disable()
                    profiles["first turn after resume"] = prof
                    continue
                first.append(timing)
            bare_first.append(await bare.turn(body))
        out["first"], out["bare_first"] = first, bare_first
        out["body_bytes"] = len(json.dumps(body))
        async with open_warm_agent(config(server, workspace, snapshot)) as agent:
            result = await (await agent.agent.prompt("resumed")).result()
            await agent.turn()
            warm = [await agent.turn() for _ in range(WARM_TURNS)]
            warm_body = (await server.last_requests())["last"]["ws"]
            bare_warm = [await bare.turn(warm_body) for _ in range(WARM_TURNS)]
            out["warm"], out["bare_warm"] = warm, bare_warm
            if profile:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(20):
                    await agent.turn()
                prof.disable()
                profiles["warm turn (x20)"] = prof
            await _forks(agent.agent, result, out, profiles if profile else None)
            _snapshots(result, out, profiles if profile else None)
    out["profiles"] = profiles
    return out


async def _forks(agent: ta.Agent, result: ta.TurnResult, out: dict[str, Any],
                 profiles: dict[str, cProfile.Profile] | None) -> None:
    out["fork_us"] = timeit_us(agent.fork, 200)
    out["fork_from_us"] = timeit_us(lambda: agent.fork_from(result), 200)
    samples = []
    for _ in range(30):
        start = time.perf_counter()
        async with agent.fork():
            pass
        samples.append(time.perf_counter() - start)
    out["fork_open_us"] = statistics.median(samples) * 1e6
    if profiles is not None:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            agent.fork()
        prof.disable()
        profiles["fork() (x200)"] = prof


def _snapshots(result: ta.TurnResult, out: dict[str, Any], profiles: dict[str, cProfile.Profile] | None) -> None:
    snapshot = result.snapshot()
    history = snapshot.history
    # Interleaved: each of SNAPSHOT_REPS reps times all four, in an order rotated per rep,
    # so that a moment of other work (or a full collection brought on by the copies) weighs
    # on ours and the floor alike; the ratios are the medians of each rep's own ratio.
    calls: dict[str, Callable[[], object]] = {"snapshot_us": result.snapshot, "to_json_us": snapshot.to_json,
             "to_json_text_us": snapshot.to_json_text, "dumps_us": lambda: json.dumps(history)}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for rep in range(SNAPSHOT_REPS):
        for name in names[rep % 4:] + names[:rep % 4]:
            start = time.perf_counter()
            calls[name]()
            samples[name].append((time.perf_counter() - start) * 1e6)
    for name, values in samples.items():
        out[name] = statistics.median(values)
    for name in ("to_json_us", "to_json_text_us"):
        pairs = zip(samples[name], samples["dumps_us"], strict=True)
        out[name.replace("_us", "_x")] = statistics.median(a / b for a, b in pairs)
    if profiles is not None:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            snapshot.to_json()
        prof.disable()
        profiles["snapshot.to_json() (x10)"] = prof


def _top(name: str, prof: cProfile.Profile, limit: int = 12) -> str:
    entries = pstats.Stats(prof, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values())
    lines = [f"{name}: {total * 1000:.1f} ms profiled; top {limit} by self time:"]
    for (file, line, func), (_cc, nc, tt, ct, _c) in sorted(entries.items(), key=lambda kv: -kv[1][2])[:limit]:
        short = file.split("site-packages/")[-1].split("wt-bench/")[-1].split("lib/python3.11/")[-1]
        lines.append(f"  self {tt * 1000:8.2f} ms ({tt / total:4.0%})  cum {ct * 1000:8.2f} ms  {nc:7d} calls  "
                     f"{short}:{line}:{func}")
    return "\n".join(lines)


async def measure(sizes: list[int], profile: bool) -> str:
    results = []
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=20)) as server:
            base = await base_snapshot(server, workspace)
            for count in sizes:
                results.append(await one_size(server, workspace, base, count, profile and count == max(sizes)))
    return report(results)


def report(results: list[dict[str, Any]]) -> str:
    warm_rows, first_rows, fork_rows, snap_rows = [], [], [], []
    flat = statistics.median(t.cpu for t in results[0]["warm"])
    for r in results:
        n = r["items"]
        a, b = [t.cpu for t in r["warm"]], [t.cpu for t in r["bare_warm"]]
        a50, a99, count = summary(a)
        warm_rows.append([n, ms(a50), ms(a99), ms(statistics.median(b)), f"{a50 / statistics.median(b):.2f}",
                          f"{a50 / flat:.2f}", count])
        fa, fb = r["first"], r["bare_first"]
        cpu_a, cpu_b = statistics.median(t.cpu for t in fa), statistics.median(t.cpu for t in fb)
        wall_a, wall_b = statistics.median(t.total for t in fa), statistics.median(t.total for t in fb)
        first_rows.append([n, f"{r['body_bytes'] / 1e3:.0f}", f"{r['config_us'] / 1000:.2f}", ms(cpu_a), ms(cpu_b),
                           f"{cpu_a / cpu_b:.2f}", ms(wall_a), ms(wall_b), f"{wall_a / wall_b:.2f}", len(fa)])
        fork_rows.append([n, f"{r['fork_us']:.1f}", f"{r['fork_from_us']:.1f}", f"{r['fork_open_us']:.0f}"])
        snap_rows.append([n, f"{r['snapshot_us']:.0f}", f"{r['to_json_us']:.0f}", f"{r['to_json_text_us']:.0f}",
                          f"{r['dumps_us']:.0f}", f"{r['to_json_x']:.2f}", f"{r['to_json_text_x']:.2f}"])
    big, small = results[-1], results[0]
    big_cpu = statistics.median(t.cpu for t in big["first"]) / statistics.median(t.cpu for t in big["bare_first"])
    record_summary([
        [f"warm turn CPU, {big['items']} vs {small['items']} items", warm_rows[-1][1] + " ms", warm_rows[0][1] + " ms",
         f"{warm_rows[-1][5]}x", "flat (1.0x)"],
        [f"first turn after resume, {big['items']} items (cpu)", first_rows[-1][3] + " ms", first_rows[-1][4] + " ms",
         f"{big_cpu:.2f}x", "<= 1.5x"],
        [f"fork() / fork_from(), {big['items']} items", f"{big['fork_us']:.1f} / {big['fork_from_us']:.1f} us", "-",
         "-", "< 20 us"],
        [f"snapshot().to_json(), {big['items']} items", f"{big['to_json_us'] / 1000:.2f} ms",
         f"{big['dumps_us'] / 1000:.2f} ms", f"{big['to_json_x']:.2f}x", "<= 1.5x json.dumps"],
    ])
    out = [
        table("warm (incremental) turn CPU, ms, by history size (floor: bare client, same frames)",
              ["items", "ours p50", "p99", "floor p50", "x floor", "x ours@smallest", "n"], warm_rows), "",
        table("first turn after resume (full replay), p50 ms (floor: bare client sending the same body)",
              ["items", "body kB", "config ms", "cpu ours", "cpu floor", "x floor", "wall ours", "wall floor",
               "x floor", "n"], first_rows), "",
        table("fork, us (p50 of 200 calls; open+close: p50 of 30)",
              ["items", "fork()", "fork_from()", "async with fork()"], fork_rows), "",
        table("snapshot serialisation, us p50 of 30 interleaved (floor: json.dumps(history); x: p50 of per-rep ratios)",
              ["items", "snapshot()", "to_json()", "to_json_text()", "json.dumps", "to_json x", "text x"],
              snap_rows),
    ]
    for r in results:
        for name, prof in r["profiles"].items():
            out += ["", _top(f"profile at {r['items']} items, {name}", prof)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    print(trio.run(measure, [int(s) for s in args.sizes.split(",")], args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
