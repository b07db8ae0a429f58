"""The sandbox's ``/run``: the host's, with every socket of its system services masked,
built so that ``/run`` changing while a command starts never fails the command.

Why (issue 21, sec4; the race found by flake5). The services of the machine keep their
sockets under ``/run`` (``/var/run`` links to it): the container engine's
(``/run/docker.sock``), the system bus, systemd's own (``/run/systemd/private``), a
database's -- as root each is a way out, and a user in the ``docker`` group has the
first. ``/run`` cannot be hidden whole (``/etc/resolv.conf`` often links into it, NixOS
keeps ``/run/current-system`` there), and ``connect`` ignores read-only mounts. So each
command's sandbox walks ``/run`` (at most :data:`RUN_DEPTH` levels and
:data:`RUN_ENTRIES` entries, :data:`DIR_ENTRIES` of one directory, root's and the
agent's directories first; at each command, so that a service started since is
covered) and masks every socket it finds with ``/dev/null`` (``connect`` is refused);
a directory there that other users may write (``/run/lock``, ``drwxrwxrwt``) is hidden
whole (anyone could make a socket in it after the walk). What a command reads there
(pid files, ``resolv.conf``) stays. A named pipe counts as a socket (sec8): opening
one to write needs no writable mount either (the kernel checks that for regular
files, directories and links only), and its reader is a service's (systemd's
``/run/initctl`` takes SysV runlevel requests: power off, reboot).

Binding ``/dev/null`` over the host's socket in place, as before sec4, raced the host:
``bwrap`` creates a missing mount point, and the host's ``/run`` is read-only in the
sandbox, so a socket (or its directory) removed between the walk and ``bwrap``'s setup
-- a service restarting -- failed the command (``Can't create file at /run/...:
Read-only file system``); no ``bwrap`` flag makes a mount conditional on its target
existing (``--ro-bind-try`` skips a missing *source*). And a mask in place held only
until the service replaced its socket: the host's unlink detaches the mount in every
namespace, so a restarted service was reachable from a command still running.

The choice: **``/run`` is rebuilt** (option (a) of the fix). It is an empty tmpfs in
the sandbox, made read-only last; each entry the walk found is put back: sockets as
``/dev/null`` (as before: ``connect`` says "Connection refused"), symbolic links as
links (``/run/shm``), a directory others may write as an empty directory, the hidden
runtime directories (``/run/user``) left to their own mount, a small regular file
copied in, everything else bound back read-only. A directory holding a socket or a
hidden directory (at any depth) is rebuilt the same way inside it; every other
directory is bound back whole, live. All of it lies inside the one tmpfs, whose mount
points ``bwrap`` may create, so nothing the host removes in between can fail the
command: not a socket, not a file, not a whole service directory (then an empty
directory with the masks stands in for it). The walk is breadth first, so a budget
spent deep down leaves the shallow levels, where services keep their sockets, listed
whole.

**Without following a link** (sec6, sec7). ``bwrap`` resolves a bind's source on the
host following links, so an entry bound back by its path shows whatever that path
leads to when ``bwrap`` runs: another user who owns a service directory (a
database's, ``systemd-resolve``'s) could swap its pid file for a link
(``../user/1000``) between the walk and ``bwrap``, and the command would see, at the
pid file's place, the agent's runtime directory with its session bus -- hidden
everywhere else. So each rebuilt directory is opened below its parent's descriptor
(``O_PATH | O_NOFOLLOW``, from ``/run`` down), and what is put back from it goes
through descriptors opened below that one without following a link, checked to be of
the type the walk listed (``_sandbox_fds``):

* a regular file of at most :data:`COPY_BYTES` (pid files, ``resolv.conf``, ``utmp``)
  that a command may read is read here, bounded, into a memory file that ``bwrap``
  copies into the tmpfs (``--file``, no mount: the copy is the sandbox user's, so one
  it may not read -- another user's, read here as root -- is bound as it is, sec8):
  nothing is resolved, and one the host removes after it was opened is copied all the
  same. Root's and the agent's too: it is the cheaper way;
* in another user's directory, anything else (a directory bound whole, a larger
  file) is bound by its descriptor (``--ro-bind-fd``: ``bwrap`` 0.8 here carries
  Debian's backport of 0.10's option). ``bwrap`` binds the path the descriptor's
  ``/proc/self/fd`` link reads as, then compares the mount with the descriptor: a
  swap in between fails the command ("Race condition binding dirfd"), never shows
  something else; a removal in between fails it too ("Can't find source path": the
  link reads ``... (deleted)``). That is the race left: a subdirectory or a large file
  of another user's removed in the instant of ``bwrap``'s setup. A ``bwrap`` whose
  ``--help`` lists no ``--ro-bind-fd`` (before 0.10, without a backport) does not
  rebuild another user's directory: it is bound whole by its path (below root's
  directories only) and its sockets masked in place, as below;
* in root's and the agent's own directories (owned by one of them, no group or other
  write, the same for every directory above: only they can swap an entry there),
  those are bound by path with ``--ro-bind-try``, which skips one gone since the walk
  (a missing source only: one made unsearchable to the agent in that instant would
  still fail ``bwrap``; services do not do that).

The walk lists another user's directories the same way, through a descriptor reached
from ``/run`` without following a link (one swapped for a link after its parent was
listed would have had a hidden directory's names walked and recreated there). An
entry gone, or of another type (a link now), between the walk and its opening is
left out. The type, not the inode, is checked: a file replaced by renaming its next
version over it in that instant is the current one, as a bind by path would show it.
A link found by the walk is recreated as a link, resolved inside the sandbox, where
the hidden directories are hidden. What changes for a command:

* a socket a service creates later, in ``/run`` itself or in a directory that held a
  socket when the command started, is not there (it was reachable before), and a
  restarted service's socket stays masked -- another user's service's too (sec7:
  until then its directory was bound whole and its sockets masked in place, which
  raced the host as below);
* the other entries created later in those rebuilt directories are not visible either,
  and a file there keeps its content from the command's start (a copy): one the host
  rewrites in place or replaces by renaming (``stub-resolv.conf``, which
  ``/etc/resolv.conf`` may link to) -- a command sees ``/run`` as it was when it
  started, but for the directories without sockets, which stay live;
* still reachable: a socket created later in a directory that held none (a service
  restarting in the instant of the walk included), or below the walk's bounds, or in
  a directory the agent may search but not list.

Cost (measured on this 2-core machine, load about 2, one interleaved run each):
``bwrap`` spends about 0.3 ms per bind (each one re-reads the mount table); a tmpfs,
a directory, a link or a copied file costs almost nothing. The rebuild adds one tmpfs,
one remount, one copy per small file and one bind per other entry of ``/run`` and of
each directory holding a socket; sockets stay one bind each. A sandboxed ``true`` here
(9 entries at the top of ``/run``, no sockets) costs what it did before the rebuild
(sec4: 7.7 -> 8.6 ms; sec7: 11.3 -> 11.7 ms, noise). On a desktop-like ``/run`` (a
tree of our own: 40 files and five service directories at the top, two of root's with
20 files and a socket, three of other users'), copying the files instead of binding
them took a sandboxed ``true`` from 31.8 to 15.9 ms (x0.50, 89 descriptors). At most
:data:`REBUILD_ENTRIES` entries are rebuilt (``bwrap`` takes at most 9,000 arguments;
lowering it caps the cost) and :data:`FD_ENTRIES` descriptors held per command (and a
quarter of ``RLIMIT_NOFILE``; the helper takes them in one message: ``_subreaper``),
at least half of them kept for other users' directories (root's files are bound by
path beyond). A directory beyond those budgets, one the walk could not list
completely, or ``/run`` when a shown path holds it (the workspace is ``/``: its bind
would cover the rebuilt ``/run``), is bound back whole -- by path when only root or
the agent may change what is above it, by descriptor otherwise -- and its sockets are
masked in place as before the rebuild, racing the host as before: a socket removed
in the instant fails the command (``bwrap`` creates a missing mount point, and the
host's directory is read-only in the sandbox), and the host's unlink of a masked
socket detaches the mask. At most :data:`MASK_ENTRIES` masks are made in place; a
directory whose masks would go beyond (another user's tree of thousands of sockets)
is hidden whole instead.

The other choice, retrying ``bwrap`` when its setup failed (cheap: the masks stay in
place), needs to know for certain that the command did not start. ``bwrap`` 0.8's
``--json-status-fd`` writes ``exit-code`` only if the command was executed (an internal
pipe written just before ``execvp``), but only once it has ended, so the failed
attempt's message would already be in the command's output; ``--info-fd`` is written
before the setup. A byte written from inside the sandbox before the command (a ``sh``
in front of it, ``bwrap``'s own messages on another descriptor) would do, at one more
``exec`` per command and a change to the spawn path. It would still leave a socket made
later, or a restarted service's, reachable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from ._sandbox_fds import fd_budget, open_dir, open_entry, open_listed
from ._sandbox_hide import inside, mask, real, visible

__all__ = [
    "COPY_BYTES", "DIR_ENTRIES", "FD_ENTRIES", "MASK_ENTRIES", "REBUILD_ENTRIES", "RUN_DEPTH", "RUN_ENTRIES",
    "RunFlags", "run_flags",
]

#: How deep below ``/run``, and over how many entries, the walk looks for sockets.
RUN_DEPTH = 4
RUN_ENTRIES = 4096
#: At most this many entries of one directory are listed (one big directory cannot spend the budget).
DIR_ENTRIES = 512
#: At most this many entries of ``/run`` and its socket-holding directories are rebuilt.
REBUILD_ENTRIES = 1024
#: At most this many masks in place (directories not rebuilt); beyond, a directory is hidden whole.
MASK_ENTRIES = 1024
#: At most this many descriptors per command (another user's entries put back): one message to the helper.
FD_ENTRIES = 200
#: A regular file of another user's up to this size is copied into the sandbox, a larger one bound.
COPY_BYTES = 64 * 1024

_SOCKET, _SHARED, _REPLACED, _LINK, _DIR, _OTHER = range(6)


class _Listing:
    """One directory of the walk: its entries as ``(path, kind, detail)``; ``detail`` is
    a link's target, a directory's own listing (None: not listed), else None."""

    __slots__ = ("complete", "entries", "modes", "path", "targets", "trusted")

    def __init__(self, path: str, trusted: bool) -> None:
        self.path = path
        self.entries: list[tuple[str, int, object]] = []
        self.modes: dict[str, int] = {}  # each entry's type (S_IFMT) as the walk saw it
        self.complete = False  # every entry listed (the walk's budget did not end inside)
        self.targets = False  # a socket or a hidden directory is in it or below it
        self.trusted = trusted  # only root or the agent may change its entries and its path (_trusted)


class RunFlags:
    """What :func:`run_flags` adds to a ``bwrap`` line: ``rebuild`` right after ``/``,
    ``/dev`` and ``/proc`` (before anything is bound into ``/run``), ``in_place`` after
    the binds (the masks not inside the rebuilt ``/run``), ``seal`` last; ``fds``: the
    descriptors ``rebuild`` names (``--file``, ``--ro-bind-fd``), to pass to ``bwrap``
    at the same numbers and to close once it is started."""

    __slots__ = ("fds", "in_place", "rebuild", "seal")

    def __init__(self, rebuild: list[str], in_place: list[str], seal: list[str], fds: list[int] | None = None) -> None:
        self.rebuild, self.in_place, self.seal = rebuild, in_place, seal
        self.fds = fds if fds is not None else []


def run_flags(replaced: Iterable[str], shown: Iterable[str], root: str = "/run",
              options: frozenset[str] | None = None) -> RunFlags:
    """The flags building the sandbox's ``root`` (module docstring). ``replaced``: mount
    points whose content is not the host's (hidden roots, the private ``/tmp``: not
    walked); ``shown``: host paths bound over themselves later (a workspace under
    ``/run``), which may lie below a replaced one. The descriptors in
    :attr:`RunFlags.fds` are the caller's to pass to ``bwrap`` and to close."""
    replaced, shown = [real(p) for p in replaced], [real(p) for p in shown]
    mounts = [("/", True), *((p, False) for p in replaced), *((p, True) for p in shown)]
    top = real(root)
    listing = _Walk(set(replaced), shown).run(top)
    if listing is None:
        return RunFlags([], [], [])
    build = _Rebuild(shown, _InPlace(mounts, shown), options)
    if not build.reserve(listing):
        return RunFlags([], _InPlace(mounts, shown).masks(listing, hideable=False), [])
    try:
        build.run(listing)
    except BaseException:
        build.close()
        raise
    return RunFlags(build.flags, build.in_place, ["--remount-ro", top], build.fds)


