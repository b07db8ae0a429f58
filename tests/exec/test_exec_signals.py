"""SIGTERM (what the SDK's AbortSignal sends) and Ctrl-C while an exec turn runs a
command: the turn is interrupted -- ``turn.failed`` as its one terminal event, exit
128 + signal -- and the command is gone (asserted by its pid); the thread stays
resumable. The command writes its pid (and ``exec``s into ``sleep``) before the signal
is sent, and runs without a login shell (tests/_os_facts: process hygiene)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from .._os_facts import pid_alive, wait_for_os_fact, wait_gone
from ..cli._cli import open_cli
from ._exec import STEP, events, exec_env, model_server, run_exec
from ._exec_schema import check_event


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
async def test_a_signal_interrupts_the_turn_and_leaves_no_command_behind(tmp_path: Path, signum: int,
                                                                       status: int) -> None:
    workspace, home = tmp_path / "project", tmp_path / "home"
    workspace.mkdir()
    pid_file = tmp_path / "command.pid"
    prompt = f"run: echo $$ > {pid_file}; exec sleep 60"
    async with model_server() as server:
        env = exec_env(home, server)
        async with open_cli("exec", "--json", "--sandbox", "danger-full-access", prompt, cwd=workspace,
                            env=env) as cli:
            await wait_for_os_fact(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(),
                                   "the command writing its pid")
            pid = int(pid_file.read_text())
            assert pid_alive(pid)
            cli.signal(signum)
            assert await cli.wait(STEP) == status
        await wait_gone([pid])
        evts = events(cli.stdout.encode())
        for event in evts:
            check_event(event)
        name = signal.Signals(signum).name
        assert evts[-1] == {"type": "turn.failed", "error": {"message": f"turn interrupted by {name}"}}
        assert [e["type"] for e in evts].count("turn.failed") == 1
        assert "turn.completed" not in [e["type"] for e in evts]
        again = await run_exec("--json", "resume", str(evts[0]["thread_id"]), "hello", cwd=workspace, env=env)
    assert again.returncode == 0 and events(again.stdout)[-1]["type"] == "turn.completed"


async def test_a_signal_before_the_turn_runs_exits_with_its_status(tmp_path: Path) -> None:
    """Signalled while waiting for its prompt on stdin: 130, nothing on stdout."""
    with trio.fail_after(STEP):
        async with open_cli("exec", "--json", cwd=tmp_path, env=exec_env(tmp_path / "home"),
                            stdin=-1) as cli:  # subprocess.PIPE: a stdin that stays open
            await cli.wait_for(lambda c: "Reading prompt from stdin" in c.stderr)
            cli.signal(signal.SIGINT)
            assert await cli.wait(STEP) == 130
    assert cli.stdout == ""
