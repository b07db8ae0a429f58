"""``serve_load``'s warm-turn rows (issue 30, item 3): the server's CPU per warm turn
against the same turn in-process.

- serve: ``trio-agent serve --listen`` on the child-process model server (10 text
  deltas, no think time), N WebSocket clients (``serve_load.Client``); each starts one
  thread and runs one untimed turn on it; then all of them run ``rounds`` turns each
  on their own thread, together (``turn/start``, every notification read up to that
  turn's ``turn/completed``). Figure: the server process's CPU (its threads' run time
  to the nanosecond, from ``/proc``: ``thread_cpu``) over the timed turns, per turn.
- in-process: N agents in one process (``_inprocess_turns``, run with ``PYTHONPATH``
  naming the tree), configured as the server configures a thread's agent, on the same
  model server, every event consumed; the same rounds. Figure: that process's CPU per
  turn.

Fair by construction (checked in issue 30's item 3): the two send the same request
bodies, byte for byte but the workspace path (the bench server's last body of each);
both keep a rollout, run one untimed turn, then the same turns on a history as long;
the in-process consumer reads every event, as a served thread's relay hears every one.

The ratio (serve over in-process at the same N, paired: the median over runs of the
two measured in the same run) is item 3's figure: <= 1.3x at 1 client, <= 1.5x at 50.
``--baseline DIR`` adds the same serve rows for another checkout, run in the same
loop (each round: in-process, then the servers in an order rotated per round), so
before and after are sampled over the same stretch of the shared machine's load.
``--warm-runs N`` repeats the whole loop; each row shows every run and their median.
``--profile DIR`` (as for the other rows): ``py-spy record`` of each server over its
timed turns, the collapsed stacks in ``DIR`` (cProfile's own cost per call and its
wall-clock timer distorted this profile several-fold; py-spy samples from outside).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import trio

from ._common import Settings, open_bench_server, record_summary, table
from .serve_load import FAKE, STEP, Phase, _client, process_cpu, profiled, running_server, server_command

__all__ = ["TARGETS", "WARM_ROUNDS", "measure_warm", "report_warm"]

WARM_ROUNDS = {1: 100, 50: 4}  # timed turns per client, per client count (others: 4)
TARGETS = {1: 1.3, 50: 1.5}  # serve CPU per turn over in-process, at most (issue 30, item 3)
INPROCESS = "in-process agents"


@attrs.define
class WarmFigures:
    """One row: CPU per turn (seconds) of every run; messages the clients read per turn."""

    label: str
    clients: int
    cpu: list[float] = attrs.field(factory=list)
    messages: Counter[str] = attrs.field(factory=Counter)
    turns: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.cpu)


async def serve_warm(tree: str, clients: int, rounds: int, model: Any, profile: str | None) -> tuple[float, Phase]:
    """The server's CPU per timed warm turn, and the phase (what the clients read)."""
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
            async with profiled(pid, profile, f"serve-warm-{clients}-{tree.rstrip('/').rsplit('/', 1)[-1]}"):
                cpu, start = thread_cpu(pid), time.perf_counter()
                async with trio.open_nursery() as turns:
                    for client in connected:
                        turns.start_soon(_rounds, client, rounds, phase)
                phase.wall = time.perf_counter() - start
                phase.server_cpu = thread_cpu(pid) - cpu
            for client in connected:
                await client.wire.aclose()
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return phase.server_cpu / len(phase.latencies), phase