class _Rebuild:
    """The rebuild's flags, top down (breadth first) from ``/run``, and the descriptors
    they name (``_sandbox_fds``): each rebuilt directory is opened (below its parent's
    descriptor, never following a link), its small regular files copied in through
    descriptors; its other entries bound back by their paths when only root or the
    agent may change it, else through descriptors too."""

    def __init__(self, shown: list[str], masks: _InPlace, options: frozenset[str] | None) -> None:
        self.shown, self.masks = shown, masks
        # An older bwrap (before 0.10 and its backports) has no --ro-bind-fd: another
        # user's directory is then not rebuilt (bound whole by path below root's, as sec6);
        # before 0.5 no --perms either (a copy gets bwrap's default mode).
        self.bind_fd = options is None or "--ro-bind-fd" in options
        self.perms = options is None or "--perms" in options
        self.budget = REBUILD_ENTRIES
        self.fd_budget = fd_budget(FD_ENTRIES)
        self.spare = self.fd_budget // 2  # kept for other users' directories: root's files then bound
        self.flags: list[str] = []
        self.in_place: list[str] = []
        self.fds: list[int] = []
        self.queue: list[tuple[_Listing, int]] = []

    def reserve(self, listing: _Listing) -> bool:
        """Whether ``listing`` may be rebuilt (:func:`_rebuildable`), with the budgets
        its entries take (one descriptor per entry bound back from another user's)."""
        needed = 0 if listing.trusted else _bound_back(listing)
        if not _rebuildable(listing, self.shown, self.budget) or needed > self.fd_budget \
                or not (listing.trusted or self.bind_fd):
            return False
        self.budget -= len(listing.entries)
        self.fd_budget -= needed
        return True

    def run(self, listing: _Listing) -> None:
        self.flags += ["--tmpfs", listing.path]
        self.queue = [(listing, open_dir(listing.path, -1, by_path=True))]
        while self.queue:
            current, parent = self.queue.pop(0)
            try:
                for entry in current.entries:
                    self._entry(current, entry, parent)
            finally:
                if parent >= 0:
                    os.close(parent)

    def _entry(self, current: _Listing, entry: tuple[str, int, object], parent: int) -> None:
        path, kind, detail = entry
        if kind == _SOCKET:
            self.flags += mask(path, directory=False)
        elif kind == _SHARED:
            self.flags += ["--dir", path]
        elif kind == _LINK:
            self.flags += ["--symlink", str(detail), path]
        elif kind == _DIR and isinstance(detail, _Listing) and detail.targets and self.reserve(detail):
            self.flags += ["--dir", path]
            self.queue.append((detail, open_dir(path, parent, by_path=detail.trusted)))
        elif kind != _REPLACED:
            self.flags += self._put_back(current, path, kind, parent)
            if kind == _DIR and isinstance(detail, _Listing) and detail.targets:
                self.in_place += self.masks.masks(detail)

    def _put_back(self, current: _Listing, path: str, kind: int, parent: int) -> list[str]:
        """A file or a directory bound back whole: through a descriptor when it is
        another user's (reserved), or a small file of root's while descriptors are spare;
        else by its path (only root or the agent may change it, nor anything above)."""
        flags: list[str] | None = None
        if parent >= 0 and not current.trusted:
            flags = open_entry(path, current.modes[path], parent, self.fds, COPY_BYTES, bind=True, perms=self.perms)
        elif parent >= 0 and kind == _OTHER and self.fd_budget > self.spare:
            flags = open_entry(path, current.modes[path], parent, self.fds, COPY_BYTES, bind=False, perms=self.perms)
            self.fd_budget -= 1 if flags else 0
        elif not current.trusted:
            return []  # its directory is gone or changed since the walk: nothing to put back
        return ["--ro-bind-try", path, path] if flags is None else flags

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        for _listing, fd in self.queue:
            if fd >= 0:
                os.close(fd)
        self.queue.clear()


