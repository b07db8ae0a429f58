"""Shared pieces of the benchmarks: statistics, the table, warm agent and bare clients.

The scripted server is ``trio_agent.cli._bench``'s child-process server (so this
process's CPU time is the client's alone); see ``open_bench_server``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio_websocket

import trio_agent as ta
from trio_agent.cli._bench._measure import bench_config, pct
from trio_agent.cli._bench._server import BenchServer, Settings, open_bench_server

__all__ = [
    "BareHttp", "BareWebSocket", "BenchServer", "Settings", "Timing", "WarmAgent", "bench_config",
    "open_bench_server", "paired_differences", "pct", "summary", "table",
]


@attrs.frozen
class Timing:
    """Seconds from submitting a turn: first text delta received, turn finished; its CPU."""

    first: float
    total: float
    cpu: float


def summary(values: Sequence[float]) -> tuple[float, float, int]:
    """(p50, p99, n) in the values' own unit."""
    return statistics.median(values), pct(list(values), 0.99), len(values)


def ms(value: float) -> str:
    return f"{value * 1000:.2f}"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A fixed-width table; numbers are printed as given (already formatted strings)."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [title]
    for j, row in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


class WarmAgent:
    """An open agent plus a consumer task that times each turn from the application's
    side (``async for event in agent.events``).

    The consumer does per event what the bare clients do per frame (they read each one,
    note the first text delta and the terminal): a kind compared by identity, a flag for
    the first delta; nothing counted. ``tap`` (profiling, the event counts of
    ``turn_overhead``) is called with every event when set."""

    def __init__(self, agent: ta.Agent, nursery: trio.Nursery) -> None:
        self.agent = agent
        self._first = trio.Event()
        self._first_pending = False  # the current turn's first delta is still to come
        self._first_at = 0.0
        self._terminal = trio.Event()
        self.warm = trio.Event()
        self.tap: Callable[[ta.AgentEvent], object] | None = None
        nursery.start_soon(self._watch)

    async def _watch(self) -> None:
        delta, completed, failed = ta.EventKind.ASSISTANT_DELTA, ta.EventKind.RUN_COMPLETED, ta.EventKind.RUN_FAILED
        warm = (ta.EventKind.MODEL_WARMUP_COMPLETED, ta.EventKind.MODEL_WARMUP_FAILED)
        async for event in self.agent.events:
            if self.tap is not None:
                self.tap(event)
            kind = event.kind
            if kind is delta:
                if self._first_pending:
                    self._first_pending = False
                    self._first_at = trio.current_time()
                    self._first.set()
            elif kind is completed or kind is failed:
                self._terminal.set()
            elif kind in warm:
                self.warm.set()

    async def turn(self, prompt: str = "hello") -> Timing:
        """One turn: prompt -> first delta received by the consumer -> ``turn.result()``.
        Returns once the consumer also received the terminal event (no overlap)."""
        self._first, self._terminal = trio.Event(), trio.Event()
        self._first_pending = True
        cpu, start = time.process_time(), trio.current_time()
        turn = await self.agent.prompt(prompt)
        await turn.result()
        total, cpu = trio.current_time() - start, time.process_time() - cpu
        await self._first.wait()
        await self._terminal.wait()
        return Timing(self._first_at - start, total, cpu)


@asynccontextmanager
async def open_warm_agent(config: ta.AgentConfig, *, wait_warm: bool = True) -> AsyncIterator[WarmAgent]:
    async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
        warm = WarmAgent(agent, nursery)
        if wait_warm and config.responses.transport is ta.Transport.WEBSOCKET and config.resume is None:
            await warm.warm.wait()
        yield warm
        nursery.cancel_scope.cancel()


