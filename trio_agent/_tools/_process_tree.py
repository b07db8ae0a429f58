"""Command processes whose whole tree ends with them: the subreaper helper, or a process group.

``exec_command`` must not leave anything running once a command is over, cancelled or
its agent closed -- including daemons that ``setsid`` or double-fork out of the
command's process group (issue 8 item 5). Killing the process group cannot reach those,
so :class:`ProcessLauncher` runs each command under a supervisor process that is a Linux
*child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): orphans are reparented to it
instead of to init, so every process the command started stays in its subtree, and the
supervisor can TERM all of them, wait the grace, and KILL whatever is left. How the
helper works is in ``_subreaper.py``; this module is its Trio client.

Why a subreaper and not a PID namespace or a cgroup: it needs no privileges (a PID
namespace needs root or an unprivileged user namespace, and then shows the command a
different uid and pid 1 semantics; cgroups need a writable, delegated hierarchy) and it
changes nothing the command can observe: real pids, real uid, the host's ``/proc``.

Cost: one helper interpreter per :class:`ProcessLauncher`, started on first use (tens
of milliseconds, once); per command, a ``fork`` of that small helper and three
descriptors passed over a socket -- no thread hop, unlike ``trio.lowlevel.open_process``.

Fallback (stated, not silent): when the helper cannot run -- not Linux, ``prctl`` or
``/proc`` unavailable, no ``sys.executable`` -- commands are started directly in a new
session (``start_new_session=True``) and ``_command_process.GroupProcess`` signals
their process group: TERM, the same grace, KILL. Everything that stays in the group is still killed;
a process that leaves it (``setsid``, a double fork into a new session) survives the
command. :attr:`ProcessLauncher.isolation` (and ``ShellSessions.statistics()``) says
which mechanism is in use, and a ``RuntimeWarning`` is issued once when the helper was
tried on Linux and could not start or answered that it is unavailable. If the helper
dies later, the next command starts a new one (running commands keep their own
supervisors).

Process control never hangs: every wait on the OS is shielded where it must survive a
cancel, and bounded (``grace + REAP_TIMEOUT``); past that the supervisor is SIGKILLed and
the helper cleans up after it.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, final

import trio

from ._command_process import REAP_TIMEOUT, CommandProcess, aclose_all, open_group_process

if TYPE_CHECKING:
    from ._pty import Terminal

__all__ = ["Isolation", "ProcessLauncher", "SupervisedProcess"]

#: Bound on the helper's start (a Python interpreter on a loaded machine).
HELPER_START_TIMEOUT = 10.0
#: Bound on the helper's exit once its socket is closed.
HELPER_EXIT_TIMEOUT = 2.0
_HELPER = Path(__file__).with_name("_subreaper.py")
_READ_SIZE = 65536

Isolation = Literal["subreaper", "process-group", "not started"]


@final
class SupervisedProcess:
    """A command run by a subreaper supervisor, controlled over its socket (``_subreaper.py``)."""

    def __init__(self, ctl: trio.socket.SocketType, stdin: trio.lowlevel.FdStream, stdout: trio.lowlevel.FdStream):
        self._ctl = ctl
        self._stdin = stdin
        self._stdout = stdout
        self._buffer = b""
        self._send_lock = trio.Lock()
        self._exited = False
        self._gone = False  # the supervisor closed its socket: nothing of the command is left
        self.pid: int | None = None
        self.supervisor: int | None = None
        self.returncode: int | None = None

    @property
    def stdin(self) -> trio.abc.SendStream:
        return self._stdin

    @property
    def stdout(self) -> trio.abc.ReceiveStream:
        return self._stdout

    async def start(self, request: Mapping[str, object]) -> None:
        """Send the request and wait for the shell to start (``OSError`` if it did not)."""
        await self._send(request)
        message = await self._next_message()
        if message is None:
            raise OSError("the command's supervisor exited before starting it")
        if "error" in message:
            raise OSError(str(message["error"]))
        self.pid = _int_or_none(message.get("started"))
        self.supervisor = _int_or_none(message.get("supervisor"))

    async def wait(self) -> int | None:
        while not self._exited:
            await self._next_message()
        return self.returncode

    async def interrupt(self) -> None:
        await self._send({"op": "interrupt"})

    async def terminate(self, grace: float) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(grace + REAP_TIMEOUT):
                if not self._gone:
                    await self._send({"op": "terminate", "grace": grace})
                while not self._gone:
                    await self._next_message()
            if not self._gone and self.supervisor is not None:
                # The supervisor is stuck (alive: its socket is open). Last resort: KILL it;
                # the helper, a subreaper too, then KILLs the tree it leaves behind.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(self.supervisor, signal.SIGKILL)
                with trio.move_on_after(REAP_TIMEOUT):
                    while not self._gone:
                        await self._next_message()

    async def aclose(self) -> None:
        await aclose_all(self._stdin, self._stdout, self._ctl)

    async def _send(self, message: Mapping[str, object]) -> None:
        data = json.dumps(message).encode() + b"\n"
        async with self._send_lock:
            try:
                while data:
                    sent = await self._ctl.send(data)
                    data = data[sent:]
            except OSError:
                pass  # the supervisor is gone: EOF on the socket tells the reader

    async def _next_message(self) -> dict[str, object] | None:
        """The next message (``exit`` is recorded on the way), or None at EOF."""
        while b"\n" not in self._buffer and not self._gone:
            try:
                data = await self._ctl.recv(_READ_SIZE)
            except OSError:
                data = b""
            if not data:
                self._gone = self._exited = True
            self._buffer += data
        if b"\n" not in self._buffer:
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        if not isinstance(message, dict):
            return {}
        if "exit" in message:
            self.returncode = _int_or_none(message["exit"])
            self._exited = True
        return message


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _HelperGone(Exception):
    pass


@final
class _Helper:
    """One run of the helper process, owned by a task of its own in the launcher's nursery.

    :meth:`run` starts it and sets ``ready`` once it answered -- ``sock`` is then set --
    or failed to start (``problem`` says why; both stay None if the start was
    cancelled). It lives until ``scope`` is cancelled or the process dies, then sets
    ``finished``. Starting it in its own task means a caller cancelled while it starts
    cancels only its own wait, not the start every later command needs.
    """

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.ready = trio.Event()
        self.finished = trio.Event()
        self.sock: trio.socket.SocketType | None = None
        self.problem: str | None = None
        self.send_lock = trio.Lock()

    async def run(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        process: trio.Process | None = None
        try:
            with self.scope:
                try:
                    process = await trio.lowlevel.open_process(
                        [sys.executable, "-I", "-S", str(_HELPER), str(theirs.fileno())],
                        pass_fds=[theirs.fileno()],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,  # a Ctrl-C in the agent's terminal is not for it
                    )
                except OSError as exc:
                    self.problem = f"could not start {sys.executable}: {exc}"
                    return
                finally:
                    theirs.close()
                await self._handshake(trio.socket.from_stdlib_socket(ours))
                if self.sock is not None:
                    await process.wait()  # until the scope is cancelled, or the helper dies
        finally:
            self.ready.set()
            # Closing our end tells the helper to exit once its supervisors have. The Trio
            # socket's close() also wakes a spawn blocked on it.
            if self.sock is not None:
                self.sock.close()
            else:
                ours.close()
            if process is not None:
                await _stop_helper(process)
            self.finished.set()

    async def _handshake(self, sock: trio.socket.SocketType) -> None:
        hello = b""
        with trio.move_on_after(HELPER_START_TIMEOUT):
            hello = await sock.recv(4096)
        if hello == b"ready":
            self.sock = sock
        elif hello:
            self.problem = hello.decode(errors="replace")
        else:
            self.problem = (
                f"it exited or gave no answer within {HELPER_START_TIMEOUT:g} s; "
                f"run `{sys.executable} -I -S {_HELPER}` to see its error"
            )
        self.ready.set()

    async def spawn(
        self, request: Mapping[str, object], grace: float, terminal: Terminal | None = None,
        passed: Sequence[int] = (),
    ) -> SupervisedProcess:
        """Start ``request`` under a new supervisor: with pipes, or on ``terminal``'s
        slave (its master streams then become the process's stdin and stdout);
        ``passed``: descriptors the command gets at the same numbers (``"fds"``)."""
        if self.sock is None or self.finished.is_set():
            raise _HelperGone("the helper is not running")
        made: list[int] = []  # closed again if the next one cannot be made (EMFILE)
        try:
            if terminal is not None and terminal.slave is not None:
                made.append(os.dup(terminal.slave))
                made.append(os.dup(terminal.slave))
                (stdin_read, stdout_write), stdin_write, stdout_read = made, -1, -1
            else:
                made.extend(os.pipe())
                made.extend(os.pipe())
                stdin_read, stdin_write, stdout_read, stdout_write = made
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            for fd in made:
                os.close(fd)
            raise
        try:
            fds = array.array("i", [theirs.fileno(), stdin_read, stdout_write, *passed])
            async with self.send_lock:
                await self.sock.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException as exc:  # OSError, or cancelled before the request left (nothing sent)
            for fd in (stdin_write, stdout_read):
                if fd >= 0:
                    os.close(fd)
            mine.close()
            if isinstance(exc, OSError):
                raise _HelperGone(str(exc)) from exc
            raise
        finally:
            for fd in (stdin_read, stdout_write):
                os.close(fd)
            theirs.close()
        process = SupervisedProcess(
            trio.socket.from_stdlib_socket(mine),
            terminal.input if terminal is not None else trio.lowlevel.FdStream(stdin_write),
            terminal.output if terminal is not None else trio.lowlevel.FdStream(stdout_read),
        )
        try:
            await process.start(request)
        except BaseException:  # OSError, or cancelled: the shell may already run
            await process.terminate(grace)
            await process.aclose()
            raise
        return process


@final
class ProcessLauncher:
    """Starts commands under the subreaper helper (see the module docstring), falling
    back to process groups where it is unavailable.

    The helper runs as a task in ``nursery``, started by the first :meth:`spawn` and
    restarted by a later one if it died. :meth:`aclose` (or cancelling ``nursery``)
    stops it; commands still running are unaffected by that (each has its own
    supervisor) and must be terminated by their owner first.
    """

    def __init__(self, nursery: trio.Nursery, *, use_helper: bool = True) -> None:
        self._nursery = nursery
        self._helper: _Helper | None = None
        self._use_helper = use_helper and sys.platform == "linux" and bool(sys.executable) and _HELPER.is_file()
        self._isolation: Isolation = "not started"
        self._closed = False

    @property
    def isolation(self) -> Isolation:
        """``"subreaper"``, ``"process-group"`` (the fallback), or ``"not started"``."""
        return self._isolation

    async def spawn(
        self, argv: list[str], cwd: Path, env: Mapping[str, str], grace: float, *, scaffold: int = 0,
        terminal: Terminal | None = None, tty_argv: list[str] | None = None, fds: Sequence[int] = (),
    ) -> CommandProcess:
        """Start ``argv`` in ``cwd`` with exactly ``env``; stdout and stderr share one pipe.

        ``scaffold``: how many generations of ``argv`` are a sandbox's own processes
        (spared by SIGINT and SIGTERM, see ``_subreaper.py``); the process-group
        fallback signals the whole group regardless.

        ``terminal``: run on that pseudo-terminal instead of pipes, as the session
        leader whose controlling terminal it is (``_pty.py``). An unsandboxed command
        (``scaffold`` 0) under the helper is made so by its supervisor; otherwise
        ``tty_argv`` runs instead of ``argv``: the same command with
        ``_pty.leader_argv()`` in front of the shell, which does it itself.

        Raises OSError if the command cannot be started (missing shell or directory),
        RuntimeError if the nursery has exited, trio.ClosedResourceError after
        :meth:`aclose` or while the nursery shuts down. The first call waits for the
        helper to start (cancellable; the start goes on for the next call).

        ``fds``: descriptors ``argv`` gets at the same numbers (a sandbox's ``/run``:
        ``_sandbox_run``); they stay the caller's to close once this returns."""
        request = {"argv": argv, "cwd": str(cwd), "env": dict(env), "grace": grace, "scaffold": scaffold}
        if fds:
            request["fds"] = list(fds)
        if terminal is not None:
            request |= {"ctty": True} if not scaffold else {"argv": tty_argv or argv}
        for _ in range(2):  # a helper that died is restarted once
            helper = await self._current_helper()
            if helper is None:
                break
            try:
                return await helper.spawn(request, grace, terminal, fds)
            except _HelperGone:
                continue
        if self._closed:
            raise trio.ClosedResourceError("the process launcher is closed")
        self._isolation = "process-group"
        if terminal is not None:
            return await open_group_process(tty_argv or argv, cwd, env, terminal, fds)
        return await open_group_process(argv, cwd, env, passed=fds)

    async def aclose(self) -> None:
        """Stop the helper (idempotent; shielded and bounded)."""
        self._closed = True
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.scope.cancel()
            with trio.CancelScope(shield=True), trio.move_on_after(HELPER_EXIT_TIMEOUT + REAP_TIMEOUT):
                await helper.finished.wait()

    async def _current_helper(self) -> _Helper | None:
        """The running helper (started, or restarted, if need be); None where it is unavailable."""
        if self._closed:
            raise trio.ClosedResourceError("the process launcher is closed")
        if not self._use_helper:
            return None
        helper = self._helper
        if helper is None or helper.finished.is_set():
            helper = self._helper = _Helper()
            self._nursery.start_soon(helper.run)
        await helper.ready.wait()
        if helper.sock is not None:
            self._isolation = "subreaper"
            return helper
        if helper.problem is None:
            raise trio.ClosedResourceError("the helper's start was cancelled: its nursery is shutting down")
        if self._use_helper:  # unavailable here: say so once, and do not try again
            self._use_helper = False
            _warn_fallback(helper.problem)
        return None


async def _stop_helper(process: trio.Process) -> None:
    """Wait (bounded) for the helper to exit once its socket is closed; then KILL it."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(HELPER_EXIT_TIMEOUT):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(REAP_TIMEOUT):
                await process.wait()


def _warn_fallback(reason: str) -> None:
    warnings.warn(
        f"exec_command: the subreaper helper is unavailable ({reason}); commands run in a "
        "process group, and a process that leaves it (setsid, a double fork) can outlive "
        "its command",
        RuntimeWarning,
        stacklevel=2,
    )
