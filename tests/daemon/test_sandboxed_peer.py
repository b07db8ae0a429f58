"""The warm daemon serves no client in a sandbox (issue 21, hole 1: the daemon's lock).

The sandbox does not mount the daemon's directory (``tests/acceptance/
test_sandbox_escapes.py``); these tests bypass that on purpose: the daemon's directory
is below ``/var/tmp`` and the agent's environment does not name it (a daemon started
with another ``TRIO_AGENT_DAEMON_DIR``), so the socket is visible read-only inside the
sandbox -- and connecting to a socket needs no write. A sandboxed command then runs
the attack of the issue (``_attack_script``: ``status`` for the build id, then a
``run --sandbox danger-full-access`` with its own descriptors) and must be refused,
without the build id; the same script from outside the sandbox is served (the
positive control: the daemon and the request work). Peers in namespaces of their own
made with ``unshare`` are refused the same way, and the check fails closed.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._daemon import _peer as _daemon_peer
from trio_agent._daemon._peer import peer_problem
from trio_agent._tools._sandbox import Confinement, resolve_sandbox
from trio_agent._tools.exec_command import ShellSessions

from ..cli._cli import COMMAND, NO_CODEX_HOME, ROOT
from ._daemon import Daemon, running_daemon
from ._escape import OUTSIDE_PARENT, SCRIPT, Escape, outside_dir

MODES = [ta.SandboxMode.WORKSPACE_WRITE, ta.SandboxMode.READ_ONLY]
SANDBOXED = "refused the client runs in a sandbox ("


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon(parent=OUTSIDE_PARENT) as daemon:
        yield daemon


@pytest.fixture
def escape(daemon: Daemon, workspace: Path) -> Iterator[Escape]:
    with outside_dir() as out:
        yield Escape(daemon, workspace, out)


def sandbox(mode: ta.SandboxMode) -> Confinement:
    return resolve_sandbox(ta.Sandbox(mode)).confinement


def build_of(daemon: Daemon) -> str:
    status = daemon.status()
    assert status is not None and status.build
    return status.build


async def assert_served_outside(shell: ShellSessions, escape: Escape) -> None:
    """The positive control: the same script, from outside the sandbox, is served."""
    await escape.daemon.settle()
    outside = await escape.attack(shell, outside_sandbox=True)
    assert f"status: daemon {escape.daemon.pid} " in outside and build_of(escape.daemon) in outside
    assert "run: ok | exit 0" in outside, outside
    assert escape.escaped.exists()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_sandboxed_command_that_reaches_the_socket_is_refused(
    nursery: trio.Nursery, escape: Escape, mode: ta.SandboxMode
) -> None:
    assert "TRIO_AGENT_DAEMON_DIR" not in os.environ  # the sandbox does not know where this daemon is
    spares = await escape.prime()
    shell = ShellSessions(nursery, escape.workspace, sandbox=sandbox(mode))
    try:
        visible = await shell.exec_command({"cmd": f"test -S {escape.daemon.directory}/daemon.sock", "login": False})
        assert visible["exit_code"] == 0  # the bypass: the socket is there to connect to
        inside = await escape.attack(shell)
        lines = inside.splitlines()
        assert lines[0].startswith(f"status: {SANDBOXED}") and lines[1].startswith(f"run: {SANDBOXED}"), inside
        assert "mnt" in lines[0] and "pid" in lines[0]  # what differs is said
        assert build_of(escape.daemon) not in inside  # status leaks nothing to a refused peer
        assert not escape.escaped.exists()
        status = escape.daemon.status()
        assert status is not None and set(status.ready) >= spares  # no spare was handed out
        await assert_served_outside(shell, escape)
    finally:
        await shell.aclose()


async def test_the_thin_client_in_a_sandbox_says_it_was_refused_and_runs_in_process(
    nursery: trio.Nursery, escape: Escape
) -> None:
    spares = await escape.prime()
    env = {"TRIO_AGENT_DAEMON_DIR": escape.daemon.directory, "TRIO_AGENT_NO_DAEMON": "0", "PYTHONPATH": str(ROOT),
           "CODEX_HOME": NO_CODEX_HOME}
    shell = ShellSessions(nursery, escape.workspace, env, sandbox=sandbox(ta.SandboxMode.WORKSPACE_WRITE))
    try:
        cmd = shlex.join([*COMMAND, "run", *escape.options, f"run: touch {escape.escaped}"])
        result = await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 30000})
        output = str(result["output"])
        assert "trio-agent: not using the daemon: it refused: the client runs in a sandbox (" in output
        # In-process, inside the command's own sandbox: the "danger-full-access" it asked
        # for is the agent's own rights there, and the outside stays read-only.
        assert f"touch: cannot touch '{escape.escaped}': Read-only file system" in output, output
        assert "-- completed: " in output
        assert not escape.escaped.exists()
        status = escape.daemon.status()
        assert status is not None and set(status.ready) >= spares
        await assert_served_outside(shell, escape)
    finally:
        await shell.aclose()


@pytest.mark.parametrize("namespaces", [["--mount"], ["--pid", "--fork"], ["--net"], ["--user"]],
                         ids=lambda flags: flags[0].strip("-"))
async def test_a_peer_in_namespaces_of_its_own_is_refused(nursery: trio.Nursery, escape: Escape,
                                                          namespaces: list[str]) -> None:
    # No sandbox of ours: plain unshare(1), one namespace at a time.
    await escape.prime()
    argv = ["unshare", *namespaces, sys.executable, str(SCRIPT), f"{escape.daemon.directory}/daemon.sock",
            str(escape.request)]
    done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0].startswith(f"status: {SANDBOXED}") and lines[1].startswith(f"run: {SANDBOXED}"), lines
    assert namespaces[0].strip("-").replace("mount", "mnt") in lines[0]
    assert not escape.escaped.exists()
    shell = ShellSessions(nursery, escape.workspace)
    try:
        await assert_served_outside(shell, escape)
    finally:
        await shell.aclose()


# -- the check itself, on a socket of the test's own ---------------------------------------------


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "peer.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    with server:
        yield server, path


CONNECT = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "print('in', flush=True); sys.stdin.read()")


def accept_from(server: socket.socket, argv: list[str]) -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """A connection from a child running ``argv`` + the connecting script, once it is
    connected (it stays until its stdin closes)."""
    child = subprocess.Popen([*argv, sys.executable, "-c", CONNECT, server.getsockname()], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"in\n"
    conn, _ = server.accept()
    return conn, child


def finish(child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    child.stdout.close()
    assert child.wait(timeout=30) == 0


def test_a_live_peer_outside_any_sandbox_passes_and_one_in_bwrap_does_not(
    listener: tuple[socket.socket, str]
) -> None:
    server, _path = listener
    conn, child = accept_from(server, [])
    with conn:
        assert peer_problem(conn) is None  # the positive control
        if tuple(int(part) for part in os.uname().release.split(".")[:2] if part.isdigit()) >= (6, 5):
            pidfd = _daemon_peer._peer_pidfd(conn)  # the kernel has SO_PEERPIDFD: it is used
            assert pidfd is not None
            os.close(pidfd)
    finish(child)
    bwrap = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--"]
    conn, child = accept_from(server, bwrap)
    with conn:
        problem = peer_problem(conn)
        assert problem is not None and problem.startswith("the client runs in a sandbox (its mnt, pid namespaces")
    finish(child)


def test_a_peer_that_exited_before_the_check_is_refused(listener: tuple[socket.socket, str]) -> None:
    # The connecting process is gone (and reaped: its pid is free to be reused by a
    # process outside any sandbox) by the time the daemon looks at it.
    server, path = listener
    subprocess.run([sys.executable, "-c", CONNECT.replace("sys.stdin.read()", "pass"), path], check=True,
                   stdout=subprocess.DEVNULL)
    conn, _ = server.accept()
    with conn:
        assert peer_problem(conn) == "the client exited before it could be checked"


def test_without_pidfds_the_pid_is_checked_and_an_unreadable_peer_is_refused(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, path = listener
    monkeypatch.setattr(_daemon_peer, "SO_PEERPIDFD", 0x7FFF)  # an option no kernel has: ENOPROTOOPT, as before 6.5
    conn, child = accept_from(server, [])
    with conn:
        assert peer_problem(conn) is None
        real = _daemon_peer._namespace

        def refused(pid: int | None, name: str) -> str:
            if pid is not None:
                raise PermissionError(13, "Permission denied")
            return real(pid, name)

        monkeypatch.setattr(_daemon_peer, "_namespace", refused)
        assert peer_problem(conn) == "the client's namespaces cannot be read (Permission denied)"  # fails closed
        monkeypatch.setattr(_daemon_peer, "_namespace", real)
    finish(child)
    subprocess.run([sys.executable, "-c", CONNECT.replace("sys.stdin.read()", "pass"), path], check=True,
                   stdout=subprocess.DEVNULL)
    conn, _ = server.accept()
    with conn:
        assert peer_problem(conn) == "the client's namespaces cannot be read (No such file or directory)"
