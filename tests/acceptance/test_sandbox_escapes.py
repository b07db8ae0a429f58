"""A sandboxed command cannot reach the user's sockets through the filesystem (issue 21,
hole 1): the warm daemon's, the runtime directory's (session bus, agents), the
ssh-agent's, and in ``read-only`` those in the host's ``/tmp``.

``connect`` on a Unix socket needs no write, so a read-only mount is no protection:
the sandbox must not show these paths at all. Each test plants or starts a real
listener, tries it from inside the sandbox (real ``bwrap``, both confined modes) and,
as the positive control, the same thing from outside it (``outside_sandbox=True``),
and checks that the command still sees and (``workspace-write``) writes its workspace
and sees the rest of the host.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox import resolve_sandbox
from trio_agent._tools.exec_command import ShellSessions

from ..daemon._daemon import Daemon, running_daemon
from ..daemon._escape import OUTSIDE_PARENT, Escape, outside_dir

MODES = [ta.SandboxMode.WORKSPACE_WRITE, ta.SandboxMode.READ_ONLY]
NO_SOCKET = "cannot connect: No such file or directory"
# Connects to each path given; prints "ok" or why not, one line each (not the path:
# the output is redacted, and $SSH_AUTH_SOCK's value counts as a secret).
CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print("ok")
    except OSError as exc:
        print(exc.strerror)
    s.close()
"""


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon(parent=OUTSIDE_PARENT) as daemon:
        yield daemon


@asynccontextmanager
async def sandboxed(nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode) -> AsyncIterator[ShellSessions]:
    (workspace / "seed.txt").write_text("seed\n")
    sessions = ShellSessions(nursery, workspace, sandbox=resolve_sandbox(ta.Sandbox(mode)).confinement)
    try:
        yield sessions
    finally:
        await sessions.aclose()


async def run(shell: ShellSessions, cmd: str, *, outside_sandbox: bool = False) -> str:
    result = await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 30000},
                                      outside_sandbox=outside_sandbox)
    assert "exit_code" in result, result
    return str(result["output"])


async def connects(shell: ShellSessions, *paths: str | Path, outside_sandbox: bool = False) -> dict[str, str]:
    output = await run(shell, shlex.join([sys.executable, "-c", CONNECT, *map(str, paths)]),
                       outside_sandbox=outside_sandbox)
    return dict(zip(map(str, paths), output.splitlines(), strict=True))


async def assert_workspace_usable(shell: ShellSessions, mode: ta.SandboxMode) -> None:
    """The positive control of the filesystem: the workspace is there, and writable in
    ``workspace-write``; the rest of the host is there (read-only)."""
    assert await run(shell, "cat seed.txt && test -r /etc/passwd && echo host") == "seed\nhost\n"
    wrote = await run(shell, "{ echo inside > inside.txt; } 2>/dev/null && cat inside.txt || echo refused")
    assert wrote == ("inside\n" if mode is ta.SandboxMode.WORKSPACE_WRITE else "refused\n")


@contextmanager
def listening(path: Path, *, unlink: bool = True) -> Iterator[Path]:
    """A Unix socket listening at ``path`` (connects succeed: the backlog takes them);
    ``unlink=False`` leaves the file for the run's owner to remove (:func:`run_plant`)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    try:
        yield path
    finally:
        server.close()
        if unlink:
            path.unlink()


def run_plant(kind: str, mode: int) -> Path:
    """A directory under the host's /run for the whole test run, named for it
    (tests/conftest.py ``RUN_PLANTS``). Not removed by the worker that made it: every
    sandboxed command -- the other workers' too -- walks /run and binds over the sockets
    and shared directories it finds, and one removed between that walk and its bwrap
    fails the command (bwrap: Can't create file / Can't mkdir ...: Read-only file
    system). A worker's session ends while the others still run commands, so the
    run's owner removes every plant at its end (``pytest_unconfigure``), after all of
    them; what is planted inside must not be removed either (``listening(unlink=False)``)."""
    path = Path(tempfile.mkdtemp(prefix=f"trio-agent-test-{kind}-{os.environ['TRIO_AGENT_TEST_RUN_PLANTS']}-",
                                 dir="/run"))
    path.chmod(mode)
    return path


@contextmanager
def private_dir(prefix: str, mode: int = 0o700) -> Iterator[Path]:
    """Below /var/tmp, removed after the test (never under /run: :func:`run_plant`)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=OUTSIDE_PARENT))
    path.chmod(mode)
    try:
        yield path
    finally:
        shutil.rmtree(path)


