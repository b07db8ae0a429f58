"""Another user swaps an entry of its directory under ``/run`` for a link between the walk
of ``/run`` and ``bwrap`` (sec6's review). The rebuilt ``/run`` binds each entry of a
directory holding a socket back by its host path, and ``bwrap`` resolves that path
following links: a pid file replaced by a link to the agent's runtime directory showed
that directory -- hidden everywhere else -- with its session bus and secrets, at the
pid file's place. sec6 bound another user's directory back whole instead (its sockets
masked in place, racing the host); sec7 rebuilds it through descriptors opened without
following a link (``_sandbox_fds``): the pid file reads as the walk found it, and a
link found by a later walk resolves inside the sandbox, where the runtime directory is
hidden. And another user's tree of thousands of sockets, each masked in place, took
``bwrap`` beyond its 9,000 arguments (every command failed): beyond ``MASK_ENTRIES``
such a directory is hidden whole.

Real ``bwrap``, both confined modes, through the agent's own command line (the swap
made deterministic at ``_sandbox.bwrap_argv``, as in ``test_sandbox_run_churn``), and as
uid 65534 (a user namespace) on a tree of our own standing for ``/run``. Positive
controls: before the swap the pid file reads as before and the socket beside it is
refused; outside the sandbox the link does lead to the secret; a directory of root's
own is still rebuilt (a socket gone since the walk does not fail the command).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox_run import run_flags

from .test_sandbox_escapes import CONNECT, MODES, connects, listening, private_dir, run, run_plant, sandboxed
from .test_sandbox_run_churn import _Gone, walk_sees

NOBODY = 65534
OTHER = 4242  # a third user (the unprivileged agent's sandbox runs as NOBODY)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root (CI runs as root)")


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The agent's runtime directory ($XDG_RUNTIME_DIR: hidden from commands), holding a
    secret and a listening bus."""
    with private_dir("xdg-") as place, listening(place / "bus"):
        (place / "secret").write_text("SECRET\n")
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(place))
        yield place


