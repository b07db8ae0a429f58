"""Where a warm turn's extra time at 25 ms goes: wakeups, contention, or slower execution?
(issue 30 item 4)

``turn_overhead --wakes [MODE]`` runs warm turns of the agent (``api_events=False``, a
consumer reading ``agent.events``) and of the bare client, on both transports:

- ``counts`` (the default; ``pinned``: the same with the server's threads on CPU 0 and
  the clients on CPU 1), agent and bare interleaved (``_rounds``) at 0 and 25 ms, per turn
  (p50): **wakeups** (the run loop's I/O waits that blocked: a timeout, over 20 us in
  epoll), **passes** (all ``before_io_wait`` calls), task **steps** by task and the CPU
  inside them, the thread's **on-CPU** time and **run-queue wait** from
  ``/proc/thread-self/schedstat`` (runnable, no core free: contention with the bench
  server or the rest of the machine), ``getrusage(RUSAGE_THREAD)``'s user/system CPU and
  voluntary/involuntary switches, and other threads' CPU;
- ``phases``: this thread's CPU and wall time between the wire marks (prompt -> request
  handed to the socket -> the answer's first bytes read -> the read holding
  ``response.completed`` -> turn done);
- ``footprint``: the code one turn touches (``sys.setprofile``): distinct Python
  functions and their bytecode's bytes, distinct C functions, calls -- load-independent;
  ``calls``: the calls per function, agent vs bare, the largest differences first;
- ``coldness``: at 0 ms RTT, 25 ms spent before every turn asleep, spinning (the core
  kept busy, the caches kept), or sweeping 32 MiB (the core busy, the caches flushed);
- ``codecost``: what one more distinct function touched per turn costs: a warm WebSocket
  turn with and without 100 extra one-line functions (each its own code object) called
  once, interleaved, at 0 and 25 ms (``_coldness``). Dec 2026, NOT settled: a scratch
  run calling them inside ``TurnQueue.accept`` gave +50 us (load 1.9) and +63 us (load
  0.8) at 25 ms, ~+4 us at 0 ms -- i.e. ~0.5 us a function after the idle wait; this
  mode, calling them just before the turn, gave +8 / -19 / -49 us at 25 ms (loads 4.0 /
  1.3 / 1.1) and -60..+14 at 0 ms. Trivial functions may be a poor proxy for the turn's
  own (which touch objects, attributes and globals too), and touching code first may
  itself warm the interpreter. The cut of code objects touched once a turn (366 -> 339
  functions) did not move the 25 ms row beyond noise (``turn_versus``).

Hardware counters (instructions, cycles, cache misses) are not available in this VM
(``perf stat``: "not supported"), so the question "same instructions, run slower?" is
answered with the calls ``footprint`` counts (and callgrind's instructions in the issue's
notes) beside the on-CPU time.

What it found (Dec 2026, this 2-core VM, load 0.4-1.6; figures per warm turn, WebSocket):
the agent wakes ONCE per turn at 25 ms, as the bare client does (at 25 ms the whole
answer is read in one burst), with fewer run-loop passes (11 vs 27) and task steps (18 vs
51): no extra hop per burst. Both clients wait ~1.1-1.4 ms per turn on the run queue (the
bench server woken onto the client's core), within 30 us of each other; pinned to two
cores, that wait is 0 for both and the gap stays (+0.56 ms). All CPU is user time. The
calls per turn are the same at 0 and 25 ms (3,840 vs 3,920; bare 3,600 vs 3,670), yet
both clients' on-CPU time nearly doubles at 25 ms (bare 0.95-1.05 -> 1.5-1.85 ms, agent
1.24-1.30 -> 2.13-2.42 ms): the same work runs slower after the wait, and the agent's
touches 3.1x the distinct Python functions (369 vs 118; 86 vs 34 KB of bytecode; HTTPS
1.5x, 578 vs 390) for 1.07x the calls. The CPU ratio hardly moves (WS 1.37 -> 1.43x,
HTTPS 1.30 -> 1.30x): the 25 ms gap is the 0 ms relative overhead applied to a doubled
base, nothing the wait adds by itself (``--idle-gap``: a 25 ms sleep before 0 ms turns
reproduces it). ``coldness`` (one run, load 1.4): spinning through the 25 ms instead of
sleeping did not remove the extra CPU (agent +0.67 ms over bare vs +0.57 asleep, +0.52
back to back), a 32 MiB sweep added a little (+0.78): not the idle core's state alone but
what the machine runs meanwhile (the bench server, itself cold, woken onto the client's
core; the other processes). Without cycle counters the split between caches, TLB and
branch predictors stays open. The lever left is the runtime's own CPU per turn (its
calls and the code it touches), not the wait.

Where the HTTPS turn's extra calls went (Dec 2026, per-function ``sys.setprofile``
counts, agent vs bare, 0 ms): not httpx -- our request makes ~200 more calls inside
``AsyncClient.send`` than the bare one only because it carries four more headers (each is
normalised by httpx, h11 and the cookie jar's request view), and we skip ``build_request``
and ``aiter_lines`` -- but the runtime: the per-event path (~25 events: SSE split, frame
decode, feed, ``emit``, the consumer's ``__anext__``; ~30 calls an event against the bare
client's ~22 per line), the turn's layers and its Trio rounds (16.5 task steps a turn
against 6.3: the runner, the consumer and the caller each wake; every resume re-enters
the runner's ~10 coroutine frames). Cut then: the frame decoder's regex matches and type
checks, the SSE dispatch, the per-frame clock, an exit stack, the benchmark consumer's
kind counting: HTTPS 4,601 -> ~4,130 calls a turn (1.56x -> 1.40x the bare client's; the
consumer's part 132), callgrind 4.80M -> 4.62M instructions a turn (1.48x -> 1.41x, the
new consumer on both sides). What remains is structure.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import trio_agent as ta

from ._common import Settings, open_bench_server
from ._rounds import interleave
from ._turn_audit import open_warm_pair

BLOCKED = 20e-6  # an I/O wait longer than this slept in the kernel


class WakeCounter(trio.abc.Instrument):
    """Passes, blocking waits and task steps since ``reset``."""

    def __init__(self) -> None:
        self.passes = 0
        self.wakeups = 0
        self.steps: Counter[str] = Counter()
        self.step_time = 0.0
        self._waited = 0.0
        self._stepped = 0.0

    def reset(self) -> None:
        self.passes = self.wakeups = 0
        self.steps.clear()
        self.step_time = 0.0

    def before_io_wait(self, timeout: float) -> None:
        self.passes += 1
        self._waited = time.perf_counter() if timeout > 0 else 0.0

    def after_io_wait(self, timeout: float) -> None:
        if self._waited and time.perf_counter() - self._waited > BLOCKED:
            self.wakeups += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name.rsplit(".", 1)[-1]] += 1
        self._stepped = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step_time += time.perf_counter() - self._stepped


def _schedstat() -> tuple[int, int, int]:
    """(ns on CPU, ns waiting on a run queue, time slices) of this thread."""
    with open("/proc/thread-self/schedstat") as f:
        run, wait, slices = f.read().split()
    return int(run), int(wait), int(slices)


def _sample(counter: WakeCounter, turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[dict[str, float]]]:
    async def run() -> dict[str, float]:
        sched = _schedstat()
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        process, thread = time.process_time(), time.thread_time()
        counter.reset()
        start = trio.current_time()
        await turn()
        total = trio.current_time() - start
        passes, wakeups, steps, step_time = counter.passes, counter.wakeups, counter.steps.copy(), counter.step_time
        thread, process = time.thread_time() - thread, time.process_time() - process
        after, sched_after = resource.getrusage(resource.RUSAGE_THREAD), _schedstat()
        out = {"turn ms": total * 1e3, "wakeups": wakeups, "passes": passes, "steps": sum(steps.values()),
               "us in steps": step_time * 1e6, "thread CPU us": thread * 1e6,
               "other threads' CPU us": (process - thread) * 1e6,
               "on-CPU us (schedstat)": (sched_after[0] - sched[0]) / 1e3,
               "run-queue wait us": (sched_after[1] - sched[1]) / 1e3, "slices": sched_after[2] - sched[2],
               "voluntary switches": after.ru_nvcsw - usage.ru_nvcsw,
               "user CPU us": (after.ru_utime - usage.ru_utime) * 1e6,
               "system CPU us": (after.ru_stime - usage.ru_stime) * 1e6,
               "involuntary switches": after.ru_nivcsw - usage.ru_nivcsw}
        out.update({f"steps: {k}": float(v) for k, v in steps.items()})
        return out
    return run


def _pin(server: int) -> None:
    """The server's threads on CPU 0, this thread (the clients) on CPU 1: no run-queue
    wait between them, for both clients alike (an experiment, ``--pin``)."""
    for task in os.listdir(f"/proc/{server}/task"):
        os.sched_setaffinity(int(task), {0})
    os.sched_setaffinity(0, {1})


async def wakes(rounds: int, pin: bool = False) -> str:
    out = [f"warm turns, api_events=False, agent and bare client interleaved, {rounds} rounds per block, "
           f"p50 per turn (mean for step counts){'; server on CPU 0, clients on CPU 1' if pin else ''}; "
           f"load {os.getloadavg()[0]:.2f}"]
    affinity = os.sched_getaffinity(0)
    counter = WakeCounter()
    trio.lowlevel.add_instrument(counter)
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        for rtt in (0.0, 0.025):
            with tempfile.TemporaryDirectory() as workspace:
                async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server, \
                        open_warm_pair(server, workspace, transport) as (agent, bare):
                    if pin:
                        _pin(server.pid)
                    ours, floor = await interleave([_sample(counter, agent.turn), _sample(counter, bare)], rounds)
            out.append(f"{transport.value} rtt {rtt * 1000:g} ms:  {'agent':>9} {'bare':>9} {'diff':>9}")
            keys = sorted({k for s in ours + floor for k in s}, key=lambda k: (k.startswith("steps: "), k))
            for key in keys:
                mean = key.startswith("steps: ")
                agg = statistics.mean if mean else statistics.median
                a, b = (agg([s.get(key, 0.0) for s in side]) for side in (ours, floor))
                out.append(f"  {key:<28}{a:9.2f} {b:9.2f} {a - b:+9.2f}")
    trio.lowlevel.remove_instrument(counter)
    os.sched_setaffinity(0, affinity)
    out.append(f"load after {os.getloadavg()[0]:.2f}")
    return "\n".join(out)


class PhaseClock:
    """This thread's CPU (``time.thread_time``) and the wall clock at a turn's wire
    marks: the request handed to the socket, the answer's first bytes read, the read
    holding ``response.completed``, the turn's end."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, float]] = {}

    def install(self) -> None:
        cls = trio.SocketStream
        send_all, receive_some = cls.send_all, cls.receive_some
        clock = self

        def mark(name: str) -> None:
            if name not in clock.marks:
                clock.marks[name] = (time.thread_time(), time.perf_counter())

        async def stamped_send(self: Any, data: Any) -> None:
            mark("sent")
            await send_all(self, data)
            mark("send returned")

        async def stamped_receive(self: Any, max_bytes: int | None = None) -> Any:
            data = await receive_some(self, max_bytes)
            if data and "sent" in clock.marks:
                mark("first read")
            if b'"response.completed"' in data:
                mark("completed read")
            return data

        cls.send_all, cls.receive_some = stamped_send, stamped_receive  # type: ignore[method-assign]
        self._restore = (send_all, receive_some)

    def uninstall(self) -> None:
        trio.SocketStream.send_all, trio.SocketStream.receive_some = self._restore  # type: ignore[method-assign]


