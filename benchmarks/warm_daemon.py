"""The warm daemon (issue 13, item 5): spawn -> first text of ``trio-agent run`` served
by a running ``trio-agent serve --daemon``, against the codex native binary, at 0 and
25 ms round trip. Target: <= 0.5x codex at both.

Bytecode first: this machine sets ``PYTHONDONTWRITEBYTECODE=1``, so the script runs
``python -m compileall -q`` on this tree's ``trio_agent`` and launcher before timing.

Setup: ``trio_agent.cli._bench``'s child-process server (its one-way ``delay`` is half
the round trip; no think time; 20 text deltas per answer) and a daemon of this tree on
a private runtime directory, started with ``serve --daemon`` as a user would. The
client is the console script as pip writes it (``import re, sys; from
_trio_agent_launch import main``) run by this interpreter, with ``OPENAI_API_KEY`` set
and ``OPENAI_RESPONSES_WEBSOCKET_URL`` pointing at the server: the real-API path,
whose first stdout byte is the answer. One untimed run first makes the daemon
prewarm a worker for this configuration; before every timed run the script waits
until the replacement spare is ready (``status``), so each run finds one -- the
steady state of a user running prompt after prompt. Rows, each spawned the same
number of times, at each round trip:

- ``trio-agent run (warm daemon)``: the thin client;
- ``trio-agent run (in-process)``: the same with ``TRIO_AGENT_NO_DAEMON=1``, the cold path;
- ``codex exec``: the native binary over HTTP/SSE to the same server (its connection
  handshake is charged one round trip, as the WebSocket upgrade is), as in
  ``cold_cli`` -- and then the whole benchmark re-runs itself in a new network
  namespace (``unshare -n``, only ``lo`` up) so that codex reaches nothing else;
- ``python -c print``: the interpreter's start-up, the floor under any Python client.

Back to back (issue 30, item 2): at each round trip, after the rows above, batches of
``--back-to-back`` (10) runs with no pause between them -- each client spawned the
moment the previous one exited, nothing waited for -- counting the runs the daemon
served (``TRIO_AGENT_DAEMON_VERBOSE``'s "served by the warm daemon") and their p50
spawn -> first text. ``--baseline TREE`` (a checkout of another commit) runs the same
batches against a daemon started from that tree, interleaved batch by batch with
this tree's, for a before/after in one run.

    /work/main/.venv/bin/python -m benchmarks.warm_daemon [--runs 15] [--codex PATH]
        [--back-to-back 10] [--batches 2] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from trio_agent._daemon._command import daemon_status

from ._common import Settings, open_bench_server, pct, record_summary, table
from .cold_cli import ENV, TREE, WORK, run_codex, spawn_first_output

CODEX = "/tmp/codexpeer/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
ROUND_TRIPS = (0.0, 0.025)
SCRIPT = """\
# -*- coding: utf-8 -*-
import re
import sys
from _trio_agent_launch import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
Sample = tuple[float, float, float]


def _settle(directory: str, seconds: float = 60.0) -> None:
    """Until the daemon's every worker is a ready spare (the previous run's replacement too)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = daemon_status(directory)
        if status is not None and status.ready and not status.starting and set(status.ready) == set(status.workers):
            return
        time.sleep(0.01)
    raise RuntimeError(f"the daemon has no ready spare after {seconds:.0f} s")


def _daemon(command: str, directory: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "trio_agent", "serve", command], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd="/")  # `-m` puts the cwd first on sys.path: PYTHONPATH decides


def _served_run(command: list[str], env: dict[str, str]) -> tuple[float, bool]:
    """(spawn -> first stdout byte, whether the warm daemon served it)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                   env={**env, "TRIO_AGENT_DAEMON_VERBOSE": "1"}, cwd=TREE)
        assert process.stdout is not None
        process.stdout.read(1)
        first = time.perf_counter() - start
        process.stdout.read()
        if process.wait() != 0:
            raise RuntimeError(f"{command} exited {process.returncode}")
        err.seek(0)
        return first, b"served by the warm daemon" in err.read()


