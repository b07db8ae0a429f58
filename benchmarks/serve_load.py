"""Load on ``trio-agent serve --listen`` (issue 23, item 5): turns per second and the
latency of a new thread's first turn at 1, 20 and 200 WebSocket clients, side by side
with the real ``codex app-server`` on the same scripted model server.

Setup, per server and client count (each a fresh server process and home):

- the server: ``python -m trio_agent serve --listen ws://127.0.0.1:0`` of this tree
  (``--tree DIR``: another checkout's ``trio_agent``, for before/after figures) on the
  built-in local model (``--local``: the model runs in the server's own process) or on
  ``trio_agent.cli._bench``'s child-process Responses server (``--websocket-url``, the
  default WebSocket transport); with ``--codex PATH`` (the native binary, e.g. the
  pinned one under ``tests/outsiders/clients`` after ``bash .ci/clients``) also
  ``codex app-server --listen ws://127.0.0.1:0`` with a scratch ``CODEX_HOME`` whose
  ``config.toml`` (``cold_cli.CODEX_CONFIG``) names a model provider on the same
  server (codex's wire for such a provider is HTTP/SSE) and turns codex's own network
  features off (analytics, feedback, the update check, OpenTelemetry export) -- and
  the whole benchmark then re-runs itself in a new network namespace (``unshare -n``,
  only ``lo`` up), so codex reaches nothing else.
  The model server answers at once: 10 text deltas, no think time, no network delay.
- the clients: N WebSocket connections in this process (``Wire``: a lean client on a
  Trio socket), each ``initialize`` +
  ``initialized``; one untimed turn on one more client first (lazy imports). Then,
  all clients started together, each repeats ``rounds`` times: ``thread/start``
  (``cwd``: a scratch workspace) and ``turn/start`` ("hello") and waits for that
  turn's ``turn/completed``. Threads stay loaded (their client stays subscribed) until
  the clients disconnect at the end. A client decodes only its responses and its own
  ``turn/completed``; every other message is counted by its method (and whether it
  names one of the client's own threads) from its first bytes.

Columns: ``turns/s`` (every turn of the phase over its wall time), ``p50``/``p99`` ms
from sending ``thread/start`` to receiving that thread's ``turn/completed``, ``server
cpu/turn`` ms (the server process and its children, user + system, over the phase,
per turn: from ``/proc``), ``client cpu/turn`` ms (this process), ``msgs/turn``
(messages the clients received per turn) and ``others %`` (of those, notifications
about another client's thread: ``thread/started``, ``thread/status/changed`` ...).
Two cores are shared by the server, the clients and the model server: compare rows
of one run.

Warm-turn rows (``--rows warm``; ``_serve_warm`` has the setup): the server's CPU per
turn on an already loaded thread at 1 and 50 clients, against the same turn run by
agents in one process -- issue 30's item 3, whose ratio goes into run_all's summary;
``--baseline DIR`` serves another checkout in the same interleaved loop.
``--rows instructions`` (``_serve_instructions``): the same warm turn's instructions under
callgrind, serve's Trio thread against in-process (load-independent; user space only).

    /work/main/.venv/bin/python -m benchmarks.serve_load [--clients 1,20,200] [--codex PATH] [--quick]
        [--rows cycle,warm,instructions] [--warm-clients 1,50] [--warm-runs N] [--baseline DIR] [--profile DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from ._common import Settings, open_bench_server, pct, record_summary, table
from ._ws_wire import Wire
from .cold_cli import CODEX_CONFIG, TREE

ROUNDS = {1: 40, 20: 5, 200: 2}  # turns per client, per client count (others: 2)
MAX_CLIENTS = 1024  # the most WebSocket connections a benchmarked trio-agent server accepts
STEP = 300.0  # seconds any one wait may take before the phase gives up (codex at 200 clients: ~170 s per turn)
_METHOD = re.compile(r'"method":"([^"]+)"')
_LISTENING = re.compile(r"listening on:? ws://127\.0\.0\.1:(\d+)")
Json = dict[str, Any]


@attrs.define
class Phase:
    """One server at one client count: every turn's latency, the phase's totals."""

    label: str
    clients: int
    latencies: list[float] = attrs.field(factory=list)
    wall: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    received: Counter[str] = attrs.field(factory=Counter)  # method (or "response") -> count
    others: Counter[str] = attrs.field(factory=Counter)  # method -> count, about another client's thread
    gave_up: bool = False  # a wait took longer than STEP: the row says so instead of figures


OVERLOADED = -32001  # the app-server's "overloaded, retry later" error code
OVERLOAD_RETRIES = 5  # bounded: 50 ms doubling, about 1.5 s in all

class Client:
    """One WebSocket client of the app server (see the module docstring)."""

    def __init__(self, wire: Wire, phase: Phase) -> None:
        self.wire = wire
        self.phase = phase
        self.threads: list[str] = []
        self._ids = iter(range(1, 1 << 30))
        self._waiting: dict[int, trio.MemorySendChannel[Json]] = {}
        self._completed: trio.MemorySendChannel[Json] | None = None

    async def read(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while (texts := await self.wire.receive()) is not None:
                for text in texts:
                    self._dispatch(text)

    def _dispatch(self, text: str) -> None:
        found = _METHOD.search(text, 0, 120)
        if found is None:  # a response
            self.phase.received["response"] += 1
            message = json.loads(text)
            thread = message.get("result", {}).get("thread")
            if isinstance(thread, dict):  # before its thread/started is read
                self.threads.append(thread["id"])
            self._waiting.pop(message["id"]).send_nowait(message)
            return
        method = found.group(1)
        self.phase.received[method] += 1
        mine = any(thread in text for thread in self.threads)
        if not mine and method.startswith(("thread/", "turn/", "item/")):
            self.phase.others[method] += 1
        if method == "turn/completed" and mine and self._completed is not None:
            message = json.loads(text)
            if message["params"]["threadId"] == self.threads[-1]:
                self._completed.send_nowait(message)
        elif method in ("item/tool/call", "execCommandApproval", "applyPatchApproval") or "requestApproval" in method:
            raise RuntimeError(f"the server asked the benchmark client {method}; it answers none")

    async def request(self, method: str, params: Json) -> Json:
        for attempt in range(OVERLOAD_RETRIES + 1):
            request_id = next(self._ids)
            send, receive = trio.open_memory_channel[Json](1)
            self._waiting[request_id] = send
            await self.wire.send(json.dumps({"id": request_id, "method": method, "params": params}))
            message = await receive.receive()
            error = message.get("error")
            if isinstance(error, dict) and error.get("code") == OVERLOADED and attempt < OVERLOAD_RETRIES:
                # codex app-server's "Server overloaded; retry later." (its clients retry):
                # at 200 clients on a loaded machine it refused thread/start once.
                await trio.sleep(0.05 * 2 ** attempt)
                continue
            if error is not None:
                raise RuntimeError(f"{method} failed: {error}")
            result: Json = message["result"]
            return result
        raise AssertionError("unreachable")

    async def initialize(self) -> None:
        await self.request("initialize", {"clientInfo": {"name": "serve_load", "version": "1"}})
        await self.wire.send(json.dumps({"method": "initialized"}))

    async def turn(self, cwd: str) -> float:
        """thread/start + turn/start; seconds until that turn's turn/completed."""
        start = time.perf_counter()
        await self.request("thread/start", {"cwd": cwd})  # _dispatch keeps its thread id
        await self.turn_on_last()
        return time.perf_counter() - start

    async def turn_on_last(self) -> float:
        """turn/start on this client's latest thread; seconds until its turn/completed."""
        start = time.perf_counter()
        send, receive = trio.open_memory_channel[Json](1)
        self._completed = send
        await self.request("turn/start", {"threadId": self.threads[-1],
                                          "input": [{"type": "text", "text": "hello"}]})
        completed = await receive.receive()
        self._completed = None
        status = completed["params"]["turn"]["status"]
        if status != "completed":
            raise RuntimeError(f"a turn ended {status}: {completed['params']['turn'].get('error')}")
        return time.perf_counter() - start


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its live descendants, from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats.get(current, (0, 0.0))[1]
        todo += [child for child, (parent, _) in stats.items() if parent == current]
    return total


