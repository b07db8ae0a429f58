"""Sockets under ``/run`` that come and go while a command's sandbox is built (sec4's
review, flake5). Each socket the walk of ``/run`` finds is masked; one deleted between
the walk and ``bwrap``'s mount made ``bwrap`` fail ("Can't create file at ...:
Read-only file system") and the command with it -- a service restarting was enough.
The sandbox's ``/run`` is now rebuilt (``_sandbox_run``): an empty tmpfs with what the
walk found put back, so nothing the host removes in between can fail the command, and
a socket made later in a rebuilt directory is not there. In a directory that every
user may write (``/run/lock`` is ``drwxrwxrwt``) another local user could make a socket
after the walk; such a directory is hidden whole (an empty read-only directory).

The interleavings are made deterministic at ``_sandbox.bwrap_argv`` (the walk and the
flags, as on main): the walk is shown entries that are gone by the time ``bwrap`` runs
(a fake listing: nothing under the host's ``/run`` is removed, which would race the
commands of other test sessions on the machine), or the test makes a socket right
after it. Real ``bwrap``, both confined modes. Positive controls: a socket in a
directory only its owner writes is still masked alone (what is read beside it stays),
and the same sockets are reachable outside the sandbox.
"""

from __future__ import annotations

import os
import shlex
import socket
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools import _sandbox
from trio_agent._tools.exec_command import ShellSessions

from .test_sandbox_escapes import CONNECT, MODES, connects, listening, run, run_plant, sandboxed, service_plant


@pytest.fixture(scope="session")
def shared() -> Path:
    """A directory under /run that every user may write, as /run/lock is. For the whole
    test run (``run_plant``): one that vanishes between another worker's walk of /run
    and its bwrap fails that command (``Can't mkdir``)."""
    return run_plant("shared", 0o1777)  # removed by the run's owner, after every worker


