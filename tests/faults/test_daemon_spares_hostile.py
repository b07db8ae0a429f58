"""Hostile cases of the daemon's spares (issue 30, item 2): spares killed behind the
daemon's back, ready or while a run waits. A run still gets its answer (warm or
in-process), the daemon survives and starts the configuration's spares again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .._os_facts import wait_gone
from ..cli._cli import run_cli
from ..daemon._daemon import running_daemon

SERVED = b"trio-agent: served by the warm daemon"


async def test_killed_ready_spares_leave_a_run_served_and_are_replaced(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        spares = await daemon.prime("--local", cwd=tmp_path)
        for pid in spares:
            os.kill(pid, signal.SIGKILL)
        await wait_gone(list(spares))
        env = {**daemon.env, "TRIO_AGENT_DAEMON_VERBOSE": "1"}
        done = await run_cli("run", "--local", "after the kill", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr.decode()
        assert b"You said: 'after the kill'" in done.stdout
        fresh = await daemon.settle()
        assert len(fresh) == 2 and not fresh & spares  # the key's spares again, new processes
        again = await run_cli("run", "--local", "warm again", cwd=tmp_path, env=env)
        assert again.returncode == 0 and SERVED in again.stderr, again.stderr.decode()
        status = daemon.status()
        assert status is not None and status.pid == daemon.pid


async def test_one_killed_spare_leaves_the_other_to_serve_and_is_replaced(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        spares = await daemon.prime("--local", cwd=tmp_path)
        victim = min(spares)
        os.kill(victim, signal.SIGKILL)
        await wait_gone([victim])  # the daemon may or may not have seen it go when the run arrives
        done = await run_cli("run", "--local", "racing", cwd=tmp_path, env=daemon.env)
        assert done.returncode == 0, done.stderr.decode()
        assert b"You said: 'racing'" in done.stdout
        assert len(await daemon.settle()) == 2