@attrs.frozen
class ServerSpec:
    """How to start one kind of server: its label and command builder."""

    label: str
    kind: str  # "local", "fake" (trio-agent on the model server) or "codex"


def server_command(spec: ServerSpec, work: Path, tree: str, codex: str | None, model: Any) -> tuple[list[str], Json]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    if spec.kind == "codex":
        assert codex is not None
        home = Path.home() / ".cache" / "trio-agent-bench" / f"codex-home-load-{os.getpid()}"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        (home / "config.toml").write_text(CODEX_CONFIG.format(base_url=model.http_base_url))
        return [codex, "app-server", "--listen", "ws://127.0.0.1:0"], {
            **env, "CODEX_HOME": str(home), "LOCAL_KEY": "dummy-local-key", "RUST_LOG": "error"}
    # --max-connections: the server serves 64 WebSocket connections by default (beyond them a
    # 503, issue 30's review); the 200-client phase needs more, as codex's has no such bound.
    command = [sys.executable, "-m", "trio_agent", "serve", "--listen", "ws://127.0.0.1:0", "--home",
               str(work / "home"), "--workspace", str(work / "workspace"), "--max-connections", str(MAX_CLIENTS)]
    env.update(PYTHONPATH=tree, CODEX_HOME=str(work / "no-codex-login"))
    if spec.kind == "local":
        return [*command, "--local"], env
    return [*command, "--websocket-url", model.ws_url], {**env, "OPENAI_API_KEY": "bench-key"}


