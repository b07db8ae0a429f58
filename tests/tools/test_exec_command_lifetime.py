"""No process outlives its command: daemons that leave the process group included.

Real subprocesses. Every command publishes the pids it starts through files (written to
a temporary name, then moved), and each test asserts by pid that they are gone. A
command is cancelled only after it wrote its pid files, so no login shell is ever
killed while its init scripts run.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent
from trio_agent._tools import _process_tree
from trio_agent._tools._process_tree import ProcessLauncher
from trio_agent._tools._shell_env import build_environment
from trio_agent._tools.exec_command import ShellSessions

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone


def publish(path: Path, what: str = "$$") -> str:
    """Shell code writing ``what`` to ``path`` atomically (a reader never sees half)."""
    return f"echo {what} > {path}.tmp && mv {path}.tmp {path}"


def daemons(tmp_path: Path) -> tuple[str, list[Path]]:
    """Start a ``setsid`` daemon and a double-fork daemon (fork, setsid, fork, parents
    exit), both in new sessions, and wait until both published their pids."""
    setsid_pid, forked_pid = tmp_path / "setsid.pid", tmp_path / "forked.pid"
    setsid_daemon = f"setsid sh -c '{publish(setsid_pid)}; exec sleep 300' </dev/null >/dev/null 2>&1 &"
    double_fork = f"( setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & {publish(forked_pid, '$!')}' & )"
    wait = f"while [ ! -e {setsid_pid} ] || [ ! -e {forked_pid} ]; do sleep 0.01; done"
    return f"{setsid_daemon} {double_fork}; {wait}", [setsid_pid, forked_pid]


async def read_pids(paths: list[Path]) -> list[int]:
    await wait_for_os_fact(lambda: all(path.exists() for path in paths), f"the command writing {paths}")
    return [int(path.read_text()) for path in paths]


async def start_daemons_and_wait(shell: ShellSessions, tmp_path: Path, **args: object) -> list[int]:
    """Run a command that starts both daemons, then blocks; cancel it once it runs.

    Returns the pids (daemons, shell) for the caller to check."""
    spawn, pid_files = daemons(tmp_path)
    shell_pid = tmp_path / "shell.pid"
    cmd = f"{spawn}; {publish(shell_pid)}; sleep 300"
    outcome: list[str] = []

    async def run() -> None:
        try:
            await shell.exec_command({"cmd": cmd, "login": False, **args})
        except trio.Cancelled:
            outcome.append("cancelled")
            raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        pids = await read_pids([*pid_files, shell_pid])
        # The daemons really left the command's session (and so its process group).
        assert all(os.getsid(daemon) != os.getsid(pids[2]) for daemon in pids[:2])
        nursery.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    return pids


# -- cancel, close, normal exit --------------------------------------------------------------------


@pytest.mark.parametrize("login", [False, True])
async def test_cancelling_exec_command_kills_daemons_outside_the_group(
    shell: ShellSessions, tmp_path: Path, login: bool
) -> None:
    pids = await start_daemons_and_wait(shell, tmp_path, login=login)
    assert shell.statistics().isolation == "subreaper"
    # exec_command returned (Cancelled) only after the whole tree was reaped.
    assert not any(pid_alive(pid) for pid in pids)
    assert shell.statistics().running == 0


async def test_aclose_kills_daemons_of_a_background_session(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path)
    spawn, pid_files = daemons(tmp_path)
    result = await shell.exec_command(
        {"cmd": f"{spawn}; echo started; sleep 300", "login": False, "yield_time_ms": 250}
    )
    assert result["session_id"] == 1
    pids = await read_pids(pid_files)
    assert all(pid_alive(pid) for pid in pids)
    await shell.aclose()
    assert not any(pid_alive(pid) for pid in pids)
    assert processes_in(tmp_path) == []


async def test_cancelling_the_owning_nursery_kills_daemons(tmp_path: Path) -> None:
    spawn, pid_files = daemons(tmp_path)
    async with trio.open_nursery() as owner:
        shell = ShellSessions(owner, tmp_path)
        args = {"cmd": f"{spawn}; sleep 300", "login": False, "yield_time_ms": 250}
        assert "session_id" in await shell.exec_command(args)
        pids = await read_pids(pid_files)
        owner.cancel_scope.cancel()
    await wait_gone(pids)
    assert processes_in(tmp_path) == []


async def test_daemons_left_by_a_finished_command_are_killed(shell: ShellSessions, tmp_path: Path) -> None:
    spawn, pid_files = daemons(tmp_path)
    result = await shell.exec_command({"cmd": f"{spawn}; echo done", "login": False})
    assert (result["exit_code"], result["output"]) == (0, "done\n")
    pids = [int(path.read_text()) for path in pid_files]
    # The result is returned once the command's leftovers are gone, not before.
    assert not any(pid_alive(pid) for pid in pids)


async def test_a_daemon_ignoring_sigterm_gets_term_then_kill_after_the_grace(
    shell: ShellSessions, tmp_path: Path
) -> None:
    pid_file, term_file = tmp_path / "daemon.pid", tmp_path / "term"
    daemon = (
        f'setsid sh -c \'trap "echo term > {term_file}" TERM; {publish(pid_file)}; '
        "while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 &"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(shell.exec_command, {"cmd": f"{daemon} sleep 300", "login": False})
        (pid,) = await read_pids([pid_file])
        cancelled_at = trio.current_time()
        nursery.cancel_scope.cancel()
    elapsed = trio.current_time() - cancelled_at
    assert term_file.read_text() == "term\n"  # TERM reached it although it left the group
    assert 0.45 < elapsed < 3.0  # it survived TERM, so it was KILLed after the 0.5 s grace
    assert not pid_alive(pid)


async def test_a_stopped_daemon_is_continued_so_it_can_exit_on_term(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path, kill_grace=10.0)
    pid_file = tmp_path / "daemon.pid"
    daemon = f"setsid sh -c '{publish(pid_file)}; kill -STOP $$' </dev/null >/dev/null 2>&1 &"
    try:
        async with trio.open_nursery() as inner:
            inner.start_soon(shell.exec_command, {"cmd": f"{daemon} sleep 300", "login": False})
            (pid,) = await read_pids([pid_file])
            await wait_for_os_fact(lambda: "\nState:\tT" in Path(f"/proc/{pid}/status").read_text(), "the stop")
            cancelled_at = trio.current_time()
            inner.cancel_scope.cancel()
        # Without SIGCONT the TERM would wait for the 10 s grace and its KILL.
        assert trio.current_time() - cancelled_at < 5.0
        assert not pid_alive(pid)
    finally:
        await shell.aclose()


async def test_sessions_keep_stdin_and_ctrl_c_under_the_subreaper(shell: ShellSessions) -> None:
    first = await shell.exec_command(
        {"cmd": 'read line; echo "got $line"; sleep 300', "yield_time_ms": 250, "login": False}
    )
    session_id = first["session_id"]
    answered = await shell.write_stdin({"session_id": session_id, "chars": "hello\n"})
    assert answered["output"] == "got hello\n"
    interrupted = await shell.write_stdin({"session_id": session_id, "chars": "\u0003", "yield_time_ms": 5000})
    assert interrupted["exit_code"] == 130
    assert shell.statistics().isolation == "subreaper"


async def test_the_command_leads_its_own_group_so_kill_0_cannot_reach_its_supervisor(
    shell: ShellSessions, tmp_path: Path
) -> None:
    spawn, pid_files = daemons(tmp_path)
    result = await shell.exec_command(
        {"cmd": f"{spawn}; echo $$ $(cut -d' ' -f{PGRP} /proc/$$/stat); kill -9 0", "login": False}
    )
    shell_pid, group = (int(word) for word in result["output"].split())
    assert shell_pid == group
    assert result["exit_code"] == 137  # the shell's own KILL, reported by its supervisor
    assert not any(pid_alive(pid) for pid in [int(path.read_text()) for path in pid_files])


async def test_a_cancel_at_any_point_of_the_start_leaves_nothing(shell: ShellSessions, tmp_path: Path) -> None:
    """Cancel after 0..20 ms: before the spawn, while the helper forks, while the shell
    starts, and once it runs. Whatever had started is gone when the call returns."""
    started = 0
    for step in range(21):
        pid_file = tmp_path / f"pid{step}"
        cmd = f"{publish(pid_file)}; exec sleep 300"
        with trio.move_on_after(step / 1000):
            await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 30_000})
        assert shell.statistics().running == 0
        if pid_file.exists():
            started += 1
            assert not pid_alive(int(pid_file.read_text()))
        assert processes_in(tmp_path) == []
    assert started > 0  # the sweep did reach commands that were running


async def test_a_spawn_cancelled_before_its_request_left_closes_what_it_opened(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A spawn cancelled while it waits to send its request to the helper (another
    spawn holds the send lock) closes the socket and pipe ends it made for the command:
    none of the process's file descriptors is left open. (Before the fix only an OSError
    closed them: a cancel left an AF_UNIX socket for the garbage collector, a
    ResourceWarning that failed an unrelated test in CI, and two pipe ends for good.)"""
    launcher = ProcessLauncher(nursery)
    env = build_environment(os.environ).env
    first = await launcher.spawn(["/bin/sh", "-c", "exit 0"], tmp_path, env, 0.5)
    await first.aclose()
    helper = launcher._helper
    assert helper is not None and launcher.isolation == "subreaper"
    try:
        gc.collect()
        before = set(os.listdir("/proc/self/fd"))
        with trio.CancelScope() as scope:
            async with helper.send_lock:
                async with trio.open_nursery() as inner:
                    inner.start_soon(launcher.spawn, ["/bin/sh", "-c", "exit 0"], tmp_path, env, 0.5)
                    await trio.testing.wait_all_tasks_blocked()
                    # The spawn made its socket pair and pipes and waits for the lock.
                    assert len(set(os.listdir("/proc/self/fd")) - before) >= 3
                    scope.cancel()
        assert scope.cancelled_caught
        gc.collect()
        assert set(os.listdir("/proc/self/fd")) - before == set()
    finally:
        await launcher.aclose()


