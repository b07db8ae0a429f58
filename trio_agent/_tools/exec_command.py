"""``exec_command`` and ``write_stdin``: shell commands as Trio subprocesses.

Theory of operation (reference: ``nanocodex.md`` sec. 5.3/5.4, ``codex.md`` sec. 5.5,
``python-ecosystem.md`` A.7).

Every command runs as ``[shell, "-lc"|"-c", cmd]`` in a new session
(``start_new_session=True``), so the shell's pid is also the id of a process group that
holds everything it starts. stdout and stderr share one pipe; stdin is a pipe too.

Each process gets a :class:`_Session` and a *supervisor* task in the nursery given to
:class:`ShellSessions` (the agent's nursery). The supervisor pumps the pipe into a
bounded :class:`HeadTailBuffer`, waits for the shell to exit, waits up to
``drain_grace`` for the pipe to reach EOF, SIGKILLs whatever is left of the group, closes
the pipes and sets ``done``. If the supervisor is cancelled (the agent nursery is
cancelled), its ``finally`` kills the group instead.

``exec_command`` spawns, then waits for ``done`` for at most ``yield_time_ms``. If the
command finished, the result carries ``exit_code`` and the session is forgotten. If not,
the session gets a public ``session_id`` and keeps running; ``write_stdin`` feeds it and
collects whatever it printed since the last read. If the task awaiting ``exec_command``
is cancelled, the group is killed before ``Cancelled`` propagates: SIGTERM to the group,
up to ``kill_grace`` (0.5 s) for the shell to exit, SIGKILL to the group, reap; all
shielded and bounded (:func:`_kill_process_group`). Trio's default ``deliver_cancel``
would only signal the shell and orphan its children (A.7).

Notes: this module starts no threads itself, but ``trio.lowlevel.open_process`` runs
``fork``/``exec`` in a Trio worker thread (uncancellable, so a cancel that arrives
during the spawn is seen right after it and still kills the group). Secrets are redacted
per returned chunk, so a secret split across two reads, or across an omission notice,
is not caught.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict, cast, final

import attrs
import trio

from ._output_capture import DEFAULT_CAPACITY, HeadTailBuffer
from ._shell_env import (
    BYTES_PER_TOKEN,
    ExecRequest,
    ShellEnvironment,
    ShellError,
    WriteRequest,
    build_environment,
    parse_exec_args,
    parse_write_args,
    redact,
    resolve_shell,
    shell_argv,
    workdir_problem,
)

__all__ = ["ExecResult", "ShellError", "ShellSessions"]

MAX_SESSIONS = 64
#: Pruning for room never touches the most recently used sessions (nanocodex sec. 5.4).
PROTECTED_RECENT_SESSIONS = 8
#: Seconds between SIGTERM and SIGKILL when a command is killed.
KILL_GRACE = 0.5
#: Seconds to wait for the output pipe's EOF after the shell exited (nanocodex: 2 s).
DRAIN_GRACE = 2.0
#: Seconds to wait for EOF after SIGKILLing the group's leftovers.
POST_KILL_DRAIN = 0.5
#: Bound on reaping a SIGKILLed process, so cleanup can never hang.
REAP_TIMEOUT = 2.0
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
class _Session:
    process: trio.Process
    secrets: tuple[str, ...]
    last_used: float
    output: HeadTailBuffer = attrs.field(factory=lambda: HeadTailBuffer(DEFAULT_CAPACITY))
    eof: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    exit_code: int | None = None
    session_id: int | None = None


@final
class ShellSessions:
    """The ``exec_command``/``write_stdin`` tools and the commands they keep running.

    Args:
      nursery: where the supervisor task of every command lives (the agent's nursery).
        Cancelling it kills every running command's process group.
      workspace: the directory relative ``workdir`` arguments are resolved against.
      env_overrides: variables set in every command's environment, applied last
        (after scrubbing and the forced ``NO_COLOR``/``TERM``/... variables).
      max_sessions: live sessions allowed at once; starting one more kills the least
        recently used session outside the 8 most recent (finished-but-unread first),
        or raises :class:`ShellError` if there is none.

    Session ids start at 1, are handed out only to commands that outlive their
    ``yield_time_ms``, and are never reused.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        workspace: Path,
        env_overrides: Mapping[str, str] | None = None,
        *,
        max_sessions: int = MAX_SESSIONS,
        kill_grace: float = KILL_GRACE,
        drain_grace: float = DRAIN_GRACE,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self._nursery = nursery
        self._workspace = Path(workspace)
        self._env_overrides = dict(env_overrides or {})
        self._max_sessions = max_sessions
        self._kill_grace = kill_grace
        self._drain_grace = drain_grace
        self._live: set[_Session] = set()
        self._by_id: dict[int, _Session] = {}
        self._next_id = 1
        self._closed = False

    @property
    def session_ids(self) -> tuple[int, ...]:
        """Ids of the sessions ``write_stdin`` currently accepts, ascending."""
        return tuple(sorted(self._by_id))

    async def exec_command(self, args: Mapping[str, object]) -> ExecResult:
        """Run ``args["cmd"]``; return its result, or a ``session_id`` if still running.

        Arguments: ``cmd`` (required), ``workdir`` (relative to the workspace or
        absolute), ``shell``, ``login`` (default true: ``-lc``; false: ``-c``),
        ``yield_time_ms`` (default 10000, clamped to 250..30000), ``max_output_tokens``
        (default 10000; output is limited to 4 bytes per token, at most 1 MiB).

        Cancellation: if this call is cancelled before it returns, the command's whole
        process group is killed (TERM, 0.5 s grace, KILL, reap; shielded and bounded)
        and ``Cancelled`` propagates. A command that was returned as a session is no
        longer tied to this call; see :meth:`aclose`.

        Raises:
          ShellError: invalid arguments, closed sessions, or no room for a session.
        """
        request = parse_exec_args(args, self._workspace)
        self._check_open()
        await self._make_room()
        started = trio.current_time()
        environment = build_environment(os.environ, self._env_overrides)
        shell = resolve_shell(request.shell, environment.env.get("SHELL"))
        argv = shell_argv(shell, request.cmd, login=request.login)
        problem = workdir_problem(request.workdir)
        if problem is None:
            try:
                session = await self._spawn(argv, request, environment)
            except OSError as exc:
                problem = f"failed to start {shell!r} in {request.workdir}: {exc}"
        if problem is not None:
            return _start_failure(problem, started)
        await self._wait_or_kill(session, request.yield_seconds)
        return self._collect(session, request.max_bytes, started)

    async def write_stdin(self, args: Mapping[str, object]) -> ExecResult:
        """Write ``args["chars"]`` to a session's stdin and return its output since the
        last read (with ``exit_code`` if it has finished, else its ``session_id``).

        Each ``"\\u0003"`` in ``chars`` sends SIGINT to the process group instead of
        being written. Empty ``chars`` just polls. The call waits for the command to
        finish for at most ``yield_time_ms`` (non-empty: default 250, 250..30000;
        empty: default 5000, 5000..300000). Cancelling this call only stops waiting:
        the session keeps running and no output is lost.

        Raises:
          ShellError: invalid arguments; ``unknown session_id N; ...``; stdin closed or
            not read by the process (``... did not read its stdin ...``; stdin is then
            closed).
        """
        request = parse_write_args(args)
        session = self._lookup(request.session_id)
        started = trio.current_time()
        session.last_used = started
        await self._send_input(session, request)
        with trio.move_on_after(request.yield_seconds):
            await session.done.wait()
        return self._collect(session, request.max_bytes, started)

    async def aclose(self) -> None:
        """Kill every live session's process group, reap it and forget it. Idempotent.

        Afterwards ``exec_command`` raises :class:`ShellError`. Runs shielded; bounded
        by the kill grace plus a few seconds.
        """
        self._closed = True
        sessions = list(self._live)
        self._live.clear()
        self._by_id.clear()
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(self._shut_down, session)

    # -- spawning and supervising ------------------------------------------------------

    async def _spawn(
        self, argv: list[str], request: ExecRequest, environment: ShellEnvironment
    ) -> _Session:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=request.workdir,
            env=dict(environment.env),
            start_new_session=True,
        )
        session = _Session(process, environment.secrets, last_used=trio.current_time())
        try:
            if self._closed:  # aclose() ran while the process was starting
                raise ShellError("shell sessions were closed while the command was starting")
            try:
                self._nursery.start_soon(self._supervise, session)
            except RuntimeError as exc:  # the owning nursery has exited
                raise ShellError("shell sessions are closed: their nursery has exited") from exc
        except ShellError:
            await _kill_process_group(process, grace=0)
            await _close_pipes(process)
            raise
        self._live.add(session)
        return session

    async def _supervise(self, session: _Session) -> None:
        process = session.process
        try:
            async with trio.open_nursery() as pump_nursery:
                pump_nursery.start_soon(_pump_output, session)
                await process.wait()
                with trio.move_on_after(self._drain_grace):
                    await session.eof.wait()
                # Whatever the shell left running in its group dies with it, as in
                # nanocodex (the group is killed when the session is dropped).
                _signal_group(process, signal.SIGKILL)
                with trio.move_on_after(POST_KILL_DRAIN):
                    await session.eof.wait()
                pump_nursery.cancel_scope.cancel()
        finally:
            await _kill_process_group(process, self._kill_grace)
            await _close_pipes(process)
            session.exit_code = _exit_code(process)
            session.done.set()

    async def _wait_or_kill(self, session: _Session, seconds: float) -> None:
        try:
            with trio.move_on_after(seconds):
                await session.done.wait()
        except BaseException:  # Cancelled, KeyboardInterrupt: never leave it running
            await self._discard(session)
            raise

    async def _discard(self, session: _Session) -> None:
        """Kill and reap the group and forget the session (its supervisor finishes alone)."""
        self._forget(session)
        await _kill_process_group(session.process, self._kill_grace)

    async def _shut_down(self, session: _Session) -> None:
        await self._discard(session)
        with trio.CancelScope(shield=True), trio.move_on_after(self._drain_grace + 1):
            await session.done.wait()

    # -- bookkeeping ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ShellError("shell sessions are closed; no new commands can be started")

    async def _make_room(self) -> None:
        while len(self._live) >= self._max_sessions:
            victim = self._least_recently_used()
            if victim is None:
                raise ShellError(
                    f"too many running commands ({len(self._live)}); finish or interrupt "
                    'one with write_stdin (chars "\\u0003") before starting another'
                )
            await self._discard(victim)

    def _least_recently_used(self) -> _Session | None:
        published = sorted(
            (s for s in self._live if s.session_id is not None), key=lambda s: s.last_used
        )
        protected = min(PROTECTED_RECENT_SESSIONS, self._max_sessions - 1)
        candidates = published[: max(0, len(published) - protected)]
        finished = [s for s in candidates if s.done.is_set()]
        pool = finished or candidates
        return pool[0] if pool else None

    def _lookup(self, session_id: int) -> _Session:
        session = self._by_id.get(session_id)
        if session is None:
            raise ShellError(
                f"unknown session_id {session_id}; it has finished (its final output was "
                "already returned), was closed, or never existed; start a new command "
                "with exec_command"
            )
        return session

    def _forget(self, session: _Session) -> None:
        self._live.discard(session)
        if session.session_id is not None:
            self._by_id.pop(session.session_id, None)

    def _publish(self, session: _Session) -> int:
        if session.session_id is None:
            session.session_id = self._next_id
            self._next_id += 1
            self._by_id[session.session_id] = session
        return session.session_id

    def _collect(self, session: _Session, max_bytes: int, started: float) -> ExecResult:
        excerpt = session.output.excerpt(max_bytes)
        session.output.clear()
        # Built in the documented key order, "output" last.
        result: dict[str, float | int | str] = {
            "wall_time_seconds": round(trio.current_time() - started, 3)
        }
        if session.done.is_set():
            result["exit_code"] = session.exit_code if session.exit_code is not None else -1
            self._forget(session)
        else:
            result["session_id"] = self._publish(session)
        if excerpt.truncated:
            result["original_token_count"] = math.ceil(excerpt.total / BYTES_PER_TOKEN)
        result["output"] = excerpt.to_text(lambda text: redact(text, session.secrets))
        return cast("ExecResult", result)

    # -- stdin -----------------------------------------------------------------------------

    async def _send_input(self, session: _Session, request: WriteRequest) -> None:
        for index, part in enumerate(request.chars.split(CTRL_C)):
            if index and not session.done.is_set():
                _signal_group(session.process, signal.SIGINT)
            if part:
                await self._write(session, request, part.encode())

    async def _write(self, session: _Session, request: WriteRequest, data: bytes) -> None:
        sid = request.session_id
        timeout = max(request.yield_seconds, MIN_STDIN_WRITE_TIMEOUT)
        stdin = session.process.stdin
        assert stdin is not None
        try:
            async with session.write_lock:
                with trio.move_on_after(timeout) as scope:
                    await stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if session.done.is_set() or session.process.returncode is not None:
                return  # it exited; the result reports that
            raise ShellError(f"stdin of session {sid} is closed; the input was not delivered") from exc
        if scope.cancelled_caught:
            with trio.CancelScope(shield=True):
                await stdin.aclose()  # a cancelled send_all leaves the stream unusable
            raise ShellError(
                f"session {sid} did not read its stdin within {timeout:g} s; part of the input "
                "may not have been delivered and its stdin is now closed"
            )


