"""Commands starting together do not take the agent's process out of descriptors, and
none is left behind (sec8's review of sec7's descriptors).

Another local user who owns a directory under ``/run`` holding a socket and a few
hundred small files has every command's rebuilt ``/run`` copy each of them (one
descriptor each, up to ``FD_ENTRIES``). On sec7 each command's budget ignored what
the process held: sixteen commands started at once (parallel tool calls) under the
common limit of 1,024 descriptors failed to start, "Too many open files".

Real ``bwrap`` through the agent's own command line, with a ``/run`` of our own (the
walk's root pointed at it: nothing planted under the host's ``/run``, which every
other worker's commands walk). The positive control: each command reads the other
user's file; and after 200 commands the process holds nothing it did not hold before
(a descriptor closed meanwhile by an earlier test's finaliser is not a leak: ``tests._fds``).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools import _sandbox_run

from .._fds import held, opened_since
from .test_sandbox_escapes import MODES, run, sandboxed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root (CI runs as root)")

NOBODY = 65534
FILES = 180


@pytest.fixture
def crowded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A /run of our own (the walk's root for the test): ``svc``, another user's, with a
    socket and :data:`FILES` small files; the descriptor limit at 1,024."""
    base = Path(tempfile.mkdtemp(prefix="trio-agent-fds-", dir="/var/tmp"))
    base.chmod(0o755)
    svc = base / "run" / "svc"
    svc.mkdir(parents=True)
    for n in range(FILES):
        (svc / f"f{n}.pid").write_text(f"{n}\n")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(svc / "sock"))
    os.chown(svc, NOBODY, NOBODY)
    monkeypatch.setattr(_sandbox_run, "run_flags", functools.partial(_sandbox_run.run_flags, root=str(base / "run")))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        yield svc
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        listener.close()
        shutil.rmtree(base)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_commands_started_together_do_not_run_the_agent_out_of_descriptors(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, crowded: Path
) -> None:
    outputs: list[str] = []
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, f"cat {crowded}/f7.pid; ls {crowded} | wc -l") == f"7\n{FILES + 1}\n"
        before = held()

        async def one() -> None:
            result = await shell.exec_command({"cmd": f"cat {crowded}/f7.pid", "login": False,
                                               "yield_time_ms": 30000})
            outputs.append(str(result["output"]))

        async with trio.open_nursery() as together:
            for _ in range(16):
                together.start_soon(one)
        assert outputs == ["7\n"] * 16, sorted(set(outputs))  # sec7: "... [Errno 24] Too many open files"
        assert opened_since(before) == {}


async def test_two_hundred_commands_leave_no_descriptor_behind(
    nursery: trio.Nursery, workspace: Path, crowded: Path
) -> None:
    async with sandboxed(nursery, workspace, ta.SandboxMode.WORKSPACE_WRITE) as shell:
        assert await run(shell, f"cat {crowded}/f7.pid") == "7\n"
        before = held()
        for _ in range(200):
            assert await run(shell, f"cat {crowded}/f9.pid") == "9\n"
        assert opened_since(before) == {}
