"""Reaping a process tree: the Linux primitives of the subreaper programs.

Standard library only, and never imports ``trio_agent``: ``_subreaper.py`` (the
command supervisors of ``exec_command``) and ``_server_reaper.py`` (the MCP server
supervisor) are standalone programs, run as ``python -I -S <file>``, that load this
file from beside them by its path. Both become a child subreaper (``prctl``), so that
"every descendant" is "everything their command started", and end such a tree here:

* Descendants are found by scanning ``/proc/*/stat`` for parent pids (the
  ``children`` files need ``CONFIG_PROC_CHILDREN``, absent on some kernels).
* Each is signalled through a pidfd opened *before* re-checking its parent, so a pid
  recycled between the scan and the signal is never hit (where pidfds are unavailable,
  plain ``kill`` right after the check); children before their parents, so each is
  checked while its parent still lives.
* A sandbox's own processes (the *scaffold*: the first generations of what was
  spawned) can be spared by SIGINT and SIGTERM; SIGKILL hits everything.
* ``reap`` collects every exited child without blocking; SIGCHLD, SIGTERM and SIGHUP
  reach the program's ``select`` loop through a wakeup pipe (``install_signals``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "RESET_SIGNALS",
    "STOP_SIGNALS",
    "become_subreaper",
    "descendants",
    "install_signals",
    "read_signals",
    "reap",
    "scaffold_of",
    "signal_descendants",
    "signal_group_below",
    "stop_requested",
]

PR_SET_CHILD_SUBREAPER = 36
#: Signals these programs ignore or handle; a program they start gets the default for each.
RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGHUP)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


# -- process tree ----------------------------------------------------------------------------


def become_subreaper() -> None:
    """Make orphaned descendants of this process its children (raises OSError)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(errno)}")


def _stat_field(pid: int, index: int) -> int | None:
    """Field ``index`` after the command name in ``/proc/<pid>/stat`` (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
    return int(data[data.rindex(b")") + 2 :].split(None, index + 1)[index])


def _parent_of(pid: int) -> int | None:
    return _stat_field(pid, 1)


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(), ()):
            found.append(child)
            queue.append(child)
    return found


def _pidfds_work() -> bool:
    """pidfd_open needs Linux 5.3, and some container seccomp profiles refuse it."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


_PIDFDS = _pidfds_work()


def _signal(pid: int, signals: tuple[signal.Signals, ...], tree: set[int], root: int) -> bool:
    """Signal ``pid`` if it is still a descendant of ``root``; whether it was.

    With pidfds the check happens after the pidfd pins the process, so a pid recycled
    since the scan is never hit; without them the window is the few microseconds
    between the check and ``kill``."""
    pidfd = None
    if _PIDFDS:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False  # already gone
    try:
        parent = _parent_of(pid)
        if parent != root and parent not in tree:
            return False
        for sig in signals:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
        return True
    except OSError:
        return False  # exited meanwhile
    finally:
        if pidfd is not None:
            os.close(pidfd)


def signal_descendants(
    root: int,
    signals: tuple[signal.Signals, ...],
    skip: frozenset[int] = frozenset(),
    spare: frozenset[int] = frozenset(),
) -> int:
    """Send ``signals`` to every descendant of ``root`` outside ``skip``'s subtrees,
    except the processes in ``spare`` themselves (their descendants are signalled).

    Returns how many processes were signalled."""
    found = descendants(root)
    tree = set(found)
    excluded = set(skip) | spare
    for pid in skip:
        excluded.update(descendants(pid))
    # Children before their parents: each is checked while its parent still lives.
    return sum(_signal(pid, signals, tree, root) for pid in reversed(found) if pid not in excluded)


def _process_group(pid: int) -> int | None:
    return _stat_field(pid, 2)


def scaffold_of(top: int, depth: int) -> frozenset[int]:
    """``top`` and its descendants down to ``depth`` generations (``top`` is the first)."""
    if depth <= 0:
        return frozenset()
    found = {top}
    level = [top]
    below = descendants(top) if depth > 1 else []
    for _ in range(depth - 1):
        level = [pid for pid in below if _parent_of(pid) in level]
        found.update(level)
    return frozenset(found)


def signal_group_below(root: int, pgid: int, sig: signal.Signals, spare: frozenset[int]) -> int:
    """``sig`` to every descendant of ``root`` in process group ``pgid`` outside ``spare``."""
    found = descendants(root)
    tree = set(found)
    members = [pid for pid in reversed(found) if pid not in spare and _process_group(pid) == pgid]
    return sum(_signal(pid, (sig,), tree, root) for pid in members)


def reap() -> tuple[list[tuple[int, int]], bool]:
    """Reap every exited child: ``([(pid, returncode)], whether children remain)``."""
    exited: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited, False
        if pid == 0:
            return exited, True
        exited.append((pid, os.waitstatus_to_exitcode(status)))


# -- the program's own signals -----------------------------------------------------------------


def install_signals() -> int:
    """Route SIGCHLD/SIGTERM/SIGHUP to a wakeup pipe; ignore SIGINT/SIGQUIT. Returns its read end."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for sig in (signal.SIGCHLD, *STOP_SIGNALS):
        signal.signal(sig, lambda signum, frame: None)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    return read_end


def read_signals(wakeup: int) -> bytes:
    with contextlib.suppress(BlockingIOError):
        return os.read(wakeup, 512)
    return b""


def stop_requested(wakeup: int) -> bool:
    """Whether the signals that woke the program include SIGTERM or SIGHUP (read them)."""
    return any(sig in STOP_SIGNALS for sig in read_signals(wakeup))
