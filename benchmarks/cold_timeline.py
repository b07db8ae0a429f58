"""Where a cold ``trio-agent run``'s milliseconds go, spawn -> socket -> first byte (issue 30 item 1).

``cold_cli`` says how long spawn -> first text takes; this says where the time goes,
from the system calls of the child: ``strace --seccomp-bpf -f -ttt`` traces only
``execve``, ``connect``, ``sendto``, ``write`` and ``exit_group`` (the filter stops the
child at those alone, so the rest runs at full speed), and each marker is the first
such call after the spawn: trio's own import (its ``ldconfig -p``, from
``ctypes.util.find_library`` in ``trio._core._thread_cache``), the sandbox trial
(``bwrap``), the socket's ``connect``, the WebSocket handshake / the HTTPS ``POST``, the
first request body (HTTPS only: a WebSocket frame is masked), the first byte on stderr
(streamed text) and on stdout (the answer), the exit. The same server as ``cold_cli``
(``trio_agent.cli._bench``'s child process, ``--rtt`` ms of round trip; the CLI with
``--profile openai``, as against OpenAI's servers: the warmup is sent), and its bare
trio-websocket client as the floor. Commands interleaved, the first round discarded,
p50 printed. Only where ``strace`` exists (Linux); its stops make every marker a little
late, alike for every command.

    .venv/bin/python -m benchmarks.cold_timeline [--runs 8] [--rtt 0] [--python PATH --tree DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from ._common import Settings, open_bench_server
from .cold_cli import BARE, TREE

PROFILE = ["--profile", "openai"]  # OpenAI's dialect, as against api.openai.com: the warmup, chaining
TRACED = "trace=execve,connect,sendto,write,exit_group"


def markers(lines: list[str]) -> dict[str, float]:
    """ms after the spawn (the first ``execve``) of each marker's first occurrence."""
    first = lines[0].split()
    main, t0 = first[0], float(first[1])
    found: dict[str, float] = {}
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) < 3:
            continue
        pid, call = parts[0], parts[2]
        at = (float(parts[1]) - t0) * 1000
        own = pid == main
        checks = {
            "trio import (ldconfig)": call.startswith("execve") and "ldconfig" in call,
            "sandbox trial (bwrap)": call.startswith("execve") and "bwrap" in call,
            "socket connect": call.startswith("connect(") and "127.0.0.1" in call and "htons(" in call,
            "ws handshake sent": own and call.startswith("sendto(") and '"GET /' in call,
            "https POST sent": own and call.startswith("sendto(") and '"POST /' in call,
            "https body sent": own and call.startswith("sendto(") and '"{\\"model' in call,
            "first stderr": own and call.startswith("write(2,"),
            "first stdout (answer)": own and call.startswith("write(1,"),
            "exit": own and call.startswith("exit_group"),
        }
        for name, hit in checks.items():
            if hit and name not in found:
                found[name] = at
    return found


def traced(command: list[str], env: dict[str, str], cwd: str) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(["strace", "--seccomp-bpf", "-f", "-ttt", "-s", "48", "-e", TRACED, "-o", out.name, *command],
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return markers(Path(out.name).read_text().splitlines())


async def timeline(runs: int, rtt: float, python: str, tree: str) -> dict[str, list[dict[str, float]]]:
    env = {**os.environ, "PYTHONPATH": tree, "OPENAI_API_KEY": "dummy-local-key", "TRIO_AGENT_NO_DAEMON": "1"}
    # an empty directory: in a checkout, python -m trio_agent imports that checkout's package
    with tempfile.TemporaryDirectory(prefix="cold-timeline-") as work:
        return await _timeline(runs, rtt, python, work, env)


async def _timeline(runs: int, rtt: float, python: str, work: str,
                    env: dict[str, str]) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {}
    async with open_bench_server(Settings(delay=rtt / 2000, think=0.0, deltas=20)) as server:
        commands = {
            "bare client (ws)": [python, "-c", BARE, server.ws_url],
            "trio-agent run (ws)": [python, "-m", "trio_agent", "run", "--websocket-url", server.ws_url, *PROFILE,
                                    "hello"],
            "trio-agent run (https)": [python, "-m", "trio_agent", "run", "--api-base", server.http_base_url,
                                       "--transport", "https", *PROFILE, "hello"],
        }
        for i in range(runs + 1):
            for name, command in commands.items():
                sample = await trio.to_thread.run_sync(traced, command, env, work)
                if i:
                    results.setdefault(name, []).append(sample)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rtt", type=float, default=0.0, help="the server's round trip, ms")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the tree timed")
    parser.add_argument("--tree", default=TREE, help="the source tree timed (its trio_agent on PYTHONPATH)")
    args = parser.parse_args(argv)
    subprocess.run([args.python, "-m", "compileall", "-q", f"{args.tree}/trio_agent",
                    f"{args.tree}/_trio_agent_launch.py"], check=True,
                   env={**os.environ, "PYTHONPATH": args.tree})
    results = trio.run(timeline, args.runs, args.rtt, args.python, args.tree)
    print(f"ms after spawn, p50 of {args.runs} (strace --seccomp-bpf; rtt {args.rtt:g} ms; "
          f"load {os.getloadavg()[0]:.2f})")
    for name, samples in results.items():
        keys = sorted({k for s in samples for k in s}, key=lambda k: statistics.median(s[k] for s in samples if k in s))
        cells = [f"{k} {statistics.median(s[k] for s in samples if k in s):.1f}" for k in keys]
        print(f"  {name}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
