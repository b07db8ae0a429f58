"""The daemon's spares replenished ahead of demand (issue 30, item 2): a taken spare's
replacement starts while its run is still going, runs that follow each other with no
pause are all served warm, and the spares stay within their bounds."""

from __future__ import annotations

from pathlib import Path

import trio

from .._os_facts import wait_gone
from ..cli._cli import open_cli, run_cli
from ._daemon import _POLL, SPARE_BOUND, running_daemon

LONG = "run: sleep 60 & touch started; wait"
SERVED = b"trio-agent: served by the warm daemon"


async def test_a_taken_spares_replacement_starts_while_its_run_goes_on(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon() as daemon:
        spares = await daemon.prime("--local", "--workspace", str(workspace), cwd=tmp_path)
        assert len(spares) == 2  # SPARES_PER_KEY
        async with open_cli("run", "--local", "--workspace", str(workspace), LONG, cwd=tmp_path,
                            env=daemon.env) as cli:
            with trio.fail_after(SPARE_BOUND):
                while True:  # the daemon's own state: polled, with a bound
                    status = daemon.status()
                    assert status is not None
                    taken = spares - set(status.ready)
                    replacements = set(status.ready) - spares
                    if taken and replacements:
                        break
                    await trio.sleep(_POLL)
            assert cli.process.returncode is None, "the run ended before its replacement was ready"
            assert len(taken) == 1 and len(replacements) == 1
            # Two spares ready for the next run while this one is still going.
            assert len(set(status.ready)) == 2
            cli.process.terminate()
            await cli.wait()
        await wait_gone(list(taken))


async def test_runs_back_to_back_are_all_served_warm(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        await daemon.prime("--local", cwd=tmp_path)
        env = {**daemon.env, "TRIO_AGENT_DAEMON_VERBOSE": "1"}
        for i in range(5):  # each starts the moment the previous one's client has exited
            done = await run_cli("run", "--local", f"hello {i}", cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr.decode()
            assert SERVED in done.stderr, f"run {i} fell back: {done.stderr.decode()}"
        status = daemon.status()
        assert status is not None and len(status.workers) <= 2 + 1  # the key's spares and a worker still exiting


async def test_spares_never_exceed_the_bound(tmp_path: Path) -> None:
    with running_daemon(TRIO_AGENT_DAEMON_SPARES="3") as daemon:
        first = await daemon.prime("--local", cwd=tmp_path)
        assert len(first) == 2
        second = await daemon.prime("--local", "--jsonl", cwd=tmp_path)  # another configuration: 2 more wanted
        assert len(second) == 3, second  # one of the first key's was closed to make room, not a fourth started
        assert len(first - second) == 1
        await wait_gone(list(first - second))
        for i in range(3):  # taking one at the bound starts its replacement without exceeding it
            done = await run_cli("run", "--local", "--jsonl", f"hello {i}", cwd=tmp_path, env=daemon.env)
            assert done.returncode == 0, done.stderr.decode()
            status = daemon.status()
            assert status is not None and len(status.ready) <= 3
        assert len(await daemon.settle()) == 3


async def test_one_spare_per_key_when_configured(tmp_path: Path) -> None:
    with running_daemon(TRIO_AGENT_DAEMON_SPARES_PER_KEY="1") as daemon:
        assert len(await daemon.prime("--local", cwd=tmp_path)) == 1