def _back_to_back(command: list[str], env: dict[str, str], runs: int) -> list[tuple[float, bool]]:
    _settle(env["TRIO_AGENT_DAEMON_DIR"])  # the batch starts in the steady state; inside it nothing waits
    return [_served_run(command, env) for _ in range(runs)]


Batches = dict[float, dict[str, list[tuple[float, bool]]]]


async def measure(runs: int, codex: str | None, work: Path, back: int = 10, batches: int = 2,
                  baseline: str | None = None) -> tuple[dict[float, dict[str, list[Sample]]], Batches]:
    directory = str(work / "rt")
    script = work / "trio-agent"
    script.write_text(SCRIPT)
    results: dict[float, dict[str, list[Sample]]] = {}
    serial: Batches = {}
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=20)) as server:
        env = {**ENV, "OPENAI_API_KEY": "bench-key", "OPENAI_RESPONSES_WEBSOCKET_URL": server.ws_url,
               "CODEX_HOME": str(work / "no-codex-home"), "TRIO_AGENT_DAEMON_DIR": directory,
               "TRIO_AGENT_HOME": str(work / "home")}  # its sessions: not the user's home (nor a growing one)
        client = [sys.executable, str(script), "run", "hello"]
        await trio.to_thread.run_sync(_daemon, "--daemon", directory, env)
        trees = {"this tree": env}
        if baseline:
            trees["baseline"] = {**env, "PYTHONPATH": baseline, "TRIO_AGENT_DAEMON_DIR": str(work / "rt-base")}
            await trio.to_thread.run_sync(_daemon, "--daemon", str(work / "rt-base"), trees["baseline"])
        try:
            for rtt in ROUND_TRIPS:
                await server.configure(Settings(delay=rtt / 2, think=0.0, deltas=20))
                rows: dict[str, list[Sample]] = {
                    "trio-agent run (warm daemon)": [], "trio-agent run (in-process)": [], "codex exec": [],
                    "python -c print": []}
                await trio.to_thread.run_sync(spawn_first_output, client, 0, env)  # makes the daemon prewarm
                for i in range(runs + 1):  # the first of each only warms the page cache
                    await trio.to_thread.run_sync(_settle, directory)
                    samples = [("trio-agent run (warm daemon)",
                                await trio.to_thread.run_sync(spawn_first_output, client, 0, env)),
                               ("trio-agent run (in-process)", await trio.to_thread.run_sync(
                                   spawn_first_output, client, 0, {**env, "TRIO_AGENT_NO_DAEMON": "1"})),
                               ("python -c print", await trio.to_thread.run_sync(
                                   spawn_first_output, [sys.executable, "-c", "print('x')"], 0, env))]
                    if codex:
                        samples.append(("codex exec", await trio.to_thread.run_sync(
                            run_codex, codex, server.http_base_url)))
                    if i:
                        for name, sample in samples:
                            rows[name].append(sample)
                results[rtt] = rows
                serial[rtt] = {name: [] for name in trees}
                for tree_env in trees.values():
                    await trio.to_thread.run_sync(spawn_first_output, client, 0, tree_env)  # makes it prewarm
                for _ in range(batches):
                    for name, tree_env in trees.items():
                        serial[rtt][name] += await trio.to_thread.run_sync(_back_to_back, client, tree_env, back)
        finally:
            for tree_env in trees.values():
                await trio.to_thread.run_sync(_daemon, "--stop", tree_env["TRIO_AGENT_DAEMON_DIR"], tree_env)
    return results, serial


