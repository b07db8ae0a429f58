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

``--codex PATH`` adds the codex native binary (``codex exec``, as ``cold_cli`` runs it,
network features off, the whole run in a loopback-only network namespace): when its
socket opens and its request leaves is the floor the CLI's connect is compared with.
codex is not traced -- under ``strace -f`` its runtime's eventfd wake-ups and its
shell-snapshot children take hundreds of ms -- but seen from a relay in this process
between it and the server: the accept, its first request byte, the server's first
byte (loopback, a copy per chunk), and its first stdout byte as ``cold_cli`` reads it. ``--opens`` also traces
``openat`` and marks the first open of the modules on the way (the CLI's ``_run``, the
configuration, the transport, httpx, the tools, the rollout): what the connect waits
behind; each open is one more stop, so the other markers move a little later.

    .venv/bin/python -m benchmarks.cold_timeline [--runs 8] [--rtt 0] [--codex PATH] [--opens]
        [--python PATH --tree DIR]
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
from urllib.parse import urlsplit, urlunsplit

import trio

from ._common import Settings, open_bench_server
from .cold_cli import BARE, TREE, cli_command, codex_home, run_codex_setup, spawn_first_output

PROFILE = ["--profile", "openai"]  # OpenAI's dialect, as against api.openai.com: the warmup, chaining
TRACED = "trace=execve,connect,sendto,write,exit_group"
# --opens: the first open of each of these (a substring of the path) is a marker
OPENS = {
    "open cli/_run": "trio_agent/cli/__pycache__/_run.",
    "open _config": "trio_agent/__pycache__/_config.",
    "open codex config.toml": "config.toml",
    "open _transport/websocket": "trio_agent/_transport/__pycache__/websocket.",
    "open _transport/https": "trio_agent/_transport/__pycache__/https.",
    "open _transport/_tls": "trio_agent/_transport/__pycache__/_tls.",
    "open trio_websocket": "trio_websocket/__pycache__/__init__.",
    "open httpx": "httpx/__pycache__/__init__.",
    "open _runtime/_model/_client": "_runtime/_model/__pycache__/_client.",
    "open _tools": "trio_agent/_tools/__pycache__/__init__.",
    "open _rollout": "trio_agent/_rollout/__pycache__/__init__.",
    "open _tools/_shell": "trio_agent/_tools/__pycache__/_shell",
    "open CA bundle": ".pem",
}


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
            **{name: call.startswith("openat(") and part in call and "= -1" not in call
               for name, part in OPENS.items()},
        }
        for name, hit in checks.items():
            if hit and name not in found:
                found[name] = at
    return found


def traced(command: list[str], env: dict[str, str], cwd: str, opens: bool = False) -> dict[str, float]:
    calls = TRACED + ",openat" if opens else TRACED
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(["strace", "--seccomp-bpf", "-f", "-ttt", "-s", "160" if opens else "48", "-e", calls,
                        "-o", out.name, *command], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return markers(Path(out.name).read_text().splitlines())


async def timeline(runs: int, rtt: float, python: str, tree: str, codex: str | None = None,
                   opens: bool = False, baseline: str | None = None) -> dict[str, list[dict[str, float]]]:
    # an empty directory: in a checkout, the CLI would import that checkout's package (sys.path[0]);
    # a sessions home of this run's own, as cold_cli gives it (and codex its CODEX_HOME)
    with tempfile.TemporaryDirectory(prefix="cold-timeline-") as work, \
            tempfile.TemporaryDirectory(prefix="cold-timeline-home-") as home:
        env = {**os.environ, "PYTHONPATH": tree, "OPENAI_API_KEY": "dummy-local-key", "TRIO_AGENT_NO_DAEMON": "1",
               "TRIO_AGENT_HOME": home}
        try:
            return await _timeline(runs, rtt, python, work, env, codex, opens, baseline)
        finally:
            shutil.rmtree(codex_home(), ignore_errors=True)


async def _timeline(runs: int, rtt: float, python: str, work: str, env: dict[str, str], codex: str | None,
                    opens: bool, baseline: str | None) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {}
    async with open_bench_server(Settings(delay=rtt / 2000, think=0.0, deltas=20)) as server:
        cli = [*cli_command(python), "run", *PROFILE]  # as the console script runs it (cold_cli.CONSOLE)
        ws = [*cli, "--websocket-url", server.ws_url, "hello"]
        https = [*cli, "--api-base", server.http_base_url, "--transport", "https", "hello"]
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "bare client (ws)": ([python, "-c", BARE, server.ws_url], env),
            "trio-agent run (ws)": (ws, env),
            "trio-agent run (https)": (https, env),
        }
        if baseline:
            before = {**env, "PYTHONPATH": baseline}
            commands["trio-agent run (ws) [baseline]"] = (ws, before)
            commands["trio-agent run (https) [baseline]"] = (https, before)
        async with trio.open_nursery() as nursery:
            relay = Relay(int(urlsplit(server.http_base_url).port or 80))
            if codex:
                port = (await nursery.start(trio.serve_tcp, relay.handle, 0))[0].socket.getsockname()[1]
                relayed = urlunsplit(urlsplit(server.http_base_url)._replace(netloc=f"127.0.0.1:{port}"))
                codex_command, codex_env = run_codex_setup(codex, relayed)
            for i in range(runs + 1):
                for name, (command, command_env) in commands.items():
                    sample = await trio.to_thread.run_sync(traced, command, command_env, work, opens)
                    if i:
                        results.setdefault(name, []).append(sample)
                if codex:
                    sample = await relay.time(codex_command, codex_env, work)
                    if i:
                        results.setdefault("codex exec (https, via a relay)", []).append(sample)
            nursery.cancel_scope.cancel()
    return results


