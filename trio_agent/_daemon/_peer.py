"""Who is on the other end of the warm daemon's socket, and whether the daemon may serve it.

Theory of operation (issue 21). The daemon runs whatever ``run`` asks for -- any
workspace, any sandbox mode, ``danger-full-access`` included -- with the rights of its
own processes. A client that is itself confined (a command an agent runs in its
Bubblewrap sandbox, which keeps the agent's uid) would get out of its sandbox by
asking. The sandbox does not mount the daemon's directory (``_tools._sandbox_hide``);
this is the second lock, for a socket that is visible all the same (a daemon started
with another ``TRIO_AGENT_DAEMON_DIR`` than the agent's, a socket passed in some other
way): the daemon serves only a peer of its own uid **in its own namespaces** (mount,
pid, user, network). A Bubblewrap sandbox always has its own pid and mount namespaces
(and a user namespace when not root, a network namespace with the network off), so
every sandboxed peer is refused, whatever it asks for; refusing them all is simpler
than deciding which requests would be no weaker than the peer's own sandbox, and
loses nothing (the client runs in-process, inside its sandbox). The other side of
the same rule: a daemon started in namespaces of its own (a service unit with
``PrivateTmp=``, a container) serves no client outside them -- start it from the
environment its clients run in.

The peer is the process that called ``connect`` (``SO_PEERCRED``). Its namespaces are
read from ``/proc/<pid>/ns``; a pid alone could name another process by the time it is
read (the peer exited and the pid was reused by a process outside), so where the
kernel has it (Linux 6.5+) the daemon takes a pidfd of the peer (``SO_PEERPIDFD``),
reads its pid from the pidfd's ``fdinfo``, reads the namespaces, and then checks that
the pidfd's process is still alive: if it is, the pid was its own all along. Without
``SO_PEERPIDFD`` the ``SO_PEERCRED`` pid is used (that race remains on older kernels).
Anything that cannot be read -- an exited peer, a pid outside the daemon's pid
namespace (0), a ``/proc`` that refuses -- is a refusal: the check fails closed.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import struct
from typing import Protocol

__all__ = ["NAMESPACES", "SO_PEERPIDFD", "peer_problem"]

#: The namespaces a peer must share with the daemon.
NAMESPACES = ("mnt", "pid", "user", "net")
#: ``getsockopt(SOL_SOCKET, SO_PEERPIDFD)``: Linux 6.5+ (not in Python's ``socket`` before 3.13).
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
_CRED = struct.Struct("3i")
_EXITED = "the client exited before it could be checked"


class _Socket(Protocol):  # a stdlib socket or a trio one
    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


def peer_problem(sock: _Socket) -> str | None:
    """Why the daemon must not serve the peer of ``sock`` (None: it may). The reason is
    said to the peer: it holds nothing the peer does not know (``"another user"`` is
    not said at all: the daemon closes such a connection without a word)."""
    pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    if uid != os.getuid():
        return "another user"
    try:
        pidfd = _peer_pidfd(sock)
    except OSError:
        return _EXITED  # the kernel has SO_PEERPIDFD and no process to give a pidfd of
    try:
        return _namespaces_problem(pid if pidfd is None else _pidfd_pid(pidfd), pidfd)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _namespaces_problem(pid: int, pidfd: int | None) -> str | None:
    if pid == -1:
        return _EXITED
    if pid <= 0:
        return "the client is not in the daemon's pid namespace"
    try:
        differs = [name for name in NAMESPACES if _namespace(pid, name) != _namespace(None, name)]
    except OSError as exc:
        return f"the client's namespaces cannot be read ({exc.strerror})"
    if pidfd is not None and not _alive(pidfd):
        return _EXITED  # what was read may be another process's, which took its pid
    if differs:
        return (f"the client runs in a sandbox (its {', '.join(differs)} namespaces are not the daemon's); "
                "a sandboxed command cannot run through the daemon")
    return None


def _peer_pidfd(sock: _Socket) -> int | None:
    """A pidfd of the peer; None on a kernel without ``SO_PEERPIDFD`` (raises
    ``OSError`` when the kernel has it but the peer is gone)."""
    try:
        fd: int = struct.unpack("i", sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))[0]
    except OSError as exc:
        if exc.errno in (errno.ENOPROTOOPT, errno.EOPNOTSUPP):
            return None  # before Linux 6.5: the SO_PEERCRED pid
        raise
    return fd


def _pidfd_pid(pidfd: int) -> int:
    """The pid of ``pidfd``'s process in our pid namespace (0: not in it, -1: exited)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as info:
            for line in info:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


def _namespace(pid: int | None, name: str) -> str:
    return os.readlink(f"/proc/{'self' if pid is None else pid}/ns/{name}")


def _alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except OSError:  # ESRCH: it exited (and its pid may name another process by now)
        return False
    return True
