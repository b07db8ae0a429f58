"""The subreaper helper: runs shell commands so that nothing they start outlives them.

This file is a standalone program (standard library only; it never imports
``trio_agent``). ``_process_tree.ProcessLauncher`` starts it once per ``ShellSessions``
as ``python -I -S _subreaper.py FD``, where FD is its end of a ``SOCK_SEQPACKET``
socket pair. It is the only code in the package that is not under Trio's clock: it is
a separate OS process, so it uses ``time.monotonic`` for the grace the agent passes in.

Theory of operation. The process tree is::

    agent --- helper (one per ShellSessions, a subreaper)
                 +-- supervisor (one per command: own session, a subreaper)
                        +-- shell -- whatever the command starts, daemons included

Linux reparents an orphan to its nearest ancestor that called
``prctl(PR_SET_CHILD_SUBREAPER)``, never past it. A command that double-forks or calls
``setsid`` leaves its process group and session, but not its supervisor's subtree:
the daemon becomes the supervisor's child. So "every descendant of the supervisor" is
exactly "everything the command started", and a supervisor that has no children left
knows the command is over (``waitpid`` says ``ECHILD``).

* **Helper**: each message on FD carries three descriptors (control socket, the shell's
  stdin, the shell's stdout/stderr), then those the command is passed (a sandbox's
  ``/run``, ``_sandbox_run``: at most 250, given to the shell at the numbers the
  request's ``"fds"`` lists). The helper forks a supervisor for it (a cheap fork
  of this small, single-threaded interpreter instead of a new interpreter per command)
  and closes its copies. On EOF of FD (or SIGTERM/SIGHUP) it stops taking requests
  and exits once its supervisors have. A supervisor that dies by a signal (the agent's last resort) leaves
  its tree to the helper, which SIGKILLs every child that is not a supervisor.
* **Supervisor**: ``setsid``, becomes a subreaper, reads one JSON line ``{"argv",
  "cwd", "env", "grace"}`` from the control socket, ``posix_spawn``\\s the shell with
  the pipes as fds 0/1/2, leading its own process group (with ``"ctty": true``, a
  session whose controlling terminal is the pseudo-terminal passed as its stdin and
  stdout, ``_pty.py``), and answers ``{"started":
  pid, "supervisor": pid}`` or ``{"error": "..."}``. It reports
  ``{"exit": returncode}`` (negative: killed by that signal) when the shell exits, and
  exits itself -- closing the socket, which is what the agent waits for -- as soon as it
  has no descendants left. Requests: ``{"op": "interrupt"}`` sends SIGINT to the
  shell's process group while the shell runs; ``{"op": "terminate", "grace": s}`` sends SIGTERM (and
  SIGCONT, for stopped ones) to every descendant, waits up to ``s`` seconds for them to
  exit, then SIGKILLs every descendant until none is left. EOF of the control socket
  (the agent closed it or died) and SIGTERM/SIGHUP mean ``terminate`` with the request's
  grace.
* **Scaffold**: a request may say ``"scaffold": n`` -- the first ``n`` generations of
  the spawned program are a sandbox's own processes, not the command (for Bubblewrap
  with a PID namespace: the outer ``bwrap`` and the namespace's init, which kill the
  whole namespace when they die). SIGINT and SIGTERM then spare them: SIGINT goes to
  the members of the process group below them, SIGTERM to every descendant below
  them; SIGKILL still hits everything, the scaffold included.

The process-tree primitives -- finding, signalling and reaping descendants, and how a
recycled pid is never hit -- are in ``_reaping.py``, loaded from beside this file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing would add to every command's start
if TYPE_CHECKING:
    from trio_agent._tools import _reaping
else:  # a program, not a package module: the process-tree primitives come from beside it
    _spec = importlib.util.spec_from_file_location("_reaping", os.path.join(os.path.dirname(__file__), "_reaping.py"))
    _reaping = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_reaping)

#: Seconds between SIGKILL rounds while descendants remain (a fork racing a kill).
_KILL_ROUND = 0.01
_FDS_PER_REQUEST = 3
#: At most this many more descriptors a request may pass to its command (``"fds"``): one
#: message carries at most 253 (the kernel's SCM_MAX_FD).
_EXTRA_FDS = 250


# -- messages --------------------------------------------------------------------------------------


def _send(fd: int, message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # the agent is gone; EOF handling follows
        os.write(fd, json.dumps(message).encode() + b"\n")


class _Lines:
    """Newline-delimited JSON objects from the control socket (malformed lines are skipped)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.pending: list[dict[str, object]] = []
        self.eof = False

    def read(self) -> list[dict[str, object]]:
        """One ``read`` (blocks if nothing is ready); every complete message not yet taken."""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if not data:
            self.eof = True
        self.buffer += data
        if b"\n" not in data:  # a large request arrives in many reads: split once, at its end
            return []
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    self.pending.append(message)
        taken, self.pending = self.pending, []
        return taken

    def take(self) -> list[dict[str, object]]:
        """The messages :meth:`first` read beyond the first one."""
        taken, self.pending = self.pending, []
        return taken

    def first(self) -> dict[str, object] | None:
        """Block for the first message; later ones stay for the next :meth:`read`."""
        while not self.pending and not self.eof:
            self.pending = self.read()
        return self.pending.pop(0) if self.pending else None


