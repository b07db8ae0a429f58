"""A spawn through the subreaper helper that runs out of descriptors half way (the
command's pipes made, its socket pair refused: EMFILE, as sec8 saw with 64 commands
started at once under a limit of 256) fails with that error and closes what it made:
no descriptor of the agent is left behind. The positive control: the next spawn works."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest
import trio

from trio_agent._tools._process_tree import ProcessLauncher
from trio_agent._tools._shell_env import build_environment

from .._fds import held, opened_since


async def test_a_spawn_refused_a_descriptor_leaks_none(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = ProcessLauncher(nursery)
    env = build_environment(os.environ).env
    try:
        helper = await launcher._current_helper()
        assert helper is not None
        real = socket.socketpair

        def exhausted(*args: object, **kwargs: object) -> tuple[socket.socket, socket.socket]:
            raise OSError(errno.EMFILE, "Too many open files")

        before = held()
        monkeypatch.setattr(socket, "socketpair", exhausted)  # the module _process_tree uses
        with pytest.raises(OSError, match="Too many open files"):
            await helper.spawn({"argv": ["/bin/true"], "cwd": str(tmp_path), "env": env, "grace": 0.5}, 0.5)
        assert opened_since(before) == {}
        monkeypatch.setattr(socket, "socketpair", real)
        process = await helper.spawn({"argv": ["/bin/true"], "cwd": str(tmp_path), "env": env, "grace": 0.5}, 0.5)
        assert await process.wait() == 0
        await process.aclose()
    finally:
        await launcher.aclose()