def report_back_to_back(serial: Batches, back: int) -> None:
    lines = []
    for rtt, trees in serial.items():
        for name, values in trees.items():
            warm = [first for first, served in values if served]
            lines.append([f"{rtt * 1000:.0f} ms", name, f"{len(warm)} of {len(values)}",
                          f"{statistics.median(v[0] for v in values) * 1000:.1f}",
                          f"{statistics.median(warm) * 1000:.1f}" if warm else "-"])
    print(table(f"back to back: batches of {back} runs with no pause, served warm and spawn -> first text p50 (ms)",
                ["RTT", "daemon", "served warm", "first p50 (all)", "first p50 (warm)"], lines))
    print()
    # Issue 30 item 2 in run_all's table: this tree's runs served warm back to back.
    record_summary([
        [f"warm daemon back to back (batches of {back}, no pause), {rtt * 1000:.0f} ms RTT: served warm",
         f"{sum(served for _, served in values)} of {len(values)}", "-", "-", f">= {back - 1} of {back}"]
        for rtt, trees in serial.items() for name, values in trees.items() if name == "this tree"
    ])


def report(results: dict[float, dict[str, list[Sample]]], codex: bool) -> None:
    summary = []
    for rtt, rows in results.items():
        warm = statistics.median(s[0] for s in rows["trio-agent run (warm daemon)"])
        reference = statistics.median(s[0] for s in rows["codex exec"]) if codex else None
        lines = []
        for name, values in rows.items():
            if not values:
                continue
            first = [v[0] for v in values]
            p50 = statistics.median(first)
            lines.append([name, f"{p50 * 1000:.1f}", f"{pct(first, 0.99) * 1000:.1f}",
                          f"{statistics.median(v[1] for v in values) * 1000:.1f}",
                          f"{p50 / reference:.2f}" if reference else "-", len(values)])
        print(table(f"spawn -> first text at {rtt * 1000:.0f} ms round trip, ms (x codex: p50 over codex's p50)",
                    ["command", "first p50", "p99", "exit p50", "x codex", "n"], lines))
        print()
        if reference is not None:
            summary.append([f"warm daemon spawn -> first text, {rtt * 1000:.0f} ms RTT", f"{warm * 1000:.1f} ms",
                            f"codex {reference * 1000:.1f} ms", f"{warm / reference:.2f}x", "<= 0.5x codex"])
        else:
            summary.append([f"warm daemon spawn -> first text, {rtt * 1000:.0f} ms RTT", f"{warm * 1000:.1f} ms",
                            "codex not run", "-", "<= 0.5x codex"])
    record_summary(summary)
    print(table("warm daemon vs codex", ["metric", "ours", "reference", "ratio", "target"], summary))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--codex", default=CODEX if os.path.exists(CODEX) else None,
                        help="path of the codex native binary (default: the offline npm install, if present)")
    parser.add_argument("--no-codex", action="store_true", help="do not run codex")
    parser.add_argument("--back-to-back", type=int, default=10, help="runs per back-to-back batch")
    parser.add_argument("--batches", type=int, default=2, help="back-to-back batches per daemon and round trip")
    parser.add_argument("--baseline", help="a checkout of another commit: its daemon, batch by batch with ours")
    args = parser.parse_args(argv)
    codex = None if args.no_codex else args.codex
    if codex and os.environ.get("COLD_CLI_NETNS") != "1":
        inner = " ".join(["exec", sys.executable, "-m", "benchmarks.warm_daemon", *(argv or sys.argv[1:])])
        os.environ["COLD_CLI_NETNS"] = "1"
        os.execvp("unshare", ["unshare", "-n", "sh", "-c", f"ip link set lo up && {inner}"])
    subprocess.run([sys.executable, "-m", "compileall", "-q", f"{TREE}/trio_agent", f"{TREE}/_trio_agent_launch.py"],
                   check=True, env=ENV)
    work = Path(tempfile.mkdtemp(prefix="warm-daemon-"))
    os.makedirs(WORK, exist_ok=True)  # cold_cli's scratch directory, where its spawns run
    try:
        results, serial = trio.run(measure, args.runs, codex, work, args.back_to_back, args.batches, args.baseline)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(WORK, ignore_errors=True)
    report(results, codex is not None)
    report_back_to_back(serial, args.back_to_back)
    if not codex:
        print("codex: not run (pass --codex PATH to the native binary; see cold_cli's docstring)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