# -- the supervisor machinery failing ---------------------------------------------------------------


PPID, PGRP = 4, 5  # fields of /proc/<pid>/stat


def _stat_field(pid: int, index: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_text()
    return int(data[data.rindex(")") + 2 :].split()[index - 3])


async def test_a_killed_supervisor_leaves_its_tree_to_the_helper_which_kills_it(
    shell: ShellSessions, tmp_path: Path
) -> None:
    spawn, pid_files = daemons(tmp_path)
    shell_pid = tmp_path / "shell.pid"
    args = {"cmd": f"{spawn}; {publish(shell_pid)}; sleep 300", "login": False, "yield_time_ms": 250}
    result = await shell.exec_command(args)
    pids = await read_pids([*pid_files, shell_pid])
    supervisor = _stat_field(pids[2], PPID)  # the shell's parent is its supervisor
    os.kill(supervisor, signal.SIGKILL)
    await wait_gone(pids)
    final = await shell.write_stdin({"session_id": result["session_id"]})
    assert "exit_code" in final
    assert shell.statistics().running == 0


async def test_a_dead_helper_is_restarted_by_the_next_command(shell: ShellSessions, tmp_path: Path) -> None:
    probe = "cut -d' ' -f4 /proc/$$/stat; sleep 300"  # the shell's parent: its supervisor
    first = await shell.exec_command({"cmd": probe, "login": False, "yield_time_ms": 250})
    helper = _stat_field(int(first["output"]), PPID)
    os.kill(helper, signal.SIGKILL)
    await wait_gone([helper])
    pids = await start_daemons_and_wait(shell, tmp_path)
    assert not any(pid_alive(pid) for pid in pids)
    assert shell.statistics().isolation == "subreaper"
    # The session started under the dead helper still works: its supervisor is its own.
    interrupted = await shell.write_stdin({"session_id": first["session_id"], "chars": "\u0003", "yield_time_ms": 5000})
    assert interrupted["exit_code"] == 130


_AGENT_SCRIPT = """
import sys, trio
from pathlib import Path
from trio_agent._tools.exec_command import ShellSessions

async def main():
    async with trio.open_nursery() as nursery:
        shell = ShellSessions(nursery, Path(sys.argv[1]))
        result = await shell.exec_command({"cmd": sys.argv[2], "login": False, "yield_time_ms": 250})
        print(result["session_id"], flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


async def test_nothing_survives_the_agent_process_being_killed(tmp_path: Path) -> None:
    spawn, pid_files = daemons(tmp_path)
    shell_pid = tmp_path / "shell.pid"
    cmd = f"{spawn}; {publish(shell_pid)}; sleep 300"
    root = Path(trio_agent.__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    agent = await trio.lowlevel.open_process(
        [sys.executable, "-c", _AGENT_SCRIPT, str(tmp_path), cmd],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        pids = await read_pids([*pid_files, shell_pid])
        supervisor = _stat_field(pids[2], PPID)
        helper = _stat_field(supervisor, PPID)
        assert _stat_field(helper, PPID) == agent.pid
    finally:
        agent.kill()
        await agent.wait()
    # The supervisors see their sockets close: TERM, grace, KILL; the helper follows.
    await wait_gone([*pids, supervisor, helper])
    assert processes_in(tmp_path) == []


# -- the fallback ------------------------------------------------------------------------------------


async def test_the_process_group_fallback_terminates_the_group(nursery: trio.Nursery, tmp_path: Path) -> None:
    launcher = ProcessLauncher(nursery, use_helper=False)
    pid_file = tmp_path / "pids"
    cmd = f"trap '' TERM; sleep 300 & {publish(pid_file, '$$ $!')}; wait"
    env = build_environment(os.environ).env
    process = await launcher.spawn(["/bin/sh", "-c", cmd], tmp_path, env, 0.5)
    try:
        assert launcher.isolation == "process-group"
        await wait_for_os_fact(pid_file.exists, "the pid file")
        pids = [int(word) for word in pid_file.read_text().split()]
        started = trio.current_time()
        await process.terminate(0.5)
        assert 0.45 < trio.current_time() - started < 3.0  # TERM ignored: KILL after the grace
        assert process.returncode == -signal.SIGKILL
        # Only the leader is ours to reap; the rest of the group dies of the KILL on its own.
        await wait_gone(pids)
    finally:
        await process.aclose()
        await launcher.aclose()


async def test_an_unavailable_helper_falls_back_with_a_warning(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake_helper.py"
    fake.write_text(
        "import socket, sys\nsocket.socket(fileno=int(sys.argv[1])).sendall(b'unavailable: no prctl here')\n"
    )
    monkeypatch.setattr(_process_tree, "_HELPER", fake)
    shell = ShellSessions(nursery, tmp_path)
    try:
        with pytest.warns(RuntimeWarning, match=r"subreaper helper is unavailable \(unavailable: no prctl here\)"):
            result = await shell.exec_command({"cmd": "echo still works", "login": False})
        assert (result["exit_code"], result["output"]) == (0, "still works\n")
        assert shell.statistics().isolation == "process-group"
        again = await shell.exec_command({"cmd": "echo no second warning", "login": False})
        assert again["exit_code"] == 0
    finally:
        await shell.aclose()
