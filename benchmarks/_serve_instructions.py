"""``serve_load --rows instructions``: instructions per warm turn of serve's main thread
against the same turn in-process (issue 30, item 3), counted by callgrind.

Why. The warm rows' CPU ratio moves +-5% run to run on this shared machine; an
instruction count does not depend on the load, so a cut of 1-3% shows in one run. It is
not the whole figure: the kernel's part is not counted (a loopback socket write that
wakes its reader is ~10 us of the writer's CPU on this machine, serve makes ~4.5 a turn
at 1 client against the in-process agent's 1), nor what an instruction costs, so the CPU
ratio of the warm rows stays the target's measure. What an instruction costs is
approximated: callgrind also simulates the first-level caches and the branch predictor
(``--cache-sim=yes --branch-sim=yes``), and the table gives the Trio thread's L1 misses
(instruction and data) and mispredicted branches per turn beside the instructions.
serve's extra work is many small Python functions run once or a few times a turn (the
relay, the mapper, the encoder, the framing), each a fresh stretch of code and data:
its misses and mispredictions grow more than its instructions (at 40 turns, 1.34x the
instructions, 1.41x the misses, 1.44x the mispredictions), which is why the CPU ratio
is above the instruction ratio. The in-process side's request body grows with the
history and serve's extra does not: at 300 turns (near the warm rows' histories) the
ratios are 1.150x the instructions (13.03 M against 11.33 M), 1.307x the L1 misses and
1.302x the mispredictions, while the warm rows' CPU ratio reads ~1.4x: the rest is the
kernel (socket writes and wakeups) and what the simulation leaves out (second-level
caches, the TLB, the cost of being woken and switched).

How. Each side runs under ``valgrind --tool=callgrind --separate-threads=yes
--instr-atstart=no --cache-sim=yes --branch-sim=yes`` (startup runs uninstrumented), one client (one agent in-process)
on the child-process model server (10 text deltas, no think time), as the warm rows:
after ``WARMUP`` untimed turns, ``callgrind_control -i on`` and ``-z`` (zero), then
``turns`` turns, then ``-d`` (dump). ``callgrind_control`` waits for the process to
answer, which it does only when it runs: a server asleep in ``epoll_wait`` is poked
meanwhile (a request it refuses; the in-process agents: a block of no turns), and the
turns start once the command has returned. Figures: the dump's total of thread 1 (the
Trio thread) and of the other threads (the thread index's worker), per turn.

``--baseline DIR`` adds that checkout's server; sides run one after the other (the
count does not depend on the load: no interleaving needed). Each side's history grows
alike (the same turns in the same order), so compare figures of the same ``turns``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from ._common import BenchServer, Settings, open_bench_server, table
from .serve_load import FAKE, STEP, Phase, _client, running_server, server_command

__all__ = ["measure_instructions", "report_instructions"]

WARMUP = 3  # untimed turns before counting (the first turn's lazy imports, caches)
TURNS = 40
_TOTAL = re.compile(r"^(?:summary|totals): ([\d ]+)$", re.M)
_EVENTS = re.compile(r"^events: (.+)$", re.M)
_MISSES = ("I1mr", "D1mr", "D1mw")  # first-level cache misses: instruction reads, data reads, data writes
_MISPREDICTED = ("Bcm", "Bim")  # mispredicted conditional and indirect branches


@attrs.frozen
class Count:
    label: str
    main: float  # instructions per turn, the Trio thread
    others: float  # instructions per turn, every other thread
    misses: float = 0.0  # the Trio thread's simulated first-level cache misses per turn
    mispredicted: float = 0.0  # the Trio thread's simulated mispredicted branches per turn


def callgrind(out: Path) -> list[str]:
    return [
        "valgrind",
        "--tool=callgrind",
        "--separate-threads=yes",
        "--instr-atstart=no",
        "--cache-sim=yes",
        "--branch-sim=yes",
        f"--callgrind-out-file={out}/callgrind.out.%p",
        f"--log-file={out}/valgrind.%p.log",
    ]


async def _control(poke: Callable[[], Awaitable[None]], *args: str) -> None:
    """``callgrind_control ARGS``, poking the process until it has answered."""
    done = trio.Event()

    async def control() -> None:
        await trio.run_process(["callgrind_control", *args], stdout=subprocess.DEVNULL, capture_stderr=True)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(control)
        while not done.is_set():
            await poke()
            with trio.move_on_after(0.05):
                await done.wait()


async def _counted(pid: int, poke: Callable[[], Awaitable[None]], turns: Callable[[], Awaitable[None]]) -> None:
    await _control(poke, "-i", "on", str(pid))
    await _control(poke, "-z", str(pid))
    await turns()
    await _control(poke, "-d", str(pid))


def _totals(out: Path, pid: int, turns: int, label: str) -> Count:
    """The dump's (``callgrind.out.PID.1-TT``) totals: thread 1, the others."""
    main = others = misses = mispredicted = 0
    for path in out.glob(f"callgrind.out.{pid}.1-*"):
        text = path.read_text(errors="replace")
        found, named = _TOTAL.search(text), _EVENTS.search(text)
        totals = (
            dict(zip(named.group(1).split(), map(int, found.group(1).split()), strict=False)) if found and named else {}
        )
        if path.name.endswith("-01"):
            main += totals.get("Ir", 0)
            misses += sum(totals.get(event, 0) for event in _MISSES)
            mispredicted += sum(totals.get(event, 0) for event in _MISPREDICTED)
        else:
            others += totals.get("Ir", 0)
    if not main:
        raise RuntimeError(f"{label}: callgrind dumped nothing for the Trio thread (in {out})")
    return Count(label, main / turns, others / turns, misses / turns, mispredicted / turns)


