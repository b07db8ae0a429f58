"""The warm daemon as the README installs trio-agent: ``pip install -e CHECKOUT`` into a
fresh environment (and a built wheel's install), then ``trio-agent serve --daemon`` and
``trio-agent run`` from that environment's console script, with nothing of this
checkout on ``PYTHONPATH`` -- so the client imports the launcher pip installed and the
daemon the one it finds, and both must agree that they are one installation.

The run is known to be served warm two ways: ``TRIO_AGENT_DAEMON_VERBOSE=1`` makes the
client say so on stderr, and the daemon's ready spare (its pid, from ``status``) is
the one that took it; three more runs straight after it are served warm too. At the
end ``serve --stop``, and every pid the daemon reported (itself, every worker) is gone.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import trio

from trio_agent._daemon._command import DaemonStatus, daemon_status

from .._os_facts import pid_alive
from ._cli import cli_env
from ._install import fresh_venv

SPARE_BOUND = 60.0  # seconds for a spare to start (a Python process importing the runtime)
SERVED = "trio-agent: served by the warm daemon\n"


@pytest.fixture(scope="module", params=["editable", "wheel"])
def venv_bin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    kind: Literal["editable", "wheel"] = request.param
    yield fresh_venv(tmp_path_factory.mktemp(kind), kind)


def _env(directory: str) -> dict[str, str]:
    env = cli_env(TRIO_AGENT_DAEMON_DIR=directory, TRIO_AGENT_DAEMON_VERBOSE="1")
    del env["PYTHONPATH"], env["TRIO_AGENT_NO_DAEMON"]  # the installed package only; a daemon of our own
    return env


def _run(bin_dir: Path, *args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(bin_dir / "trio-agent"), *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


async def _settled(directory: str, seen: set[int]) -> DaemonStatus:
    """The daemon once one spare is ready and none is starting (another process's
    state: polled, with a bound)."""
    with trio.fail_after(SPARE_BOUND):
        while True:
            status = daemon_status(directory)
            assert status is not None, "the daemon went away"
            seen.update((status.pid, *status.workers))
            if status.ready and not status.starting and set(status.workers) == set(status.ready):
                return status
            await trio.sleep(0.02)


async def test_the_installed_console_script_gets_a_warm_run_from_the_daemon(venv_bin: Path, tmp_path: Path) -> None:
    directory = tempfile.mkdtemp(prefix="tad-")  # short: a socket path has 108 bytes; mode 0700
    env = _env(directory)
    seen: set[int] = set()
    try:
        started = _run(venv_bin, "serve", "--daemon", env=env, cwd=tmp_path)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "daemon started (pid " in started.stdout

        # Without the verbose note (a variable of the client's only: the same configuration).
        quiet = {k: v for k, v in env.items() if k != "TRIO_AGENT_DAEMON_VERBOSE"}
        first = _run(venv_bin, "run", "--local", "hi", env=quiet, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert "daemon" not in first.stderr, first.stderr  # not "started from another installation"

        spares = set((await _settled(directory, seen)).ready)
        warm = _run(venv_bin, "run", "--local", "hi", env=env, cwd=tmp_path)
        assert warm.returncode == 0, warm.stderr
        assert warm.stderr.startswith(SERVED), warm.stderr  # first, and a line of its own
        assert "You said: 'hi'" in warm.stdout
        after = daemon_status(directory)
        assert after is not None and not spares <= set(after.ready)  # the spare took it
        for i in range(3):  # back to back, nothing waited for: the spares were replenished ahead of demand
            again = _run(venv_bin, "run", "--local", f"hi {i}", env=env, cwd=tmp_path)
            assert again.returncode == 0, again.stderr
            assert again.stderr.startswith(SERVED), f"run {i}: {again.stderr}"
    finally:
        stopped = _run(venv_bin, "serve", "--stop", env=env, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        with trio.fail_after(30):
            while any(pid_alive(pid) for pid in seen):  # noqa: ASYNC110 - another process's exit
                await trio.sleep(0.02)
    assert seen and not Path(directory, "daemon.sock").exists()
