"""A named pipe under ``/run`` is a way to a service, as a socket is, and is masked the
same (sec8's review of the rebuilt ``/run``).

Opening a FIFO for writing needs no writable mount (the kernel checks a read-only
mount for regular files, directories and links only), so a FIFO the host's ``/run``
holds reaches whoever reads it on the host: systemd's ``/run/initctl`` (owned by
root, read by PID 1, whose SysV requests switch the runlevel: power off, reboot) is
the one a root agent's command could write. Until sec8 the walk masked sockets only:
a FIFO was copied back by path (root's and the agent's directories) or by descriptor
(another user's), and a command's write arrived on the host.

Real ``bwrap``, both confined modes: a FIFO in root's directory beside a socket (a
rebuilt directory), in one without a socket (bound back whole before sec8), in
another user's (rebuilt through descriptors); and as uid 65534 on a tree of our own.
Each has its positive control: the same write from outside the sandbox arrives, and
the pid file beside reads.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta

from .test_sandbox_escapes import MODES, listening, run, run_plant, sandboxed
from .test_sandbox_run_swap import NOBODY, OTHER, bwrap, nobody_runs, tree

__all__ = ["tree"]  # a fixture, used by name

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="planting under /run needs root (CI runs as root)")

WRITE = "{{ echo through > {fifo}; }} 2>/dev/null && echo written || echo refused"


@contextlib.contextmanager
def reading(fifo: Path) -> Iterator[int]:
    """A reader of ``fifo`` on the host (non-blocking: a writer's open does not wait)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        yield fd
    finally:
        os.close(fd)


def arrived(fd: int) -> bytes:
    """What was written to the FIFO read through ``fd`` so far (b"": nothing)."""
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""


@pytest.fixture(scope="session")
def pipes() -> Iterator[dict[str, Path]]:
    """Directories under /run for the whole test run (run_plant), each with a FIFO
    ``initctl`` and a pid file: root's beside a socket, root's alone, another user's
    beside a socket."""
    places = {kind: run_plant(f"fifo-{kind}", 0o755) for kind in ("socket", "alone", "others")}
    for place in places.values():
        os.mkfifo(place / "initctl", 0o666)
        (place / "svc.pid").write_text("4242\n")
    with listening(places["socket"] / "sock", unlink=False), listening(places["others"] / "sock", unlink=False):
        os.chown(places["others"], NOBODY, NOBODY)
        yield places


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("kind", ["socket", "alone", "others"])
async def test_a_fifo_under_run_is_masked_like_a_socket(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, kind: str, pipes: dict[str, Path]
) -> None:
    # On sec7: "written", and the host's reader got "through".
    place = pipes[kind]
    with reading(place / "initctl") as fd:
        async with sandboxed(nursery, workspace, mode) as shell:
            assert await run(shell, f"cat {place}/svc.pid") == "4242\n"  # the positive control: the rest reads
            assert await run(shell, WRITE.format(fifo=place / "initctl")) == "refused\n"
            assert arrived(fd) == b""
            # The positive control: from outside the sandbox it does arrive.
            assert await run(shell, WRITE.format(fifo=place / "initctl"), outside_sandbox=True) == "written\n"
            assert arrived(fd) == b"through\n"


def test_as_an_unprivileged_agent_a_fifo_under_run_is_masked(tree: Path) -> None:
    # tree: svc (another user's, a socket), own (root's, a socket); quiet: root's, no socket.
    (tree / "quiet").mkdir()
    (tree / "quiet" / "q.pid").write_text("1\n")
    fifos = [tree / "svc" / "initctl", tree / "own" / "initctl", tree / "quiet" / "initctl"]
    for fifo in fifos:
        os.mkfifo(fifo, 0o666)
        os.chmod(fifo, 0o666)
    os.chown(fifos[0], OTHER, OTHER)
    with contextlib.ExitStack() as stack:
        fds = [stack.enter_context(reading(fifo)) for fifo in fifos]
        writes = "; ".join(WRITE.format(fifo=fifo) for fifo in fifos)
        line = nobody_runs(tree, f"cat {tree}/quiet/q.pid; {writes}")
        assert bwrap(line) == ["1", "refused", "refused", "refused"]  # sec7: written (3 times)
        assert [arrived(fd) for fd in fds] == [b"", b"", b""]
