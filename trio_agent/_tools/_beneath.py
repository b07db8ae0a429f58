"""Paths beneath a root directory, looked up without the kernel ever following a symlink.

Theory of operation (issue 21, hole 4)
--------------------------------------
``apply_patch`` writes where the model says, in a tree that commands run by the same
model may change while the patch applies. A path that is checked and then handed to the
kernel as a string is looked up again when it is used, and a directory swapped for a
symlink in between sends the write elsewhere. So nothing here hands the kernel a path of
more than one component: :class:`Beneath` holds a descriptor of the root, and every step
is an ``*at`` call relative to the descriptor of the directory before it, with
``O_NOFOLLOW`` (or ``follow_symlinks=False``), so the kernel follows no symlink at all.

There are two walks:

* :meth:`Beneath.resolve` (to plan) follows symlinks *in user space*, with the semantics
  of ``openat2(RESOLVE_BENEATH)``: a symlink met on the way is read (``readlinkat``) and
  its target put in front of the rest of the path; a relative target goes on from the
  link's directory, an absolute one from the root if it names a place beneath the root's
  real path (``RESOLVE_BENEATH`` refuses those; a user's in-tree absolute link is
  legitimate); ``..`` goes back to the directory the walk came from and never above the
  root. A link or ``..`` that would leave the root raises :class:`Escape` (naming the
  link), more than :data:`MAX_LINKS` links raise :class:`TooManyLinks`. The answer is the
  *canonical* path: its components from the root, none of them a symlink when it was
  looked at; components that do not exist (or sit below a non-directory) are kept as
  given at the end, for what is to be created. ``..`` in the *given* path is a step back
  like any other (callers that want git's lexical meaning normalise first).
* :meth:`Beneath.open_dir` (to use) opens a canonical directory one component at a time
  with ``O_DIRECTORY | O_NOFOLLOW``, creating missing ones with ``mkdirat`` if asked. It
  follows nothing: a component that has become a symlink (or a file) since it was
  resolved raises :class:`Changed`. Files are then created (``O_CREAT | O_EXCL |
  O_NOFOLLOW``), read, renamed and unlinked by a single name relative to that
  descriptor, so a swap between planning and use fails instead of escaping.

A directory held open stays the directory it was: if it is renamed meanwhile, what is
written lands in it wherever it went. In the sandbox that is still the workspace: the
workspace is a mount point of its own there, and a rename across mounts fails (EXDEV).

Why not ``openat2``: it would do :meth:`resolve`'s walk in the kernel (Linux 5.6+), but it
gives no canonical path (which the patch plan keys on and the ``.git`` rule decides on),
refuses in-tree absolute links, and is not on every kernel; one walk in user space has
the same guarantees everywhere: each step is atomic on a descriptor already beneath.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from types import TracebackType

__all__ = ["MAX_LINKS", "Beneath", "Changed", "Escape", "Parts", "TooLarge", "TooManyLinks"]

#: Components of a path beneath the root, as in ``("src", "app.py")``; ``()`` is the root.
Parts = tuple[str, ...]
#: Symlinks one lookup may follow (Linux's own limit, ``MAXSYMLINKS``).
MAX_LINKS = 40
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# What opening a symlink or a file with O_DIRECTORY | O_NOFOLLOW fails with (Linux: ENOTDIR).
_NOT_A_DIRECTORY = frozenset({errno.ENOTDIR, errno.ELOOP})
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


class Escape(Exception):
    """The path leaves the root: through the symlink ``link`` (its canonical path) whose
    target is ``target``, or, when ``link`` is None, by a ``..`` above the root."""

    def __init__(self, link: str | None, target: str | None) -> None:
        self.link, self.target = link, target
        where = f"through the symlink {link} -> {target}" if link is not None else "through '..'"
        super().__init__(f"the path leaves the root {where}")


class TooLarge(OSError):
    """A file holds more bytes than the reader takes (``size``: as many as it saw)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(errno.EFBIG, f"it holds {size} bytes, more than the {limit} this reads")
        self.size = size
        self.limit = limit