def swap_for_link(entry: Path, target: Path) -> None:
    """What the directory's owner does: the entry becomes a link (rename over it)."""
    staged = entry.with_name(f".{entry.name}.link")
    staged.symlink_to(target)
    staged.rename(entry)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_an_entry_another_user_swaps_for_a_link_after_the_walk_shows_nothing_hidden(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = run_plant("swapped", 0o755)  # removed by the run's owner, after every worker (run_plant)
    (service / "service.pid").write_text("4242\n")
    with listening(service / "sock", unlink=False):
        os.chown(service, NOBODY, NOBODY)  # the service's user: it may replace what is in there
        async with sandboxed(nursery, workspace, mode) as shell:
            # The positive control: what is read there is there, the socket is refused.
            assert await run(shell, f"cat {service}/service.pid") == "4242\n"
            assert await connects(shell, service / "sock") == {str(service / "sock"): "Connection refused"}
            walk_sees(monkeypatch, {}, after=lambda: swap_for_link(service / "service.pid", runtime))
            seen = await run(shell, f"cat {service}/service.pid/secret 2>/dev/null || echo hidden; "
                                    f"cat {service}/service.pid")
            assert seen == "hidden\n4242\n"  # sec6: SECRET (the bind followed the link); now the file as walked
            assert await connects(shell, service / "service.pid" / "bus") == \
                {str(service / "service.pid" / "bus"): "No such file or directory"}  # sec6: ok
            # (a later command's walk finds the link: put back as a link, resolved in the sandbox)
            assert await connects(shell, service / "sock") == {str(service / "sock"): "Connection refused"}
            assert await run(shell, f"cat {service}/service.pid/secret", outside_sandbox=True) == "SECRET\n"


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_a_directory_of_roots_own_is_still_rebuilt(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other side of the line: root's service directory is rebuilt, so its socket
    # going away between the walk and bwrap does not fail the command (masked in place,
    # bwrap: Can't create file ...: Read-only file system).
    service = run_plant("rooted", 0o755)  # removed by the run's owner, after every worker (run_plant)
    (service / "service.pid").write_text("4242\n")
    with listening(service / "sock", unlink=False):
        walk_sees(monkeypatch, {str(service): [_Gone(service, "gone.sock", stat.S_IFSOCK | 0o755)]})
        async with sandboxed(nursery, workspace, mode) as shell:
            assert await run(shell, f"cat {service}/service.pid") == "4242\n"
            assert await connects(shell, service / "sock") == {str(service / "sock"): "Connection refused"}


# -- as uid 65534: bwrap in a user namespace, on a /run of our own ----------------------------------


@pytest.fixture
def tree() -> Iterator[Path]:
    """A /run below /var/tmp that uid 65534 may enter: ``user/1000`` (hidden: a secret
    and a bus), ``svc`` of another user (a socket, a pid file), ``own`` of root's."""
    base = Path(tempfile.mkdtemp(prefix="trio-agent-swap-", dir="/var/tmp"))
    base.chmod(0o755)
    top = base / "run"
    for name in ("user/1000", "svc", "own"):
        (top / name).mkdir(parents=True)
    (top / "user" / "1000" / "secret").write_text("SECRET\n")
    for name in ("svc", "own"):
        (top / name / f"{name}.pid").write_text("4242\n")
    sockets = [socket.socket(socket.AF_UNIX) for _ in range(3)]
    for each, path in zip(sockets, ("user/1000/bus", "svc/sock", "own/sock"), strict=True):
        each.bind(str(top / path))
        each.listen(1)
        os.chmod(top / path, 0o777)  # 65534 may connect: only the mask stops it
    os.chown(top / "svc", OTHER, OTHER)  # a service's user: neither root nor the agent (65534)
    try:
        yield top
    finally:
        for each in sockets:
            each.close()
        shutil.rmtree(base)


class Line(list[str]):
    """A ``bwrap`` tail and the descriptors it names (the agent passes them, then closes them)."""

    fds: list[int]


def nobody_runs(top: Path, script: str, *paths: Path) -> Line:
    """``script`` then the connect probe of ``paths`` (the system ``python3``: ours is
    closed to 65534), after /run's flags as the agent builds them (before any swap)."""
    flags = run_flags([str(top / "user")], [], str(top))
    line = Line([*flags.rebuild, "--tmpfs", str(top / "user"), "--remount-ro", str(top / "user"), *flags.in_place,
            *flags.seal, "--", "/bin/sh", "-c", f"{script}; exec \"$@\"", "sh",
            shutil.which("python3", path="/usr/bin:/bin") or "python3", "-c", CONNECT, *map(str, paths)])
    line.fds = flags.fds
    return line


def bwrap(tail: Line, *, fails: bool = False) -> list[str]:
    """Run ``tail`` as uid 65534 (its descriptors passed, then closed); its output lines,
    or its error when ``fails``."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "bwrap", "--die-with-parent",
            "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *tail]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, pass_fds=tail.fds)
    finally:
        for fd in tail.fds:
            os.close(fd)
    if fails:
        assert done.returncode != 0, done.stdout
        return done.stderr.splitlines()
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_as_an_unprivileged_agent_a_swapped_entry_shows_nothing_hidden(tree: Path) -> None:
    svc, own = tree / "svc", tree / "own"
    # Positive control: the pid files read, the sockets are refused, the hidden one absent.
    line = nobody_runs(tree, f"cat {svc}/svc.pid {own}/own.pid", svc / "sock", own / "sock", tree / "user/1000/bus")
    assert bwrap(line) == ["4242", "4242", "Connection refused", "Connection refused", "No such file or directory"]
    # The swap, between the walk (the flags) and bwrap.
    line = nobody_runs(tree, f"cat {svc}/svc.pid/secret 2>/dev/null || echo hidden; cat {svc}/svc.pid",
                       svc / "svc.pid" / "bus")
    swap_for_link(svc / "svc.pid", Path("../user/1000"))
    # sec6's bind by path followed the link: SECRET, ok. Now the pid file as the walk
    # found it (a copy of what its descriptor names), the link nowhere.
    assert bwrap(line) == ["hidden", "4242", "Not a directory"]
    assert (svc / "svc.pid" / "secret").read_text() == "SECRET\n"  # outside, the link does lead there


def test_another_users_thousands_of_sockets_do_not_fail_the_command(tree: Path) -> None:
    # Each masked in place (another user's: not rebuilt), they took bwrap beyond its
    # 9,000 arguments: "Exceeded maximum number of arguments", every command failed.
    # Beyond MASK_ENTRIES the directory is hidden whole; the other masks stay.
    hog = tree / "hog"
    for d in range(7):
        (hog / f"d{d}").mkdir(parents=True)
        for n in range(450):
            with socket.socket(socket.AF_UNIX) as each:
                each.bind(str(hog / f"d{d}" / f"s{n}"))  # the file stays
    os.chown(hog, OTHER, OTHER)
    # Now another user's directory is rebuilt too (through descriptors): within the
    # budgets its subdirectories are, beyond them masked in place, beyond that hidden whole.
    line = nobody_runs(tree, f"ls -A {hog} | wc -l", hog / "d0" / "s0", tree / "svc" / "sock", tree / "own" / "sock")
    seen = bwrap(line)
    assert seen[0] == "7" and seen[1] in ("No such file or directory", "Connection refused"), seen
    assert seen[2:] == ["Connection refused", "Connection refused"]