PHASES = ("sent", "send returned", "first read", "completed read")


def _phased(clock: PhaseClock, turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[dict[str, float]]]:
    async def run() -> dict[str, float]:
        clock.marks = {"start": (time.thread_time(), time.perf_counter())}
        await turn()
        clock.marks["done"] = (time.thread_time(), time.perf_counter())
        out: dict[str, float] = {}
        if all(name in clock.marks for name in PHASES):  # else a read began before the patch
            previous = "start"
            for name in (*PHASES, "done"):
                out[f"CPU us to {name}"] = (clock.marks[name][0] - clock.marks[previous][0]) * 1e6
                out[f"wall us to {name}"] = (clock.marks[name][1] - clock.marks[previous][1]) * 1e6
                previous = name
        return out
    return run


async def phases(rounds: int) -> str:
    load = os.getloadavg()[0]
    out = [f"warm turns, api_events=False, interleaved, {rounds} rounds; this thread's CPU and wall time between "
           f"the wire marks, p50; load {load:.2f}"]
    clock = PhaseClock()
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        for rtt in (0.0, 0.025):
            with tempfile.TemporaryDirectory() as workspace:
                async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server, \
                        open_warm_pair(server, workspace, transport) as (agent, bare):
                    clock.install()
                    try:
                        ours, floor = await interleave([_phased(clock, agent.turn), _phased(clock, bare)], rounds)
                    finally:
                        clock.uninstall()
            out.append(f"{transport.value} rtt {rtt * 1000:g} ms:  {'agent':>9} {'bare':>9} {'diff':>9}")
            keys = [f"{what} us to {name}" for name in (*PHASES, "done") for what in ("CPU", "wall")]
            for key in keys:
                a, b = (statistics.median([s[key] for s in side if s]) for side in (ours, floor))
                out.append(f"  {key:<28}{a:9.1f} {b:9.1f} {a - b:+9.1f}")
    out.append(f"load after {os.getloadavg()[0]:.2f}")
    return "\n".join(out)