def _bound_back(listing: _Listing) -> int:
    """How many of ``listing``'s entries are bound back (each a descriptor when they are
    another user's): everything but sockets, links, hidden and replaced directories."""
    return sum(kind in (_DIR, _OTHER) for _path, kind, _detail in listing.entries)


def _rebuildable(listing: _Listing, shown: list[str], budget: int) -> bool:
    """Whether ``listing`` may be rebuilt: listed whole, within the budget, and not a
    shown path or below one (its bind would cover the rebuilt directory)."""
    return (listing.complete and len(listing.entries) <= budget
            and not any(inside(listing.path, path) for path in shown))


def _trusted(info: os.stat_result) -> bool:
    """Whether only root or the agent's own user may change the entries of the directory
    ``info`` describes: owned by one of them, and no group or other write."""
    return info.st_uid in (0, os.getuid(), os.geteuid()) and not info.st_mode & 0o022


class _InPlace:
    """The masks over the host's own entries (as before the rebuild) of the directories
    not rebuilt: sockets and hidden directories the sandbox shows. At most
    :data:`MASK_ENTRIES` in all: ``bwrap`` takes at most 9,000 arguments, and another
    user's tree of a few thousand sockets under ``/run`` made every command fail
    (sec6). A directory whose masks would go beyond is hidden whole instead (unless it
    holds a shown path), the biggest first: the masks are made top down."""

    def __init__(self, mounts: list[tuple[str, bool]], shown: list[str]) -> None:
        self.mounts, self.shown = mounts, shown
        self.budget = MASK_ENTRIES

    def masks(self, listing: _Listing, hideable: bool = True) -> list[str]:
        """``listing``'s masks; ``hideable``: it may be hidden whole (not ``/run`` itself)."""
        if hideable and _count(listing) > self.budget and visible(listing.path, self.mounts) \
                and not any(inside(path, listing.path) for path in self.shown):
            self.budget -= 1
            return mask(listing.path, directory=True)
        flags: list[str] = []
        for path, kind, detail in listing.entries:
            if kind in (_SOCKET, _SHARED) and visible(path, self.mounts):
                self.budget -= 1
                flags += mask(path, directory=kind == _SHARED)
            elif isinstance(detail, _Listing):
                flags += self.masks(detail)
        return flags


