"""Tests of the ``exec_command``/``write_stdin`` tools (real subprocesses).

Where a test needs an OS fact that no Trio primitive can signal (a pid file written by
the command, a process having died), it polls for it in a bounded loop and fails with a
clear message; nothing sleeps "to let things happen".
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._tools._output_capture import HeadTailBuffer, omitted_notice
from trio_agent._tools._shell_env import (
    REDACTED,
    build_environment,
    is_secret_name,
    parse_exec_args,
    parse_write_args,
    redact,
    resolve_shell,
)
from trio_agent._tools.exec_command import ExecResult, ShellError, ShellSessions

from .._os_facts import wait_for_os_fact

# -- helpers ---------------------------------------------------------------------------------


def _process_is_running(pid: int) -> bool:
    """True unless the pid is gone or a zombie (dead, waiting for init to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return state.split()[1] not in ("Z", "X")


async def assert_process_exits(pid: int) -> None:
    await wait_for_os_fact(lambda: not _process_is_running(pid), f"exit of process {pid} after the kill")


def _read_complete_file(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def read_pids(path: Path) -> list[int]:
    """Wait for the command to publish ``$$ $!`` (written to a temp file, then moved)."""
    await wait_for_os_fact(lambda: _read_complete_file(path) is not None, f"the command writing {path}")
    return [int(word) for word in (_read_complete_file(path) or "").split()]


def _make_dirs(path: Path) -> Path:
    path.mkdir(parents=True)
    return path.resolve()


def tree_cmd(pid_file: Path) -> str:
    """A shell with a background grandchild that both outlive any test."""
    return f"sleep 100 & echo $$ $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; sleep 100"


async def run_to_exit(shell: ShellSessions, result: ExecResult) -> tuple[str, ExecResult]:
    """Poll a session until it exits; return all output and the final result."""
    outputs = [result["output"]]
    for _ in range(10):
        if "exit_code" in result:
            return "".join(outputs), result
        result = await shell.write_stdin({"session_id": result["session_id"]})
        outputs.append(result["output"])
    pytest.fail(f"session did not exit; output so far: {''.join(outputs)!r}")


# -- one-shot commands -------------------------------------------------------------------------


async def test_printf_output_and_exit_code_zero(shell: ShellSessions) -> None:
    result = await shell.exec_command({"cmd": "printf 'hello\\nworld'"})
    assert result["exit_code"] == 0
    assert result["output"].endswith("hello\nworld")
    assert "session_id" not in result
    assert "original_token_count" not in result
    assert isinstance(result["wall_time_seconds"], float)
    assert result["wall_time_seconds"] == round(result["wall_time_seconds"], 3)
    assert list(result) == ["wall_time_seconds", "exit_code", "output"]


async def test_nonzero_exit_code(shell: ShellSessions) -> None:
    result = await shell.exec_command({"cmd": "exit 3", "login": False})
    assert result == {"wall_time_seconds": result["wall_time_seconds"], "exit_code": 3, "output": ""}


async def test_stderr_is_merged_into_output(shell: ShellSessions) -> None:
    result = await shell.exec_command({"cmd": "echo out; echo err >&2; echo out2", "login": False})
    assert result["output"] == "out\nerr\nout2\n"


async def test_relative_and_absolute_workdir(shell: ShellSessions, tmp_path: Path) -> None:
    sub = _make_dirs(tmp_path / "sub" / "dir")
    relative = await shell.exec_command({"cmd": "pwd -P", "workdir": "sub/dir", "login": False})
    assert relative["output"] == f"{sub}\n"
    absolute = await shell.exec_command({"cmd": "pwd -P", "workdir": str(sub), "login": False})
    assert absolute["output"] == f"{sub}\n"
    default = await shell.exec_command({"cmd": "pwd -P", "login": False})
    assert default["output"] == f"{sub.parent.parent}\n"


async def test_login_flag_gives_the_login_environment_or_not(nursery: trio.Nursery, tmp_path: Path) -> None:
    # login: true -> the environment the login shell's profile sets up (taken once, see
    # _login_env; the command itself runs in "-c"); login: false -> the agent's own.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text("export PROFILE_RAN=yes\n")
    shell = ShellSessions(nursery, tmp_path, {"HOME": str(home)})
    probe = "echo ${PROFILE_RAN:-no}"
    try:
        plain = await shell.exec_command({"cmd": probe, "shell": "/bin/bash", "login": False})
        assert plain["output"] == "no\n"
        login = await shell.exec_command({"cmd": probe, "shell": "/bin/bash"})
        assert login["output"] == "yes\n"
    finally:
        await shell.aclose()


async def test_start_failures_are_results_with_exit_code_1(shell: ShellSessions) -> None:
    missing = await shell.exec_command({"cmd": "true", "workdir": "no/such/dir"})
    assert missing["exit_code"] == 1
    assert "could not start" in missing["output"]
    assert "does not exist" in missing["output"]
    bad_shell = await shell.exec_command({"cmd": "true", "shell": "/no/such/shell"})
    assert bad_shell["exit_code"] == 1
    assert "failed to start '/no/such/shell'" in bad_shell["output"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'cmd' is required"),
        ({"cmd": "  "}, "'cmd' is required"),
        ({"cmd": "true", "login": "yes"}, "'login' must be true or false"),
        ({"cmd": "true", "yield_time_ms": "soon"}, "'yield_time_ms' must be an integer"),
        ({"cmd": "true", "yield_time_ms": True}, "'yield_time_ms' must be an integer"),
        ({"cmd": "true", "max_output_tokens": -1}, "must not be negative"),
        ({"cmd": "true", "workdir": 3}, "'workdir' must be a string"),
    ],
)
async def test_invalid_exec_arguments_raise(
    shell: ShellSessions, args: dict[str, object], message: str
) -> None:
    with pytest.raises(ShellError, match=message):
        await shell.exec_command(args)


async def test_commands_run_concurrently(shell: ShellSessions) -> None:
    results: list[ExecResult] = []

    async def run() -> None:
        results.append(await shell.exec_command({"cmd": "sleep 0.5", "login": False}))

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(run)
    assert trio.current_time() - started < 1.2
    assert [result["exit_code"] for result in results] == [0, 0, 0]


# -- sessions ----------------------------------------------------------------------------------


async def test_yield_returns_a_session_and_polling_gets_the_rest(
    shell: ShellSessions, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    cmd = f"echo first; while [ ! -e {go} ]; do sleep 0.01; done; echo second"
    first = await shell.exec_command({"cmd": cmd, "yield_time_ms": 250, "login": False})
    assert "exit_code" not in first
    assert first["session_id"] == 1
    assert shell.session_ids == (1,)
    go.touch()
    started = trio.current_time()
    output, final = await run_to_exit(shell, first)
    assert trio.current_time() - started < 4.0  # a poll returns as soon as it exits
    assert output == "first\nsecond\n"
    assert final["exit_code"] == 0
    assert "session_id" not in final
    assert shell.session_ids == ()
    with pytest.raises(ShellError, match="unknown session_id 1; "):
        await shell.write_stdin({"session_id": 1})


async def test_write_stdin_feeds_the_process(shell: ShellSessions) -> None:
    cmd = 'echo ready; read line; echo "got $line"'
    first = await shell.exec_command({"cmd": cmd, "yield_time_ms": 250, "login": False})
    session_id = first["session_id"]
    written = await shell.write_stdin({"session_id": session_id, "chars": "hello\n"})
    output, final = await run_to_exit(shell, written)
    assert first["output"] + output == "ready\ngot hello\n"
    assert final["exit_code"] == 0


async def test_write_stdin_to_cat_echoes(shell: ShellSessions) -> None:
    first = await shell.exec_command({"cmd": "head -n 2", "yield_time_ms": 250, "login": False})
    session_id = first["session_id"]
    await shell.write_stdin({"session_id": session_id, "chars": "one\n"})
    last = await shell.write_stdin({"session_id": session_id, "chars": "two\n"})
    output, final = await run_to_exit(shell, last)
    assert final["exit_code"] == 0
    assert output.endswith("two\n")


async def test_ctrl_c_sends_sigint_to_the_group(shell: ShellSessions) -> None:
    first = await shell.exec_command({"cmd": "sleep 100", "yield_time_ms": 250, "login": False})
    interrupted = await shell.write_stdin({"session_id": first["session_id"], "chars": "\u0003"})
    _, final = await run_to_exit(shell, interrupted)
    assert final["exit_code"] == 130  # 128 + SIGINT


async def test_session_ids_are_never_reused(shell: ShellSessions) -> None:
    args = {"cmd": "sleep 100", "yield_time_ms": 250, "login": False}
    first = await shell.exec_command(args)
    await run_to_exit(shell, await shell.write_stdin({"session_id": 1, "chars": "\u0003"}))
    assert "exit_code" not in first
    second = await shell.exec_command(args)
    assert second["session_id"] == 2


async def test_invalid_write_arguments_raise(shell: ShellSessions) -> None:
    with pytest.raises(ShellError, match="'session_id' is required"):
        await shell.write_stdin({"chars": "x"})
    with pytest.raises(ShellError, match="unknown session_id 7; "):
        await shell.write_stdin({"session_id": 7, "chars": "x"})


async def test_pruning_makes_room_for_new_sessions(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path, max_sessions=2)
    try:
        args = {"cmd": "sleep 100", "yield_time_ms": 250, "login": False}
        assert (await shell.exec_command(args))["session_id"] == 1
        assert (await shell.exec_command(args))["session_id"] == 2
        third = await shell.exec_command({"cmd": "echo hi", "login": False})
        assert third["exit_code"] == 0
        assert shell.session_ids == (2,)  # the least recently used one was killed
        with pytest.raises(ShellError, match="unknown session_id 1"):
            await shell.write_stdin({"session_id": 1})
    finally:
        await shell.aclose()


# -- environment and output ----------------------------------------------------------------------


async def test_environment_is_scrubbed_forced_and_redacted(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_KEY", "supersecretvalue")
    monkeypatch.setenv("GITHUB_TOKEN", "short")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "dvorak")
    monkeypatch.setenv("TERM", "xterm-256color")
    shell = ShellSessions(nursery, tmp_path, env_overrides={"PAGER": "less", "EXTRA": "1"})
    try:
        cmd = "env; printf 'value=supersecretvalue short'"
        result = await shell.exec_command({"cmd": cmd, "login": False})
    finally:
        await shell.aclose()
    lines = result["output"].splitlines()
    assert not any(line.startswith(("MY_API_KEY=", "GITHUB_TOKEN=")) for line in lines)
    for expected in ["KEYBOARD_LAYOUT=dvorak", "TERM=dumb", "NO_COLOR=1", "LC_ALL=C.UTF-8"]:
        assert expected in lines
    for expected in ["LANG=C.UTF-8", "COLORTERM=", "GIT_PAGER=cat", "PAGER=less", "EXTRA=1"]:
        assert expected in lines
    assert lines[-1] == f"value={REDACTED} short"
    assert "supersecretvalue" not in result["output"]


def test_secret_names() -> None:
    secret = ["MY_API_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "db_password", "AWS_SECRET_ACCESS_KEY"]
    secret += ["SESSION_COOKIE", "GOOGLE_APPLICATION_CREDENTIALS", "PASS", "X_PASSWD"]
    plain = ["PATH", "HOME", "KEYBOARD", "PASSWORDLESS", "TOKENIZER_DIR", "MONKEY"]
    assert all(is_secret_name(name) for name in secret)
    assert not any(is_secret_name(name) for name in plain)


def test_redaction_replaces_longest_secrets_first() -> None:
    inherited = {"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-longer", "C_KEY": "tiny", "PATH": "/x"}
    environment = build_environment(inherited, {"D_KEY": "kept-as-given"})
    assert environment.secrets == ("abcdefgh-longer", "abcdefgh")
    assert environment.env["PATH"] == "/x"
    assert environment.env["D_KEY"] == "kept-as-given"
    assert "A_TOKEN" not in environment.env and "C_KEY" not in environment.env
    text = "x abcdefgh-longer y abcdefgh z tiny"
    assert redact(text, environment.secrets) == "x [REDACTED] y [REDACTED] z tiny"


def test_shell_resolution() -> None:
    assert resolve_shell("/usr/bin/fish", "/bin/zsh") == "/usr/bin/fish"
    assert resolve_shell(None, "/usr/local/bin/zsh") == "/usr/local/bin/zsh"
    assert resolve_shell(None, "/usr/bin/fish") == "/bin/bash"
    assert resolve_shell(None, None) == "/bin/bash"


def test_yield_and_token_clamping(tmp_path: Path) -> None:
    def exec_yield(value: object) -> float:
        return parse_exec_args({"cmd": "x", "yield_time_ms": value}, tmp_path).yield_seconds

    def write_yield(chars: str, value: object = None) -> float:
        args = {"session_id": 1, "chars": chars, "yield_time_ms": value}
        return parse_write_args(args).yield_seconds

    assert (exec_yield(None), exec_yield(1), exec_yield(10**9), exec_yield(500.0)) == (
        10.0, 0.25, 30.0, 0.5,
    )  # fmt: skip
    assert (write_yield("a"), write_yield("a", 1), write_yield("a", 10**9)) == (0.25, 0.25, 30.0)
    assert (write_yield(""), write_yield("", 1), write_yield("", 10**9)) == (5.0, 5.0, 300.0)
    assert parse_exec_args({"cmd": "x"}, tmp_path).max_bytes == 40_000
    assert parse_exec_args({"cmd": "x", "max_output_tokens": 10**9}, tmp_path).max_bytes == 2**20


async def test_output_is_truncated_to_max_output_tokens(shell: ShellSessions) -> None:
    result = await shell.exec_command(
        {"cmd": "seq 1 30000", "max_output_tokens": 100, "login": False}
    )
    data = "".join(f"{i}\n" for i in range(1, 30001))
    assert result["original_token_count"] == -(-len(data) // 4)
    notice = omitted_notice(len(data) - 400)
    assert result["output"] == data[:200] + notice + data[-200:]
    assert list(result) == ["wall_time_seconds", "exit_code", "original_token_count", "output"]


async def test_capture_keeps_head_and_tail_of_huge_output(shell: ShellSessions) -> None:
    size = 3 * 2**20
    cmd = f"printf start; head -c {size} /dev/zero | tr '\\0' a; printf end"
    result = await shell.exec_command({"cmd": cmd, "max_output_tokens": 10**9, "login": False})
    total = size + len("start") + len("end")
    assert result["original_token_count"] == -(-total // 4)
    head, tail = result["output"].split(omitted_notice(total - 2**20))
    assert head == "start" + "a" * (2**19 - 5)
    assert tail == "a" * (2**19 - 3) + "end"


def test_head_tail_buffer_small() -> None:
    buffer = HeadTailBuffer(capacity=10)
    for chunk in (b"0123", b"456789ab", b"cdef"):
        buffer.write(chunk)
    excerpt = buffer.excerpt()
    assert (excerpt.head, excerpt.tail, excerpt.total, excerpt.omitted) == (b"01234", b"bcdef", 16, 6)
    assert excerpt.to_bytes() == b"01234" + omitted_notice(6).encode() + b"bcdef"
    smaller = buffer.excerpt(4)
    assert (smaller.head, smaller.tail, smaller.omitted) == (b"01", b"ef", 12)
    buffer.clear()
    assert buffer.excerpt().to_bytes() == b""


@given(
    capacity=st.integers(min_value=2, max_value=64),
    chunks=st.lists(st.binary(max_size=40), max_size=8),
    budget=st.integers(min_value=0, max_value=80),
)
def test_head_tail_buffer_matches_the_stream(capacity: int, chunks: list[bytes], budget: int) -> None:
    buffer = HeadTailBuffer(capacity=capacity)
    for chunk in chunks:
        buffer.write(chunk)
    data = b"".join(chunks)
    full = buffer.excerpt()
    if len(data) <= capacity:
        assert full.to_bytes() == data and not full.truncated
    else:
        assert full.head == data[: capacity // 2]
        assert full.tail == data[len(data) - (capacity - capacity // 2) :]
    cut = buffer.excerpt(min(budget, capacity))
    limit = min(budget, capacity)
    if len(data) <= limit:
        assert cut.to_bytes() == data
    else:
        assert cut.head == data[: limit // 2]
        assert cut.tail == data[len(data) - (limit - limit // 2) :]
        assert cut.omitted == len(data) - limit


# -- cancellation and shutdown -------------------------------------------------------------------


async def test_cancelling_exec_command_kills_the_whole_tree(
    shell: ShellSessions, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    outcome: list[str] = []

    async def run() -> None:
        try:
            await shell.exec_command({"cmd": tree_cmd(pid_file), "login": False})
        except trio.Cancelled:
            outcome.append("cancelled")
            raise
        outcome.append("returned")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        pids = await read_pids(pid_file)
        cancelled_at = trio.current_time()
        nursery.cancel_scope.cancel()
    assert trio.current_time() - cancelled_at < 1.5  # TERM, at most 0.5 s grace, KILL
    assert outcome == ["cancelled"]
    assert len(pids) == 2  # the shell and its background grandchild
    for pid in pids:
        await assert_process_exits(pid)
    assert shell.session_ids == ()


async def test_aclose_kills_background_sessions(nursery: trio.Nursery, tmp_path: Path) -> None:
    shell = ShellSessions(nursery, tmp_path)
    pid_file = tmp_path / "pids"
    args = {"cmd": tree_cmd(pid_file), "yield_time_ms": 250, "login": False}
    result = await shell.exec_command(args)
    assert result["session_id"] == 1
    pids = await read_pids(pid_file)
    await shell.aclose()
    for pid in pids:
        await assert_process_exits(pid)
    await shell.aclose()  # idempotent
    with pytest.raises(ShellError, match="closed"):
        await shell.exec_command({"cmd": "true"})
    with pytest.raises(ShellError, match="unknown session_id 1"):
        await shell.write_stdin({"session_id": 1})


async def test_cancelling_the_owning_nursery_kills_sessions(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    async with trio.open_nursery() as owner:
        shell = ShellSessions(owner, tmp_path)
        args = {"cmd": tree_cmd(pid_file), "yield_time_ms": 250, "login": False}
        assert "session_id" in await shell.exec_command(args)
        pids = await read_pids(pid_file)
        owner.cancel_scope.cancel()
    for pid in pids:
        await assert_process_exits(pid)


async def test_cancelling_write_stdin_keeps_the_session(shell: ShellSessions) -> None:
    first = await shell.exec_command({"cmd": "head -n 1", "yield_time_ms": 250, "login": False})
    session_id = first["session_id"]
    with trio.move_on_after(0.05) as scope:
        await shell.write_stdin({"session_id": session_id})
    assert scope.cancelled_caught
    assert shell.session_ids == (session_id,)
    answered = await shell.write_stdin({"session_id": session_id, "chars": "still here\n"})
    output, final = await run_to_exit(shell, answered)
    assert (output, final["exit_code"]) == ("still here\n", 0)


async def test_background_children_are_swept_when_the_shell_exits(
    shell: ShellSessions, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    cmd = f"sleep 100 >/dev/null 2>&1 & echo $$ $! > {pid_file}; echo done"
    result = await shell.exec_command({"cmd": cmd, "login": False})
    assert (result["exit_code"], result["output"]) == (0, "done\n")
    for pid in await read_pids(pid_file):
        await assert_process_exits(pid)


async def test_processes_ignoring_sigterm_get_sigkill_after_the_grace(
    shell: ShellSessions, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    # The ignored SIGTERM is inherited by the background child too.
    cmd = "trap '' TERM; " + tree_cmd(pid_file)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(shell.exec_command, {"cmd": cmd, "login": False})
        pids = await read_pids(pid_file)
        cancelled_at = trio.current_time()
        nursery.cancel_scope.cancel()
    assert 0.45 < trio.current_time() - cancelled_at < 2.0  # waited the 0.5 s grace, then KILL
    for pid in pids:
        await assert_process_exits(pid)