class Footprint:
    """The code one turn touches (``sys.setprofile``): distinct Python functions, their
    bytecode's bytes, distinct C functions, and calls. A load-independent proxy for what
    a turn must bring back into the caches after an idle wait."""

    def __init__(self) -> None:
        self.python: set[Any] = set()
        self.native: set[Any] = set()
        self.calls = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.python.add(frame.f_code)
            self.calls += 1
        elif event == "c_call":
            self.native.add(arg)
            self.calls += 1

    def figures(self) -> dict[str, float]:
        return {"Python functions": len(self.python), "their bytecode bytes": sum(len(c.co_code) for c in self.python),
                "C functions": len(self.native), "calls": self.calls}


async def footprint(rounds: int) -> str:
    out = [f"code touched per warm turn, api_events=False, mean of {rounds} turns each (sys.setprofile)"]
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        for rtt in (0.0, 0.025):
            with tempfile.TemporaryDirectory() as workspace:
                async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server, \
                        open_warm_pair(server, workspace, transport) as (agent, bare):
                    sides = [await _touched(turn, rounds) for turn in (agent.turn, bare)]
            out.append(f"{transport.value} rtt {rtt * 1000:g} ms:  {'agent':>9} {'bare':>9} {'ratio':>6}")
            for key, a in sides[0].items():
                out.append(f"  {key:<22}{a:9.0f} {sides[1][key]:9.0f} {a / sides[1][key]:6.2f}")
    return "\n".join(out)


