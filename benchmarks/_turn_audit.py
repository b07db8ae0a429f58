"""What a warm turn does on Trio's scheduler, and when its bytes move (issue 30, item 4).

``turn_overhead --audit`` runs warm turns of the agent (``api_events=False``) and of the
bare client on both transports and reports, per turn:

- **cancel scopes** entered (``trio.CancelScope.__enter__`` counted);
- **checkpoints** (Trio's own per-task ``_cancel_points`` counter, which every
  checkpoint and every blocking trap increments);
- **schedule points** (``_schedule_points``: every yield to the scheduler) and among
  them **suspensions**: a yield after which the task was rescheduled by someone else
  (an I/O wakeup, another task's ``Event.set``), not by its own ``checkpoint()``; told
  apart by the instrument's ``task_scheduled`` hook firing inside or outside the
  task's own step;
- **tasks** spawned and **steps** taken, by task name, and the wall time spent inside
  each task's steps (``perf_counter`` around every step: the CPU the tasks use, without
  the scheduler's own);
- **scheduler rounds** (``before_io_wait``: one per pass of Trio's run loop that waits
  for I/O) and **arrivals** (``receive_some`` calls that returned bytes): how many
  wake-ups the answer's bytes cost, against the bare client's;
- a **timeline** of the wire: when the request's first byte is handed to the socket
  (``trio.SocketStream.send_all``), when the answer's first bytes and the bytes holding
  ``response.completed`` are read (``receive_some``), and when the turn returns -- the
  request path, the burst and the turn's end, the agent beside the bare client.

Internal Trio names (``_cancel_points``) are read for measurement only; a Trio release
that drops them makes the audit print zeros, never fail a turn.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

import trio_agent as ta

from ._common import (
    BareHttp,
    Settings,
    Timing,
    WarmAgent,
    bench_config,
    open_bare_websocket,
    open_bench_server,
    open_warm_agent,
)


class SchedulerAudit(trio.abc.Instrument):
    """Counts per window (``start``/``stop``): see the module docstring."""

    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()
        self.spawned: Counter[str] = Counter()
        self.suspensions = 0
        self.scopes = 0
        self.rounds = 0  # passes of the run loop that waited for I/O
        self._current: trio.lowlevel.Task | None = None
        self._seen: dict[trio.lowlevel.Task, tuple[int, int]] = {}
        self._ended: list[tuple[int, int]] = []
        self.busy: dict[str, float] = {}  # seconds spent in each task's steps
        self._stepped: float | None = None  # when the current step began (None: before the window)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._current = task
        self._stepped = time.perf_counter()
        self.steps[_name(task)] += 1
        if task not in self._seen:
            self._seen[task] = _points(task)

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._current = None
        if self._stepped is not None:
            name = _name(task)
            self.busy[name] = self.busy.get(name, 0.0) + time.perf_counter() - self._stepped

    def before_io_wait(self, timeout: float) -> None:
        self.rounds += 1

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if task is not self._current:
            self.suspensions += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned[_name(task)] += 1
        self._seen[task] = (0, 0)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        start = self._seen.pop(task, None)
        if start is not None:
            now = _points(task)
            self._ended.append((now[0] - start[0], now[1] - start[1]))

    def points(self) -> tuple[int, int]:
        """(checkpoints, schedule points) since the window opened."""
        rows = self._ended + [(a - s[0], b - s[1]) for task, s in self._seen.items() for a, b in [_points(task)]]
        return sum(r[0] for r in rows), sum(r[1] for r in rows)


def _points(task: trio.lowlevel.Task) -> tuple[int, int]:
    return getattr(task, "_cancel_points", 0), getattr(task, "_schedule_points", 0)


def _name(task: trio.lowlevel.Task) -> str:
    return task.name.rsplit(".", 1)[-1]


class WireStamps:
    """``SocketStream.send_all``/``receive_some`` wrapped: the first send of a turn, the
    first read with bytes after it, the read that carried ``response.completed``, and
    how many reads brought bytes (arrivals). Every socket of this process is a client's
    (the server runs in a child process)."""

    def __init__(self) -> None:
        self.sent: float | None = None
        self.first: float | None = None
        self.completed: float | None = None
        self.arrivals = 0

    def install(self) -> None:
        cls = trio.SocketStream
        send_all, receive_some = cls.send_all, cls.receive_some
        stamps = self

        async def stamped_send(self: Any, data: Any) -> None:
            if stamps.sent is None:
                stamps.sent = trio.current_time()
            await send_all(self, data)

        async def stamped_receive(self: Any, max_bytes: int | None = None) -> Any:
            data = await receive_some(self, max_bytes)
            if data and stamps.sent is not None:
                stamps.arrivals += 1
                if stamps.first is None:
                    stamps.first = trio.current_time()
            if b'"response.completed"' in data:
                stamps.completed = trio.current_time()
            return data

        cls.send_all, cls.receive_some = stamped_send, stamped_receive  # type: ignore[method-assign]
        self._restore = (send_all, receive_some)

    def uninstall(self) -> None:
        trio.SocketStream.send_all, trio.SocketStream.receive_some = self._restore  # type: ignore[method-assign]

    def clear(self) -> None:
        self.sent = self.first = self.completed = None
        self.arrivals = 0


_ScopeEnter = Callable[[trio.CancelScope], trio.CancelScope]


async def _counted(
    fn: Callable[[], Awaitable[object]], turns: int
) -> SchedulerAudit:
    audit = SchedulerAudit()
    enter: _ScopeEnter = trio.CancelScope.__enter__

    def counting_enter(scope: trio.CancelScope) -> trio.CancelScope:
        audit.scopes += 1
        return enter(scope)

    trio.CancelScope.__enter__ = counting_enter  # type: ignore[method-assign]
    trio.lowlevel.add_instrument(audit)
    try:
        for _ in range(turns):
            await fn()
    finally:
        trio.lowlevel.remove_instrument(audit)
        trio.CancelScope.__enter__ = enter  # type: ignore[method-assign]
    return audit


def _counts_line(name: str, audit: SchedulerAudit, turns: int) -> list[str]:
    checkpoints, schedule = audit.points()
    tasks = sum(audit.spawned.values())
    line = (f"  {name:<6} cancel scopes {audit.scopes / turns:5.1f}  checkpoints {checkpoints / turns:5.1f}  "
            f"schedule points {schedule / turns:5.1f}  suspensions {audit.suspensions / turns:5.1f}  "
            f"tasks {tasks / turns:4.1f}  steps {sum(audit.steps.values()) / turns:5.1f}  "
            f"rounds {audit.rounds / turns:5.1f}")
    by_task = ", ".join(f"{k} {v / turns:.1f}" for k, v in audit.steps.most_common(6))
    spawned = ", ".join(f"{k} {v / turns:.1f}" for k, v in audit.spawned.most_common(4)) or "none"
    ranked = sorted(audit.busy.items(), key=lambda kv: -kv[1])[:6]
    busy = ", ".join(f"{k} {v / turns * 1e6:.0f}" for k, v in ranked)
    return [line, f"         steps by task: {by_task}; spawned per turn: {spawned}",
            f"         us in each task's steps: {busy} (total {sum(audit.busy.values()) / turns * 1e6:.0f})"]


async def _timeline(
    stamps: WireStamps, turn: Callable[[], Awaitable[Any]], turns: int
) -> dict[str, float]:
    marks: dict[str, list[float]] = {"on socket": [], "first bytes read": [], "completed read": [],
                                     "turn done": [], "arrivals (reads with bytes)": []}
    for _ in range(turns):
        stamps.clear()
        start = trio.current_time()
        timing = await turn()
        if stamps.sent is None or stamps.first is None or stamps.completed is None:
            continue
        marks["on socket"].append(stamps.sent - start)
        marks["first bytes read"].append(stamps.first - start)
        marks["completed read"].append(stamps.completed - start)
        marks["turn done"].append(timing.total)
        marks["arrivals (reads with bytes)"].append(stamps.arrivals / 1000)  # printed as a count
    return {k: statistics.median(v) for k, v in marks.items() if v}


async def audit(turns: int, rtt: float = 0.0) -> str:
    out: list[str] = [f"warm-turn audit, api_events=False, {rtt * 1000:g} ms rtt, {turns} turns each (per turn):"]
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server:
            for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
                out.append(f"{transport.value}:")
                out += await _audit_transport(server, workspace, transport, turns)
    return "\n".join(out)


@asynccontextmanager
async def open_warm_pair(
    server: Any, workspace: str, transport: ta.Transport
) -> AsyncIterator[tuple[WarmAgent, Callable[[], Awaitable[Timing]]]]:
    """A warm agent (``api_events=False``, a consumer reading its events) and the bare
    client's warm turn on the same transport, sending the agent's own request body; ten
    turns of each done (not sampled)."""
    https = transport is ta.Transport.HTTPS
    config = attrs.evolve(bench_config(server, workspace, transport=transport, store=https), api_events=False)
    async with open_warm_agent(config) as agent, httpx.AsyncClient() as client, \
            open_bare_websocket(server.ws_url) as bare_ws:
        for _ in range(10):
            await agent.turn()
        last = (await server.last_requests())["last"]
        bare_http = BareHttp(client, server.http_base_url + "/responses")

        def bare() -> Awaitable[Timing]:
            return bare_http.turn(last["http"]) if https else bare_ws.turn(last["ws"])

        for _ in range(10):
            await bare()
        yield agent, bare


async def _audit_transport(server: Any, workspace: str, transport: ta.Transport, turns: int) -> list[str]:
    out: list[str] = []
    async with open_warm_pair(server, workspace, transport) as (agent, bare):
        for name, fn in (("agent", agent.turn), ("bare", bare)):
            out += _counts_line(name, await _counted(fn, turns), turns)
        stamps = WireStamps()
        stamps.install()
        try:
            marks = {"agent": await _timeline(stamps, agent.turn, turns), "bare": await _timeline(stamps, bare, turns)}
        finally:
            stamps.uninstall()
    out.append(f"  timeline, ms since prompt()/send, p50:  {'agent':>8} {'bare':>8}")
    previous = {"agent": 0.0, "bare": 0.0}
    arrivals = "arrivals (reads with bytes)"
    for key in marks["agent"]:
        if key == arrivals:
            counts = [f"{marks[who].get(key, 0.0) * 1000:8.1f}" for who in ("agent", "bare")]
            out.append(f"    {key:<36}{counts[0]} {'':>9} {counts[1]}")
            continue
        cells = []
        for who in ("agent", "bare"):
            value = marks[who].get(key, 0.0)
            cells += [f"{value * 1000:8.3f}", f"(+{(value - previous[who]) * 1000:.3f})"]
            previous[who] = value
        out.append(f"    {key:<36}{cells[0]} {cells[1]:>9} {cells[2]} {cells[3]:>9}")
    return out