def _count(listing: _Listing) -> int:
    """The sockets and hidden directories in ``listing``'s subtree (as walked)."""
    return sum(1 if kind in (_SOCKET, _SHARED) else _count(detail) if isinstance(detail, _Listing) else 0
               for _path, kind, detail in listing.entries)


class _Walk:
    """One bounded walk of ``/run``: every entry of each directory it lists. A directory
    that a user other than its owner may write is hidden whole, not walked: anyone may
    make a socket there after the walk (a channel out with the network off). One that
    holds a path the sandbox shows (a workspace below it) is walked as any other."""

    def __init__(self, skip: set[str], shown: list[str]) -> None:
        self.skip, self.shown = skip, shown
        self.budget = RUN_ENTRIES
        self.top = "/run"
        self.queue: list[tuple[_Listing, int]] = []  # trusted directories (root's, the agent's)
        self.later: list[tuple[_Listing, int]] = []  # other users' (and ones others may write)

    def run(self, top: str) -> _Listing | None:
        """``top``'s listing (None: not listable), walked breadth first: a budget spent
        deep down (``/run/udev/data`` holds an entry per device) leaves the shallow
        directories, where the services keep their sockets, listed whole. A directory the
        budget left unlisted has no entries: it is bound back whole, as before (its
        sockets reachable). So that neither another user nor one big directory can spend
        the budget before root's services are listed (sec6: a directory of a database's
        user holding 5,000 files left ``/run/systemd`` unlisted, ``private`` reachable),
        the directories only root or the agent may change are listed first, and at most
        :data:`DIR_ENTRIES` entries of each (a directory cut there is bound back whole)."""
        try:
            first = _Listing(top, _trusted(os.lstat(top)))
        except OSError:
            return None
        self.top = top
        order: list[_Listing] = []
        self.queue, self.later = [(first, RUN_DEPTH)], []
        while (self.queue or self.later) and self.budget >= 0:
            found, depth = (self.queue or self.later).pop(0)
            if self._list(found, depth) and found is first:
                return None
            order.append(found)
        for found in reversed(order):  # deepest first: a directory's targets include its children's
            found.targets = any(kind in (_SOCKET, _SHARED) or (isinstance(detail, _Listing) and detail.targets)
                                for _path, kind, detail in found.entries)
        return first

    def _list(self, found: _Listing, depth: int) -> bool:
        """List ``found``'s directory; whether it could not be (gone, or not listable by
        us: a search-only directory can hide a socket, not covered)."""
        fd = -1
        try:
            # Another user's directory is listed through a descriptor reached from /run
            # without following a link: one swapped for a link after its parent was listed
            # (to a hidden directory) would otherwise have that directory's names walked.
            fd = -1 if found.trusted else open_listed(found.path, self.top)
            with os.scandir(found.path if fd < 0 else fd) as entries:
                for count, entry in enumerate(entries):
                    self.budget -= 1
                    if self.budget < 0 or count >= DIR_ENTRIES:
                        return False  # incomplete: not rebuilt
                    self._entry(found, entry, depth, fd)
        except OSError:
            found.entries.clear()
            return True
        finally:
            if fd >= 0:
                os.close(fd)
        found.complete = True
        return False

    def _entry(self, found: _Listing, entry: os.DirEntry[str], depth: int, fd: int) -> None:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            return  # gone since it was listed
        mode = info.st_mode
        path, kind = os.path.join(found.path, entry.name), _OTHER
        detail: str | _Listing | None = None
        if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):  # a FIFO is a way to whoever reads it (sec8)
            kind = _SOCKET
        elif stat.S_ISLNK(mode):
            try:
                detail, kind = os.readlink(path) if fd < 0 else os.readlink(entry.name, dir_fd=fd), _LINK
            except OSError:
                return  # gone since it was listed
        elif stat.S_ISDIR(mode) and path in self.skip:
            kind = _REPLACED
        elif stat.S_ISDIR(mode) and mode & 0o022 and not any(inside(shown, path) for shown in self.shown):
            kind = _SHARED
        elif stat.S_ISDIR(mode) and depth > 1:
            kind, detail = _DIR, _Listing(path, found.trusted and _trusted(info))  # its path too
            (self.queue if detail.trusted else self.later).append((detail, depth - 1))
        found.entries.append((path, kind, detail))
        found.modes[path] = stat.S_IFMT(mode)