class CallCounts:
    """Calls per function (``sys.setprofile``): Python functions by file, line and name,
    C functions by name (``calls`` mode: where one client's extra calls go)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            where = code.co_filename.rsplit("site-packages/", 1)[-1].replace(os.getcwd() + "/", "")
            self.counts[f"{where}:{code.co_firstlineno}:{code.co_qualname}"] += 1
        elif event == "c_call":
            self.counts[f"C:{getattr(arg, '__qualname__', arg)}"] += 1


async def calls(rounds: int, top: int = 40) -> str:
    """Calls per warm turn by function, agent vs bare, at 0 ms: the ``top`` largest differences."""
    out = [f"calls per warm turn by function, api_events=False, 0 ms, {rounds} turns each (sys.setprofile)"]
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        with tempfile.TemporaryDirectory() as workspace:
            async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=20)) as server, \
                    open_warm_pair(server, workspace, transport) as (agent, bare):
                sides = []
                for turn in (agent.turn, bare):
                    probe = CallCounts()
                    for _ in range(rounds):
                        sys.setprofile(probe)
                        try:
                            await turn()
                        finally:
                            sys.setprofile(None)
                    sides.append(probe.counts)
        ours, floor = sides
        out.append(f"{transport.value}: {sum(ours.values()) / rounds:.0f} vs {sum(floor.values()) / rounds:.0f} "
                   f"calls; {'agent':>8} {'bare':>8} {'diff':>8}")
        diffs = sorted(ours.keys() | floor.keys(), key=lambda k: -abs(ours[k] - floor[k]))
        for key in diffs[:top]:
            a, b = ours[key] / rounds, floor[key] / rounds
            out.append(f"  {a:8.1f} {b:8.1f} {a - b:+8.1f}  {key}")
    return "\n".join(out)


async def _touched(turn: Callable[[], Awaitable[Any]], rounds: int) -> dict[str, float]:
    samples = []
    for _ in range(rounds):
        probe = Footprint()
        sys.setprofile(probe)
        try:
            await turn()
        finally:
            sys.setprofile(None)
        samples.append(probe.figures())
    return {k: statistics.mean(s[k] for s in samples) for k in samples[0]}


async def run_wakes(mode: str, rounds: int) -> str:
    """``turn_overhead --wakes [counts|pinned|phases|footprint|calls|coldness|codecost]``."""
    if mode in ("coldness", "codecost"):
        from ._coldness import codecost, coldness

        return await (coldness(rounds) if mode == "coldness" else codecost(rounds))
    if mode == "footprint":
        return await footprint(min(rounds, 30))
    if mode == "calls":
        return await calls(min(rounds, 30))
    return await (phases(rounds) if mode == "phases" else wakes(rounds, pin=mode == "pinned"))