class BareWebSocket:
    """The floor: an already-connected trio-websocket client doing the same frames
    (``json.dumps`` of the body out, ``json.loads`` of every frame in)."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self.ws = ws

    async def turn(self, body: dict[str, Any]) -> Timing:
        cpu, start = time.process_time(), trio.current_time()
        await self.ws.send_message(json.dumps(body))
        first = None
        while True:
            frame = json.loads(await self.ws.get_message())
            kind = frame["type"]
            if first is None and kind == "response.output_text.delta":
                first = trio.current_time() - start
            elif kind == "response.completed":
                assert first is not None
                return Timing(first, trio.current_time() - start, time.process_time() - cpu)


@asynccontextmanager
async def open_bare_websocket(url: str) -> AsyncIterator[BareWebSocket]:
    async with trio_websocket.open_websocket_url(url, max_message_size=64 << 20) as ws:
        yield BareWebSocket(ws)


class BareHttp:
    """The HTTPS floor: one kept-alive httpx client POSTing the same body and reading
    the server-sent events line by line (``json.loads`` of every ``data:`` line). Its
    ``total`` ends at ``response.completed``, before the response is closed; ``closed``
    keeps each turn's time to the close as well (the agent's ``turn.result()`` comes
    after its response is closed)."""

    def __init__(self, client: Any, url: str) -> None:
        self.client = client
        self.url = url
        self.closed: list[Timing] = []  # per turn: ``total`` once the response is closed


    async def turn(self, body: dict[str, Any]) -> Timing:
        cpu, start = time.process_time(), trio.current_time()
        first = None
        content = json.dumps(body).encode()
        headers = {"content-type": "application/json", "authorization": "Bearer bench"}
        async with self.client.stream("POST", self.url, content=content, headers=headers) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                frame = json.loads(line[6:])
                kind = frame["type"]
                if first is None and kind == "response.output_text.delta":
                    first = trio.current_time() - start
                elif kind == "response.completed":
                    total = trio.current_time() - start
        assert first is not None
        # The connection is back in the pool only now, ready for the next request.
        self.closed.append(Timing(first, trio.current_time() - start, time.process_time() - cpu))
        return Timing(first, total, time.process_time() - cpu)


def paired_differences(ours: Sequence[float], floor: Sequence[float]) -> list[float]:
    """``ours[i] - floor[i]`` for every interleaved pair (the two lists pair up index by
    index: the runs alternate, so pair ``i`` saw the same moment of the machine)."""
    if len(ours) != len(floor):
        raise ValueError(f"paired samples differ in number: {len(ours)} vs {len(floor)}")
    return [a - b for a, b in zip(ours, floor, strict=True)]


def added_row(label: str, ours: Sequence[Timing], floor: Sequence[Timing], attr: str = "total") -> list[str]:
    """label, ours p50/p99, floor p50/p99, added ms p50/p99, ratio p50, n.

    "added p50" is ours' p50 minus the floor's (the targets' figure); "added p99" is the
    p99 of the PAIRED differences (ours minus floor, pair by pair), not p99 minus p99:
    two independent tails subtracted (at n <= 100 the two maxima) say nothing about how
    much a turn of ours adds, and are often negative. ``n`` is the number of pairs (at
    n < 100 nearest-rank p99 is the largest paired difference)."""
    a = [getattr(t, attr) for t in ours]
    b = [getattr(t, attr) for t in floor]
    a50, a99, n = summary(a)
    b50, b99, _ = summary(b)
    added99 = pct(paired_differences(a, b), 0.99)
    return [label, ms(a50), ms(a99), ms(b50), ms(b99), f"{(a50 - b50) * 1000:+.2f}", f"{added99 * 1000:+.2f}",
            f"{a50 / b50:.2f}" if b50 else "-", str(n)]


ADDED_HEADER = ["path", "ours p50", "p99", "floor p50", "p99", "added p50", "added p99", "ratio", "n"]


def record_summary(rows: Sequence[Sequence[Any]]) -> None:
    """Append ``[metric, ours, floor, ratio or added, target]`` rows for ``run_all``
    (only when it set ``BENCH_SUMMARY`` to a file)."""
    path = os.environ.get("BENCH_SUMMARY")
    if path:
        with open(path, "a") as out:
            for row in rows:
                out.write(json.dumps([str(c) for c in row]) + "\n")