class TooManyLinks(Exception):
    """More than :data:`MAX_LINKS` symlinks on the way (a loop, most likely)."""

    def __init__(self, link: str) -> None:
        self.link = link
        super().__init__(f"more than {MAX_LINKS} symlinks to follow (a symlink loop at {link}?)")


class Changed(Exception):
    """A component of a canonical path is no longer a directory (``what`` says what it is
    now): the tree changed between resolving the path and using it."""

    def __init__(self, where: Parts, what: str) -> None:
        self.where, self.what = where, what
        super().__init__(f"{'/'.join(where)} changed while it was in use: it is now {what}")


def _split(path: str) -> list[str]:
    """``path``'s components, empty ones and ``.`` dropped (``..`` kept)."""
    return [part for part in path.split("/") if part not in ("", ".")]


class Beneath:
    """A root directory, held open; lookups that never leave it (module docstring).

    Synchronous; use as a context manager (or call :meth:`close`). Raises ``OSError``
    when the root cannot be opened."""

    def __init__(self, root: Path | str) -> None:
        self.real = os.path.realpath(root)
        self._prefixes = {tuple(_split(self.real)), tuple(_split(os.path.abspath(root)))}
        self._root: int | None = os.open(self.real, _DIR_FLAGS & ~os.O_NOFOLLOW)

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the root descriptor (idempotent)."""
        if self._root is not None:
            os.close(self._root)
            self._root = None

    @property
    def root_fd(self) -> int:
        if self._root is None:
            raise ValueError("the Beneath root is closed")
        return self._root

    # -- resolving (user-space symlinks, never above the root) -----------------------------

    def resolve(self, path: str, *, follow_final: bool = True) -> Parts:
        """The canonical components of ``path`` beneath the root (module docstring).

        With ``follow_final=False`` a final symlink is not followed (the entry itself is
        meant: to unlink it). An absolute ``path`` is taken like an absolute link target.

        Raises:
          Escape: the path (or a symlink on it) leaves the root.
          TooManyLinks: more than :data:`MAX_LINKS` symlinks.
          OSError: a lookup failed otherwise (permission denied, ...).
        """
        walk = _Walk(self.root_fd)
        try:
            walk.push(self._relative(path, None))
            while walk.todo:
                name = walk.todo.pop()
                if name == "..":
                    walk.up()
                elif walk.blocked or (not walk.todo and not follow_final):
                    walk.done.append(name)
                else:
                    target = walk.step(name, final=not walk.todo)
                    if target is not None:
                        walk.push(self._relative(target, walk.count_link(name, target)))
            return tuple(walk.done)
        finally:
            walk.close()

    def _relative(self, target: str, link: str | None) -> list[str]:
        """``target``'s components from where it starts: a relative one as it is, an
        absolute one as the rest after the root (None if it is not beneath the root)."""
        parts = _split(target)
        if not target.startswith("/"):
            return parts
        for prefix in self._prefixes:
            if tuple(parts[: len(prefix)]) == prefix:
                return ["/", *parts[len(prefix) :]]  # "/": start again from the root
        raise Escape(link, target)

    # -- using (nothing followed) ------------------------------------------------------------

    def open_dir(self, parts: Parts, *, create: bool = False, made: list[Parts] | None = None) -> int:
        """A descriptor (``O_PATH``) of the directory ``parts``, walked without following
        anything; missing directories are made if ``create`` (and appended to ``made``).
        The caller closes it.

        Raises:
          Changed: a component is a symlink or not a directory.
          OSError: ``FileNotFoundError`` if one is missing and not ``create``, or another failure.
        """
        fd = os.dup(self.root_fd)
        try:
            for depth, name in enumerate(parts, 1):
                child = _open_child(fd, name, parts[:depth], create, made)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lstat(self, parts: Parts) -> os.stat_result | None:
        """What is at ``parts`` (not following a final symlink), or None if nothing is (or
        a component above it is not a directory). ``parts`` must not be ``()``."""
        try:
            fd = self.open_dir(parts[:-1])
        except (FileNotFoundError, Changed):
            return None
        try:
            return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(fd)

    def read_bytes(self, parts: Parts, *, limit: int) -> tuple[bytes, os.stat_result]:
        """The content and status of the regular file at ``parts``, opened with
        ``O_NOFOLLOW`` (and ``O_NONBLOCK``: a FIFO swapped in does not hang the read),
        at most ``limit`` bytes of it: a sandboxed command makes a terabyte-sized sparse
        file in an instant, and reading it whole would take the agent's memory.

        Raises:
          Changed: a component above it is not a directory; IsADirectoryError: it is
          not a regular file; TooLarge: it holds more than ``limit`` bytes; OSError
          otherwise.
        """
        fd = self.open_dir(parts[:-1])
        try:
            file = os.open(parts[-1], _READ_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        with os.fdopen(file, "rb") as f:
            status = os.fstat(f.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
            if status.st_size > limit:
                raise TooLarge(status.st_size, limit)
            data = f.read(limit + 1)  # bounded even if it grew since the fstat
            if len(data) > limit:
                raise TooLarge(len(data), limit)
            return data, status


def _open_child(fd: int, name: str, where: Parts, create: bool, made: list[Parts] | None) -> int:
    """Open directory ``name`` in ``fd`` without following it; make it first if asked."""
    for _attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if exc.errno not in _NOT_A_DIRECTORY:
                raise
            raise Changed(where, _what(fd, name)) from None
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
            if made is not None:
                made.append(where)
        except FileExistsError:
            pass  # made meanwhile by someone else: open what is there now (once more)
    raise Changed(where, "gone again after it was made")


def _what(fd: int, name: str) -> str:
    try:
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        return "gone"
    return "a symlink" if stat.S_ISLNK(mode) else "not a directory"


class _Walk:
    """The state of one :meth:`Beneath.resolve`: the components still to look at (a stack,
    next on top), those done, and a descriptor of each directory on the way."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.todo: list[str] = []
        self.done: list[str] = []
        self.fds: list[int] = []  # fds[i] is the directory done[: i + 1]
        self.blocked = False  # a component was missing or not a directory: the rest is as given
        self.links = 0
        self.via: tuple[str, str] | None = None  # the last symlink followed, for Escape

    @property
    def here(self) -> int:
        return self.fds[-1] if self.fds else self.root

    def push(self, parts: list[str]) -> None:
        if parts[:1] == ["/"]:
            self.close()
            self.done.clear()
            self.blocked = False
            parts = parts[1:]
        self.todo.extend(reversed(parts))

    def up(self) -> None:
        if not self.done:
            raise Escape(*self.via) if self.via is not None else Escape(None, None)
        if self.blocked and len(self.done) > len(self.fds):
            self.done.pop()
            self.blocked = len(self.done) > len(self.fds)
            return
        self.done.pop()
        os.close(self.fds.pop())

    def step(self, name: str, *, final: bool) -> str | None:
        """Look at ``name`` in the current directory; the symlink target to follow, or None."""
        if not final:
            try:
                self.fds.append(os.open(name, _DIR_FLAGS, dir_fd=self.here))
                self.done.append(name)
                return None
            except FileNotFoundError:
                self._stop(name)
                return None
            except OSError as exc:
                if exc.errno not in _NOT_A_DIRECTORY:
                    raise
                # a symlink (read below) or a file
        try:
            return os.readlink(name, dir_fd=self.here)
        except FileNotFoundError:
            self._stop(name)
            return None
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: it is there and not a symlink
                raise
        if final:
            self.done.append(name)
        else:
            self._stop(name)  # a file where a directory should be
        return None

    def _stop(self, name: str) -> None:
        """``name`` is missing or not a directory: it and the rest are kept as given."""
        self.done.append(name)
        self.blocked = True

    def count_link(self, name: str, target: str) -> str:
        """Count the symlink ``name`` (to ``target``) about to be followed; its path."""
        self.links += 1
        link = "/".join((*self.done, name))
        if self.links > MAX_LINKS:
            raise TooManyLinks(link)
        self.via = (link, target)
        return link

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())
