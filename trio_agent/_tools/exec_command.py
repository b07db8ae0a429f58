"""``exec_command`` and ``write_stdin``: shell commands as Trio subprocesses.

Theory of operation (reference: ``nanocodex.md`` sec. 5.3/5.4, ``codex.md`` sec. 5.5,
``python-ecosystem.md`` A.7).

Every command runs as ``[shell, "-c", cmd]``: a ``login: true`` one (the default) with
the environment the user's login shell set up, taken once by running that shell apart
from any command, so that what its start-up prints is not part of the command's output
(``_login_env``; as ``[shell, "-lc", cmd]`` if that failed). It is started by a
:class:`~._process_tree.ProcessLauncher`: under a child-subreaper supervisor where
Linux allows it, so that everything the command starts -- daemons that ``setsid`` or
double-fork included -- ends with it; otherwise directly in a new session, its process
group being all that can be killed (the fallback is described in ``_process_tree``).
stdout and stderr share one pipe; stdin is a pipe too. With ``tty: true`` all three
are a new pseudo-terminal instead, the command's controlling terminal (``_pty.py``):
its master is read and written like the pipes, and ``write_stdin``'s ``size`` resizes it.

A command first takes one of ``max_sessions`` slots (``_command_slots``): taken before
the spawn, given back once its whole process tree is gone, so a burst cannot exceed the
cap; a call beyond the cap evicts an old background session or waits (bounded) for a
slot. Each process then gets a ``CommandSession`` (``_shell_session``: its output, its
stdin) and a *supervisor task* in the nursery given to :class:`ShellSessions` (the
agent's nursery), which ends the command's whole tree once the shell exits, then gives
the slot back and sets ``done``. Cancelling its scope (``_discard``) or the nursery
skips to the termination.

``exec_command`` spawns, then waits for ``done`` for at most ``yield_time_ms`` (counted
from the spawn, not from the call, so time spent waiting for a slot does not eat into
it). If the command finished, the result carries ``exit_code`` and the session is
forgotten. If not, the session gets a public ``session_id`` and keeps running;
``write_stdin`` feeds it and collects whatever it printed since the last read. If the
task awaiting ``exec_command`` is cancelled, the command's whole tree is terminated
before ``Cancelled`` propagates: SIGTERM to every process, up to ``kill_grace`` (0.5 s)
for them to exit, SIGKILL to the rest; shielded and bounded.

Sandbox (``_sandbox.py``): given a confining :class:`~._sandbox.Confinement`, every
command runs as ``bwrap ... -- shell -c cmd`` in namespaces of its own (PID, mount,
IPC and, with the network off, network), under the same supervisor: the pipes,
``write_stdin``, Ctrl-C and the TERM-then-KILL grace work as without it (the
supervisor spares the two bwrap processes from SIGINT/SIGTERM, see ``_subreaper``),
and when the shell exits the kernel kills whatever it left in its PID namespace.
``workspace-write`` gets a private ``/tmp``: one directory per ``ShellSessions``,
created with the first command and removed by :meth:`ShellSessions.aclose`.
``exec_command(args, outside_sandbox=True)`` runs one command without the sandbox
(an approved escalation; deciding that is the caller's job). In the process-group
fallback (no supervisor) the group signals reach bwrap too, so Ctrl-C ends a
sandboxed command as a whole there.

Progress: ``on_output`` (given to one call) also receives what the command prints
while that call waits (``_shell_session``); the dispatcher emits it as ``tool.progress``.
Secrets are redacted per returned chunk: one split across two reads is not caught.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast, final

import attrs
import trio

from ._command_process import REAP_TIMEOUT, CommandProcess
from ._command_slots import SLOT_WAIT_LIMIT, CommandSlots
from ._login_env import SNAPSHOT_TIMEOUT, LoginEnvironments, login_command_environment
from ._process_tree import Isolation, ProcessLauncher
from ._pty import Terminal, TerminalSize, leader_argv
from ._real_time import real_process_running
from ._sandbox import SANDBOX_ENV, SCAFFOLD_DEPTH, Confinement, argv_fds, released, settle_of
from ._security import Sandbox, SandboxMode
from ._shell_env import (
    BYTES_PER_TOKEN,
    ExecRequest,
    ShellEnvironment,
    ShellError,
    build_environment,
    parse_exec_args,
    parse_write_args,
    redact,
    resolve_shell,
    shell_argv,
    workdir_problem,
)
from ._shell_session import CommandSession, ExecResult, SessionTable, start_failure

__all__ = ["ExecResult", "ShellError", "ShellSessions", "ShellStatistics"]

MAX_SESSIONS = 64
#: Seconds between SIGTERM and SIGKILL when a command is killed.
KILL_GRACE = 0.5
#: Seconds to wait for the output pipe's EOF after the shell exited (nanocodex: 2 s).
DRAIN_GRACE = 2.0
#: Seconds ``aclose`` gives the removal of the private temp dir (then it is left behind).
TMP_REMOVAL_LIMIT = 5.0


@attrs.frozen
class ShellStatistics:
    """A snapshot of :class:`ShellSessions`.

    ``running``: commands holding a slot (their process tree is not gone yet);
    ``waiting``: ``exec_command`` calls waiting for a slot; ``sessions``: ids
    ``write_stdin`` accepts (running or finished but not yet read); ``isolation``: how
    commands are contained (``"subreaper"``, ``"process-group"``, ``"not started"``);
    ``sandbox``: the mode commands run in (``danger-full-access`` without a sandbox).
    """

    running: int
    waiting: int
    sessions: int
    max_sessions: int
    isolation: Isolation
    sandbox: SandboxMode = SandboxMode.DANGER_FULL_ACCESS


@final
class ShellSessions:
    """The ``exec_command``/``write_stdin`` tools and the commands they keep running.

    Args:
      nursery: where the supervisor task of every command (and the subreaper helper)
        lives: the agent's nursery. Cancelling it terminates every running command.
      workspace: the directory relative ``workdir`` arguments are resolved against.
      env_overrides: variables set in every command's environment, applied last
        (after scrubbing and the forced ``NO_COLOR``/``TERM``/... variables).
      max_sessions: commands allowed to run at once. One more first evicts the least
        recently used background session outside the 8 most recently used (killing
        it, as nanocodex does); if there is none it waits for a slot, for at most its
        ``yield_time_ms`` plus ``slot_wait`` (30 s), then raises :class:`ShellError`. Finished
        sessions whose final output was not read yet hold no slot; at most
        ``max_sessions`` of them are kept (the least recently used is forgotten).
      sandbox: how commands are confined (see the module docstring); None or a
        non-confining one: no sandbox (the agent resolves and passes its own).
      login_timeout: how long the login shell whose environment ``login: true``
        commands get may take to start (``_login_env``: 10 s).
      on_warning: told, once, when that login shell failed and ``login: true``
        commands run in a login shell each instead (default: a ``RuntimeWarning``).

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
        slot_wait: float = SLOT_WAIT_LIMIT,
        sandbox: Confinement | None = None,
        login_timeout: float = SNAPSHOT_TIMEOUT,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self._slots = CommandSlots(max_sessions)
        self._login = LoginEnvironments(login_timeout, on_warning)
        self._sandbox = sandbox or Confinement(Sandbox(SandboxMode.DANGER_FULL_ACCESS))
        self._private_tmp: Path | None = None
        self._slot_wait = slot_wait
        self._nursery = nursery
        self._launcher = ProcessLauncher(nursery)
        self._workspace = Path(workspace)
        self._env_overrides = dict(env_overrides or {})
        self._kill_grace = kill_grace
        self._drain_grace = drain_grace
        self._live: set[CommandSession] = set()  # supervisor task running
        self._table = SessionTable(self._slots.limit)  # published and not yet read to the end
        self._closed = False

    @property
    def session_ids(self) -> tuple[int, ...]:
        """Ids of the sessions ``write_stdin`` currently accepts, ascending."""
        return self._table.ids

    def statistics(self) -> ShellStatistics:
        return ShellStatistics(
            running=self._slots.running,
            waiting=self._slots.waiting,
            sessions=len(self._table),
            max_sessions=self._slots.limit,
            isolation=self._launcher.isolation,
            sandbox=self._sandbox.sandbox.mode if self._sandbox.confined else SandboxMode.DANGER_FULL_ACCESS,
        )

    @property
    def confinement(self) -> Confinement:
        """How commands are confined (the sandbox given, or none)."""
        return self._sandbox

    @confinement.setter
    def confinement(self, confinement: Confinement) -> None:
        """Commands started from now on are confined so; running sessions keep theirs."""
        self._sandbox = confinement

    async def exec_command(
        self, args: Mapping[str, object], *, outside_sandbox: bool = False,
        on_output: Callable[[str], None] | None = None,
    ) -> ExecResult:
        """Run ``args["cmd"]``; return its result, or a ``session_id`` if still running.

        Arguments: ``cmd`` (required), ``workdir`` (relative to the workspace or
        absolute), ``shell``, ``login`` (default true: the login shell's environment, see
        ``_login_env``; false: the agent's), ``tty`` (default false; true: a terminal of
        ``size`` ``{rows, cols}``, default 24x80), ``yield_time_ms`` (default 10000,
        clamped to 250..30000), ``max_output_tokens`` (default 10000; output is limited
        to 4 bytes per token, at most 1 MiB). Any other argument is refused.

        Cancellation: if this call is cancelled while waiting for a slot, nothing was
        started. If it is cancelled later, before it returns, every process of the
        command is terminated (TERM, 0.5 s grace, KILL; shielded and bounded) and
        ``Cancelled`` propagates. A command that was returned as a session is no longer
        tied to this call; see :meth:`aclose`. A call cancelled while the login shell
        whose environment it needs is starting (the first ``login: true`` command)
        returns only once that shell is done -- it is never killed while it starts --
        bounded by ``login_timeout`` and a kill grace.

        ``outside_sandbox=True`` runs this command without the sandbox. ``on_output``
        receives the output while this call waits (see the module docstring).

        Raises:
          ShellError: invalid arguments, closed sessions, or no slot within the bound.
        """
        request = parse_exec_args(args, self._workspace)
        self._check_open()
        started = trio.current_time()
        environment = build_environment(os.environ, self._env_overrides)
        shell = resolve_shell(request.shell, environment.env.get("SHELL"))
        problem = workdir_problem(request.workdir)
        if problem is not None:
            return start_failure(problem, started)
        sandboxed = self._sandbox.confined and not outside_sandbox
        if sandboxed:
            environment = attrs.evolve(environment, env={**environment.env, **self._forced_tmp()})
        login = request.login
        if login:
            environment, login = await self._login_environment(shell, environment, sandboxed, request.workdir)
        await self._slots.acquire(request.yield_seconds + self._slot_wait, self._make_room)
        try:
            argv = shell_argv(shell, request.cmd, login=login)
            tty_argv = [*leader_argv(), *argv] if request.tty else None
            scaffold = 0
            if sandboxed:
                wrapped = self._sandbox.wrap(argv, self._workspace, request.workdir, self._tmp_dir())
                if tty_argv is not None:  # the same sandbox (one /run, its descriptors), the leader in front
                    tty_argv = [*wrapped[: len(wrapped) - len(argv)], *leader_argv(), *argv]
                argv, scaffold = wrapped, SCAFFOLD_DEPTH
            with released(argv):  # the helper has its own copies once it is started
                session = await self._spawn(argv, request, environment, scaffold, tty_argv)
        except OSError as exc:
            self._slots.release()
            return start_failure(f"failed to start {shell!r} in {request.workdir}: {exc}", started)
        except BaseException:
            self._slots.release()
            raise
        with session.streaming(on_output):
            await self._wait_or_kill(session, request.yield_seconds)
        return self._collect(session, request.max_bytes, started)

    async def write_stdin(
        self, args: Mapping[str, object], *, on_output: Callable[[str], None] | None = None
    ) -> ExecResult:
        """Write ``args["chars"]`` to a session's stdin and return its output since the
        last read (with ``exit_code`` if it has finished, else its ``session_id``).

        Each ``"\\u0003"`` in ``chars`` sends SIGINT to the process group instead of
        being written (on a terminal it is written: the terminal interrupts). Empty
        ``chars`` just polls. ``size`` (``{rows, cols}``) resizes a terminal first. The call waits for the command to
        finish for at most ``yield_time_ms`` (non-empty: default 250, 250..30000;
        empty: default 5000, 5000..300000). Cancelling this call only stops waiting:
        the session keeps running and no output is lost. ``on_output`` receives what
        it prints while this call waits (as for ``exec_command``).

        Raises:
          ShellError: invalid arguments; ``unknown session_id N; ...``; stdin closed or
            not read by the process (``... did not read its stdin ...``; stdin is then
            closed).
        """
        request = parse_write_args(args)
        session = self._table.lookup(request.session_id)
        started = trio.current_time()
        session.last_used = started
        with session.streaming(on_output):
            await session.send_input(request)
            with trio.move_on_after(request.yield_seconds):
                await session.done.wait()
        return self._collect(session, request.max_bytes, started)

    async def aclose(self) -> None:
        """Terminate every running command's whole tree, forget every session, stop the
        helper. Idempotent.

        Afterwards ``exec_command`` raises :class:`ShellError`. Runs shielded; bounded
        by the kill grace plus a few seconds.
        """
        self._closed = True
        sessions = list(self._live)
        self._table.clear()
        with trio.CancelScope(shield=True), real_process_running():
            async with trio.open_nursery() as nursery:
                for session in sessions:
                    nursery.start_soon(self._discard, session)
            await self._login.aclose()  # a login shell still starting is not cut short
            await self._launcher.aclose()
            await self._remove_tmp()

    # -- the login environment (_login_env) ----------------------------------------------

    async def _login_environment(
        self, shell: str, environment: ShellEnvironment, sandboxed: bool, workdir: Path
    ) -> tuple[ShellEnvironment, bool]:
        """The environment of a ``login: true`` command, and whether it still needs a
        login shell (True only when the snapshot is unavailable: then as before)."""

        async def spawn(argv: list[str]) -> CommandProcess:
            if sandboxed:
                argv = self._sandbox.wrap(argv, self._workspace, workdir, self._tmp_dir())
            with real_process_running(), released(argv):
                return await self._launcher.spawn(argv, workdir, environment.env, self._kill_grace,
                                                  scaffold=SCAFFOLD_DEPTH if sandboxed else 0, fds=argv_fds(argv))

        where = self._sandbox if sandboxed else None
        login_env = await self._login.environment(shell, where, environment.env, spawn)
        if login_env is None:
            return environment, True
        forced = self._forced_tmp() if sandboxed else {}
        return login_command_environment(environment, login_env, self._env_overrides, forced), False

    # -- the private temp dir ------------------------------------------------------------

    def _tmp_dir(self) -> Path | None:
        """The private ``/tmp`` of ``workspace-write`` commands (created on first use)."""
        if self._sandbox.sandbox.mode is not SandboxMode.WORKSPACE_WRITE:
            return None
        if self._private_tmp is None:
            self._private_tmp = Path(tempfile.mkdtemp(prefix="trio-agent-tmp-"))
        return self._private_tmp

    def _forced_tmp(self) -> dict[str, str]:
        """``TMPDIR=/tmp`` inside the sandbox unless the caller's overrides set it."""
        return {} if "TMPDIR" in self._env_overrides else dict(SANDBOX_ENV)

    async def _remove_tmp(self) -> None:
        path, self._private_tmp = self._private_tmp, None
        if path is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(TMP_REMOVAL_LIMIT):
            await trio.to_thread.run_sync(shutil.rmtree, path, True, abandon_on_cancel=True)

    # -- spawning and supervising ------------------------------------------------------

    async def _spawn(
        self, argv: list[str], request: ExecRequest, environment: ShellEnvironment, scaffold: int = 0,
        tty_argv: list[str] | None = None,
    ) -> CommandSession:
        """Start the command; on a new pseudo-terminal when ``tty_argv`` is given (``_pty``)."""
        self._check_open()  # aclose() may have run while this call waited for its slot
        terminal = Terminal.open(TerminalSize(*request.size) if request.size else TerminalSize()) if tty_argv else None
        try:
            with real_process_running():  # see _real_time: commands under an autojumping MockClock
                process = await self._launcher.spawn(
                    argv, request.workdir, environment.env, self._kill_grace, scaffold=scaffold,
                    terminal=terminal, tty_argv=tty_argv, fds=argv_fds(argv),
                )
        except BaseException as exc:
            if terminal is not None:
                await terminal.aclose()
            if isinstance(exc, trio.ClosedResourceError | RuntimeError):  # closed; or the nursery exited
                raise ShellError(f"shell sessions were closed while the command was starting ({exc})") from exc
            raise
        if terminal is not None:
            terminal.close_slave()  # the command holds it now: EIO on the master ends its output
        session = CommandSession(process, environment.secrets, last_used=trio.current_time(), terminal=terminal,
                                 settle=settle_of(argv))
        try:
            if self._closed:  # aclose() ran while the process was starting
                raise ShellError("shell sessions were closed while the command was starting")
            try:
                self._nursery.start_soon(self._supervise, session)
            except RuntimeError as exc:
                raise ShellError("shell sessions are closed: their nursery has exited") from exc
        except ShellError:
            await process.terminate(0)
            await process.aclose()
            raise
        self._live.add(session)
        return session

    async def _supervise(self, session: CommandSession) -> None:
        """Own the session's process until its whole tree is gone, then give the slot back."""
        with real_process_running():
            try:
                await session.supervise(self._kill_grace, self._drain_grace)
            finally:
                self._live.discard(session)
                self._slots.release()
                session.done.set()
                self._table.forget_old_finished()

    async def _wait_or_kill(self, session: CommandSession, seconds: float) -> None:
        try:
            with trio.move_on_after(seconds):
                await session.done.wait()
        except BaseException:  # Cancelled, KeyboardInterrupt: never leave it running
            await self._discard(session)
            raise

    async def _discard(self, session: CommandSession) -> None:
        """Forget the session and terminate its whole tree; return once that is done
        (shielded; bounded by the grace plus the reap timeouts)."""
        self._table.forget(session)
        session.scope.cancel()
        with trio.CancelScope(shield=True), trio.move_on_after(self._kill_grace + 2 * REAP_TIMEOUT + 1):
            await session.done.wait()

    # -- bookkeeping ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ShellError("shell sessions are closed; no new commands can be started")

    async def _make_room(self) -> bool:
        """Evict the least recently used background session that may be evicted."""
        victim = self._table.eviction_candidate()
        if victim is None:
            return False
        await self._discard(victim)
        return True

    def _collect(self, session: CommandSession, max_bytes: int, started: float) -> ExecResult:
        excerpt = session.output.excerpt(max_bytes)
        session.output.clear()
        # Built in the documented key order, "output" last.
        result: dict[str, float | int | str] = {
            "wall_time_seconds": round(trio.current_time() - started, 3)
        }
        if session.done.is_set():
            result["exit_code"] = session.exit_code if session.exit_code is not None else -1
            self._table.forget(session)
        else:
            result["session_id"] = self._table.publish(session)
        if excerpt.truncated:
            result["original_token_count"] = math.ceil(excerpt.total / BYTES_PER_TOKEN)
        result["output"] = excerpt.to_text(lambda text: redact(text, session.secrets))
        return cast("ExecResult", result)
