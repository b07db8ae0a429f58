"""Opening what the rebuilt ``/run`` puts back from another user's directory, without
following a link (``_sandbox_run``'s docstring says why and what it costs).

``bwrap`` resolves a bind's source on the host following links, so an entry of a
directory another user may change, bound back by its path, shows whatever that user
made it point to by the time ``bwrap`` runs (sec6). Here each such entry is opened
below its parent's descriptor with ``O_NOFOLLOW`` (a link is never opened; a directory
by ``O_PATH``), checked to be the inode and type the walk listed, and handed to
``bwrap`` as a descriptor:

* a regular file of at most ``copy_bytes`` (pid files, ``resolv.conf``) that a command
  could read on the host is reopened for reading through its descriptor, read here
  (bounded) into a memory file, which ``bwrap`` copies into the sandbox (``--file FD
  DEST``): nothing is resolved, and a file the host removes after it was opened is
  copied all the same. The copy is the sandbox's user's: one a command could not read
  (another user's private file, read here as root) is bound as it is (sec8);
* anything else (a directory bound back whole, a larger file) is bound by its
  descriptor (``--ro-bind-fd FD DEST``). ``bwrap`` (0.8 with Debian's backport, as
  0.10 upstream) turns it into the path ``/proc/self/fd/FD`` reads as, binds that, and
  compares the mount with the descriptor (``fstat``): a swap in between makes it fail
  ("Race condition binding dirfd"), never shows something else; an entry removed in
  between fails it too ("Can't find source path": the path reads ``... (deleted)``).
  That is the one race left, for directories and large files only.

An entry gone, or changed, between the walk and its opening is left out (nothing is
put back there); the descriptors are kept at 3 and above, close-on-exec (the spawn
path passes each at its number, ``_subreaper``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import stat
import subprocess

from ._beneath import Beneath, Changed
from ._bwrap_help import printed

__all__ = [
    "bwrap_options", "fd_budget", "high", "open_dir", "open_entry", "open_listed",
    "readable_as_command", "verified",
]


_options: dict[str, frozenset[str]] = {}  # per bwrap executable, for this process


def bwrap_options(bwrap: str) -> frozenset[str]:
    """The options ``bwrap --help`` lists (once per executable and process): whether it
    has ``--ro-bind-fd`` (0.10, and backports such as Debian 12's 0.8) and ``--perms``
    (0.5). Empty when it cannot say: neither is used then. Normally learnt from the
    sandbox's trial run, whose no-op is ``bwrap --help`` (``_bwrap_help``); only
    otherwise is it run here, blocking once."""
    known = _options.get(bwrap)
    if known is None:
        text = printed(bwrap)
        if text is None:
            try:
                done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
            except (OSError, subprocess.SubprocessError):
                done = None
            text = "" if done is None else done.stdout
        known = _options[bwrap] = _listed(text)
    return known


def _listed(help_text: str) -> frozenset[str]:
    return frozenset(word for word in help_text.split() if word.startswith("--"))


def fd_budget(cap: int) -> int:
    """The descriptors one command's ``/run`` may hold: ``cap``, and no more than keeps
    this process within half its limit with what it holds now (sec8: commands starting
    at the same time -- parallel tool calls -- each took a quarter of the limit, and
    sixteen of them ran the agent out of descriptors: "Too many open files"). 0: none
    (the directories are then bound, as beyond any budget)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    try:
        held = held_descriptors()
    except OSError:  # no /proc: as if a quarter of the limit were taken
        held = soft // 4
    return max(0, min(cap, soft // 2 - held))


def held_descriptors() -> int:
    """How many descriptors this process holds. Linux 6.2 and later give the count as the
    size of ``/proc/self/fd`` (one ``stat``, whatever the count: a server holding
    thousands of connections paid ~3 ms a command to list them); earlier kernels give 0
    there, and the listing is counted (less its own descriptor)."""
    size = os.stat("/proc/self/fd").st_size
    return size if size > 0 else len(os.listdir("/proc/self/fd")) - 1


def verified(fd: int, kind: int) -> bool:
    """Whether ``fd`` names an entry of the type the walk listed, else it is closed. The
    type, not the inode: a file its owner replaced by renaming a new one over it
    (``stub-resolv.conf``) in between is the current one, as a bind by path would show
    it, and nothing opened without following a link is more than its owner could have
    put there before the walk."""
    if stat.S_IFMT(os.fstat(fd).st_mode) == kind:
        return True
    os.close(fd)
    return False


def open_dir(path: str, parent: int, by_path: bool) -> int:
    """A descriptor of the directory ``path`` the rebuild puts back entries of, opened
    without following a link: below ``parent``'s descriptor, or by its path when
    ``parent`` is not open (-1) and ``by_path`` (``/run`` itself, or a directory that
    only root or the agent may change, as every one above it). -1: gone, not a
    directory, or not to be opened by its path -- its stand-in then keeps its masks and
    links, and only a trusted one its other entries, bound by path."""
    if parent < 0 and not by_path:
        return -1
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = high(os.open(path, flags) if parent < 0 else os.open(os.path.basename(path), flags, dir_fd=parent))
    except OSError:
        return -1
    return fd if verified(fd, stat.S_IFDIR) else -1


def open_listed(path: str, top: str) -> int:
    """A descriptor to list the directory ``path`` below ``top`` (``/run``, a real path)
    through, each directory on the way opened below the last without following a link
    (``_beneath``; raises OSError: one is gone, or a link now)."""
    parts = tuple(part for part in os.path.relpath(path, top).split(os.sep) if part != ".")
    with Beneath(top) as below:
        try:
            fd = below.open_dir(parts)
        except Changed as exc:
            raise NotADirectoryError(errno.ENOTDIR, str(exc)) from None
    try:
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


def open_entry(path: str, kind: int, parent: int, fds: list[int], copy_bytes: int, *, bind: bool,
               perms: bool = True) -> list[str] | None:
    """The flags putting back the entry ``path`` of a rebuilt directory through a
    descriptor opened below ``parent`` without following a link, of the type the walk
    listed (module docstring): a small regular file is copied (``--file``: nothing to
    resolve, and a file gone since it was opened is copied all the same); anything else,
    when ``bind``, bound by its descriptor (``--ro-bind-fd``, which ``bwrap`` checks
    after the mount), else None (the caller binds it by path). [] when it is gone,
    or not what the walk listed (a link now): nothing is put back there."""
    try:
        fd = high(os.open(os.path.basename(path), os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent))
    except OSError:
        return []
    if not verified(fd, kind):
        return []
    info = os.fstat(fd)
    if kind == stat.S_IFREG and info.st_size <= copy_bytes and readable_as_command(info):
        copy = _copy(fd, copy_bytes)
        if copy is not None:
            os.close(fd)
            fds.append(copy)
            return [*(["--perms", f"{info.st_mode & 0o777:04o}"] if perms else []), "--file", str(copy), path]
    if not bind:
        os.close(fd)
        return None
    fds.append(fd)
    return ["--ro-bind-fd", str(fd), path]


def readable_as_command(info: os.stat_result) -> bool:
    """Whether a command could read the file ``info`` describes on the host: the copy is
    its own, so a file it could not read must be bound as it is (sec8). As root the
    agent reads everything, its commands (no capabilities) only by the mode bits that
    apply to uid 0; as another user the agent reads with the command's own rights."""
    if os.geteuid() != 0:
        return True  # _copy reads it as the command would (unreadable: bound)
    if info.st_uid == 0:
        return bool(info.st_mode & 0o400)
    if info.st_gid in (os.getegid(), *os.getgroups()):
        return bool(info.st_mode & 0o040)
    return bool(info.st_mode & 0o004)


def _copy(fd: int, limit: int) -> int | None:
    """A memory file holding what the regular file ``fd`` names holds, read here, at most
    ``limit`` bytes (``bwrap`` would read a file to its end: its owner could make it a
    sparse terabyte in between). None: unreadable by the agent, or grown beyond
    ``limit`` -- then it is bound, and reads as it would on the host."""
    try:  # reopened through the descriptor: the same inode, nothing resolved again
        readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(readable, limit + 1, 0)
    except OSError:
        return None
    finally:
        os.close(readable)
    if len(data) > limit:
        return None
    try:
        copy = high(os.memfd_create("trio-agent-run", os.MFD_CLOEXEC))
    except OSError:
        return None  # no memory files here (a seccomp profile), or no descriptor left: bound
    try:
        os.write(copy, data)  # a memory file takes it whole
        os.lseek(copy, 0, os.SEEK_SET)
    except OSError:
        os.close(copy)
        return None
    return copy


def high(fd: int) -> int:
    """``fd`` moved to 3 or above: the spawn path gives each descriptor its own number
    in ``bwrap``, where 0, 1 and 2 are the command's."""
    if fd >= 3:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)
