"""Hostile commands on a terminal (``exec_command`` with ``tty: true``): garbage output,
raw mode that swallows Ctrl-C, a daemon that keeps the terminal open after the shell
exits. Each is a result or a cancelled call, never an exception; nothing is left
running (checked by host pid)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent._tools.exec_command import ShellSessions

from .._os_facts import wait_gone
from ..tools.test_sandbox import host_pids, sleeper, wait_running


@pytest.fixture
async def sessions(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[ShellSessions]:
    shell = ShellSessions(nursery, tmp_path)
    try:
        yield shell
    finally:
        await shell.aclose()


async def test_garbage_on_the_terminal_is_text_in_the_result(sessions: ShellSessions) -> None:
    cmd = r"printf '\377\376\033[2J\033]0;title\007\000\r\rok\n'; head -c 3000 /dev/urandom"
    result = await sessions.exec_command({"cmd": cmd, "login": False, "tty": True, "max_output_tokens": 50})
    assert result["exit_code"] == 0
    assert isinstance(result["output"], str) and "ok" in result["output"]


async def test_raw_mode_swallowing_ctrl_c_is_still_ended_by_a_cancel(sessions: ShellSessions) -> None:
    child = sleeper()
    cmd = f"trap '' INT; stty raw -echo; sleep {child} & echo up; wait"
    started = await sessions.exec_command({"cmd": cmd, "login": False, "tty": True, "yield_time_ms": 250})
    pids = await wait_running([child])
    still = await sessions.write_stdin({"session_id": started["session_id"], "chars": "\u0003", "yield_time_ms": 250})
    assert "session_id" in still  # raw mode: the byte is input, not an interrupt
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sessions.write_stdin, {"session_id": started["session_id"], "chars": ""})
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    await sessions.aclose()  # ends every command's whole tree
    await wait_gone(pids)
    assert host_pids(child) == []


async def test_a_daemon_holding_the_terminal_ends_with_the_command(sessions: ShellSessions) -> None:
    child = sleeper()
    # The daemon keeps the terminal's slave open (EIO never comes) in a session of its own.
    cmd = f"setsid sleep {child} < /dev/tty > /dev/tty 2>&1 & echo spawned"
    result = await sessions.exec_command({"cmd": cmd, "login": False, "tty": True, "yield_time_ms": 30_000})
    assert result["exit_code"] == 0 and "spawned" in result["output"]
    assert host_pids(child) == []  # the supervisor ended it with the shell