def thread_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s threads, to the nanosecond (``/proc/PID/task/*/schedstat``):
    ``process_cpu`` counts 10 ms ticks, 4% of a 1-client row's 100 turns at 2.5 ms. A
    thread that ended in the window would be missed: a fresh server's worker threads
    live 10 s idle. Falls back to ``process_cpu`` without schedstat."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return process_cpu(pid)


async def _rounds(client: Any, rounds: int, phase: Phase) -> None:
    for _ in range(rounds):
        with trio.fail_after(STEP):
            phase.latencies.append(await client.turn_on_last())


async def inprocess_warm(tree: str, agents: int, rounds: int, model: Any) -> float:
    """CPU per turn of ``agents`` agents in one process (``_inprocess_turns``)."""
    work = Path(tempfile.mkdtemp(prefix="inprocess-warm-"))
    script = Path(__file__).with_name("_inprocess_turns.py")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    try:
        with trio.fail_after(STEP):
            done = await trio.run_process([sys.executable, str(script), model.ws_url, str(agents), str(rounds),
                                           str(work)], env={**env, "PYTHONPATH": tree}, cwd=work,
                                          capture_stdout=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = json.loads(done.stdout)
    return float(figures["cpu"]) / float(figures["turns"])


async def measure_warm(counts: list[int], quick: bool, trees: dict[str, str], runs: int,
                       profile: str | None = None) -> list[WarmFigures]:
    """Every row of ``counts`` x (in-process, each tree's server), ``runs`` times, interleaved.
    ``trees``: label -> checkout; the first one's also runs the in-process agents."""
    rows: dict[tuple[str, int], WarmFigures] = {}
    labels = list(trees)
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=10)) as model:
        for run in range(runs):
            for clients in counts:
                rounds = WARM_ROUNDS.get(clients, 4)
                rounds = max(1, rounds // 2) if quick else rounds
                row = rows.setdefault((INPROCESS, clients), WarmFigures(INPROCESS, clients))
                row.cpu.append(await inprocess_warm(trees[labels[0]], clients, rounds, model))
                row.turns += clients * rounds
                shift = run % len(labels)
                for label in labels[shift:] + labels[:shift]:
                    cpu, phase = await serve_warm(trees[label], clients, rounds, model, profile)
                    row = rows.setdefault((label, clients), WarmFigures(label, clients))
                    row.cpu.append(cpu)
                    row.messages.update(phase.received)
                    row.turns += len(phase.latencies)
                print(f"   warm turns, run {run + 1}, {clients} clients: done (load average "
                      f"{os.getloadavg()[0]:.2f})", flush=True)
    return list(rows.values())


def paired_ratio(row: WarmFigures, floor: WarmFigures) -> float:
    """The median over runs of ``row``'s CPU per turn over ``floor``'s in the same run
    (the shared machine's load moves both within a run, and differs between runs)."""
    return statistics.median(ours / theirs for ours, theirs in zip(row.cpu, floor.cpu, strict=True))


def report_warm(rows: list[WarmFigures], main_label: str) -> None:
    """The table, and the summary rows (run_all) of ``main_label``'s server."""
    floors = {row.clients: row for row in rows if row.label == INPROCESS}
    lines = []
    for row in rows:
        runs = " / ".join(f"{cpu * 1000:.2f}" for cpu in row.cpu)
        ratio = "-" if row.label == INPROCESS else f"{paired_ratio(row, floors[row.clients]):.2f}x"
        target = "-" if row.label == INPROCESS else f"<= {TARGETS.get(row.clients, 1.5)}x"
        messages = f"{sum(row.messages.values()) / row.turns:.0f}" if row.messages else "-"
        lines.append([row.label, str(row.clients), runs, f"{row.median * 1000:.2f}", ratio, target, messages,
                      str(row.turns)])
    print(table("server CPU per warm turn (turn/start on a loaded thread, every notification read) vs the same "
                "turn in-process", ["server", "clients", "cpu/turn ms, each run", "p50", "vs in-process (paired)",
                                    "target", "msgs/turn", "n"], lines))
    for row in rows:  # --baseline: after over before, paired per run (the same stretch of the machine's load)
        ours = next((r for r in rows if r.label == main_label and r.clients == row.clients), None)
        if row.label not in (INPROCESS, main_label) and ours is not None:
            print(f"{main_label} over {row.label} at {row.clients} clients, paired per run: "
                  f"{paired_ratio(ours, row):.2f}x")
    summary = []
    for row in rows:
        if row.label == main_label:
            summary.append([f"serve warm turn, {row.clients} client{'s' if row.clients > 1 else ''}: server CPU/turn",
                            f"{row.median * 1000:.2f} ms", f"in-process {floors[row.clients].median * 1000:.2f} ms",
                            f"{paired_ratio(row, floors[row.clients]):.2f}x", f"<= {TARGETS.get(row.clients, 1.5)}x"])
    record_summary(summary)
