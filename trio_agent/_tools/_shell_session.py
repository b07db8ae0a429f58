"""One command of ``exec_command``: its process, what it printed, its stdin, and the
supervision that ends its whole process tree (``exec_command.ShellSessions`` keeps the
sessions: slots, ids, eviction, the sandbox, the login environment).

A :class:`CommandSession` is made once its process has started. Its supervisor task
(:meth:`CommandSession.supervise`, run by ``ShellSessions`` in the agent's nursery)
pumps the one stdout+stderr pipe into a bounded :class:`HeadTailBuffer`, waits for the
shell to exit, waits up to ``drain_grace`` for the pipe to reach EOF, terminates
whatever the command left running (TERM, ``kill_grace``, KILL) and closes the pipes;
cancelling the session's ``scope`` skips to the termination. ``ShellSessions`` gives
the slot back and sets ``done`` after it.

While one ``exec_command``/``write_stdin`` call waits for the command, what it prints
also goes to that call's ``on_output``, read by read, decoded and redacted
(``_output_progress``; :meth:`CommandSession.streaming`). ``write_stdin``'s input goes
through :meth:`CommandSession.send_input`: each ``"\\u0003"`` in it is a SIGINT to the
process group, the rest is written to stdin, bounded in time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import NotRequired, TypedDict

import attrs
import trio

from ._command_process import CommandProcess
from ._output_capture import DEFAULT_CAPACITY, HeadTailBuffer
from ._output_progress import OutputProgress
from ._pty import Terminal, TerminalSize
from ._shell_env import ShellError, WriteRequest

__all__ = ["CTRL_C", "CommandSession", "ExecResult", "SessionTable", "exit_code_of", "start_failure"]

#: Pruning for room never touches the most recently used sessions (nanocodex sec. 5.4).
PROTECTED_RECENT_SESSIONS = 8

#: Seconds to wait for EOF after terminating the command's leftovers.
POST_KILL_DRAIN = 0.5
#: Writing to stdin waits at least this long for the process to accept the input.
MIN_STDIN_WRITE_TIMEOUT = 5.0
CTRL_C = "\u0003"
_READ_SIZE = 64 * 1024


class ExecResult(TypedDict):
    """The JSON-able result of ``exec_command`` and ``write_stdin``.

    Exactly one of ``exit_code`` (the command finished; 128+N if killed by signal N)
    and ``session_id`` (still running) is present. ``original_token_count``
    (``ceil(bytes / 4)`` of everything printed since the last read) is present only
    when ``output`` was truncated.
    """

    wall_time_seconds: float
    exit_code: NotRequired[int]
    session_id: NotRequired[int]
    original_token_count: NotRequired[int]
    output: str


@attrs.define(eq=False)
class CommandSession:
    """A started command (see the module docstring); ``session_id`` is set once it is
    handed out, ``done`` once its whole tree is gone and its slot given back."""

    process: CommandProcess
    secrets: tuple[str, ...]
    last_used: float
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    output: HeadTailBuffer = attrs.field(factory=lambda: HeadTailBuffer(DEFAULT_CAPACITY))
    eof: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    exit_code: int | None = None
    session_id: int | None = None
    progress: OutputProgress | None = None  # the waiting call's on_output, if any
    terminal: Terminal | None = None  # tty: true -- its master is the process's stdin and stdout
    settle: Callable[[], str | None] | None = None  # once the tree is gone: a note for the output (_sandbox_state)

    async def supervise(self, kill_grace: float, drain_grace: float) -> None:
        """Own the process until its whole tree is gone (the caller then frees its slot)."""
        process = self.process
        try:
            with self.scope:
                async with trio.open_nursery() as pump_nursery:
                    pump_nursery.start_soon(self._pump_output)
                    await process.wait()
                    with trio.move_on_after(drain_grace):
                        await self.eof.wait()
                    # Whatever the command left running ends with it (nanocodex kills the
                    # group when the session is dropped); TERM first, like a cancel.
                    await process.terminate(kill_grace)
                    with trio.move_on_after(POST_KILL_DRAIN):
                        await self.eof.wait()
                    pump_nursery.cancel_scope.cancel()
        finally:
            await process.terminate(kill_grace)  # shielded, bounded, idempotent
            await process.aclose()
            self.exit_code = exit_code_of(process.returncode)
            note = self.settle() if self.settle is not None else None
            if note is not None:
                self.output.write(f"\n{note}\n".encode())

    async def _pump_output(self) -> None:
        stdout = self.process.stdout
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await stdout.receive_some(_READ_SIZE):
                self.output.write(bytes(data))
                if self.progress is not None:
                    self.progress.feed(bytes(data))
        self.eof.set()

    @contextlib.contextmanager
    def streaming(self, on_output: Callable[[str], None] | None) -> Iterator[None]:
        """Give the output to ``on_output`` too while the block runs (one call's wait)."""
        if on_output is None or self.progress is not None:  # a call already streams it
            yield
            return
        self.progress = progress = OutputProgress(on_output, self.secrets)
        try:
            yield
        finally:
            self.progress = None
            progress.close()

    async def send_input(self, request: WriteRequest) -> None:
        """``write_stdin``'s ``chars``: each Ctrl-C a SIGINT, the rest written to stdin.

        On a terminal (``tty: true``) everything is written, Ctrl-C included: the
        terminal's line discipline makes it a SIGINT to the foreground process group,
        unless the program reads raw input. ``size`` resizes the terminal first."""
        if request.size is not None:
            self._resize(request)
        if self.terminal is not None:
            if request.chars:
                await self._write(request, request.chars.encode())
            return
        for index, part in enumerate(request.chars.split(CTRL_C)):
            if index and not self.done.is_set():
                await self.process.interrupt()
            if part:
                await self._write(request, part.encode())

    def _resize(self, request: WriteRequest) -> None:
        assert request.size is not None
        if self.terminal is None:
            raise ShellError(
                f"write_stdin: session {request.session_id} has no terminal (it was started without "
                "\"tty\": true), so 'size' does not apply; drop it"
            )
        with contextlib.suppress(trio.ClosedResourceError, OSError):  # it is over: the result says so
            self.terminal.resize(TerminalSize(*request.size))

    async def _write(self, request: WriteRequest, data: bytes) -> None:
        sid = request.session_id
        timeout = max(request.yield_seconds, MIN_STDIN_WRITE_TIMEOUT)
        stdin = self.process.stdin
        try:
            async with self.write_lock:
                with trio.move_on_after(timeout) as scope:
                    await stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if self.done.is_set() or self.process.returncode is not None:
                return  # it exited; the result reports that
            raise ShellError(f"stdin of session {sid} is closed; the input was not delivered") from exc
        if scope.cancelled_caught:
            with trio.CancelScope(shield=True):
                await stdin.aclose()  # a cancelled send_all leaves the stream unusable
            raise ShellError(
                f"session {sid} did not read its stdin within {timeout:g} s; part of the input "
                "may not have been delivered and its stdin is now closed"
            )


class SessionTable:
    """The sessions ``write_stdin`` can reach, by id: ids (from 1, never reused) go to
    commands that outlive their ``yield_time_ms``, and a session stays until its final
    output is read. Which running session to evict for room and which finished ones to
    forget follow nanocodex (sec. 5.4): the least recently used, and never one of the
    most recently used running ones; at most ``limit`` finished ones are kept."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_id: dict[int, CommandSession] = {}
        self._next_id = 1

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._by_id))

    def __len__(self) -> int:
        return len(self._by_id)

    def clear(self) -> None:
        self._by_id.clear()

    def publish(self, session: CommandSession) -> int:
        """The session's id, handed out on its first call."""
        if session.session_id is None:
            session.session_id = self._next_id
            self._next_id += 1
            self._by_id[session.session_id] = session
        return session.session_id

    def lookup(self, session_id: int) -> CommandSession:
        session = self._by_id.get(session_id)
        if session is None:
            raise ShellError(
                f"unknown session_id {session_id}; it has finished (its final output was "
                "already returned), was closed, or never existed; start a new command "
                "with exec_command"
            )
        return session

    def forget(self, session: CommandSession) -> None:
        if session.session_id is not None:
            self._by_id.pop(session.session_id, None)

    def eviction_candidate(self) -> CommandSession | None:
        """The least recently used running session that may be evicted, if any."""
        running = sorted((s for s in self._by_id.values() if not s.done.is_set()), key=lambda s: s.last_used)
        protected = min(PROTECTED_RECENT_SESSIONS, self._limit - 1)
        candidates = running[: max(0, len(running) - protected)]
        return candidates[0] if candidates else None

    def forget_old_finished(self) -> None:
        finished = sorted((s for s in self._by_id.values() if s.done.is_set()), key=lambda s: s.last_used)
        for session in finished[: max(0, len(finished) - self._limit)]:
            self.forget(session)


def exit_code_of(code: int | None) -> int | None:
    """A process's return code as the shell reports it (killed by signal N: 128+N)."""
    if code is not None and code < 0:
        return 128 - code
    return code


def start_failure(problem: str, started: float) -> ExecResult:
    """The result of a command that could not start (``exit_code`` 1, the reason)."""
    return ExecResult(
        wall_time_seconds=round(trio.current_time() - started, 3),
        exit_code=1,
        output=f"exec_command could not start the command: {problem}",
    )
