"""``trio-agent run --ask-for-approval POLICY``: the approval hook that asks on the terminal.

The question goes to stderr (stdout may be JSON Lines); the answer is one line read
from stdin: ``y``/``yes`` approves this call, ``a``/``always`` approves it for the
session, ``abort`` denies it and cancels the turn, anything else -- an empty line,
``n``, end of input -- denies it.

Reading: a worker thread does ``os.read`` on fd 0 (unbuffered, so no lock of
``sys.stdin`` is held by a thread that may be abandoned, and the terminal is left in
blocking mode for the shell). The read runs in a task of the command's nursery and
posts its line to a channel, so that a cancelled question (the turn was cancelled,
the hook timed out) leaves the read to finish in the background; the next question
drops answers typed before it was asked. ``_run_options`` refuses a policy other than
``never`` when stdin is not a terminal.
"""

from __future__ import annotations

import math
import os
import sys
from typing import TextIO

import trio

import trio_agent as ta

__all__ = ["TerminalApprover"]

_ANSWERS = {
    "y": ta.ApprovalDecision.APPROVE, "yes": ta.ApprovalDecision.APPROVE,
    "a": ta.ApprovalDecision.APPROVE_FOR_SESSION, "always": ta.ApprovalDecision.APPROVE_FOR_SESSION,
    "abort": ta.ApprovalDecision.ABORT,
}
_SAID = {
    ta.ApprovalDecision.APPROVE: "approved",
    ta.ApprovalDecision.APPROVE_FOR_SESSION: "approved for this session",
    ta.ApprovalDecision.DENY: "denied",
    ta.ApprovalDecision.ABORT: "denied; the turn is cancelled",
}


def _read_line(fd: int) -> str:
    """One line from ``fd`` ("" at end of input); runs in a worker thread."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


class TerminalApprover:
    """``ta.Approvals(policy, hook=approver.ask)`` for a terminal (see the module docstring)."""

    def __init__(self, nursery: trio.Nursery, *, fd: int = 0, out: TextIO | None = None) -> None:
        self._nursery = nursery
        self._fd = fd
        self._out = out
        self._send, self._lines = trio.open_memory_channel[str](math.inf)
        self._reading = False
        self._closed = False  # stdin reached its end: every later question is denied

    async def ask(self, request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        out = self._out or sys.stderr
        out.write(_question(request))
        out.flush()
        if self._closed:
            out.write("(stdin is closed: denied)\n")
            return ta.ApprovalDecision.DENY
        while True:  # answers typed before this question was asked
            try:
                self._lines.receive_nowait()
            except trio.WouldBlock:
                break
        if not self._reading:
            self._reading = True
            self._nursery.start_soon(self._read)
        line = await self._lines.receive()
        if not line:
            self._closed = True
        decision = _ANSWERS.get(line.strip().lower(), ta.ApprovalDecision.DENY)
        out.write(f"trio-agent: {_SAID[decision]}\n")
        out.flush()
        return decision

    async def _read(self) -> None:
        try:
            line = await trio.to_thread.run_sync(_read_line, self._fd, abandon_on_cancel=True)
        finally:
            self._reading = False
        self._send.send_nowait(line)


def _question(request: ta.ApprovalRequest) -> str:
    if request.kind is ta.ApprovalKind.COMMAND:
        where = " outside the sandbox" if request.outside_sandbox else ""
        what = f"run `{request.command}`{where} in {request.cwd}"
    else:
        changes = ", ".join(f"{c.path} ({c.kind}{' -> ' + c.move_to if c.move_to else ''})" for c in request.changes)
        what = f"change {changes or 'no files'}"
    return (f"trio-agent: approve? {what}\n"
            f"  why: {request.reason}\n"
            "  [y]es, [N]o, [a]lways (this session), abort (the turn): ")