@asynccontextmanager
async def running_server(command: list[str], env: Json, work: Path) -> AsyncIterator[tuple[int, str]]:
    """The server process: ``(pid, url)`` once it listens; SIGTERM (then SIGKILL) after."""
    stderr_path = work / "server.stderr"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(command, env=env, cwd=work, stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        with trio.fail_after(STEP):
            while (found := _LISTENING.search(stderr_path.read_text(errors="replace"))) is None:
                if process.poll() is not None:
                    raise RuntimeError(f"{command[0]} exited: {stderr_path.read_text(errors='replace')[-2000:]}")
                await trio.sleep(0.05)  # another process's output sets no trio.Event
        yield process.pid, f"ws://127.0.0.1:{found.group(1)}"
    finally:
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _client(nursery: trio.Nursery, url: str, phase: Phase) -> Client:
    client = Client(await Wire.connect(url), phase)
    nursery.start_soon(client.read)
    await client.initialize()
    return client


@asynccontextmanager
async def profiled(pid: int, directory: str | None, name: str) -> AsyncIterator[None]:
    """With ``--profile DIR``: ``py-spy record`` of the server during the block, its
    collapsed stacks in ``DIR/NAME.txt`` (py-spy beside this Python, as a venv installs
    it, else on PATH; ``SERVE_LOAD_SPY_RATE``: samples a second, default 250)."""
    if directory is None:
        yield
        return
    beside = Path(sys.executable).parent / "py-spy"
    spy = str(beside) if beside.exists() else shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy: pip install py-spy (into this Python's environment)")
    os.makedirs(directory, exist_ok=True)  # (once, before the block: nothing else runs yet)
    out = Path(directory) / f"{name}.txt"
    # --nonblocking: py-spy otherwise stops the process for each sample, which inflated the
    # server's CPU per warm turn 2.6x (8.1 ms against 3.1) and with it every profiled figure
    rate = os.environ.get("SERVE_LOAD_SPY_RATE", "250")
    command = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", rate, "--nonblocking",
               "--output", str(out)]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGINT)  # py-spy writes its output and exits
            await process.wait()


