"""``exec_command`` with ``tty: true``: real commands on a real pseudo-terminal.

Every behaviour runs three ways: unconfined under the subreaper supervisor (which makes
the shell the terminal's session leader), inside the Bubblewrap sandbox (where the
``_tty_leader`` prefix does it) and in the process-group fallback (the same prefix).
Nothing is skipped: CI installs bubblewrap (``.ci/run``). Commands that are cancelled or
interrupted run with ``login: false`` and print a marker first; what they started is
then found gone by host pid.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from trio_agent._tools import _process_tree
from trio_agent._tools._shell_env import parse_exec_args, parse_write_args
from trio_agent._tools._shell_session import ExecResult
from trio_agent._tools.exec_command import ShellError, ShellSessions

from .._os_facts import wait_gone
from .test_sandbox import confinement, host_pids, sleeper, wait_running

MODES = ("subreaper", "sandboxed", "process-group")


@pytest.fixture(params=MODES)
async def tty_shell(
    request: pytest.FixtureRequest, nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ShellSessions]:
    mode = request.param
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if mode == "process-group":  # no helper to start: the launcher falls back, silently
        monkeypatch.setattr(_process_tree, "_HELPER", tmp_path / "absent.py")
    sandbox = confinement() if mode == "sandboxed" else None
    sessions = ShellSessions(nursery, workspace, sandbox=sandbox)
    try:
        yield sessions
    finally:
        await sessions.aclose()
    expected = "process-group" if mode == "process-group" else "subreaper"
    assert sessions.statistics().isolation in (expected, "not started")


async def tty(sessions: ShellSessions, cmd: str, **args: object) -> ExecResult:
    return await sessions.exec_command({"cmd": cmd, "login": False, "tty": True, **args})


async def write(sessions: ShellSessions, session_id: int, chars: str = "", **args: object) -> ExecResult:
    return await sessions.write_stdin({"session_id": session_id, "chars": chars, **args})


#: Bound on waiting for a running command to print what a test expects.
READ_LIMIT = 30.0


async def read_until(sessions: ShellSessions, started: ExecResult, text: str) -> str:
    """The output of a running session up to (and including) ``text``, polling it; fails
    the test after :data:`READ_LIMIT` seconds or if the command ends first."""
    output = started["output"]
    with trio.fail_after(READ_LIMIT):
        while text not in output:
            assert "session_id" in started, f"the command ended before printing {text!r}: {output!r}"
            started = await write(sessions, started["session_id"], yield_time_ms=5000)
            output += started["output"]
    return output


# -- the terminal is there ---------------------------------------------------------------------


async def test_tty_true_gives_the_command_a_terminal_and_tty_false_does_not(tty_shell: ShellSessions) -> None:
    on_pipes = await tty_shell.exec_command({"cmd": "tty", "login": False})
    assert (on_pipes["exit_code"], on_pipes["output"]) == (1, "not a tty\n")
    on_terminal = await tty(tty_shell, "tty; test -t 0 && test -t 1 && test -t 2 && echo all three")
    assert on_terminal["exit_code"] == 0
    device, answer = on_terminal["output"].split("\r\n")[:2]
    assert device.startswith("/dev/")  # /dev/pts/N; /dev/console inside bwrap, which binds it there
    assert answer == "all three"


async def test_the_terminal_is_the_controlling_terminal_of_the_command(tty_shell: ShellSessions) -> None:
    # /dev/tty opens only for a process that has a controlling terminal; the shell leads
    # the session and its process group is the terminal's foreground group.
    result = await tty(tty_shell, 'echo via-dev-tty > /dev/tty; ps -o sid=,tpgid= -p $$; echo "me $$"')
    assert result["exit_code"] == 0, result
    lines = result["output"].split("\r\n")
    assert lines[0] == "via-dev-tty"
    sid, tpgid = lines[1].split()
    assert sid == tpgid == lines[2].removeprefix("me ")


async def test_a_password_prompt_reads_the_terminal_without_echo(tty_shell: ShellSessions) -> None:
    prompt = "read -r -s -p 'Password: ' secret < /dev/tty; echo; echo \"length ${#secret}\""
    first = await tty(tty_shell, prompt, yield_time_ms=250)
    assert await read_until(tty_shell, first, "Password: ") == "Password: "
    assert "session_id" in first
    done = await write(tty_shell, first["session_id"], "hunter22\n", yield_time_ms=10_000)
    assert done["exit_code"] == 0
    assert done["output"] == "\r\nlength 8\r\n"  # the password itself never comes back


async def test_input_is_echoed_and_output_lines_end_in_crlf(tty_shell: ShellSessions) -> None:
    started = await tty(tty_shell, "echo ready; read -r line; echo \"got $line\"", yield_time_ms=250)
    await read_until(tty_shell, started, "ready\r\n")
    done = await write(tty_shell, started["session_id"], "hello\n", yield_time_ms=10_000)
    assert done["exit_code"] == 0
    assert done["output"] == "hello\r\ngot hello\r\n"


# -- size ----------------------------------------------------------------------------------------


async def test_the_terminal_is_24_by_80_unless_sized(tty_shell: ShellSessions) -> None:
    assert (await tty(tty_shell, "stty size"))["output"] == "24 80\r\n"
    sized = await tty(tty_shell, "stty size", size={"rows": 50, "cols": 132})
    assert sized["output"] == "50 132\r\n"


async def test_write_stdin_resizes_the_terminal_and_the_command_sees_sigwinch(tty_shell: ShellSessions) -> None:
    cmd = "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"
    started = await tty(tty_shell, cmd, yield_time_ms=250)
    await read_until(tty_shell, started, "ready\r\n")
    resized = await write(tty_shell, started["session_id"], size={"rows": 33, "cols": 101}, yield_time_ms=250)
    assert await read_until(tty_shell, resized, "33 101") == "33 101\r\n"
    stopped = await write(tty_shell, started["session_id"], "\u0003", yield_time_ms=10_000)
    assert stopped.get("exit_code") == 130  # the terminal's SIGINT ends the loop


# -- Ctrl-C, cancel, leftovers -------------------------------------------------------------------


async def test_ctrl_c_goes_through_the_terminal_and_nothing_is_left(tty_shell: ShellSessions) -> None:
    child = sleeper()
    started = await tty(tty_shell, f"sleep {child} & echo started; wait", yield_time_ms=250)
    pids = await wait_running([child])
    await read_until(tty_shell, started, "started")
    result = await write(tty_shell, started["session_id"], "\u0003", yield_time_ms=10_000)
    assert result.get("exit_code") == 130, result
    assert "^C" in result["output"]  # the terminal echoes it: it was written, not signalled
    await wait_gone(pids)
    assert host_pids(child) == []


async def test_cancelling_a_tty_command_ends_its_whole_tree(tty_shell: ShellSessions) -> None:
    child = sleeper()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tty, tty_shell, f"sleep {child} & echo started; wait")
            await wait_running([child])
            scope.cancel()
    assert host_pids(child) == []  # exec_command returns only once the tree is gone
    assert tty_shell.statistics().running == 0


# -- output handling is the pipes' ---------------------------------------------------------------


async def test_output_bounds_redaction_and_progress_apply_on_a_terminal(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTY_TEST_TOKEN", "s3cr3t-value-123")
    sessions = ShellSessions(nursery, tmp_path)
    seen: list[str] = []
    try:
        secret = await sessions.exec_command(
            {"cmd": "printf 's3cr3t-value-123\\n'", "login": False, "tty": True}, on_output=seen.append
        )
        assert secret["output"] == "[REDACTED]\r\n"
        assert "".join(seen) == "[REDACTED]\r\n"
        big = await tty(sessions, "head -c 100000 /dev/zero | tr '\\0' x", max_output_tokens=100)
        assert big["original_token_count"] == 25_000
        assert len(big["output"]) < 1000
    finally:
        await sessions.aclose()


# -- arguments -----------------------------------------------------------------------------------


def test_unknown_arguments_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ShellError, match=r"exec_command: unknown arguments 'colour', 'timeout'; it takes cmd, "):
        parse_exec_args({"cmd": "true", "timeout": 5, "colour": True}, tmp_path)
    with pytest.raises(ShellError, match=r"write_stdin: unknown argument 'text'; it takes session_id, chars"):
        parse_write_args({"session_id": 1, "text": "x"})
    # codex's approval metadata is accepted (as nanocodex does)
    accepted = parse_exec_args({"cmd": "true", "prefix_rule": ["true"], "justification": "j"}, tmp_path)
    assert accepted.justification == "j"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"tty": "yes"}, r"'tty' must be true or false, got 'yes'"),
        ({"size": {"rows": 10, "cols": 10}}, r"'size' sets the terminal of a tty: true command"),
        ({"tty": True, "size": {"rows": 0, "cols": 10}}, r"whole numbers 1\.\.65535, got"),
        ({"tty": True, "size": {"rows": 10}}, r"'size' must be \{\"rows\": R, \"cols\": C\}"),
        ({"tty": True, "size": [24, 80]}, r"'size' must be"),
        ({"tty": True, "size": {"rows": True, "cols": 10}}, r"'size' must be"),
    ],
)
def test_bad_tty_arguments_say_what_is_wrong(tmp_path: Path, args: dict[str, object], problem: str) -> None:
    with pytest.raises(ShellError, match=problem):
        parse_exec_args({"cmd": "true", **args}, tmp_path)


async def test_resizing_a_session_without_a_terminal_is_refused(shell: ShellSessions) -> None:
    started = await shell.exec_command({"cmd": "echo up; read -r line", "login": False, "yield_time_ms": 250})
    with pytest.raises(ShellError, match=r"session \d+ has no terminal \(it was started without \"tty\": true\)"):
        await write(shell, started["session_id"], size={"rows": 10, "cols": 10})
    done = await write(shell, started["session_id"], "x\n", yield_time_ms=10_000)
    assert done["exit_code"] == 0


async def test_a_size_alone_waits_like_a_write_not_a_poll(tmp_path: Path) -> None:
    assert parse_write_args({"session_id": 1, "size": {"rows": 5, "cols": 5}}).yield_seconds == 0.25
    assert parse_write_args({"session_id": 1}).yield_seconds == 5.0


def test_the_leader_runs_the_program_even_without_a_terminal(tmp_path: Path) -> None:
    # On pipes TIOCSCTTY fails: the program still runs, with a note on stderr.
    import subprocess
    import sys

    from trio_agent._tools._pty import leader_argv

    done = subprocess.run(
        [*leader_argv(), "sh", "-c", "echo ran"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        check=False, start_new_session=True, timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "ran\n")
    assert "runs without a controlling terminal" in done.stderr
    missing = subprocess.run(
        [*leader_argv(), str(tmp_path / "no-such-program")], stdin=subprocess.DEVNULL, capture_output=True,
        text=True, check=False, start_new_session=True, timeout=30,
    )
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    assert sys.executable in leader_argv()