# -- the warm daemon -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_the_daemons_socket_is_not_in_the_sandbox(
    nursery: trio.Nursery, workspace: Path, daemon: Daemon, mode: ta.SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's environment names the daemon's directory (as a user who set
    # TRIO_AGENT_DAEMON_DIR has it): the sandbox hides it, wherever it is.
    monkeypatch.setenv("TRIO_AGENT_DAEMON_DIR", daemon.directory)
    with outside_dir() as out:
        escape = Escape(daemon, workspace, out)
        await escape.prime()
        async with sandboxed(nursery, workspace, mode) as shell:
            inside = await escape.attack(shell)
            assert inside.splitlines() == [f"status: {NO_SOCKET}", f"run: {NO_SOCKET}"]
            assert await run(shell, f"ls -A {daemon.directory}; echo listed") == "listed\n"  # an empty directory
            assert not escape.escaped.exists()
            # Only the daemon's directory is hidden: its neighbours in /var/tmp are not.
            assert await run(shell, f"test -r {escape.request} && echo seen") == "seen\n"
            await assert_workspace_usable(shell, mode)
            # The positive control: from outside, the same attack is served.
            await daemon.settle()
            outside = await escape.attack(shell, outside_sandbox=True)
            assert "run: ok | exit 0" in outside, outside
            assert escape.escaped.exists()


# -- the user's runtime directory, ssh-agent, /tmp ---------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_the_runtime_directory_and_the_ssh_agent_are_hidden(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    with private_dir("xdg-") as runtime, private_dir("ssh-") as ssh, listening(runtime / "bus") as bus, \
            listening(ssh / "agent.1") as agent:
        (runtime / "pulse").mkdir()
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
        async with sandboxed(nursery, workspace, mode) as shell:
            assert await connects(shell, bus, agent) == {str(bus): "No such file or directory",
                                                         str(agent): "No such file or directory"}
            assert await run(shell, f"ls -A {runtime} {ssh} | wc -l") == "3\n"  # both empty: two names, a blank
            assert await run(shell, f"touch {runtime}/planted 2>/dev/null || echo read-only") == "read-only\n"
            await assert_workspace_usable(shell, mode)
            assert await connects(shell, bus, agent, outside_sandbox=True) == {str(bus): "ok", str(agent): "ok"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_an_ssh_agent_in_a_shared_directory_is_hidden_alone(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its directory is open to others (or holds other things): only the socket goes.
    with private_dir("shared-", 0o755) as shared, listening(shared / "agent.sock") as agent:
        (shared / "notes.txt").write_text("notes\n")
        monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
        async with sandboxed(nursery, workspace, mode) as shell:
            assert (await connects(shell, agent))[str(agent)] in ("Permission denied", "Connection refused")
            assert await run(shell, f"cat {shared}/notes.txt") == "notes\n"
            assert await connects(shell, agent, outside_sandbox=True) == {str(agent): "ok"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_the_hosts_tmp_and_its_sockets_are_not_in_the_sandbox(
    nursery: trio.Nursery, tmp_path: Path, workspace: Path, mode: ta.SandboxMode
) -> None:
    # tmux, X11, editors' servers and forwarded agents live in /tmp; the workspace may
    # too (pytest's tmp_path is below /tmp): it is bound back, nothing else is.
    assert tmp_path.is_relative_to("/tmp")
    with listening(tmp_path / "tmux-0") as tmux:
        async with sandboxed(nursery, workspace, mode) as shell:
            assert await connects(shell, tmux) == {str(tmux): "No such file or directory"}
            assert await run(shell, f"ls -A {tmp_path}") == "workspace\n"
            await assert_workspace_usable(shell, mode)
            assert await connects(shell, tmux, outside_sandbox=True) == {str(tmux): "ok"}


# -- system services' sockets under /run ---------------------------------------------------------


@pytest.fixture(scope="session")
def run_service() -> Iterator[tuple[Path, Path, Path]]:
    with service_plant() as planted:
        yield planted


@contextmanager
def service_plant() -> Iterator[tuple[Path, Path, Path]]:
    """As the container engine's /run/docker.sock and systemd's /run/systemd/private are:
    one socket at the top of /run, one in a service's directory, beside a pid file.
    (CI runs as root, which may create them; as root each such socket is a way out.)
    For the whole test run, not one worker's session (:func:`run_plant`)."""
    # 0755 as a service's directory is (/run/systemd): mkdtemp's 0700 would close it to the
    # unprivileged sandbox test, whose bwrap line is built by this root process (which sees
    # the socket inside) and run as uid 65534, which may not reach the socket to mask it.
    service = run_plant("service", 0o755)  # removed by the run's owner, after every worker (run_plant)
    (service / "service.pid").write_text("4242\n")
    with listening(Path(f"{service}.sock"), unlink=False) as top, \
            listening(service / "private", unlink=False) as nested:
        yield service, top, nested


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_system_sockets_under_run_are_refused_and_the_rest_of_run_stays(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, run_service: tuple[Path, Path, Path]
) -> None:
    service, top, nested = run_service
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await connects(shell, top, nested) == {str(top): "Connection refused",
                                                      str(nested): "Connection refused"}
        assert await run(shell, f"cat {service}/service.pid") == "4242\n"  # what is read there stays
        await assert_workspace_usable(shell, mode)
        assert await connects(shell, top, nested, outside_sandbox=True) == {str(top): "ok", str(nested): "ok"}
