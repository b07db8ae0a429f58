"""``turn_overhead --wakes coldness|codecost``: why a warm turn after a 25 ms wait costs
more (``_wake_audit``'s module docstring has the findings).

- ``coldness``: at 0 ms RTT, 25 ms spent before every turn asleep, spinning (the core kept
  busy, the caches kept), or sweeping 32 MiB (the core busy, the caches flushed);
- ``codecost``: a warm WebSocket turn with and without 100 extra one-line functions (each
  its own code object) called once, interleaved, at 0 and 25 ms: what one more distinct
  function touched per turn costs, back to back and after the wait.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import trio_agent as ta

from ._common import Settings, open_bench_server
from ._rounds import interleave
from ._turn_audit import open_warm_pair

__all__ = ["codecost", "coldness"]

WAITS = ("none", "sleep", "spin", "sweep")  # how a turn's 25 ms wait before it is spent (0 ms RTT)
SWEEP = bytearray(32 << 20)  # larger than this machine's last-level cache share


def _wait(how: str) -> None:
    """25 ms spent before a turn: not at all, asleep (``sleep`` is awaited by the caller),
    spinning on the clock (the core stays busy and this process's caches stay as they are),
    or sweeping 32 MiB (the core stays busy, the caches are flushed)."""
    end = time.perf_counter() + 0.025
    if how == "spin":
        while time.perf_counter() < end:
            pass
    elif how == "sweep":
        view, at = memoryview(SWEEP), 0
        while time.perf_counter() < end:
            bytes(view[at : at + (1 << 22)])  # 4 MiB read and written, every cache line
            at = (at + (1 << 22)) % len(SWEEP)


def _waited(how: str, turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[tuple[float, float]]]:
    async def run() -> tuple[float, float]:
        if how == "sleep":
            await trio.sleep(0.025)
        else:
            _wait(how)
        cpu, start = time.thread_time(), trio.current_time()
        await turn()
        return trio.current_time() - start, time.thread_time() - cpu

    return run


async def coldness(rounds: int) -> str:
    """Why a turn after a 25 ms wait costs more: the idle core, or the caches?"""
    out = [
        f"warm turns at 0 ms RTT after 25 ms spent each way, api_events=False, {rounds} interleaved pairs per "
        f"row, p50 (thread CPU); load {os.getloadavg()[0]:.2f}"
    ]
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        with tempfile.TemporaryDirectory() as workspace:
            async with (
                open_bench_server(Settings(delay=0.0, think=0.0, deltas=20)) as server,
                open_warm_pair(server, workspace, transport) as (agent, bare),
            ):
                for how in WAITS:
                    ours, floor = await interleave([_waited(how, agent.turn), _waited(how, bare)], rounds)
                    turn, cpu = (
                        [statistics.median(t[i] for t in side) * 1e3 for side in (ours, floor)] for i in (0, 1)
                    )
                    out.append(
                        f"  {transport.value:<22} wait {how:<5}: turn {turn[0]:6.3f} vs {turn[1]:6.3f} ms "
                        f"(added {turn[0] - turn[1]:+.3f}), CPU {cpu[0]:.3f} vs {cpu[1]:.3f} ms "
                        f"(+{cpu[0] - cpu[1]:.3f}, {cpu[0] / cpu[1]:.2f}x)"
                    )
    out.append(f"load after {os.getloadavg()[0]:.2f}")
    return "\n".join(out)


def _one_liner(i: int) -> Callable[[int], int]:
    space: dict[str, Any] = {}
    exec(f"def f{i}(x):\n    return x + {i}\n", space)  # a code object of its own
    fn: Callable[[int], int] = space[f"f{i}"]
    return fn


def _with(extra: list[Callable[[int], int]], turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[float]]:
    async def run() -> float:
        cpu = time.thread_time()
        for fn in extra:
            fn(1)
        await turn()
        return time.thread_time() - cpu

    return run


async def codecost(rounds: int, extra: int = 100) -> str:
    """CPU per warm WebSocket turn with ``extra`` more distinct functions touched once."""
    fns = [_one_liner(i) for i in range(extra)]
    out = [
        f"CPU per warm WebSocket turn, api_events=False, with {extra} extra one-line functions called once per "
        f"turn or not, {rounds} interleaved pairs, p50 (thread CPU); load {os.getloadavg()[0]:.2f}"
    ]
    for rtt in (0.0, 0.025):
        with tempfile.TemporaryDirectory() as workspace:
            async with (
                open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server,
                open_warm_pair(server, workspace, ta.Transport.WEBSOCKET) as (agent, _),
            ):
                sides = await interleave([_with([], agent.turn), _with(fns, agent.turn)], rounds)
        a, b = (statistics.median(side) * 1e6 for side in sides)
        out.append(
            f"  rtt {rtt * 1000:g} ms: {a:.0f} -> {b:.0f} us ({b - a:+.0f}; {(b - a) / extra:.2f} us a function)"
        )
    out.append(f"load after {os.getloadavg()[0]:.2f}")
    return "\n".join(out)
