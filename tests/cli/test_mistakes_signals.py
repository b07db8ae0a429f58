"""Signals around the edges of ``trio-agent run`` (issue 24), driving the installed
console script: a configuration refused before the signal watcher first ran, and
Ctrl-C pressed again after the command printed its one ``-- cancelled`` line."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from .._os_facts import OS_FACT_TIMEOUT, OS_POLL_INTERVAL, pid_alive, processes_in, wait_for_os_fact
from ._cli import SCRIPT, cli_env, open_cli, run_cli

# Loaded by the console script's interpreter (first on PYTHONPATH): Trio's scheduler
# reverses each batch of runnable tasks when its RNG draws below 0.5 -- fixing the draw
# fixes the order in which the command's task and the signal watcher first run.
SCHEDULE = """\
import pathlib
import random

import trio._core._run as _run


class _Fixed(random.Random):
    def random(self) -> float:
        return {draw}


_run._r = _Fixed()
pathlib.Path({marker!r}).touch()
"""


def _scheduled(tmp_path: Path, draw: float, **extra: str) -> dict[str, str]:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SCHEDULE.format(draw=draw, marker=str(tmp_path / "hook-loaded")))
    env = cli_env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(hooks), env["PYTHONPATH"]])
    return env


@pytest.mark.parametrize("draw", [0.0, 0.9], ids=["batch-reversed", "batch-in-order"])
async def test_a_malformed_api_key_is_one_line_and_exit_2_in_either_task_order(tmp_path: Path, draw: float) -> None:
    # The key is refused before the first checkpoint; on main, with the batch reversed,
    # the watcher then first ran after the receiver's block had exited:
    # "RuntimeError: open_signal_receiver block already exited" and exit status 1.
    env = _scheduled(tmp_path, draw, OPENAI_API_KEY="sk-bad\nkey")
    result = await run_cli("run", "hi", cwd=tmp_path, env=env, command=SCRIPT)
    assert (tmp_path / "hook-loaded").exists(), "the scheduling hook ran in the console script's interpreter"
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert result.stdout == b""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("trio-agent: the API key has a whitespace, control or non-ASCII character at position 7")


@pytest.mark.parametrize("draw", [0.0, 0.9], ids=["batch-reversed", "batch-in-order"])
async def test_a_good_run_under_the_same_task_orders_answers(tmp_path: Path, draw: float) -> None:
    result = await run_cli("run", "hi", cwd=tmp_path, env=_scheduled(tmp_path, draw), command=SCRIPT)
    assert (tmp_path / "hook-loaded").exists()
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith("Hello from trio_agent's local scripted model. You said: 'hi'.")


# Starts a long command, then says so with a marker file (its processes exist by then).
LONG = "run: sleep 60 & touch started; wait"


async def _keep_pressing_ctrl_c(process: trio.Process) -> None:
    """SIGINT every few milliseconds until ``process`` exited (an OS fact: polled, bounded)."""
    with trio.move_on_after(OS_FACT_TIMEOUT):
        while process.poll() is None:
            process.send_signal(signal.SIGINT)
            await trio.sleep(OS_POLL_INTERVAL)
        return
    pytest.fail(f"the command did not exit within {OS_FACT_TIMEOUT} s of its -- cancelled line")


@pytest.mark.parametrize("jsonl", [False, True], ids=["human", "jsonl"])
async def test_ctrl_c_after_the_cancelled_line_adds_nothing(tmp_path: Path, workspace: Path, jsonl: bool) -> None:
    flags = ["--jsonl"] if jsonl else []
    async with open_cli("run", *flags, "--workspace", str(workspace), LONG, cwd=tmp_path, command=SCRIPT) as cli:
        await wait_for_os_fact((workspace / "started").exists, "the command starting (the turn is live)")
        pids = processes_in(workspace)
        assert pids
        cli.signal(signal.SIGINT)
        await cli.wait_for(lambda c: "-- cancelled" in c.stderr)  # the marker: its last word is out
        await _keep_pressing_ctrl_c(cli.process)
        assert await cli.wait() == 130
    assert not any(pid_alive(pid) for pid in pids)
    lines = cli.stderr.splitlines()
    assert [line for line in lines if "cancelled by" in line or "exiting now" in line] == [lines[-1]], cli.stderr
    assert lines[-1].startswith("-- cancelled by Ctrl-C after ")
    assert "Traceback" not in cli.stdout + cli.stderr
    if jsonl:
        assert all(line.startswith("{") for line in cli.lines)
    else:
        assert cli.stdout == ""  # a cancelled turn has no answer
