"""The descriptors of the rebuilt ``/run`` (``_sandbox_run``: another user's entries put
back through descriptors, sec7) reach ``bwrap`` through the spawn path at the numbers
its command line names -- under the subreaper helper (``SCM_RIGHTS``, then moved in
the supervisor) and in the process-group fallback (``pass_fds``) -- and are closed in
the agent's process once the command is started."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from trio_agent._tools._process_tree import ProcessLauncher
from trio_agent._tools._sandbox import BwrapArgv, argv_fds, release_fds
from trio_agent._tools._shell_env import build_environment


@pytest.fixture
def passed(tmp_path: Path) -> Iterator[list[int]]:
    """Three read-only descriptors of files saying which they are, at numbers of our
    choosing (high ones, and adjacent: the supervisor receives them elsewhere)."""
    fds: list[int] = []
    for number, target in enumerate((150, 151, 40)):
        path = tmp_path / f"f{number}"
        path.write_text(f"file {number}\n")
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
        fds.append(target)
    try:
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.parametrize("use_helper", [True, False], ids=["subreaper", "process-group"])
async def test_descriptors_reach_the_command_at_their_numbers(
    nursery: trio.Nursery, tmp_path: Path, passed: list[int], use_helper: bool
) -> None:
    launcher = ProcessLauncher(nursery, use_helper=use_helper)
    script = "; ".join(f"cat /proc/self/fd/{fd}" for fd in passed) + "; ls /proc/$$/fd | sort -n | tr '\\n' ' '"
    try:
        process = await launcher.spawn(["/bin/sh", "-c", script], tmp_path, build_environment(os.environ).env, 0.5,
                                       fds=passed)
        assert launcher.isolation == ("subreaper" if use_helper else "process-group")
        output = b""
        while chunk := await process.stdout.receive_some():
            output += chunk
        assert await process.wait() == 0
        await process.aclose()
    finally:
        await launcher.aclose()
    *lines, numbers = output.decode().splitlines()
    assert lines == ["file 0", "file 1", "file 2"]
    assert {"40", "150", "151"} <= set(numbers.split())  # nothing else of ours, at those numbers


async def test_a_request_naming_descriptors_it_does_not_pass_is_refused(nursery: trio.Nursery, tmp_path: Path) -> None:
    # The supervisor gives each received descriptor the number the request names: a
    # count that does not match (or a number below 3, which is the command's stdio) is
    # an error, not a command with the wrong descriptors.
    launcher = ProcessLauncher(nursery)
    env = build_environment(os.environ).env
    try:
        helper = await launcher._current_helper()
        assert helper is not None
        for fds in ([5], [1]):
            with pytest.raises(OSError, match="fds must name"):
                await helper.spawn({"argv": ["/bin/true"], "cwd": str(tmp_path), "env": env, "grace": 0.5,
                                    "fds": fds}, 0.5)
    finally:
        await launcher.aclose()


def test_release_closes_a_wrapped_lines_descriptors_once(tmp_path: Path) -> None:
    read, write = os.pipe()
    argv = BwrapArgv(["bwrap", "--file", str(read), "/run/x", "--", "true"], [read, write])
    assert argv_fds(argv) == [read, write] and argv_fds(["true"]) == []
    release_fds(argv)
    release_fds(argv)  # idempotent
    for fd in (read, write):
        with pytest.raises(OSError):
            os.fstat(fd)
