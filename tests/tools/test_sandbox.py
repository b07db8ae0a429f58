"""The Bubblewrap sandbox of ``exec_command``: real commands, real writes, real sockets.

Nothing is skipped: CI installs bubblewrap (``.ci/run``). Commands inside the sandbox
live in a PID namespace, so ``$$`` is not a host pid there: processes are found on the
host by a unique ``sleep`` argument instead (:func:`host_pids`), and every test asserts
by pid that they are gone.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox import Confinement, protected_paths, release_fds, resolve_sandbox
from trio_agent._tools._sandbox import bwrap_argv as built
from trio_agent._tools.exec_command import ShellSessions

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone

_nonces = itertools.count(1)


def bwrap_argv(*args: Any) -> list[str]:
    """The line, only read: the descriptors of its rebuilt /run are closed at once."""
    argv = built(*args)
    release_fds(argv)
    return argv


def sleeper() -> str:
    """A ``sleep`` argument no other process on this machine has: ``300.<pid><n>``."""
    return f"300.{os.getpid()}{next(_nonces)}"


def host_pids(argument: str) -> list[int]:
    """Host pids of the live processes running ``sleep <argument>``."""
    wanted = f"sleep\0{argument}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if cmdline.read() == wanted and pid_alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def sandboxed_daemons() -> tuple[str, list[str]]:
    """Shell code starting a ``setsid`` daemon and a double-fork daemon (each in a new
    session) and waiting until both run (each touches a ready file in the working
    directory first), and the ``sleep`` arguments to find them by on the host."""
    setsid_arg, forked_arg = sleeper(), sleeper()
    setsid_daemon = f"setsid sh -c 'touch .ready-{setsid_arg}; exec sleep {setsid_arg}' </dev/null >/dev/null 2>&1 &"
    inner = f'sh -c "touch .ready-{forked_arg}; exec sleep {forked_arg}" </dev/null >/dev/null 2>&1 &'
    double_fork = f"( setsid sh -c '{inner}' & )"
    wait = f"while [ ! -e .ready-{setsid_arg} ] || [ ! -e .ready-{forked_arg} ]; do sleep 0.01; done"
    return f"{setsid_daemon} {double_fork}; {wait};", [setsid_arg, forked_arg]


async def wait_running(arguments: list[str]) -> list[int]:
    """The host pids of one ``sleep`` per argument, once all of them run."""
    await wait_for_os_fact(lambda: all(host_pids(arg) for arg in arguments), f"sleep {arguments} starting")
    return [pid for arg in arguments for pid in host_pids(arg)]


def confinement(mode: ta.SandboxMode = ta.SandboxMode.WORKSPACE_WRITE, **kw: object) -> Confinement:
    return resolve_sandbox(ta.Sandbox(mode, **kw)).confinement  # type: ignore[arg-type]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
async def shell(nursery: trio.Nursery, workspace: Path) -> AsyncIterator[ShellSessions]:
    sessions = ShellSessions(nursery, workspace, sandbox=confinement())
    try:
        yield sessions
    finally:
        await sessions.aclose()


async def run(sessions: ShellSessions, cmd: str, **args: object) -> dict[str, object]:
    result = await sessions.exec_command({"cmd": cmd, "login": False, **args})
    return dict(result)


# -- the command line ------------------------------------------------------------------------


def test_workspace_write_binds_the_workspace_a_private_tmp_and_protects_git(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    extra = tmp_path / "cache"
    extra.mkdir()
    sandbox = ta.Sandbox(writable_roots=[extra])
    argv = bwrap_argv("/usr/bin/bwrap", sandbox, tmp_path, tmp_path / "sub", Path("/private"), ["sh", "-c", "x"])
    joined = " ".join(argv)
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--cap-drop ALL"):
        assert flag in joined
    # Read-only root first; the private /tmp before the workspace (which may lie below /tmp).
    order = [joined.index(part) for part in (
        "--ro-bind / /", "--bind /private /tmp", f"--bind {tmp_path} {tmp_path}",
        f"--bind {extra} {extra}", f"--ro-bind {tmp_path}/.git {tmp_path}/.git",
    )]
    assert order == sorted(order)
    assert argv[-6:] == ["--chdir", str(tmp_path / "sub"), "--", "sh", "-c", "x"]


def test_network_and_writable_git_drop_their_flags(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    sandbox = ta.Sandbox(network=True, writable_git=True)
    joined = " ".join(bwrap_argv("bwrap", sandbox, tmp_path, tmp_path, Path("/p"), ["true"]))
    assert "--unshare-net" not in joined
    assert ".git" not in joined
    assert "--unshare-pid" in joined


def test_read_only_rebinds_nothing_writable(tmp_path: Path) -> None:
    argv = bwrap_argv("bwrap", ta.Sandbox(ta.SandboxMode.READ_ONLY), tmp_path, tmp_path, None, ["true"])
    assert "--bind" not in argv
    assert "--remount-ro /dev" in " ".join(argv)


def test_a_git_file_protects_the_git_dir_it_points_to_inside_a_writable_root(tmp_path: Path) -> None:
    gitdir = tmp_path / "repo.git" / "worktrees" / "w"
    gitdir.mkdir(parents=True)
    (tmp_path / ".git").write_text(f"gitdir: {gitdir}\n")
    assert protected_paths([tmp_path]) == [tmp_path / ".git", gitdir]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert protected_paths([outside]) == []


# -- detection ---------------------------------------------------------------------------------


def test_danger_full_access_needs_no_bwrap() -> None:
    resolution = resolve_sandbox(ta.Sandbox(ta.SandboxMode.DANGER_FULL_ACCESS, bwrap="/nonexistent/bwrap"))
    assert resolution.fallback is None
    assert not resolution.confinement.confined


def test_a_configured_mode_without_bwrap_says_what_is_missing_and_how_to_opt_out() -> None:
    with pytest.raises(ta.SandboxUnavailable) as info:
        resolve_sandbox(ta.Sandbox(ta.SandboxMode.READ_ONLY, bwrap="/nonexistent/bwrap"))
    message = str(info.value)
    assert "'read-only' cannot work here" in message
    assert "/nonexistent/bwrap was not found" in message
    assert "apt-get install bubblewrap" in message
    assert "sandbox=ta.SandboxMode.DANGER_FULL_ACCESS" in message
    assert isinstance(info.value, ta.ConfigError)


def test_a_bwrap_that_cannot_create_namespaces_fails_with_its_own_words(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ta.SandboxUnavailable, match="No permissions to creating new namespace"):
        resolve_sandbox(ta.Sandbox(bwrap=str(fake)))


def test_the_default_falls_back_to_full_access_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    resolution = resolve_sandbox(None)
    assert resolution.confinement.sandbox.mode is ta.SandboxMode.DANGER_FULL_ACCESS
    assert resolution.fallback is not None and "Bubblewrap is not installed" in resolution.fallback


def test_the_default_is_workspace_write_where_bwrap_works() -> None:
    resolution = resolve_sandbox(None)
    assert resolution.fallback is None
    assert resolution.confinement.confined
    assert resolution.confinement.sandbox == ta.Sandbox()


# -- what commands can do ------------------------------------------------------------------------


async def test_workspace_write_writes_the_workspace_and_its_private_tmp_only(
    shell: ShellSessions, workspace: Path, tmp_path: Path
) -> None:
    result = await run(shell, "echo inside > inside.txt && echo tmp > /tmp/t && cat /tmp/t && echo $TMPDIR")
    assert result["exit_code"] == 0 and result["output"] == "tmp\n/tmp\n"
    assert (workspace / "inside.txt").read_text() == "inside\n"
    outside = Path(tempfile.mkdtemp(prefix="trio-agent-outside-", dir="/var/tmp"))
    try:
        for target in (outside / "x", Path("/etc/trio-agent-x"), Path("/usr/trio-agent-x")):
            result = await run(shell, f"echo no > {target}")
            assert result["exit_code"] == 1 and "Read-only file system" in str(result["output"]), result
            assert not target.exists()
    finally:
        shutil.rmtree(outside)
    # /tmp is the private temp dir: a write below it, even at a path next to a workspace
    # that lies below /tmp, lands there, never in the host's /tmp.
    beside = await run(shell, f"echo private > {tmp_path}/beside.txt")
    assert not (tmp_path / "beside.txt").exists() and not Path("/tmp/t").exists()
    [private] = [p for p in Path(tempfile.gettempdir()).glob("trio-agent-tmp-*") if (p / "t").exists()]
    if tmp_path.is_relative_to("/tmp"):
        assert beside["exit_code"] == 0
        assert (private / tmp_path.relative_to("/tmp") / "beside.txt").read_text() == "private\n"
    await shell.aclose()  # removes it
    assert not private.exists()


async def test_read_only_refuses_every_write(nursery: trio.Nursery, workspace: Path) -> None:
    shell = ShellSessions(nursery, workspace, sandbox=confinement(ta.SandboxMode.READ_ONLY))
    try:
        for target in ("in-workspace.txt", "/tmp/ro-test", "/dev/shm/ro-test", str(workspace.parent / "up.txt")):
            result = await run(shell, f"echo no > {target}")
            assert result["exit_code"] == 1, result
            assert "Read-only file system" in str(result["output"])
            assert not (workspace / target).exists()
        assert (await run(shell, "echo fine > /dev/null && cat in-workspace.txt 2>&1 | wc -l"))["exit_code"] == 0
        assert os.listdir(workspace) == []
    finally:
        await shell.aclose()


async def test_git_is_read_only_unless_configured(nursery: trio.Nursery, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    for writable_git, expected in ((False, 1), (True, 0)):
        shell = ShellSessions(nursery, workspace, sandbox=confinement(writable_git=writable_git))
        try:
            result = await run(shell, "echo x > .git/config")
            assert result["exit_code"] == expected, result
        finally:
            await shell.aclose()
    assert (workspace / ".git" / "config").read_text() == "x\n"


async def _listener() -> tuple[trio.SocketListener, int]:
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return listener, listener.socket.getsockname()[1]


@pytest.mark.parametrize("network", [False, True])
async def test_a_connect_to_the_host_loopback_fails_with_the_network_off_and_works_with_it_on(
    nursery: trio.Nursery, workspace: Path, network: bool
) -> None:
    listener, port = await _listener()
    accepted = trio.Event()

    async def accept() -> None:
        stream = await listener.accept()
        accepted.set()
        await stream.aclose()

    shell = ShellSessions(nursery, workspace, sandbox=confinement(network=network))
    try:
        async with trio.open_nursery() as server:
            server.start_soon(accept)
            cmd = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
            result = await run(shell, cmd, shell="/bin/bash")
            if network:
                assert result == {**result, "exit_code": 0, "output": "connected\n"}
                await accepted.wait()
            else:
                assert result["exit_code"] == 1
                assert "Connection refused" in str(result["output"])
                assert not accepted.is_set()
                server.cancel_scope.cancel()
    finally:
        await shell.aclose()
        await listener.aclose()


async def test_the_agents_environ_is_not_readable(shell: ShellSessions, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIO_AGENT_SANDBOX_MARKER", "visible-only-outside")
    agent = os.getpid()
    result = await run(shell, f"cat /proc/{agent}/environ; ls /proc | grep -c '^[0-9]'")
    assert "visible-only-outside" not in str(result["output"])
    assert f"/proc/{agent}/environ: No such file or directory" in str(result["output"])
    # Only the command's own processes exist in its /proc: bwrap's init, the shell, ls, grep.
    assert int(str(result["output"]).split()[-1]) <= 5


# -- process lifetime ---------------------------------------------------------------------------


async def test_daemons_die_with_the_command_that_started_them(shell: ShellSessions, workspace: Path) -> None:
    spawn, arguments = sandboxed_daemons()
    result = await run(shell, f"{spawn} echo started")
    assert result["exit_code"] == 0 and result["output"] == "started\n"
    assert all((workspace / f".ready-{arg}").exists() for arg in arguments)  # both ran
    assert all(host_pids(arg) == [] for arg in arguments)  # and are gone by the time the result is in
    assert processes_in(workspace) == []


async def test_a_cancelled_command_takes_its_daemons_and_namespace_with_it(
    shell: ShellSessions, workspace: Path
) -> None:
    spawn, arguments = sandboxed_daemons()
    pids: list[int] = []
    async with trio.open_nursery() as nursery:

        async def cancel_once_running() -> None:
            pids.extend(await wait_running(arguments))
            nursery.cancel_scope.cancel()

        nursery.start_soon(cancel_once_running)
        await run(shell, f"{spawn} sleep 300", yield_time_ms=30000)
    assert len(pids) == 2
    await wait_gone(pids)
    assert processes_in(workspace) == []
    assert shell.statistics().running == 0


async def test_closing_the_sessions_ends_a_background_session_and_its_daemons(
    shell: ShellSessions, workspace: Path
) -> None:
    spawn, arguments = sandboxed_daemons()
    result = await run(shell, f"{spawn} sleep 300", yield_time_ms=250)
    assert "session_id" in result
    pids = await wait_running(arguments)
    await shell.aclose()
    await wait_gone(pids)
    assert processes_in(workspace) == []


async def test_write_stdin_and_ctrl_c_reach_the_command_not_the_sandbox(shell: ShellSessions) -> None:
    script = "trap 'echo interrupted' INT; while read line; do echo got $line; done; echo eof"
    started = await run(shell, script, yield_time_ms=250)
    session_id = started["session_id"]
    echoed = await shell.write_stdin({"session_id": session_id, "chars": "one\n", "yield_time_ms": 500})
    assert echoed["output"] == "got one\n" and echoed.get("session_id") == session_id
    # SIGINT reaches the shell (its trap runs) while the sandbox's own processes stay up.
    interrupted = await shell.write_stdin({"session_id": session_id, "chars": "\u0003two\n", "yield_time_ms": 500})
    assert "interrupted" in interrupted["output"] and interrupted.get("session_id") == session_id
    assert "got two" in interrupted["output"] or "got two" in (
        await shell.write_stdin({"session_id": session_id, "chars": "", "yield_time_ms": 5000})
    )["output"]


async def test_terminate_gives_the_command_its_grace(shell: ShellSessions, workspace: Path) -> None:
    marker = workspace / "terminated"
    script = f"trap 'echo bye > {marker}; exit 0' TERM; echo ready; while :; do sleep 0.01; done"
    started = await run(shell, script, yield_time_ms=250)
    assert started["output"] == "ready\n"
    await shell.aclose()  # TERM to the command (the sandbox spared), grace, KILL
    assert marker.read_text() == "bye\n"
    assert processes_in(workspace) == []
