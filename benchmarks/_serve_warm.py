"""``serve_load``'s warm-turn rows (issue 30, item 3): the server's CPU per warm turn
against the same turn in-process.

- serve: ``trio-agent serve --listen`` on the child-process model server (10 text
  deltas, no think time), N WebSocket clients (``serve_load.Client``); each starts one
  thread and runs one untimed turn on it. A block: all of them run ``turns`` turns each
  on their own thread, together (``turn/start``, every notification read up to that
  turn's ``turn/completed``). Figure: the server process's CPU (its threads' run time
  to the nanosecond, from ``/proc``: ``thread_cpu``) over the block, per turn.
- in-process: N agents in one process (``_inprocess_turns``, run with ``PYTHONPATH``
  naming the tree), configured as the server configures a thread's agent, on the same
  model server, every event consumed; the same blocks. Figure: that process's CPU per
  turn over the block.

Fair by construction (checked in issue 30's item 3): the two send the same request
bodies, byte for byte but the workspace path (the bench server's last body of each);
both keep a rollout, run one untimed turn, then the same turns on a history as long;
the in-process consumer reads every event, as a served thread's relay hears every one.

Stable by construction: the machine's two cores are shared (and may be hyperthreads of
one core), so the same turn's CPU moved 1.27-2.46 ms between runs of separate processes.
The in-process agents and each server are therefore started once and stay up, and the
measurement is ``rounds`` rounds of one block on each side, one right after the other
(the order rotated per round); the ratio is the median of the per-round ratios (serve's
block over the in-process block of the same round), with n -- as ``cold_cli`` does.
Every side runs the same turns in the same order, so their histories grow alike.

``--baseline DIR`` adds another checkout's server to every round (before/after in one
interleaved run); ``--warm-runs N`` repeats the whole measurement with fresh processes
(default 2, ``--quick`` 1): the per-round ratios of every run are pooled, each run's p50
shown too -- where a set of processes landed on the two cores moves all its rounds
alike (one run's per-round p50 still moved 1.48-1.65x between consecutive runs), so a
second set halves that part of the spread.
``--profile DIR`` (as for the other rows): ``py-spy record`` of each server and of the
in-process agents over all their blocks, the collapsed stacks in ``DIR`` (to diff a served
turn against the same turn in-process) (cProfile's own cost per call and its
wall-clock timer distorted this profile several-fold; py-spy samples from outside).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from ._common import Settings, open_bench_server, record_summary, table
from .serve_load import FAKE, STEP, Client, Phase, _client, process_cpu, profiled, running_server, server_command

__all__ = ["TARGETS", "WARM_BLOCKS", "measure_warm", "report_warm"]

# clients -> (rounds, turns per client in a block): 400 timed turns a side at 1 client,
# 1,600 at 50; a 1-client block is ~25 ms of CPU, far above the clock's resolution.
WARM_BLOCKS = {1: (40, 10), 50: (16, 2)}
QUICK_BLOCKS = {1: (20, 10), 50: (8, 2)}
TARGETS = {1: 1.3, 50: 1.5}  # serve CPU per turn over in-process, at most (issue 30, item 3)
INPROCESS = "in-process agents"


@attrs.define
class WarmFigures:
    """One row: CPU per turn (seconds) of each block, by run; messages the clients read."""

    label: str
    clients: int
    runs: list[list[float]] = attrs.field(factory=list)
    messages: Counter[str] = attrs.field(factory=Counter)
    turns: int = 0

    @property
    def cpu(self) -> list[float]:
        return [cpu for run in self.runs for cpu in run]

    @property
    def median(self) -> float:
        return statistics.median(self.cpu)


class Served:
    """A server with ``clients`` clients, each on its own loaded thread (one untimed turn)."""

    def __init__(self, pid: int, clients: list[Client], phase: Phase) -> None:
        self.pid = pid
        self.clients = clients
        self.phase = phase

    async def block(self, turns: int) -> float:
        """CPU per turn of the server over ``turns`` turns by every client, together."""
        before = len(self.phase.latencies)
        cpu = thread_cpu(self.pid)
        async with trio.open_nursery() as nursery:
            for client in self.clients:
                nursery.start_soon(_rounds, client, turns, self.phase)
        return (thread_cpu(self.pid) - cpu) / (len(self.phase.latencies) - before)


@asynccontextmanager
async def served(tree: str, clients: int, model: Any, profile: str | None, name: str) -> AsyncIterator[Served]:
    work = Path(tempfile.mkdtemp(prefix="serve-warm-"))
    (work / "workspace").mkdir()
    cwd = str(work / "workspace")
    phase = Phase("serve", clients)
    try:
        command, env = server_command(FAKE, work, tree, None, model)
        async with running_server(command, env, work) as (pid, url), trio.open_nursery() as nursery:
            with trio.fail_after(STEP):
                connected = [await _client(nursery, url, phase) for _ in range(clients)]
                for client in connected:
                    await client.request("thread/start", {"cwd": cwd})
                async with trio.open_nursery() as warmups:  # one untimed turn per thread
                    for client in connected:
                        warmups.start_soon(client.turn_on_last)
            phase.received.clear()
            phase.others.clear()
            async with profiled(pid, profile, name):
                yield Served(pid, connected, phase)
            for client in connected:
                await client.wire.aclose()
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def thread_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s threads, to the nanosecond (``/proc/PID/task/*/schedstat``):
    ``process_cpu`` counts 10 ms ticks. A thread that ended in the window would be
    missed: a fresh server's worker threads live 10 s idle. Falls back to
    ``process_cpu`` without schedstat."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return process_cpu(pid)


async def _rounds(client: Any, rounds: int, phase: Phase) -> None:
    for _ in range(rounds):
        with trio.fail_after(STEP):
            phase.latencies.append(await client.turn_on_last())


class InProcess:
    """``_inprocess_turns`` running ``agents`` agents, driven block by block."""

    def __init__(self, process: trio.Process) -> None:
        self._process = process
        self._pending = b""

    async def line(self) -> bytes:
        assert self._process.stdout is not None
        while b"\n" not in self._pending:
            chunk = await self._process.stdout.receive_some()
            if not chunk:
                raise RuntimeError("the in-process agents exited")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    async def block(self, turns: int) -> float:
        assert self._process.stdin is not None
        with trio.fail_after(STEP):
            await self._process.stdin.send_all(b"%d\n" % turns)
            figures = json.loads(await self.line())
        return float(figures["cpu"]) / float(figures["turns"])


@asynccontextmanager
async def inprocess(tree: str, agents: int, model: Any, profile: str | None = None,
                    name: str = "") -> AsyncIterator[InProcess]:
    work = Path(tempfile.mkdtemp(prefix="inprocess-warm-"))
    script = Path(__file__).with_name("_inprocess_turns.py")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, str(script), model.ws_url, str(agents), str(work)], env={**env, "PYTHONPATH": tree},
            cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            driven = InProcess(process)
            with trio.fail_after(STEP):
                if await driven.line() != b"ready":
                    raise RuntimeError("the in-process agents did not start")
            async with profiled(process.pid, profile, name):
                yield driven
        finally:
            with trio.CancelScope(shield=True):
                assert process.stdin is not None
                await process.stdin.aclose()  # EOF: it exits
                with trio.move_on_after(30):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def measure_warm(counts: list[int], quick: bool, trees: dict[str, str], runs: int,
                       profile: str | None = None) -> list[WarmFigures]:
    """Every row of ``counts`` x (in-process, each tree's server), interleaved block by
    block, ``runs`` times. ``trees``: label -> checkout; the first one's also runs the
    in-process agents."""
    rows: dict[tuple[str, int], WarmFigures] = {}
    labels = list(trees)
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=10)) as model:
        for run in range(runs):
            for clients in counts:
                rounds, turns = (QUICK_BLOCKS if quick else WARM_BLOCKS).get(clients, (6, 2))
                async with AsyncExitStack() as stack:
                    sides: dict[str, InProcess | Served] = {
                        INPROCESS: await stack.enter_async_context(inprocess(
                        trees[labels[0]], clients, model, profile, f"inprocess-warm-{clients}-{run + 1}"))}
                    for label in labels:
                        name = f"serve-warm-{clients}-{trees[label].rstrip('/').rsplit('/', 1)[-1]}-{run + 1}"
                        sides[label] = await stack.enter_async_context(
                            served(trees[label], clients, model, profile, name))
                    order = list(sides)
                    for row_label in order:
                        rows.setdefault((row_label, clients), WarmFigures(row_label, clients)).runs.append([])
                    for index in range(rounds):
                        shift = index % len(order)
                        for label in order[shift:] + order[:shift]:
                            row = rows[(label, clients)]
                            row.runs[-1].append(await sides[label].block(turns))
                            row.turns += clients * turns
                    for label in labels:
                        side = sides[label]
                        assert isinstance(side, Served)
                        rows[(label, clients)].messages.update(side.phase.received)
                print(f"   warm turns, run {run + 1}, {clients} clients: {rounds} rounds of {turns} turns a client "
                      f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    return list(rows.values())


def round_ratios(row: WarmFigures, floor: WarmFigures) -> list[float]:
    """``row``'s CPU per turn over ``floor``'s, round by round (the two blocks of a round
    ran one right after the other: the shared machine's load moves both alike)."""
    return [ours / theirs for ours, theirs in zip(row.cpu, floor.cpu, strict=True)]


def paired_ratio(row: WarmFigures, floor: WarmFigures) -> float:
    """The p50 of the per-round ratios (every run's rounds pooled)."""
    return statistics.median(round_ratios(row, floor))


def _per_run(row: WarmFigures, floor: WarmFigures) -> str:
    return " / ".join(f"{statistics.median(a / b for a, b in zip(ours, theirs, strict=True)):.2f}"
                      for ours, theirs in zip(row.runs, floor.runs, strict=True))


def report_warm(rows: list[WarmFigures], main_label: str) -> None:
    """The table, and the summary rows (run_all) of ``main_label``'s server."""
    floors = {row.clients: row for row in rows if row.label == INPROCESS}
    lines = []
    for row in rows:
        runs = " / ".join(f"{statistics.median(run) * 1000:.2f}" for run in row.runs)
        floor = floors[row.clients]
        ratio = "-" if row.label == INPROCESS else f"{paired_ratio(row, floor):.2f}x ({_per_run(row, floor)})"
        target = "-" if row.label == INPROCESS else f"<= {TARGETS.get(row.clients, 1.5)}x"
        messages = f"{sum(row.messages.values()) / row.turns:.0f}" if row.messages else "-"
        lines.append([row.label, str(row.clients), runs, f"{row.median * 1000:.2f}", ratio, target, messages,
                      str(len(row.cpu)), str(row.turns)])
    print(table("server CPU per warm turn (turn/start on a loaded thread, every notification read) vs the same "
                "turn in-process, interleaved block by block",
                ["server", "clients", "cpu/turn ms, p50 of each run", "p50", "vs in-process (per-round p50; each run)",
                 "target", "msgs/turn", "rounds", "turns"], lines))
    for row in rows:  # --baseline: after over before, round by round (the same stretch of the machine's load)
        ours = next((r for r in rows if r.label == main_label and r.clients == row.clients), None)
        if row.label not in (INPROCESS, main_label) and ours is not None:
            print(f"{main_label} over {row.label} at {row.clients} clients, per-round p50 (n={len(ours.cpu)}): "
                  f"{paired_ratio(ours, row):.2f}x ({_per_run(ours, row)} by run)")
    summary = []
    for row in rows:
        if row.label == main_label:
            floor = floors[row.clients]
            summary.append([f"serve warm turn, {row.clients} client{'s' if row.clients > 1 else ''}: server CPU/turn",
                            f"{row.median * 1000:.2f} ms", f"in-process {floor.median * 1000:.2f} ms",
                            f"{paired_ratio(row, floor):.2f}x (per-round p50, n={len(row.cpu)})",
                            f"<= {TARGETS.get(row.clients, 1.5)}x"])
    record_summary(summary)
