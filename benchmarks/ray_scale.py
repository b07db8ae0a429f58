"""N agents on a local Ray pool (2 actors) beside the same N agents in one process.

The model is the same scripted Responses server for both, in a process of its own on
127.0.0.1: a warmup is answered at once; a prompt waits ``--think-ms`` and then streams
``--deltas`` text deltas. Every agent opens, runs one prompt and closes. Measured, in
the driver, on one clock:

- ``first token``: from submitting the agent (``open_agent`` in one process,
  ``pool.start`` on the pool) to its first ``assistant.delta`` event reaching the
  caller (``agent.events``, or the pool's event channel), for one agent at a time
  (``single``: the cost of one trip through the distribution layer) and for a burst
  of ``--concurrency`` agents started together (``burst``);
- ``throughput``: ``--agents`` agents, at most ``--concurrency`` at once, agents per
  second from the first submission to the last result, in ``--rounds`` rounds per side
  that alternate between one process and the pool (a new pool for each round, warmed
  up by a discarded round), added up: a change in the other work's load falls on both
  sides.

The cost of the distribution layer is reported as the difference in first-token p50
and the throughput ratio. One machine runs everything (Ray's daemons, the driver, the
actors and the model server share its cores), so compare the rows with each other.

The throughput ratio depends on how many cores are free, which on a shared machine is
the other work's load, not the pool's. So the CPU each process spends per agent is
reported too (``/proc``: the driver, the actors, the model server, and Ray's daemons
and idle workers), and from it the throughput the machine would allow idle: each
process runs one event loop (at most one core), and all of them share the machine's
cores -- the ratio to read on a quiet machine, and the bound a loaded one cannot beat.

The pool's events reach the driver in batches; its consumer takes what is waiting at
once (``receive_nowait``), as ``agent.events`` does in one process, instead of a pass of
the driver's loop per event (``--consumer each`` measures that: a Trio memory channel's
``receive`` is a schedule point each time).

    python -m benchmarks.ray_scale --agents 400 --concurrency 64 [--consumer each]
    python -m benchmarks.ray_scale --address auto ...     (an existing cluster)
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeConnection, FakeResponsesServer, frames

from ._ray_measure import PARTS, Bulk, Round, Runner, ideal, parts, total_cpu

# -- the model server (its own process: ``--serve``) ---------------------------------------


async def _answer(conn: FakeConnection, think: float, deltas: int) -> None:
    count = 0
    while True:
        request = await conn.next_request()
        count += 1
        if request.get("generate") is False:
            await conn.send_warmup(f"warm-{count}")
            continue
        await trio.sleep(think)
        response_id = f"resp-{count}"
        message = frames.assistant_message("x" * deltas, item_id=f"msg_{response_id}", phase="final_answer")
        await conn.send(frames.response_created(response_id))
        await conn.send(frames.output_item_added(0, {**message, "status": "in_progress", "content": []}))
        for _ in range(deltas):
            await conn.send(frames.text_delta(0, "x"))
        await conn.send(frames.output_item_done(0, message))
        await conn.send(frames.completed(response_id, [message]))


async def _serve_connection(conn: FakeConnection, think: float, deltas: int) -> None:
    try:
        await _answer(conn, think, deltas)
    except ClientDisconnected:
        return  # the agent closed


async def serve(think: float, deltas: int) -> None:
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        print(server.url, flush=True)
        while True:
            try:
                conn = await server.accept()
            except trio.BrokenResourceError:
                continue
            nursery.start_soon(_serve_connection, conn, think, deltas)


# -- measuring ----------------------------------------------------------------------------


def _config(url: str, workspace: Path) -> ta.AgentConfig:
    return ta.AgentConfig(
        auth="bench",
        workspace=workspace,
        thinking=ta.Thinking.LOW,
        responses=ta.Responses(websocket_url=url, profile=ta.Profile.OPENAI),
    )


def local_runner(url: str, workspace: Path) -> Runner:
    async def run(count: int, concurrency: int) -> Round:
        result = Round()
        limiter = trio.CapacityLimiter(concurrency)

        async def one() -> None:
            async with limiter, trio.open_nursery() as nursery:
                submitted = trio.current_time()
                async with ta.open_agent(_config(url, workspace)) as agent:
                    nursery.start_soon(_first_delta, agent.events, submitted, result)
                    turn = await agent.prompt("hello")
                    try:
                        await turn.result()
                    except ta.AgentError:
                        result.failed += 1

        began = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(one)
        result.wall = trio.current_time() - began
        return result

    return run


async def _first_delta(events: ta.AgentEvents, submitted: float, result: Round) -> None:
    seen = False
    async for event in events:
        if not seen and event.kind is ta.EventKind.ASSISTANT_DELTA:
            result.first_token.append(trio.current_time() - submitted)
            seen = True


def ray_runner(url: str, workspace: Path, pool: Any, *, drain: bool = True) -> Runner:
    from trio_agent.ray import AgentTask, TaskEvent, TaskStatus

    async def run(count: int, concurrency: int) -> Round:
        result = Round()
        submitted: dict[str, float] = {}
        send, receive = trio.open_memory_channel[TaskEvent](1024)

        async def watch() -> None:
            seen: set[str] = set()

            def note(item: TaskEvent) -> None:
                if item.task_id not in seen and item.event.kind is ta.EventKind.ASSISTANT_DELTA:
                    seen.add(item.task_id)
                    result.first_token.append(trio.current_time() - submitted[item.task_id])

            async for item in receive:
                note(item)
                # What else is waiting, without a pass of the loop each (docs/ray.md): a
                # batch of events arrives at once ("--consumer each": one pass per event).
                while drain:
                    try:
                        item = receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    note(item)

        limiter = trio.CapacityLimiter(concurrency)  # the same bound as in one process

        async def one() -> None:
            task = AgentTask(_config(url, workspace), prompts=["hello"])
            async with limiter:
                submitted[task.task_id] = trio.current_time()
                done = await pool.run(task, events=send)
            if done.status is not TaskStatus.COMPLETED:
                result.failed += 1

        async with trio.open_nursery() as outer:
            outer.start_soon(watch)
            began = trio.current_time()
            async with send, trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(one)
            result.wall = trio.current_time() - began
        return result

    return run


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latencies(run: Runner, args: argparse.Namespace) -> dict[str, float]:
    """The first-token rows (after a discarded round: imports, JS engine, connections)."""
    await run(args.concurrency, args.concurrency)
    single = Round()
    for _ in range(args.single):
        single.first_token += (await run(1, 1)).first_token
    burst = await run(args.concurrency, args.concurrency)
    return {
        "single_p50_ms": _ms(single.first_token, 0.5),
        "burst_p50_ms": _ms(burst.first_token, 0.5),
        "burst_p99_ms": _ms(burst.first_token, 0.99),
        "failed": float(burst.failed),
    }


# -- main ---------------------------------------------------------------------------------


def _start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.ray_scale",
        "--serve",
        "--think-ms",
        str(args.think_ms),
        "--deltas",
        str(args.deltas),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def _compare(args: argparse.Namespace, url: str, workspace: Path, server: int) -> dict[str, Any]:
    from trio_agent.ray import open_ray_pool

    load = os.getloadavg()[0]
    local_run, local_bulk, pool_bulk = local_runner(url, workspace), Bulk(), Bulk()
    local_latency = await latencies(local_run, args)
    pool_latency: dict[str, float] = {}
    # The throughput rounds alternate, so that a change in the machine's load (other work)
    # falls on both sides: one process's round runs with no pool open (Ray initialised,
    # as before the pool), then a pool is opened for the pool's round and closed again.
    for _ in range(args.rounds):
        await local_bulk.round(local_run, functools.partial(parts, server, ()), args)
        async with open_ray_pool(num_actors=args.actors, agents_per_actor=-(-args.concurrency // args.actors)) as pool:
            pids = tuple(actor.pid for actor in pool.actors)
            pool_run = ray_runner(url, workspace, pool, drain=args.consumer == "drain")
            if pool_latency:
                await pool_run(args.concurrency, args.concurrency)  # a new pool's warm-up, discarded
            else:
                pool_latency = await latencies(pool_run, args)
            await pool_bulk.round(pool_run, functools.partial(parts, server, pids), args)
            actors = await pool.actor_statistics()
    local, distributed = local_bulk.row(local_latency), pool_bulk.row(pool_latency)
    cores = os.cpu_count() or 1
    ideal_local, ideal_pool = ideal(local, 1, cores), ideal(distributed, args.actors, cores)
    # With as many idle cores as it takes: only one core per event loop bounds each.
    free_local, free_pool = ideal(local, 1, math.inf), ideal(distributed, args.actors, math.inf)
    return {
        "settings": {
            "agents": args.agents,
            "concurrency": args.concurrency,
            "actors": args.actors,
            "rounds": args.rounds,
            "think_ms": args.think_ms,
            "deltas": args.deltas,
            "cpus": cores,
            "load_before": round(load, 1),
            "load_after": round(os.getloadavg()[0], 1),
            "consumer": args.consumer,
        },
        "one_process": local,
        "ray_pool": distributed,
        "actor_peak_rss_mib": [round(a.peak_rss_bytes / 2**20, 1) for a in actors if a is not None],
        "cost": {
            "single_first_token_ms": distributed["single_p50_ms"] - local["single_p50_ms"],
            "burst_first_token_p50_ms": distributed["burst_p50_ms"] - local["burst_p50_ms"],
            "throughput_ratio": distributed["agents_per_s"] / local["agents_per_s"],
            "cpu_ms_per_agent": distributed["cpu_ms_per_agent"] - local["cpu_ms_per_agent"],
        },
        "ideal": {
            "one_process": ideal_local,
            "ray_pool": ideal_pool,
            "ratio": ideal_pool / ideal_local,
            "unbounded_one_process": free_local,
            "unbounded_ray_pool": free_pool,
            "unbounded_ratio": free_pool / free_local,
            "unbounded_pool_cores": free_pool * total_cpu(distributed),
        },
    }


def _report(data: dict[str, Any]) -> str:
    s, local, ray_, cost, best = data["settings"], data["one_process"], data["ray_pool"], data["cost"], data["ideal"]
    lines = [
        f"{s['rounds']} x {s['agents']} agents per side (alternating), {s['concurrency']} at once, "
        f"{s['actors']} actors, think {s['think_ms']} ms, "
        f"{s['deltas']} deltas, {s['cpus']} CPUs, load average {s['load_before']} before, {s['load_after']} after, "
        f"events consumed {'in batches' if s['consumer'] == 'drain' else 'one per pass of the loop'}",
        f"{'':14}{'single p50':>12}{'burst p50':>12}{'burst p99':>12}{'agents/s':>10}{'cpu/agent':>11}{'failed':>8}",
    ]
    for name, row in (("one process", local), ("ray pool", ray_)):
        lines.append(
            f"{name:14}{row['single_p50_ms']:>10.1f}ms{row['burst_p50_ms']:>10.1f}ms"
            f"{row['burst_p99_ms']:>10.1f}ms{row['agents_per_s']:>10.1f}{row['cpu_ms_per_agent']:>9.1f}ms"
            f"{int(row['failed']):>8}"
        )
    lines.append(
        f"distribution cost: {cost['single_first_token_ms']:+.1f} ms first token (one agent), "
        f"{cost['burst_first_token_p50_ms']:+.1f} ms (burst p50), throughput x{cost['throughput_ratio']:.2f}, "
        f"{cost['cpu_ms_per_agent']:+.1f} ms CPU per agent (driver + actors); "
        f"actor peak RSS {data['actor_peak_rss_mib']} MiB"
    )
    lines.append(
        "CPU per agent, by process (ms): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{part} {row[f'cpu_ms_{part}']:.2f}" for part in PARTS)
            for name, row in (("one process", local), ("ray pool", ray_))
        )
    )
    lines.append(
        f"ideal on {s['cpus']} idle cores at these CPU costs (one core per process at most): one process "
        f"{best['one_process']:.0f}/s, pool {best['ray_pool']:.0f}/s: x{best['ratio']:.2f} at best here "
        f"(measured x{cost['throughput_ratio']:.2f} at load {s['load_before']}-{s['load_after']}); with "
        f"enough idle cores: one process {best['unbounded_one_process']:.0f}/s, pool "
        f"{best['unbounded_ray_pool']:.0f}/s on {best['unbounded_pool_cores']:.1f} cores: "
        f"x{best['unbounded_ratio']:.2f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="throughput rounds of --agents agents per side, alternating one process and the pool",
    )
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--single", type=int, default=20, help="one-at-a-time agents for the single p50")
    parser.add_argument("--think-ms", type=float, default=20.0)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--address", default=None, help="an existing Ray cluster (default: start a local one)")
    parser.add_argument(
        "--consumer",
        choices=("drain", "each"),
        default="drain",
        help="the pool's event consumer: take what waits at once (drain), or one event per "
        "receive (each: a pass of the driver's loop per event)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(serve, args.think_ms / 1000, args.deltas)
        return 0
    try:
        import ray
    except ModuleNotFoundError:
        print("ray_scale: Ray is not installed here (pip install -e '.[ray]'); skipped")
        return 0

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(
            address="local", num_cpus=args.actors, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
    server, url = _start_server(args)
    try:
        with tempfile.TemporaryDirectory() as workspace:
            data = trio.run(_compare, args, url, Path(workspace), server.pid)
    finally:
        server.terminate()
        server.wait(10)
        ray.shutdown()
    print(json.dumps(data, indent=2) if args.json else _report(data))
    _summary(data)
    return 0


def _summary(data: dict[str, Any]) -> None:
    """``run_all``'s rows: the pool (every event streamed to the driver) against one
    process, measured and as the machine's cores allow at the measured CPU costs."""
    from ._common import record_summary

    s, local, pool, cost, best = data["settings"], data["one_process"], data["ray_pool"], data["cost"], data["ideal"]
    record_summary(
        [  # metric names stable across runs (the README table keys rows by them)
            [
                f"Ray pool ({s['actors']} actors, events streamed), agents/s, measured",
                f"{pool['agents_per_s']:.0f}/s at load {s['load_before']}-{s['load_after']}",
                f"{local['agents_per_s']:.0f}/s",
                f"x{cost['throughput_ratio']:.2f}",
                ">= x1.5",
            ],
            [
                "Ray pool, agents/s this machine allows idle (its cores, at the CPU costs measured)",
                f"{best['ray_pool']:.0f}/s on {s['cpus']} cores",
                f"{best['one_process']:.0f}/s",
                f"x{best['ratio']:.2f}",
                "-",
            ],
            [
                "Ray pool, agents/s with enough idle cores (at the CPU costs measured)",
                f"{best['unbounded_ray_pool']:.0f}/s on {best['unbounded_pool_cores']:.1f} cores",
                f"{best['unbounded_one_process']:.0f}/s",
                f"x{best['unbounded_ratio']:.2f}",
                ">= x1.5 (a quiet machine)",
            ],
            [
                "Ray pool, CPU per agent (driver + actors)",
                f"{pool['cpu_ms_per_agent']:.1f} ms",
                f"{local['cpu_ms_per_agent']:.1f} ms",
                f"{pool['cpu_ms_per_agent'] / local['cpu_ms_per_agent']:.2f}x",
                "-",
            ],
            ["Ray pool, driver CPU per agent", f"{pool['cpu_ms_driver']:.2f} ms", "-", "-", "-"],
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