async def _served(tree: str, label: str, turns: int, model: BenchServer) -> Count:
    work = Path(tempfile.mkdtemp(prefix="serve-instructions-"))
    (work / "workspace").mkdir()
    (work / "callgrind").mkdir()
    try:
        command, env = server_command(FAKE, work, tree, None, model)
        async with (
            running_server([*callgrind(work / "callgrind"), *command], env, work) as (pid, url),
            trio.open_nursery() as nursery,
        ):
            with trio.fail_after(STEP):
                client = await _client(nursery, url, Phase(label, 1))
                await client.request("thread/start", {"cwd": str(work / "workspace")})
                for _ in range(WARMUP):
                    await client.turn_on_last()

                async def poke() -> None:  # a request the server refuses: it wakes and answers
                    try:
                        await client.request("benchmark/poke", {})
                    except RuntimeError:
                        pass

                async def run() -> None:
                    for _ in range(turns):
                        await client.turn_on_last()

                await _counted(pid, poke, run)
            await client.wire.aclose()
            nursery.cancel_scope.cancel()
        return _totals(work / "callgrind", pid, turns, label)
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _inprocess(tree: str, turns: int, model: BenchServer) -> Count:
    work = Path(tempfile.mkdtemp(prefix="inprocess-instructions-"))
    (work / "callgrind").mkdir()
    script = Path(__file__).with_name("_inprocess_turns.py")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    try:
        process = await trio.lowlevel.open_process(
            [*callgrind(work / "callgrind"), sys.executable, str(script), model.ws_url, "1", str(work)],
            env={**env, "PYTHONPATH": tree},
            cwd=work,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout
        pending = b""

        async def line() -> bytes:
            nonlocal pending
            while b"\n" not in pending:
                chunk = await stdout.receive_some()
                if not chunk:
                    raise RuntimeError("the in-process agents exited")
                pending += chunk
            text, pending = pending.split(b"\n", 1)
            return text

        async def block(count: int) -> None:
            await stdin.send_all(b"%d\n" % count)
            await line()

        try:
            with trio.fail_after(STEP):
                if await line() != b"ready":
                    raise RuntimeError("the in-process agents did not start")
                await block(WARMUP)
                await _counted(process.pid, lambda: block(0), lambda: block(turns))
        finally:
            with trio.CancelScope(shield=True):
                await stdin.aclose()  # EOF: it exits
                with trio.move_on_after(60):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        return _totals(work / "callgrind", process.pid, turns, "in-process agents")
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def measure_instructions(trees: dict[str, str], turns: int = TURNS) -> list[Count]:
    """In-process (the first tree's ``trio_agent``), then each tree's server."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--rows instructions needs valgrind (callgrind and callgrind_control) on PATH")
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=10)) as model:
        counts = [await _inprocess(next(iter(trees.values())), turns, model)]
        for label, tree in trees.items():
            counts.append(await _served(tree, label, turns, model))
    return counts


def report_instructions(counts: list[Count], turns: int = TURNS) -> None:
    floor = counts[0]

    def versus(ours: float, theirs: float, own: Count) -> str:
        return "-" if own is floor or not theirs else f"{ours / theirs:.3f}x"

    rows = [
        [
            count.label,
            f"{count.main / 1e6:.3f}",
            f"{count.others / 1e6:.3f}",
            versus(count.main, floor.main, count),
            f"{count.misses / 1e3:.1f}",
            versus(count.misses, floor.misses, count),
            f"{count.mispredicted / 1e3:.1f}",
            versus(count.mispredicted, floor.mispredicted, count),
        ]
        for count in counts
    ]
    print(
        table(
            f"instructions per warm turn, 1 client, {turns} turns after {WARMUP} (callgrind; user space only; "
            "cache and branch figures simulated, the Trio thread's)",
            [
                "side",
                "Trio thread M",
                "other threads M",
                "vs in-process",
                "L1 misses k",
                "vs in-process",
                "mispredicted k",
                "vs in-process",
            ],
            rows,
        )
    )