class Relay:
    """Between codex and the server: when its socket was accepted, its first request
    byte arrived, the server's first byte came back (``time.time()``, this process)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.marks: dict[str, float] = {}

    async def handle(self, client: trio.SocketStream) -> None:
        self.marks.setdefault("socket connect", time.time())
        async with client, await trio.open_tcp_stream("127.0.0.1", self.port) as upstream:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._copy, client, upstream, "request sent")
                await self._copy(upstream, client, "server's first byte")
                nursery.cancel_scope.cancel()

    async def _copy(self, source: trio.SocketStream, sink: trio.SocketStream, mark: str) -> None:
        try:
            async for chunk in source:
                self.marks.setdefault(mark, time.time())
                await sink.send_all(chunk)
        except trio.BrokenResourceError:
            pass

    async def time(self, command: list[str], env: dict[str, str], cwd: str) -> dict[str, float]:
        self.marks = {}
        start = time.time()
        first, end, _cpu = await trio.to_thread.run_sync(spawn_first_output, command, 0, env, cwd)
        found = {name: (at - start) * 1000 for name, at in self.marks.items()}
        return {**found, "first stdout (answer)": first * 1000, "exit": end * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--rtt", type=float, default=0.0, help="the server's round trip, ms")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the tree timed")
    parser.add_argument("--tree", default=TREE, help="the source tree timed (its trio_agent on PYTHONPATH)")
    parser.add_argument("--baseline", default=None, help="another tree, its CLI rows interleaved with ours")
    parser.add_argument("--codex", default=None, help="path of the codex native binary (optional)")
    parser.add_argument("--opens", action="store_true", help="also mark the first open of the modules on the way")
    args = parser.parse_args(argv)
    if args.codex and os.environ.get("COLD_CLI_NETNS") != "1":
        # as cold_cli: codex runs where nothing but loopback exists
        inner = " ".join(["exec", sys.executable, "-m", "benchmarks.cold_timeline", *(argv or sys.argv[1:])])
        os.environ["COLD_CLI_NETNS"] = "1"
        os.execvp("unshare", ["unshare", "-n", "sh", "-c", f"ip link set lo up && {inner}"])
    for tree in (args.tree, *([args.baseline] if args.baseline else [])):
        subprocess.run([args.python, "-m", "compileall", "-q", f"{tree}/trio_agent",
                        f"{tree}/_trio_agent_launch.py"], check=True, env={**os.environ, "PYTHONPATH": tree})
    results = trio.run(timeline, args.runs, args.rtt, args.python, args.tree, args.codex, args.opens,
                       args.baseline)
    print(f"ms after spawn, p50 of {args.runs} (strace --seccomp-bpf; rtt {args.rtt:g} ms; "
          f"load {os.getloadavg()[0]:.2f})")
    for name, samples in results.items():
        keys = sorted({k for s in samples for k in s}, key=lambda k: statistics.median(s[k] for s in samples if k in s))
        cells = [f"{k} {statistics.median(s[k] for s in samples if k in s):.1f}" for k in keys]
        print(f"  {name}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
