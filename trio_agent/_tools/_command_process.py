"""What ``exec_command`` needs from a running command, and the process-group fallback.

:class:`CommandProcess` is the interface ``ShellSessions`` drives: the pipes, the
shell's exit, SIGINT for Ctrl-C, and :meth:`~CommandProcess.terminate` for the whole
command (TERM, grace, KILL). ``_process_tree.SupervisedProcess`` implements it under a
subreaper supervisor; :class:`GroupProcess` is the fallback where that is unavailable:
the command runs in a new session (``start_new_session=True``) and its process group is
all that can be signalled, so a process that leaves the group survives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, final

import trio

if TYPE_CHECKING:
    from ._pty import Terminal

__all__ = [
    "GROUP_POLL_INTERVAL",
    "REAP_TIMEOUT",
    "CommandProcess",
    "GroupProcess",
    "aclose_all",
    "open_group_process",
    "signal_group",
]

#: Bound on waiting for a killed process tree to be gone, beyond its grace.
REAP_TIMEOUT = 2.0
#: Interval for polling a process group that has no Trio-visible leader left.
GROUP_POLL_INTERVAL = 0.01


class CommandProcess(Protocol):
    """A running command: its pipes, its shell's exit, and control of its whole tree."""

    @property
    def stdin(self) -> trio.abc.SendStream: ...

    @property
    def stdout(self) -> trio.abc.ReceiveStream: ...

    @property
    def returncode(self) -> int | None:
        """The shell's return code once known (negative: killed by that signal)."""

    async def wait(self) -> int | None:
        """Wait for the shell to exit; its return code (negative: killed by that signal),
        None if unknown. Other processes of the command may still run."""

    async def interrupt(self) -> None:
        """SIGINT to the command's process group (a no-op once it is over)."""

    async def terminate(self, grace: float) -> None:
        """TERM every process of the command, wait up to ``grace``, KILL the rest; return
        when none is left. Shielded, bounded by ``grace + REAP_TIMEOUT``, idempotent."""

    async def aclose(self) -> None:
        """Close the pipes (and control socket). Call after :meth:`terminate`."""


def signal_group(pgid: int | None, sig: signal.Signals) -> None:
    if pgid is None or pgid <= 1:  # os.killpg(0 or 1, ...) would hit us or everything
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def aclose_all(*resources: trio.abc.AsyncResource | trio.socket.SocketType) -> None:
    with trio.CancelScope(shield=True):
        for resource in resources:
            if isinstance(resource, trio.abc.AsyncResource):
                await resource.aclose()
            else:
                resource.close()


@final
class GroupProcess:
    """A command started directly in its own session; its process group is its extent."""

    def __init__(
        self, process: trio.Process, streams: tuple[trio.abc.SendStream, trio.abc.ReceiveStream] | None = None
    ) -> None:
        if streams is None:
            assert process.stdin is not None and process.stdout is not None
            streams = (process.stdin, process.stdout)
        self._process = process
        self._stdin, self._stdout = streams

    @property
    def stdin(self) -> trio.abc.SendStream:
        return self._stdin

    @property
    def stdout(self) -> trio.abc.ReceiveStream:
        return self._stdout

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int | None:
        return await self._process.wait()

    async def interrupt(self) -> None:
        if self._process.returncode is None:
            signal_group(self._process.pid, signal.SIGINT)
        await trio.lowlevel.checkpoint()

    async def terminate(self, grace: float) -> None:
        pgid = self._process.pid
        with trio.CancelScope(shield=True), trio.move_on_after(grace + REAP_TIMEOUT):
            if self._process.returncode is None or _group_exists(pgid):
                signal_group(pgid, signal.SIGTERM)
                signal_group(pgid, signal.SIGCONT)
                with trio.move_on_after(grace):
                    await self._process.wait()
                    while _group_exists(pgid):  # noqa: ASYNC110 - no Trio event for a group
                        await trio.sleep(GROUP_POLL_INTERVAL)
                # SIGKILL even when the leader exited on TERM, for members ignoring TERM.
                signal_group(pgid, signal.SIGKILL)
            await self._process.wait()

    async def aclose(self) -> None:
        await aclose_all(self._stdin, self._stdout)


async def open_group_process(
    argv: list[str], cwd: Path, env: Mapping[str, str], terminal: Terminal | None = None, passed: Sequence[int] = (),
) -> GroupProcess:
    """Start ``argv`` in a new session, on pipes or on ``terminal``'s slave (whose
    master streams become its stdin and stdout; ``argv`` then takes the terminal as
    its controlling one itself: ``_pty.leader_argv``); ``passed``: descriptors it gets
    at the same numbers."""
    if terminal is None or terminal.slave is None:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            pass_fds=tuple(passed),
        )
        return GroupProcess(process)
    slave = terminal.slave
    process = await trio.lowlevel.open_process(
        argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=dict(env), start_new_session=True,
        pass_fds=tuple(passed),
    )
    return GroupProcess(process, (terminal.input, terminal.output))