# -- supervisor --------------------------------------------------------------------------------


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{what} must be a non-empty list of strings")
    return value


def _environment(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("env must map strings to strings")
    return value


def _passed(request: dict[str, object], extras: list[int]) -> list[tuple[object, ...]]:
    """The spawn actions giving the command ``extras`` at the numbers ``"fds"`` names
    (the agent's own numbers, which its ``bwrap`` line uses): each first moved above
    every such number, so that no ``dup2`` overwrites one not yet given."""
    targets = request.get("fds", [])
    if not isinstance(targets, list) or len(targets) != len(extras) \
            or not all(isinstance(fd, int) and not isinstance(fd, bool) and 3 <= fd < 65536 for fd in targets):
        raise ValueError("fds must name, from 3 up, each descriptor passed with the request")
    if not extras:
        return []
    import fcntl  # only a sandboxed command that passes descriptors needs it

    base = max(targets) + 1
    for index, fd in enumerate(extras):
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base)
        os.close(fd)
        extras[index] = moved
    return [(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(extras, targets, strict=True)]


def _spawn(request: dict[str, object], stdin: int, stdout: int, extras: list[int] | None = None) -> int:
    """Start the shell in ``cwd`` with the pipes as fds 0/1/2 (``$PATH`` of ``env`` for a
    bare name), leading a new process group: a ``kill 0`` in the command cannot reach
    the supervisor. With ``"ctty": true`` (``stdin`` is a pseudo-terminal slave) it
    leads a new session instead, whose controlling terminal is that terminal: opened by
    its path as fd 0 after ``setsid``, which is what makes it the controlling one."""
    argv = _strings(request.get("argv"), "argv")
    env = _environment(request.get("env"))
    terminal = os.ttyname(stdin) if request.get("ctty") is True else None
    os.chdir(str(request.get("cwd")))
    actions: list[tuple[object, ...]] = [(os.POSIX_SPAWN_DUP2, stdin, 0)]
    if terminal is not None:
        actions = [(os.POSIX_SPAWN_OPEN, 0, terminal, os.O_RDWR, 0)]
    actions += [(os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stdout, 2), *_passed(request, extras or [])]
    group = {"setsid": True} if terminal is not None else {"setpgroup": 0}
    name = argv[0]
    candidates = [name] if "/" in name else [os.path.join(d, name) for d in os.get_exec_path(env)]
    error: OSError = FileNotFoundError(2, "No such file or directory", name)
    try:
        for path in candidates:
            try:
                return os.posix_spawn(
                    path, argv, env, file_actions=actions, setsigdef=_reaping.RESET_SIGNALS, setsigmask=(), **group
                )
            except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
                error = exc
        raise error
    finally:
        os.chdir("/")  # the supervisor itself keeps no directory busy


class _Supervisor:
    """One command: its shell, its descendants, and the termination state machine."""

    def __init__(self, ctl: int, wakeup: int) -> None:
        self.ctl = ctl
        self.wakeup = wakeup
        self.lines = _Lines(ctl)
        self.me = os.getpid()
        self.shell: int | None = None
        self.scaffold = 0  # generations of sandbox processes above the command
        self.grace = 0.5
        self.kill_at: float | None = None  # set once terminating

    def start(self, stdin: int, stdout: int, extras: list[int]) -> bool:
        request = self.lines.first()
        if request is None:
            return False
        grace = request.get("grace")
        self.grace = float(grace) if isinstance(grace, int | float) else self.grace
        scaffold = request.get("scaffold")
        self.scaffold = scaffold if isinstance(scaffold, int) and not isinstance(scaffold, bool) else 0
        try:
            self.shell = _spawn(request, stdin, stdout, extras)
        except (OSError, ValueError, TypeError) as exc:
            _send(self.ctl, {"error": str(exc)})
            return False
        finally:
            for fd in (stdin, stdout, *extras):
                os.close(fd)
        _send(self.ctl, {"started": self.shell, "supervisor": self.me})
        return True

    def terminate(self, grace: float) -> None:
        if self.kill_at is not None:
            return
        self.kill_at = time.monotonic() + max(0.0, grace)
        _reaping.signal_descendants(self.me, (signal.SIGTERM, signal.SIGCONT), spare=self._spared())

    def _spared(self) -> frozenset[int]:
        """The sandbox's own processes, spared by SIGINT and SIGTERM (module docstring)."""
        if self.shell is None or not self.scaffold:
            return frozenset()
        return _reaping.scaffold_of(self.shell, self.scaffold)

    def handle(self, message: dict[str, object]) -> None:
        if message.get("op") == "interrupt":
            if self.shell is not None and self.scaffold:
                _reaping.signal_group_below(self.me, self.shell, signal.SIGINT, self._spared())
            elif self.shell is not None:  # not reaped yet, so its pid is still its group's id
                with contextlib.suppress(OSError):
                    os.killpg(self.shell, signal.SIGINT)
        elif message.get("op") == "terminate":
            grace = message.get("grace")
            self.terminate(float(grace) if isinstance(grace, int | float) else self.grace)

    def run(self) -> None:
        for message in self.lines.take():  # sent together with the request
            self.handle(message)
        if self.lines.eof:
            self.terminate(self.grace)
        while True:
            exited, children_left = _reaping.reap()
            for pid, code in exited:
                if pid == self.shell:
                    self.shell = None
                    _send(self.ctl, {"exit": code})
            if not children_left:
                return
            timeout = None
            if self.kill_at is not None:
                timeout = max(0.0, self.kill_at - time.monotonic())
                if timeout == 0.0:
                    _reaping.signal_descendants(self.me, (signal.SIGKILL,))
                    timeout = _KILL_ROUND
            watched = [self.wakeup] if self.lines.eof else [self.wakeup, self.ctl]
            readable, _, _ = select.select(watched, [], [], timeout)
            if self.wakeup in readable and _reaping.stop_requested(self.wakeup):
                self.terminate(self.grace)
            if self.ctl in readable:
                for message in self.lines.read():
                    self.handle(message)
                if self.lines.eof:
                    self.terminate(self.grace)


def _supervise(ctl: int, stdin: int, stdout: int, *extras: int) -> None:
    """The forked child of the helper: run one command to the end of its whole tree."""
    os.setsid()
    wakeup = _reaping.install_signals()
    try:
        _reaping.become_subreaper()
    except OSError as exc:
        _send(ctl, {"error": f"cannot supervise the command: {exc}"})
        return
    supervisor = _Supervisor(ctl, wakeup)
    if supervisor.start(stdin, stdout, list(extras)):
        supervisor.run()


# -- helper ------------------------------------------------------------------------------------


def _receive(sock: socket.socket) -> list[int] | None:
    """The descriptors of one request, or None at EOF."""
    space = socket.CMSG_SPACE(4 * (_FDS_PER_REQUEST + _EXTRA_FDS))
    message, ancillary, _, _ = sock.recvmsg(16, space, socket.MSG_CMSG_CLOEXEC)
    if not message:
        return None
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4))
    return fds


