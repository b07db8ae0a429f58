"""What of the host a sandboxed command must not reach through the filesystem (issue 21),
as ``bwrap`` flags for ``_sandbox.bwrap_argv``.

Theory of operation. ``--ro-bind / /`` stops writes, not connections: ``connect`` on a
Unix-domain socket needs write permission on the socket's inode only, which a read-only
mount does not take away, and the sandbox keeps the agent's uid. So every socket the
agent's user may connect to is reachable from a command unless its path is hidden --
and some of them run anything outside: the warm daemon (a ``run`` asking for
``danger-full-access``), the session bus (``systemd-run --user``), tmux, an editor's
server, an X server. The sandbox therefore hides the places where the user's own
services keep their sockets, as directories (not by a list of services):

* **the runtime directories**: ``/run/user`` (every user's, the agent's included) and
  ``$XDG_RUNTIME_DIR`` wherever it is become an empty read-only tmpfs: the session
  and accessibility buses, ssh-agent, gpg-agent, keyrings, Wayland, PipeWire,
  PulseAudio, the warm daemon's default directory;
* **/tmp**: ``workspace-write`` has its private one (``_sandbox``); ``read-only`` an
  empty read-only one: X11's ``.X11-unix``, ICE, tmux, ``ssh-*`` agents and
  forwarded agents, editors' servers, the daemon's fallback ``/tmp/trio-agent-$UID``;
* **the warm daemon's directory** wherever it is
  (``_trio_agent_launch.daemon_directory`` of the agent's environment, so
  ``$TRIO_AGENT_DAEMON_DIR`` too, and the two default places): an empty read-only
  tmpfs over it, after the writable binds so that none shows it again. A missing one
  is created first (mode 0700, as the daemon creates it), so that a daemon started
  while a command runs binds its socket under the mask;
* **``$SSH_AUTH_SOCK``**: its directory when that is private to the user (owned, no
  group or other access) and holds nothing the sandbox shows, else the socket itself;
* **the files the agent's process keeps to itself** (:data:`HIDE_VARIABLE`): each
  regular file named in ``$TRIO_AGENT_SANDBOX_HIDE`` (absolute paths,
  ``os.pathsep``-separated, by real path) has ``/dev/null`` bound over it wherever
  the sandbox shows it, after the writable binds. Files only: a mask over a directory
  could hide a workspace or another mask inside it. ``trio-agent serve
  --ws-token-file PATH`` names its token file there (:func:`hide_from_commands`): a
  command of one of its threads could otherwise read the token and, with the network
  or from any process of the user, open an unconfined thread. An internal mechanism,
  not a setting (naming more paths only hides more); being in the environment, it
  reaches the processes the server starts, as the paths stay secret for them too.

What must stay visible is bound back on top of a hidden directory that contains it
(the workspace, the writable roots, and in ``read-only`` the working directory). A
path is masked only when the sandbox would show the host's file there (the deepest
mount above it shows the host), so nothing is created inside a mask.

The kernel's knobs (``/proc``, ``/sys``). Without a user namespace (the agent runs as
root) the sandbox's uid 0 passes the owner checks of ``/proc/sys``, ``/proc/irq``,
``/proc/bus/pci``, ``/proc/mtrr``, ``/proc/sysrq-trigger``; dropped capabilities do not
stop those writes. So, whatever the uid, every entry at the top of the fresh ``/proc``
that is not a process (``[0-9]*``, ``self``, ``thread-self``) and is a directory or a
writable file is bound read-only over itself; the entries container runtimes mask
(:data:`PROC_MASKED`: kernel memory, keys, timer and scheduler internals, ACPI, sound,
SCSI) are masked (an empty read-only tmpfs, or ``/dev/null``, which reads as
``EACCES`` on the ``nodev`` bind). A process's own files (``/proc/self/oom_score_adj``,
``uid_map`` for a nested user namespace) stay writable; they reach only the
sandbox's own processes. ``/sys`` is read-only with the root (``--ro-bind / /`` is
recursive); ``/sys/firmware`` and the power-capping counters are masked too. The
listing of ``/proc`` is taken once per process (its top never changes while the
kernel runs, bar a module adding a driver's directory).

System services' sockets (``/run``): every socket below ``/run`` is masked and a
directory there that other users may write hidden whole; ``_sandbox_run`` builds the
sandbox's ``/run`` so that the host changing it while a command starts never fails the
command (its docstring says how, and what that costs).

What stays reachable (the README states it): sockets of the user elsewhere in the
filesystem (an ssh ``ControlMaster`` under ``~/.ssh``, a gpg-agent in ``~/.gnupg``
when there is no runtime directory, anything under ``/var/tmp`` or the home
directory); abstract sockets (an X server's, a bus
started by ``dbus-launch``) when ``Sandbox.network`` is on (with it off the command has
a network namespace of its own, where the host's abstract sockets do not exist). The
warm daemon also refuses any client that is not in its own namespaces
(``trio_agent._daemon._peer``), so its socket is no way out even where it is visible.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Mapping, MutableMapping

from _trio_agent_launch import daemon_directory

__all__ = [
    "HIDE_VARIABLE", "PROC_MASKED", "SYS_MASKED", "hidden_roots", "hide_from_commands",
    "inside", "installation_below", "mask", "proc_flags", "real", "socket_masks", "visible",
]

#: The environment variable naming the paths no sandboxed command may read (module docstring).
HIDE_VARIABLE = "TRIO_AGENT_SANDBOX_HIDE"

#: Entries of ``/proc`` masked as container runtimes mask them (runc's ``maskedPaths``).
PROC_MASKED = frozenset({
    "acpi", "asound", "kcore", "keys", "latency_stats", "sched_debug", "scsi", "timer_list", "timer_stats",
})
#: Directories of ``/sys`` masked likewise (firmware tables and variables, energy counters).
SYS_MASKED = ("/sys/firmware", "/sys/devices/virtual/powercap")
_PROCESS_LINKS = frozenset({"self", "thread-self"})
_proc_flags: list[str] | None = None  # this process's listing of /proc, as flags (proc_flags)


def proc_flags() -> list[str]:
    """The flags making ``/proc``'s kernel-wide knobs read-only and its secrets masked
    (computed once per process; see the module docstring)."""
    global _proc_flags
    if _proc_flags is None:
        flags: list[str] = []
        with os.scandir("/proc") as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                flags += _proc_entry(entry)
        for path in SYS_MASKED:
            if os.path.isdir(path):
                flags += mask(path, directory=True)
        _proc_flags = flags
    return _proc_flags


def _proc_entry(entry: os.DirEntry[str]) -> list[str]:
    if entry.name.isdigit() or entry.name in _PROCESS_LINKS:
        return []
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return []
    if stat.S_ISLNK(mode):
        return []  # /proc/mounts, /proc/net: links into the process's own directory
    if entry.name in PROC_MASKED and (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        return mask(entry.path, directory=stat.S_ISDIR(mode))
    if stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and mode & 0o222):
        return ["--ro-bind", entry.path, entry.path]
    return []


@functools.lru_cache(maxsize=64)
def real(path: str) -> str:
    """``os.path.realpath`` of a configured path (the workspace, a writable root, a
    runtime or daemon directory), resolved once per process: bwrap_argv runs per
    command, and these do not move under a running agent. (``$SSH_AUTH_SOCK`` is
    resolved each time: it is often a link that a terminal multiplexer re-points.)"""
    return os.path.realpath(path)


@functools.lru_cache(maxsize=1)
def _installation() -> tuple[str, ...]:
    import sys

    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(dict.fromkeys(real(path) for path in (sys.prefix, sys.base_prefix, package_root)))


def installation_below(replaced: Iterable[str]) -> list[str]:
    """The agent's own installation (``sys.prefix``, ``sys.base_prefix``, the directory
    holding the ``trio_agent`` package) where a replaced mount (a hidden ``/tmp``) would
    hide it: bound back read-only so that commands can still run the agent's Python and
    ``trio-agent``. A path that *is* a replaced root is not (that would undo the hiding)."""
    roots = [real(root) for root in replaced]
    return [path for path in _installation()
            if path not in roots and any(inside(path, root) for root in roots)]


def mask(path: str, *, directory: bool) -> list[str]:
    """Flags hiding ``path`` (which exists): an empty read-only tmpfs over a directory,
    ``/dev/null`` over anything else."""
    if directory:
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--ro-bind", "/dev/null", path]


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def hidden_roots(environ: Mapping[str, str], *, hide_tmp: bool) -> list[str]:
    """The existing directories replaced by an empty one: the runtime directories, and
    ``/tmp`` when ``hide_tmp`` (real paths, outermost only)."""
    candidates = ["/run/user"]
    if environ.get("XDG_RUNTIME_DIR", "").startswith("/"):
        candidates.append(environ["XDG_RUNTIME_DIR"])
    if hide_tmp:
        candidates.append("/tmp")
    found = [real(path) for path in candidates if os.path.isdir(path)]
    return [path for path in dict.fromkeys(found)
            if not any(other != path and inside(path, other) for other in found)]


def hide_from_commands(path: str, environ: MutableMapping[str, str] | None = None) -> None:
    """Name ``path`` in :data:`HIDE_VARIABLE` of ``environ`` (default ``os.environ``):
    the sandboxed commands this process and its children start no longer read it."""
    env = os.environ if environ is None else environ
    named = [entry for entry in env.get(HIDE_VARIABLE, "").split(os.pathsep) if entry]
    env[HIDE_VARIABLE] = os.pathsep.join(dict.fromkeys([*named, os.path.realpath(path)]))


def _named_masks(environ: Mapping[str, str], mounts: list[tuple[str, bool]]) -> list[str]:
    """Flags hiding each regular file named in :data:`HIDE_VARIABLE` that the sandbox shows."""
    flags: list[str] = []
    for entry in dict.fromkeys(environ.get(HIDE_VARIABLE, "").split(os.pathsep)):
        if not entry.startswith("/"):
            continue  # empty, or relative: names nothing in particular
        path = os.path.realpath(entry)  # resolved each time, as the ssh-agent's socket
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # gone: nothing to read there
        if stat.S_ISREG(mode) and visible(path, mounts):
            flags += mask(path, directory=False)
    return flags


def socket_masks(environ: Mapping[str, str], replaced: Iterable[str], shown: Iterable[str]) -> list[str]:
    """Flags hiding the warm daemon's directories, the ssh-agent's socket and the paths
    named in :data:`HIDE_VARIABLE` wherever the sandbox would still show them.
    ``replaced``: mount points whose content is not the host's (hidden roots, the
    private ``/tmp``); ``shown``: binds of host paths over themselves, which may lie
    below a replaced one."""
    mounts = [("/", True), *((real(p), False) for p in replaced), *((real(p), True) for p in shown)]
    flags = _named_masks(environ, mounts)
    for directory in _daemon_directories(environ):
        if visible(directory, mounts) and _ensure_private_dir(directory):
            flags += mask(directory, directory=True)
    agent = environ.get("SSH_AUTH_SOCK", "")
    if agent.startswith("/") and os.path.exists(agent):
        resolved = os.path.realpath(agent)
        if visible(resolved, mounts):
            flags += _agent_mask(resolved, environ, [path for path, _host in mounts[1:]])
    return flags


def visible(path: str, mounts: list[tuple[str, bool]]) -> bool:
    """Whether the sandbox shows the host's ``path``: the deepest mount above it does."""
    deepest = max((m for m in mounts if inside(path, m[0])), key=lambda m: len(m[0]))
    return deepest[1]


def _daemon_directories(environ: Mapping[str, str]) -> list[str]:
    found = [daemon_directory(environ), f"/tmp/trio-agent-{os.getuid()}"]
    if environ.get("XDG_RUNTIME_DIR"):
        found.append(os.path.join(environ["XDG_RUNTIME_DIR"], "trio-agent"))
    return list(dict.fromkeys(real(path) for path in found if path.startswith("/")))


def _ensure_private_dir(directory: str) -> bool:
    """Whether ``directory`` is a directory now (created mode 0700 as the daemon
    creates it when missing); a path that cannot be one holds no daemon's socket."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir(directory)


def _agent_mask(socket: str, environ: Mapping[str, str], mount_points: list[str]) -> list[str]:
    parent = os.path.dirname(socket)
    home = real(environ.get("HOME") or "/")
    try:
        info = os.lstat(parent)
    except OSError:
        return []
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    holds_mount = any(inside(point, parent) for point in mount_points)
    if private and not holds_mount and parent not in ("/", home):
        return mask(parent, directory=True)
    return mask(socket, directory=False)
