"""The live-command cap: atomic under a burst, counting only running commands, with a
bounded and cancellable wait for a slot (real subprocesses).

Concurrency is measured from outside: each command appends ``start`` and ``end`` to a log
(``O_APPEND`` writes of a few bytes are atomic), so the peak of ``starts - ends`` is a
lower bound of how many commands were alive at once. Commands are held by a gate (a
``flock`` the test holds, or a file the test creates) rather than by sleeping.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from trio_agent._tools.exec_command import ExecResult, ShellError, ShellSessions

from .._os_facts import wait_for_os_fact


def log_lines(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def peak_concurrency(log: Path) -> int:
    live = peak = 0
    for word in log_lines(log):
        live += 1 if word == "start" else -1
        peak = max(peak, live)
    return peak


def gated(gate: Path, then: str = "echo finished") -> str:
    """A command that runs until ``gate`` exists."""
    return f"while [ ! -e {gate} ]; do sleep 0.01; done; {then}"


async def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait for a state change driven by processes exiting (no Trio event to wait on)."""
    await wait_for_os_fact(check, what)


async def test_a_burst_of_200_never_has_more_than_64_live_commands(shell: ShellSessions, tmp_path: Path) -> None:
    log, gate = tmp_path / "log", tmp_path / "gate"
    gate.touch()
    cmd = f"echo start >> {log}; flock -s {gate} true; echo end >> {log}"
    results: list[ExecResult] = []

    async def run() -> None:
        results.append(await shell.exec_command({"cmd": cmd, "login": False}))

    with gate.open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # every command blocks in flock until released
        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(run)
            await wait_for_os_fact(lambda: len(log_lines(log)) == 64, "64 commands starting")
            stats = shell.statistics()
            assert (stats.running, stats.waiting, stats.max_sessions) == (64, 136, 64)
            fcntl.flock(held, fcntl.LOCK_UN)
    assert [result["exit_code"] for result in results] == [0] * 200
    assert log_lines(log).count("start") == 200
    assert peak_concurrency(log) == 64
    assert shell.statistics().running == 0


async def test_finished_sessions_hold_no_slot(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=2)
    gate = tmp_path / "gate"
    try:
        for expected_id in (1, 2):
            started = await shell.exec_command({"cmd": gated(gate), "login": False, "yield_time_ms": 250})
            assert started["session_id"] == expected_id
        assert shell.statistics().running == 2
        gate.touch()
        await wait_until(lambda: shell.statistics().running == 0, "both sessions finishing")
        # Two finished, unread sessions: a new command neither waits nor evicts one.
        third = await shell.exec_command({"cmd": "echo third", "login": False})
        assert (third["exit_code"], third["output"]) == (0, "third\n")
        background = await shell.exec_command({"cmd": gated(tmp_path / "never"), "login": False, "yield_time_ms": 250})
        assert background["session_id"] == 3
        assert shell.session_ids == (1, 2, 3)
        for session_id in (1, 2):
            final = await shell.write_stdin({"session_id": session_id})
            assert (final["exit_code"], final["output"]) == (0, "finished\n")
    finally:
        await shell.aclose()


async def test_commands_that_finish_within_their_yield_free_their_slot(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=1)
    results: list[ExecResult] = []

    async def run(n: int) -> None:
        results.append(await shell.exec_command({"cmd": f"echo {n}", "login": False}))

    try:
        async with trio.open_nursery() as inner:
            for n in range(5):
                inner.start_soon(run, n)
        assert sorted(result["output"] for result in results) == [f"{n}\n" for n in range(5)]
        assert {result["exit_code"] for result in results} == {0}
        assert shell.statistics().running == 0
    finally:
        await shell.aclose()


async def test_a_call_beyond_the_cap_waits_for_a_running_command_instead_of_evicting_a_recent_one(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=2)
    gate = tmp_path / "gate"
    try:
        background = await shell.exec_command({"cmd": "sleep 300", "login": False, "yield_time_ms": 250})
        results: list[ExecResult] = []

        async def run(args: dict[str, object]) -> None:
            results.append(await shell.exec_command(args))

        async with trio.open_nursery() as inner:
            inner.start_soon(run, {"cmd": gated(gate, "echo first"), "login": False, "yield_time_ms": 30_000})
            await wait_until(lambda: shell.statistics().running == 2, "the first command starting")
            inner.start_soon(run, {"cmd": "echo second", "login": False})
            await wait_until(lambda: shell.statistics().waiting == 1, "the second call waiting")
            gate.touch()
        assert [result["output"] for result in results] == ["first\n", "second\n"]
        assert shell.session_ids == (background["session_id"],)  # the recent one was kept
    finally:
        await shell.aclose()


async def test_waiting_for_a_slot_is_bounded_by_the_yield_time_plus_the_slot_wait(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=1, slot_wait=0.2)
    gate = tmp_path / "gate"
    try:
        async with trio.open_nursery() as inner:
            inner.start_soon(shell.exec_command, {"cmd": gated(gate), "login": False, "yield_time_ms": 30_000})
            await wait_until(lambda: shell.statistics().running == 1, "the first command starting")
            started = trio.current_time()
            with pytest.raises(ShellError, match=r"too many running commands: no slot of 1 became free within 0\.45 s"):
                await shell.exec_command({"cmd": "echo never", "login": False, "yield_time_ms": 250})
            assert 0.44 < trio.current_time() - started < 2.0
            assert shell.statistics().waiting == 0
            gate.touch()
    finally:
        await shell.aclose()


async def test_a_call_waiting_for_a_slot_can_be_cancelled_and_starts_nothing(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=1)
    gate, marker = tmp_path / "gate", tmp_path / "marker"
    try:
        async with trio.open_nursery() as inner:
            inner.start_soon(shell.exec_command, {"cmd": gated(gate), "login": False, "yield_time_ms": 30_000})
            await wait_until(lambda: shell.statistics().running == 1, "the first command starting")
            with trio.CancelScope() as waiting:
                inner.start_soon(_cancel_when_waiting, shell, waiting)
                await shell.exec_command({"cmd": f"touch {marker}", "login": False})
            assert waiting.cancelled_caught
            assert (shell.statistics().waiting, shell.statistics().running) == (0, 1)
            gate.touch()
        assert shell.statistics().running == 0
        assert not marker.exists()
    finally:
        await shell.aclose()


async def _cancel_when_waiting(shell: ShellSessions, scope: trio.CancelScope) -> None:
    await wait_until(lambda: shell.statistics().waiting == 1, "the call waiting")
    scope.cancel()


async def test_at_most_max_sessions_finished_unread_sessions_are_kept(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=2)
    try:
        for n in (1, 2, 3):
            gate = tmp_path / f"gate{n}"
            result = await shell.exec_command({"cmd": gated(gate), "login": False, "yield_time_ms": 250})
            assert result["session_id"] == n
            gate.touch()
            await wait_until(lambda: shell.statistics().running == 0, f"session {n} finishing")
        assert shell.session_ids == (2, 3)  # the least recently used finished one was forgotten
    finally:
        await shell.aclose()
