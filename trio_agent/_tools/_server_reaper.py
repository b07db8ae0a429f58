"""The MCP server supervisor: runs one stdio MCP server so that nothing it starts outlives it.

A standalone program (standard library only; it never imports ``trio_agent``, and
loads its process-tree functions from ``_reaping.py`` beside it)::

    python -I -S _server_reaper.py AGENT_PID GRACE EXECUTABLE -- ARGV0 [ARG...]

``_mcp.py`` hands the MCP SDK's ``stdio_client`` this command line in place of the
server's, so the process the SDK knows -- the one whose stdin it closes and whose
process group it sends SIGTERM and then SIGKILL -- is this supervisor; the server is
its child -- ``EXECUTABLE`` (the path the agent resolved, as ``subprocess`` would)
run with ``ARGV0 ARG...`` as its argv -- with the same stdin, stdout, stderr (so its
stderr reaches the agent's buffer unchanged), environment, working directory and
process group. The SDK's
shutdown works as before; it just reaches a tree instead of a group.

Theory of operation (the subreaper of ``_subreaper.py``, for one server):

* The supervisor becomes a Linux *child subreaper*: a process the server starts that
  leaves its process group and session (``setsid``, a double fork) is reparented to
  the supervisor instead of to init, so "the supervisor's descendants" is exactly
  "everything the server started".
* The tree ends when the server does: once the server has exited (the SDK closed its
  stdin, or it crashed), every descendant left gets SIGTERM (and SIGCONT), ``GRACE``
  seconds, then SIGKILL until none is left; then the supervisor exits with the
  server's status (128 + N when signal N killed it). SIGTERM or SIGHUP to the
  supervisor (the SDK's escalation signals the whole group) does the same to the whole
  tree, server included. ``GRACE`` (1 s) is below the SDK's 2 s windows, so the
  supervisor is done before the SDK would SIGKILL it.
* The agent dying -- even by SIGKILL, when no shutdown runs -- does the same: the
  supervisor holds a pidfd of ``AGENT_PID`` (readable once that process is gone) or,
  where pidfds are unavailable, compares its parent pid once a second.
  ``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that forked exits, and
  Trio may start a process from a worker thread that it ends when idle.
* Why not a cgroup: it needs a delegated, writable cgroup v2 hierarchy (rarely there
  in containers and CI), and a PID namespace would show the server pid 1 semantics and
  need privileges; the subreaper needs neither and changes nothing the server sees.

Fallback (stated, not silent): where the supervisor cannot become a subreaper (no
``prctl``, no ``/proc``), it ``exec``\\s the server in its own place: exactly what the
SDK alone does (a process that leaves the group then survives). ``_mcp.py`` does not
use the supervisor at all off Linux.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing would add to every server's start
if TYPE_CHECKING:
    from trio_agent._tools import _reaping
else:
    _spec = importlib.util.spec_from_file_location("_reaping", os.path.join(os.path.dirname(__file__), "_reaping.py"))
    _reaping = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_reaping)

_POLL_PARENT = 1.0  # seconds between parent checks where pidfds are unavailable
_KILL_ROUND = 0.01  # seconds between SIGKILL rounds while descendants remain (a fork racing a kill)


def _usage(program: str) -> int:
    print(f"usage: {program} AGENT_PID GRACE EXECUTABLE -- ARGV0 [ARG...]  (started by trio_agent for an MCP "
          "server, not by hand)", file=sys.stderr)
    return 2


def _exit_code(status: int | None) -> int:
    if status is None:
        return 1
    return 128 - status if status < 0 else status


class _Tree:
    """The server, its descendants, and the end of both (module docstring)."""

    def __init__(self, server: int, grace: float, wakeup: int, parent: int) -> None:
        self.me = os.getpid()
        self.server = server
        self.grace = grace
        self.wakeup = wakeup
        self.parent = parent
        self.status: int | None = None
        self.kill_at: float | None = None
        self.watch = _watch_parent(parent)

    def terminate(self) -> None:
        if self.kill_at is None:
            self.kill_at = time.monotonic() + self.grace
            _reaping.signal_descendants(self.me, (signal.SIGTERM, signal.SIGCONT))
        if self.watch is not None:  # readable for good now: stop watching it
            os.close(self.watch)
            self.watch = None

    def run(self) -> int:
        if os.getppid() != self.parent:  # the agent died before the pidfd held it
            self.terminate()
        while True:
            exited, children_left = _reaping.reap()
            if any(pid == self.server for pid, _ in exited):
                self.status = next(code for pid, code in exited if pid == self.server)
                self.terminate()
            if not children_left:
                return _exit_code(self.status)
            self._wait()

    def _wait(self) -> None:
        timeout = _POLL_PARENT if self.watch is None and self.kill_at is None else None
        if self.kill_at is not None:
            timeout = max(0.0, self.kill_at - time.monotonic())
            if timeout == 0.0:
                _reaping.signal_descendants(self.me, (signal.SIGKILL,))
                timeout = _KILL_ROUND
        watched = [self.wakeup] if self.watch is None else [self.wakeup, self.watch]
        readable, _, _ = select.select(watched, [], [], timeout)
        signals = _reaping.read_signals(self.wakeup) if self.wakeup in readable else b""
        if any(sig in _reaping.STOP_SIGNALS for sig in signals):
            self.terminate()
        if self.kill_at is None and ((self.watch is not None and self.watch in readable)
                                     or os.getppid() != self.parent):
            self.terminate()  # the agent is gone


def _watch_parent(parent: int) -> int | None:
    """A pidfd of the agent (readable once it has exited), or None where there are none."""
    if not _reaping._PIDFDS:
        return None
    try:
        return os.pidfd_open(parent)
    except OSError:
        return None  # gone already: the parent pid check sees it


def _spawn(executable: str, argv: list[str]) -> int:
    """The server, with this process's descriptors, environment and directory, and the
    default disposition of every signal the supervisor handles or ignores."""
    return os.posix_spawn(executable, argv, os.environ, setsigdef=_reaping.RESET_SIGNALS, setsigmask=())


def main(argv: list[str]) -> int:
    if len(argv) < 6 or argv[4] != "--" or not argv[1].isdigit():
        return _usage(argv[0])
    parent, executable, server_argv = int(argv[1]), argv[3], argv[5:]
    try:
        grace = float(argv[2])
        if not os.path.exists(f"/proc/{os.getpid()}/stat"):
            raise OSError("/proc is not mounted")
        _reaping.become_subreaper()
    except ValueError:
        return _usage(argv[0])
    except OSError:
        with contextlib.suppress(OSError):
            os.execv(executable, server_argv)  # the fallback: the server in our place
        print(f"trio_agent: cannot start the MCP server {executable}", file=sys.stderr)
        return 127
    wakeup = _reaping.install_signals()
    if os.getppid() != parent:
        return 1  # the agent died before its server could start: start nothing
    try:
        server = _spawn(executable, server_argv)
    except OSError as exc:
        print(f"trio_agent: cannot start the MCP server {executable}: {exc}", file=sys.stderr)
        return 127
    os.chdir("/")  # the server has its working directory; the supervisor keeps none busy
    # Nor the pipes: the SDK sees the server's stdout end, and its stdin refuse writes, when
    # the server's own copies close (stderr stays, for the supervisor's own last words).
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return _Tree(server, grace, wakeup, parent).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
