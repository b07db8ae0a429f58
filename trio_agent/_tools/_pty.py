"""Pseudo-terminals for ``exec_command(tty: true)``: the agent's side of a command's PTY.

Theory of operation. A ``tty: true`` command gets a fresh pseudo-terminal
(``os.openpty``, sized with ``TIOCSWINSZ``; 24 rows by 80 columns unless asked
otherwise, as nanocodex does). The *slave* becomes the command's stdin, stdout and
stderr -- and its controlling terminal: the command's shell is a session leader that
opened it, so ``/dev/tty`` works, a password prompt reads it with echo off, Ctrl-C
written to it is SIGINT from the line discipline, and ``SIGWINCH`` follows a resize.
Who makes the shell that session leader depends on how it is started:

* under the subreaper supervisor and unsandboxed, the supervisor spawns it with
  ``setsid`` and opens the slave by its path as fd 0 (``_subreaper.py``);
* inside the Bubblewrap sandbox, ``bwrap`` itself must not own the terminal (its
  processes would get the terminal's signals), so the command is prefixed with
  :func:`leader_argv`: a tiny program (``_tty_leader.py``) that, inside the sandbox,
  starts a new session, takes the terminal and ``exec``\\s the shell;
* in the process-group fallback (no supervisor), the same prefix does it.

The agent keeps the *master*: :class:`Terminal` reads the command's output from it and
writes ``write_stdin``'s input to it, through two Trio streams (the master and a
``dup`` of it, so that each closes on its own as a pipe would), and resizes it. When
every process holding the slave has exited, reading the master fails with ``EIO``,
which the output pump takes as the end of the output, like a pipe's EOF.

Unlike a pipe the terminal translates: output lines end in ``\\r\\n``, input is echoed
(unless the program turns echo off), and the line discipline interprets control
characters (``\\u0003`` interrupts, ``\\u0004`` ends input) unless the program puts the
terminal in raw mode. That is what the model asked for with ``tty: true``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import final

import attrs
import trio

__all__ = ["DEFAULT_COLS", "DEFAULT_ROWS", "Terminal", "TerminalSize", "leader_argv"]

DEFAULT_ROWS = 24
DEFAULT_COLS = 80
_LEADER = Path(__file__).with_name("_tty_leader.py")


@attrs.frozen
class TerminalSize:
    """A terminal's size in character cells (codex's ``{rows, cols}``)."""

    rows: int = DEFAULT_ROWS
    cols: int = DEFAULT_COLS


def leader_argv() -> list[str]:
    """The prefix that makes the program after it the session leader of the terminal on
    its stdin (see the module docstring): ``python -I -S _tty_leader.py``."""
    return [sys.executable, "-I", "-S", str(_LEADER)]


def _set_size(fd: int, size: TerminalSize) -> None:
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size.rows, size.cols, 0, 0))


@final
class Terminal:
    """The master side of one command's pseudo-terminal (see the module docstring).

    Made by :meth:`open`, which also returns the slave's descriptor: the caller hands
    it to the process it starts and then closes it (:meth:`close_slave`), so that the
    master sees the end of the output once the command's processes are gone."""

    def __init__(self, master: int, slave: int, size: TerminalSize) -> None:
        self.slave: int | None = slave
        self.size = size
        self.output = trio.lowlevel.FdStream(master)  # sets the master non-blocking
        self.input = trio.lowlevel.FdStream(os.dup(master))

    @classmethod
    def open(cls, size: TerminalSize) -> Terminal:
        """A new pseudo-terminal of ``size`` (``OSError`` if none can be had)."""
        master, slave = os.openpty()  # both non-inheritable: only the command gets the slave
        try:
            _set_size(master, size)
            return cls(master, slave, size)
        except BaseException:
            os.close(master)
            os.close(slave)
            raise

    def close_slave(self) -> None:
        """Close the agent's copy of the slave (idempotent)."""
        slave, self.slave = self.slave, None
        if slave is not None:
            os.close(slave)

    def resize(self, size: TerminalSize) -> None:
        """Set the terminal's size; its foreground processes get ``SIGWINCH``.

        Raises ``trio.ClosedResourceError`` once the terminal is closed."""
        fd = self.output.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the terminal is closed")
        _set_size(fd, size)
        self.size = size

    async def aclose(self) -> None:
        """Close both streams of the master and the slave (shielded, idempotent)."""
        self.close_slave()
        with trio.CancelScope(shield=True):
            await self.input.aclose()
            await self.output.aclose()
