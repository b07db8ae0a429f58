"""Writing a planned patch to disk without following a symlink (``apply_patch`` phase 3).

Theory of operation
-------------------
The plan names every file by its canonical path beneath the workspace (``_beneath``).
Committing opens each parent directory along that path with ``O_DIRECTORY |
O_NOFOLLOW`` from the root descriptor (making missing ones with ``mkdirat``), one
descriptor per directory for the whole commit, and then:

1. stages every new file body as a temporary file created in that directory
   (``O_CREAT | O_EXCL | O_NOFOLLOW``, the old file's permission bits, fsynced), and
   opens the directory of every entry to delete;
2. renames each temporary file onto its name (``renameat`` within the same directory
   descriptor) and unlinks deleted entries (``unlinkat``).

A component that has become a symlink (or a file) since planning raises
``_beneath.Changed`` in the first step: the temporary files and the directories made for
them are removed, and nothing has changed. The second step only works in directories
already open, so a swap then cannot redirect it; if it fails anyway (a full disk, a
directory put where a file was), the error says that some files may have changed.
Nothing here passes the kernel a path of more than one component, so no swap can send
a write outside the workspace.

Each distinct directory of a patch is held open until the commit ends: a patch that
writes into more directories than the process may open files fails with ``Too many open
files`` (and changes nothing).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping

import attrs

from ._beneath import Beneath, Changed, Parts
from ._patch_parse import PatchError

__all__ = ["Pending", "commit"]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_STEM_BYTES = 100  # of the file name kept in its temp file's name (NAME_MAX is 255)


@attrs.define
class Pending:
    """The planned final state of one file; ``lines is None`` means deleted (the entry
    ``unlink_at`` is unlinked)."""

    lines: tuple[str, ...] | None
    newline: str = "\n"
    mode: int | None = None
    unlink_at: Parts | None = None


class _Dirs:
    """The directories of one commit, each opened once without following a symlink."""

    def __init__(self, fs: Beneath) -> None:
        self._fs = fs
        self._open: dict[Parts, int] = {}
        self.made: list[Parts] = []

    def get(self, parts: Parts, *, create: bool) -> int:
        fd = self._open.get(parts)
        if fd is None:
            fd = self._fs.open_dir(parts, create=create, made=self.made)
            self._open[parts] = fd
        return fd

    def remove_made(self) -> None:
        """Remove the directories this commit made (the deepest first), if still empty."""
        for parts in sorted(self.made, key=len, reverse=True):
            with contextlib.suppress(OSError, Changed):
                parent = self.get(parts[:-1], create=False)
                os.rmdir(parts[-1], dir_fd=parent)

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


def _encode(entry: Pending, shown: str) -> bytes:
    lines = entry.lines or ()
    text = "".join(line + entry.newline for line in lines)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise PatchError(f"Cannot write {shown}: the new content is not encodable.") from exc


def commit(fs: Beneath, pending: Mapping[Parts, Pending]) -> None:
    """Stage every write as a temp file, then move them into place and unlink deletions."""
    writes = [(parts, _encode(entry, "/".join(parts)), entry.mode)
              for parts, entry in pending.items() if entry.lines is not None]
    unlinks = [entry.unlink_at for entry in pending.values() if entry.lines is None and entry.unlink_at is not None]
    dirs = _Dirs(fs)
    staged: list[tuple[int, str, str]] = []  # (directory fd, temp name, final name)
    doomed: list[tuple[int, str]] = []  # (directory fd, name to unlink)
    try:
        try:
            for parts, data, mode in writes:
                directory = dirs.get(parts[:-1], create=True)
                staged.append((directory, _stage(directory, parts[-1], data, mode), parts[-1]))
            for parts in unlinks:  # opened now too: nothing is changed before all are open
                with contextlib.suppress(FileNotFoundError):
                    doomed.append((dirs.get(parts[:-1], create=False), parts[-1]))
        except (OSError, Changed) as exc:
            _discard(staged)
            dirs.remove_made()
            raise PatchError(f"Failed to write files: {exc}. No files were changed.") from exc
        try:
            for directory, tmp, name in staged:
                os.rename(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
            for directory, name in doomed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
        except OSError as exc:
            _discard(staged)
            raise PatchError(
                f"Failed while applying the patch: {exc}. Some files may already have "
                "changed; re-read them before retrying."
            ) from exc
    finally:
        dirs.close()


def _stage(directory: int, name: str, data: bytes, mode: int | None) -> str:
    """Write ``data`` to a new temp file beside ``name`` in ``directory``; its name."""
    stem = os.fsdecode(os.fsencode(name)[:_STEM_BYTES])
    tmp = f".{stem}.{secrets.token_hex(4)}.apply_patch.tmp"
    fd = os.open(tmp, _CREATE, 0o666 if mode is None else mode, dir_fd=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise
    return tmp


def _discard(staged: list[tuple[int, str, str]]) -> None:
    for directory, tmp, _name in staged:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