@pytest.fixture(scope="session")
def service() -> Iterator[Path]:
    """A service's directory under /run that only its owner writes, with its socket and
    pid file, for the whole test run (for the same reason)."""
    place = run_plant("owned", 0o755)  # removed by the run's owner, after every worker
    (place / "service.pid").write_text("4242\n")
    with listening(place / "private", unlink=False):
        yield place


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_socket_deleted_after_the_walk_does_not_fail_the_command(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    churned = shared / f"churn-{mode.value}.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(churned))
    walk = _sandbox.bwrap_argv

    def walk_then_delete(*args: object, **kwargs: object) -> list[str]:
        flags = walk(*args, **kwargs)  # type: ignore[arg-type]
        if churned.exists():
            churned.unlink()  # the other user's loop
        return flags

    monkeypatch.setattr(_sandbox, "bwrap_argv", walk_then_delete)
    try:
        async with sandboxed(nursery, workspace, mode) as shell:
            assert await run(shell, "echo ran") == "ran\n"
    finally:
        server.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_directory_every_user_writes_is_hidden_whole(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, shared: Path
) -> None:
    (shared / "lockfile").write_text("1\n")
    async with sandboxed(nursery, workspace, mode) as shell:
        with listening(shared / f"late-{mode.value}.sock") as late:  # one the walk finds: hidden with the directory
            assert await run(shell, f"ls -A {shared}; echo end") == "end\n"
            assert (await connects(shell, late))[str(late)] == "No such file or directory"
            assert await connects(shell, late, outside_sandbox=True) == {str(late): "ok"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_socket_in_a_private_service_directory_is_still_masked_alone(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, service: Path
) -> None:
    private = service / "private"
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await connects(shell, private) == {str(private): "Connection refused"}
        assert await run(shell, f"cat {service}/service.pid") == "4242\n"
        assert await connects(shell, private, outside_sandbox=True) == {str(private): "ok"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_another_workers_plants_outlive_its_session(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under xdist one worker's session ends (its session fixtures torn down) while another
    # worker's command has walked /run and not yet run bwrap: what the first planted there
    # must outlive it (run_plant). Made deterministic: the other worker's whole session
    # (test_sandbox_escapes' run_service) spans this command's walk.
    walk = _sandbox.bwrap_argv

    def walk_within_another_session(*args: object, **kwargs: object) -> list[str]:
        with service_plant():
            return walk(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_sandbox, "bwrap_argv", walk_within_another_session)
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, "echo ran") == "ran\n"


class _Gone:
    """A directory entry the walk of /run lists, gone by the time bwrap runs."""

    def __init__(self, directory: str | Path, name: str, mode: int) -> None:
        self.name, self.path, self.mode = name, os.path.join(directory, name), mode

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return os.stat_result((self.mode, 0, 0, 1, 0, 0, 0, 0, 0, 0))


class _Listing:
    """What ``os.scandir`` gives for a directory the walk is shown: its real entries
    (none if it is gone itself) and the gone ones."""

    def __init__(self, real: Iterator[os.DirEntry[str]] | None, gone: list[_Gone]) -> None:
        self.real, self.gone = real, gone

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.real is not None:
            self.real.close()  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[object]:
        yield from self.real or ()
        yield from self.gone


def walk_sees(monkeypatch: pytest.MonkeyPatch, gone: dict[str, list[_Gone]], *, gone_dirs: tuple[str, ...] = (),
              after: Callable[[], None] = lambda: None) -> None:
    """Each command's walk of /run also lists ``gone`` (directory -> entries; the
    ``gone_dirs`` exist only in the listing); ``after`` runs between the walk and bwrap."""
    build, scandir = _sandbox.bwrap_argv, os.scandir

    def listing(path: str | int) -> object:
        # Another user's directory is listed through a descriptor: named by what it reads as.
        key = os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else os.fspath(path)
        if key not in gone:
            return scandir(path)
        return _Listing(None if key in gone_dirs else scandir(path), gone[key])

    def walk_then(*args: object, **kwargs: object) -> list[str]:
        os.scandir = listing  # type: ignore[assignment]  # only while the flags are built
        try:
            flags = build(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            os.scandir = scandir
        after()
        return flags

    monkeypatch.setattr(_sandbox, "bwrap_argv", walk_then)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_service_socket_gone_since_the_walk_does_not_fail_the_command(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service (or another test session on the machine: the /run plants of every
    # pytest session are walked by every other's commands) removes its socket, and a
    # file beside it, between this command's walk of /run and its bwrap. On main: bwrap
    # fails (Can't create file at .../gone.sock: Read-only file system).
    walk_sees(monkeypatch, {str(service): [_Gone(service, "gone.sock", stat.S_IFSOCK | 0o755),
                                           _Gone(service, "gone.pid", stat.S_IFREG | 0o644)]})
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, "echo ran") == "ran\n"
        assert await run(shell, f"cat {service}/service.pid; test -e {service}/gone.pid || echo no pid") == \
            "4242\nno pid\n"
        assert await connects(shell, service / "private") == {str(service / "private"): "Connection refused"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_service_directory_gone_since_the_walk_does_not_fail_the_command(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service stops (systemd removes its RuntimeDirectory, socket and all) between the
    # walk and bwrap. On main: bwrap fails (Can't mkdir parents for .../sock).
    directory = f"{service}.gone-{mode.value}"
    walk_sees(monkeypatch, {"/run": [_Gone("/run", os.path.basename(directory), stat.S_IFDIR | 0o755)],
                            directory: [_Gone(directory, "sock", stat.S_IFSOCK | 0o755)]}, gone_dirs=(directory,))
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, "echo ran") == "ran\n"
        assert await connects(shell, service / "private") == {str(service / "private"): "Connection refused"}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_socket_made_after_the_walk_in_a_service_directory_or_at_the_top_is_not_there(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service (re)starts and binds its socket after the walk: in its directory, which
    # held a socket when the command started, and at the top of /run. On main both are
    # reachable ("ok"): nothing masks a socket the walk did not see.
    late = [service / f"late-{mode.value}.sock", Path(f"{service}.late-{mode.value}.sock")]
    with ExitStack() as stack:

        def bind_late() -> None:  # once: the next command's walk finds them (and masks them)
            for path in late:
                if not path.exists():
                    stack.enter_context(listening(path, unlink=False))  # left for the run's owner (run_plant)

        walk_sees(monkeypatch, {}, after=bind_late)
        async with sandboxed(nursery, workspace, mode) as shell:
            check = shlex.join([sys.executable, "-c", CONNECT, *map(str, late)])
            *listed, first, second = (await run(shell, f"ls {service}; {check}")).splitlines()
            assert {"private", "service.pid"} <= set(listed) and late[0].name not in listed
            assert [first, second] == ["No such file or directory"] * 2
            assert await connects(shell, *late, outside_sandbox=True) == {str(p): "ok" for p in late}
            assert await connects(shell, *late) == {str(p): "Connection refused" for p in late}  # walked now


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_socket_a_service_replaces_while_a_command_runs_stays_masked(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, service: Path, shared: Path
) -> None:
    # A service restarts while a long command runs: its new socket takes the old one's
    # name (renamed over it: the name never goes missing for other sessions' walks; the
    # new one is made in the shared directory, which no walk enters). On main the mask
    # was a bind over the host's old socket, which the host's rename detached: "ok".
    name = service / f"restarting-{mode.value}.sock"
    with listening(name, unlink=False), listening(shared / f"restarted-{mode.value}.sock", unlink=False) as new:
        async with sandboxed(nursery, workspace, mode) as shell:
            await replaced_while_running(shell, name, new)


async def replaced_while_running(shell: ShellSessions, name: Path, new: Path) -> None:
    """A command connects to ``name``, ``new`` is renamed over it (the service's restart),
    the command connects again: refused both times, and ``ok`` outside the sandbox."""
    probe = f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({str(name)!r})\n" \
            "    print('ok')\nexcept OSError as exc:\n    print(exc.strerror)\n"
    script = f"{sys.executable} -c {shlex.quote(probe)}; read line; {sys.executable} -c {shlex.quote(probe)}"
    started = await shell.exec_command({"cmd": script, "login": False, "yield_time_ms": 250})
    assert "session_id" in started, started
    new.rename(name)  # the service's restart
    ended = await shell.write_stdin({"session_id": started["session_id"], "chars": "\n", "yield_time_ms": 30000})
    assert ended.get("exit_code") == 0, ended
    assert f"{started['output']}{ended['output']}" == "Connection refused\n" * 2
    assert await connects(shell, name, outside_sandbox=True) == {str(name): "ok"}  # the positive control