async def run_phase(spec: ServerSpec, clients: int, rounds: int, tree: str, codex: str | None, model: Any,
                    profile: str | None = None) -> Phase:
    work = Path(tempfile.mkdtemp(prefix="serve-load-"))
    (work / "workspace").mkdir()
    phase = Phase(spec.label, clients)
    try:
        command, env = server_command(spec, work, tree, codex, model)
        async with running_server(command, env, work) as (pid, url), trio.open_nursery() as nursery:
            with trio.fail_after(STEP):
                warm = await _client(nursery, url, Phase(spec.label, 1))
                await warm.turn(str(work / "workspace"))
                connected = [await _client(nursery, url, phase) for _ in range(clients)]
            phase.received.clear()
            phase.others.clear()
            async with profiled(pid, profile, f"{spec.kind}-{clients}"):
                cpu, mine, start = process_cpu(pid), time.process_time(), time.perf_counter()
                async with trio.open_nursery() as turns:
                    for client in connected:
                        turns.start_soon(_rounds, client, rounds, str(work / "workspace"), phase)
                phase.wall = time.perf_counter() - start
            phase.server_cpu, phase.client_cpu = process_cpu(pid) - cpu, time.process_time() - mine
            for client in [warm, *connected]:
                await client.wire.aclose()
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return phase


async def _rounds(client: Client, rounds: int, cwd: str, phase: Phase) -> None:
    for _ in range(rounds):
        with trio.fail_after(STEP):
            phase.latencies.append(await client.turn(cwd))


