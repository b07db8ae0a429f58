"""Another user's directory under ``/run`` (a service user's: Ubuntu's
``/run/systemd/resolve`` belongs to ``systemd-resolve``) is rebuilt like root's now, its
entries put back through descriptors the walk's rebuild opens without following links
(sec7). Until then it was bound back whole with its sockets masked in place (sec6: an
entry bound back by its path could be swapped for a link), which brought back the race
of sec4: a service restarting at the instant a command started failed the command
(``bwrap: Can't create file at ...: Read-only file system``), and a socket the service
replaced while a command ran was reachable (the host's unlink detaches the mask).

Real ``bwrap``, both confined modes, through the agent's own command line; the
interleaving of the walk and ``bwrap`` is driven by the test (``walk_sees``: entries
listed but gone, and removals right after the flags are built), no timers; and as uid
65534 (a user namespace) on a tree of our own standing for ``/run``. Positive controls:
the pid file beside reads as before, the socket beside is refused, and outside the
sandbox the replaced socket does answer.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox_fds import bwrap_options

from .._fds import held, opened_since
from .test_sandbox_escapes import MODES, connects, listening, run, run_plant, sandboxed
from .test_sandbox_run_churn import _Gone, replaced_while_running, shared, walk_sees
from .test_sandbox_run_swap import NOBODY, OTHER, bwrap, nobody_runs, tree

__all__ = ["shared", "tree"]  # fixtures, used by name

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root (CI runs as root)"),
    pytest.mark.skipif("--ro-bind-fd" not in bwrap_options("bwrap"),
                       reason="this bwrap has no --ro-bind-fd (0.10, or a backport such as Debian 12's 0.8): "
                              "another user's directory is masked in place there, as before sec7"),
]


@pytest.fixture(scope="session")
def others() -> Iterator[Path]:
    """A service's directory under /run owned by another user (uid 65534 here: the
    service's user), with its socket and pid file, for the whole test run (run_plant)."""
    place = run_plant("others", 0o755)  # removed by the run's owner, after every worker (run_plant)
    (place / "service.pid").write_text("4242\n")
    with listening(place / "private", unlink=False):
        os.chown(place, NOBODY, NOBODY)
        yield place


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_an_entry_of_another_users_directory_gone_since_the_walk_does_not_fail_the_command(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, others: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service restarts between the walk and bwrap: a socket and a pid file the walk
    # listed are gone before the rebuild opens them, another pid file right after (its
    # descriptor still names it: copied as the walk found it). On main: bwrap fails
    # (Can't create file at .../gone.sock: Read-only file system: masked in place).
    late = others / f"late-{mode.value}.pid"
    late.write_text("1\n")
    walk_sees(monkeypatch, {str(others): [_Gone(others, "gone.sock", stat.S_IFSOCK | 0o755),
                                          _Gone(others, "gone.pid", stat.S_IFREG | 0o644)]},
              after=lambda: late.unlink(missing_ok=True))
    before = held()
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, f"cat {others}/service.pid; test -e {others}/gone.pid || echo no pid") == \
            "4242\nno pid\n"  # the positive control: what is there reads
        assert await connects(shell, others / "private") == {str(others / "private"): "Connection refused"}
        assert await run(shell, "ls /proc/self/fd | tr '\\n' ' '") == "0 1 2 3 "  # bwrap closed ours (ls: 3)
    assert opened_since(before) == {}  # and the agent closed its own after each spawn
    late.write_text("1\n")
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, f"cat {late}") == "1\n"  # removed after it was opened: as the walk found it
    assert not late.exists()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_socket_another_users_service_replaces_while_a_command_runs_stays_masked(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, others: Path, shared: Path
) -> None:
    # As test_sandbox_run_churn's for root's directory: the new socket is renamed over the
    # old one's name. On main the mask was a bind over the host's old socket (another
    # user's directory: masked in place), which the host's rename detached: "ok".
    name = others / f"restarting-{mode.value}.sock"
    with listening(name, unlink=False), listening(shared / f"others-{mode.value}.sock", unlink=False) as new:
        async with sandboxed(nursery, workspace, mode) as shell:
            await replaced_while_running(shell, name, new)


def test_as_an_unprivileged_agent_an_entry_gone_since_the_walk_does_not_fail_the_command(tree: Path) -> None:
    svc = tree / "svc"
    (svc / "gone.pid").write_text("7\n")
    with socket.socket(socket.AF_UNIX) as gone:
        gone.bind(str(svc / "gone.sock"))
        os.chown(svc / "gone.sock", OTHER, OTHER)
        # The positive control: both are there, the socket refused.
        line = nobody_runs(tree, f"cat {svc}/svc.pid {svc}/gone.pid", svc / "gone.sock", svc / "sock")
        assert bwrap(line) == ["4242", "7", "Connection refused", "Connection refused"]
        # The service's restart, between the flags and bwrap. On main: bwrap fails
        # (Can't create file at .../gone.sock: the mask in place).
        line = nobody_runs(tree, f"cat {svc}/svc.pid {svc}/gone.pid", svc / "gone.sock", svc / "sock")
        (svc / "gone.sock").unlink()
        (svc / "gone.pid").unlink()
        assert bwrap(line) == ["4242", "7", "Connection refused", "Connection refused"]
