"""A warm daemon of a test's own: started with ``trio-agent serve --daemon`` on a
private runtime directory, stopped with ``--stop`` at the end, and then the daemon's
pid and every worker's pid it ever reported must be gone.

``Daemon.prime`` runs a harmless prompt with the options a test is about to use: the
first run of a configuration falls back to the in-process path and makes the daemon
start a spare for it; ``prime`` returns once every spare is ready (their pids), so
the test's own run is served warm -- and ``served`` checks that one of them served it
(its pid left the daemon). The daemon keeps up to 32 spares here
(``TRIO_AGENT_DAEMON_SPARES``), so that none is closed to make room mid-test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from trio_agent._daemon._command import DaemonStatus, daemon_status

from .._os_facts import pid_alive, wait_gone
from ..cli._cli import COMMAND, cli_env, run_cli

SPARE_BOUND = 60.0  # seconds for a spare to start (a Python process importing the runtime)
_POLL = 0.02


def daemon_env(directory: str, **extra: str) -> dict[str, str]:
    env = cli_env(**{"TRIO_AGENT_DAEMON_DIR": directory, "TRIO_AGENT_DAEMON_SPARES": "32", **extra})
    env.pop("TRIO_AGENT_NO_DAEMON")
    return env


def normalised(output: bytes) -> str:
    """Output with the measured durations (first token, totals, tool times) and the session id blanked, and
    tool results cut to their status (a result holds its wall time, and the line is cut
    to a length, so a time's digits move what is left of it)."""
    text = re.sub(r"(\[tool\] \S+ -> \S+ in )[^\n]*", r"\1N", output.decode())
    text = re.sub(r"(run trio-agent resume )[0-9a-f-]{36}", r"\1ID", text)  # each run's own session
    return re.sub(r"\d+(\.\d+)? (ms|s|seconds)\b", r"N \2", text)


class Daemon:
    def __init__(self, directory: str, **extra: str) -> None:
        self.directory = directory
        self.env = daemon_env(directory, **extra)
        self.seen: set[int] = set()  # every pid the daemon reported: all must be gone at the end
        self.pid = 0

    def status(self) -> DaemonStatus | None:
        status = daemon_status(self.directory)
        if status is not None:
            self.seen.update((status.pid, *status.workers))
        return status

    async def settle(self) -> set[int]:
        """Once every worker is a ready spare (none starting, none running): their pids."""
        with trio.fail_after(SPARE_BOUND):
            while True:
                status = self.status()
                assert status is not None, "the daemon went away"
                if not status.starting and set(status.workers) == set(status.ready):
                    return set(status.ready)
                await trio.sleep(_POLL)  # another process's state: polled, with a bound

    async def prime(self, *options: str, cwd: Path) -> set[int]:
        """Make the daemon start a spare for ``run OPTIONS PROMPT`` in ``cwd`` (the first
        run of a configuration falls back and starts one); the ready spares then."""
        done = await run_cli("run", *options, "hello", cwd=cwd, env=self.env)
        assert done.returncode == 0, done.stderr.decode()
        return await self.settle()

    async def served(self, spares: set[int]) -> int:
        """The one spare of ``spares`` that a run took, once it has exited (the client
        may exit first: the worker reports the status before its interpreter's exit)."""
        with trio.fail_after(SPARE_BOUND):
            while True:
                status = self.status()
                assert status is not None, "the daemon went away"
                if not set(status.ready) >= spares:
                    break  # one was taken
                await trio.sleep(_POLL)
        gone = spares - set(status.ready)
        assert len(gone) == 1, f"spares {spares}, ready now {status.ready}"
        (spare,) = gone
        await wait_gone([spare])
        return spare


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *args], env=env, cwd="/", capture_output=True, text=True, timeout=120)


def _wait_gone(pids: set[int], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(_POLL)
    assert not any(pid_alive(pid) for pid in pids), f"left running: {[p for p in pids if pid_alive(p)]}"


@contextmanager
def running_daemon(parent: str | None = None, **extra: str) -> Iterator[Daemon]:
    """A daemon started with ``daemon_env(directory, **extra)``, stopped at the end; its
    directory is a new one in ``parent`` (default: the temp dir)."""
    directory = tempfile.mkdtemp(prefix="tad-", dir=parent)  # short (a socket path has 108 bytes), mode 0700
    daemon = Daemon(directory, **extra)
    try:
        started = _cli("serve", "--daemon", env=daemon.env)
        assert started.returncode == 0, started.stdout + started.stderr
        status = daemon.status()
        assert status is not None
        daemon.pid = status.pid
        assert f"daemon started (pid {status.pid}, socket {directory}/daemon.sock" in started.stdout
        yield daemon
    finally:
        daemon.status()
        stopped = _cli("serve", "--stop", env=daemon.env)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        _wait_gone(daemon.seen)
        assert not os.path.exists(os.path.join(directory, "daemon.sock"))
        shutil.rmtree(directory)