# -- process helpers ---------------------------------------------------------------------------


async def _pump_output(session: _Session) -> None:
    stdout = session.process.stdout
    assert stdout is not None
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await stdout.receive_some(_READ_SIZE):
            session.output.write(bytes(data))
    session.eof.set()


def _signal_group(process: trio.Process, sig: signal.Signals) -> None:
    """Signal the process group led by ``process`` (its pid, thanks to setsid)."""
    if process.pid <= 1:  # os.killpg(0 or 1, ...) would hit us or everything
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _kill_process_group(process: trio.Process, grace: float) -> None:
    """SIGTERM the group, wait up to ``grace`` s for its leader, SIGKILL the group, reap.

    Shielded and bounded by ``grace + REAP_TIMEOUT``, so it runs to completion inside a
    cancelled scope and can never hang. SIGKILL goes to the group even when the leader
    exited on SIGTERM, for children that ignore SIGTERM.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(grace + REAP_TIMEOUT):
        if process.returncode is None:
            _signal_group(process, signal.SIGTERM)
            with trio.move_on_after(grace):
                await process.wait()
        _signal_group(process, signal.SIGKILL)
        await process.wait()


async def _close_pipes(process: trio.Process) -> None:
    with trio.CancelScope(shield=True):
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                await stream.aclose()


def _exit_code(process: trio.Process) -> int | None:
    code = process.returncode
    if code is not None and code < 0:
        return 128 - code  # killed by signal N: the shell's 128+N convention
    return code


def _start_failure(problem: str, started: float) -> ExecResult:
    return ExecResult(
        wall_time_seconds=round(trio.current_time() - started, 3),
        exit_code=1,
        output=f"exec_command could not start the command: {problem}",
    )