def _fork_supervisor(sock: socket.socket, wakeup: int, fds: list[int]) -> int | None:
    if not _FDS_PER_REQUEST <= len(fds) <= _FDS_PER_REQUEST + _EXTRA_FDS:
        for fd in fds:
            os.close(fd)
        return None
    try:
        pid = os.fork()
    except OSError as exc:  # EAGAIN at the process limit: fail this command, keep serving
        _send(fds[0], {"error": f"cannot fork a supervisor: {exc}"})
        for fd in fds:
            os.close(fd)
        return None
    if pid == 0:
        code = 0
        try:
            signal.set_wakeup_fd(-1)
            os.close(wakeup)
            sock.close()
            _supervise(*fds)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    return pid


def _serve(sock: socket.socket, wakeup: int) -> None:
    supervisors: set[int] = set()
    accepting = True
    while accepting or supervisors:
        watched = [wakeup, sock.fileno()] if accepting else [wakeup]
        readable, _, _ = select.select(watched, [], [])
        if wakeup in readable:
            if _reaping.stop_requested(wakeup):
                accepting = False  # running commands keep their supervisors
            exited, _ = _reaping.reap()
            if any(pid not in supervisors or code != 0 for pid, code in exited):
                # A supervisor failed (or an orphan of one died): its tree is ours now, and
                # nothing but supervisors should be. Sweep until that is true again.
                _reaping.signal_descendants(os.getpid(), (signal.SIGKILL,), skip=frozenset(supervisors))
            supervisors.difference_update(pid for pid, _ in exited)
        if sock.fileno() in readable:
            fds = _receive(sock)
            if fds is None:
                accepting = False
                continue
            pid = _fork_supervisor(sock, wakeup, fds)
            if pid is not None:
                supervisors.add(pid)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print(f"usage: {argv[0]} FD  (started by trio_agent's exec_command, not by hand)", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=int(argv[1]))
    os.set_inheritable(sock.fileno(), False)
    wakeup = _reaping.install_signals()
    try:
        if not os.path.exists(f"/proc/{os.getpid()}/stat"):
            raise OSError("/proc is not mounted")
        _reaping.become_subreaper()
    except OSError as exc:
        sock.sendall(f"unavailable: {exc}".encode())
        return 1
    sock.sendall(b"ready")
    _serve(sock, wakeup)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