async def measure(specs: list[ServerSpec], counts: list[int], quick: bool, tree: str, codex: str | None,
                  profile: str | None = None) -> list[Phase]:
    phases = []
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=10)) as model:
        for clients in counts:
            rounds = ROUNDS.get(clients, 2)
            rounds = max(1, rounds // 2) if quick else rounds
            for spec in specs:
                try:
                    phase = await run_phase(spec, clients, rounds, tree, codex, model, profile)
                except* trio.TooSlowError:
                    phase = Phase(spec.label, clients, gave_up=True)
                if phase.gave_up:
                    print(f"   {spec.label}, {clients} clients: a turn took over {STEP:.0f} s; no figures", flush=True)
                    phases.append(phase)
                    continue
                print(f"   {spec.label}, {clients} clients: {len(phase.latencies)} turns in {phase.wall:.1f} s",
                      flush=True)
                phases.append(phase)
    return phases


def row(phase: Phase) -> list[str]:
    turns = len(phase.latencies)
    if phase.gave_up or not turns:
        return [phase.label, str(phase.clients), f"(a turn over {STEP:.0f} s)", *["-"] * 7]
    received = sum(phase.received.values())
    return [phase.label, str(phase.clients), f"{turns / phase.wall:.1f}",
            f"{statistics.median(phase.latencies) * 1000:.0f}", f"{pct(phase.latencies, 0.99) * 1000:.0f}",
            f"{phase.server_cpu / turns * 1000:.1f}", f"{phase.client_cpu / turns * 1000:.1f}",
            f"{received / turns:.0f}", f"{sum(phase.others.values()) / max(received, 1) * 100:.0f}", str(turns)]


def report(phases: list[Phase]) -> None:
    header = ["server", "clients", "turns/s", "p50 ms", "p99 ms", "server cpu/turn ms", "client cpu/turn ms",
              "msgs/turn", "others %", "n"]
    print(table("thread/start -> turn/completed under load (each client: thread/start + turn/start, repeated)",
                header, [row(phase) for phase in phases]))
    for phase in phases:
        if phase.others and phase.latencies:
            turns = len(phase.latencies)
            shown = ", ".join(f"{method} {count / turns:.1f}" for method, count in phase.others.most_common())
            print(f"  {phase.label}, {phase.clients} clients, other clients' messages per turn: {shown}")
    by = {(phase.label, phase.clients): phase for phase in phases}
    summary = []
    for phase in phases:
        if phase.label != LOCAL.label and phase.label != FAKE.label:
            continue
        codex = by.get((CODEX.label, phase.clients)) if phase.label == FAKE.label else None
        if phase.gave_up:
            continue
        if codex is not None and codex.gave_up:
            codex = None
        ours = len(phase.latencies) / phase.wall
        reference = f"codex {len(codex.latencies) / codex.wall:.1f}/s" if codex else "-"
        ratio = f"{ours / (len(codex.latencies) / codex.wall):.2f}x" if codex else "-"
        summary.append([f"serve load, {phase.label}, {phase.clients} clients: turns/s", f"{ours:.1f}/s", reference,
                        ratio, "report"])
    record_summary(summary)


LOCAL = ServerSpec("trio-agent --local", "local")
FAKE = ServerSpec("trio-agent (model server)", "fake")
CODEX = ServerSpec("codex app-server (model server)", "codex")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", default="1,20,200", help="client counts, comma-separated")
    parser.add_argument("--codex", default=None, help="path of the codex native binary (optional)")
    parser.add_argument("--tree", default=TREE, help="the checkout whose trio_agent serves (default: this one)")
    parser.add_argument("--servers", default="local,fake,codex", help="which of local, fake, codex to run")
    parser.add_argument("--quick", action="store_true", help="half the rounds")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="py-spy record each server during its timed phase (collapsed stacks in DIR)")
    parser.add_argument("--rows", default="cycle,warm",
                        help="cycle (thread/start + turn, every server), warm (a loaded thread's turn vs in-process), "
                             "instructions (warm turns at 1 client under callgrind: not part of the default)")
    parser.add_argument("--warm-clients", default="1,50", help="client counts of the warm-turn rows")
    parser.add_argument("--warm-runs", type=int, default=None,
                        help="warm-turn rows: runs of the interleaved loop, each with fresh processes, their rounds "
                             "pooled (default 2, --quick 1: a process set's placement on the cores moves all its "
                             "rounds alike)")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="warm-turn rows: also serve from this checkout, interleaved (before/after figures)")
    args = parser.parse_args(argv)
    if args.codex and os.environ.get("COLD_CLI_NETNS") != "1":
        inner = " ".join(["exec", sys.executable, "-m", "benchmarks.serve_load", *(argv or sys.argv[1:])])
        os.environ["COLD_CLI_NETNS"] = "1"
        os.execvp("unshare", ["unshare", "-n", "sh", "-c", f"ip link set lo up && {inner}"])
    chosen = args.servers.split(",")
    specs = [spec for spec in (LOCAL, FAKE, CODEX) if spec.kind in chosen and (spec.kind != "codex" or args.codex)]
    counts = [int(count) for count in args.clients.split(",")]
    if max(counts) > MAX_CLIENTS:
        parser.error(f"--clients: at most {MAX_CLIENTS} (the --max-connections the servers are started with)")
    trees = {"serve": args.tree, **({"serve (baseline)": args.baseline} if args.baseline else {})}
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/trio_agent"], check=True)
    print(f"serving tree: {args.tree}; {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = args.rows.split(",")
    if "cycle" in rows:
        phases = trio.run(measure, specs, counts, args.quick, args.tree, args.codex, args.profile)
        report(phases)
        if not args.codex:
            print("codex: not run (pass --codex PATH to the native binary; see the docstring)")
    if "warm" in rows:
        from ._serve_warm import measure_warm, report_warm  # it imports this module

        warm_counts = [int(count) for count in args.warm_clients.split(",")]
        warm_runs = args.warm_runs if args.warm_runs is not None else (1 if args.quick else 2)
        report_warm(trio.run(measure_warm, warm_counts, args.quick, trees, warm_runs,
                             args.profile), "serve")
        print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    if "instructions" in rows:
        from ._serve_instructions import measure_instructions, report_instructions  # it imports this module

        report_instructions(trio.run(measure_instructions, trees))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
