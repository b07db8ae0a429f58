"""Writing a rollout: ``RolloutWriter`` appends one session's history changes to its file.

Theory of operation (durability, issue 8; the package docstring has the whole story):

- each history change is one ``os.write`` of whole lines on an ``O_APPEND``
  descriptor, on the Trio thread, so it is in the OS when committed; ``fsync`` runs on
  ``flush`` and close, or after every write with ``fsync="commit"``;
- the writer knows where its last whole line ends (``_size``) and cuts the file back
  there when a write fails part-way, and cuts off a torn last line before it appends;
- it holds ``flock(LOCK_EX | LOCK_NB)`` on its file for its whole life: a second
  writer of the same thread is refused with ``RolloutError``;
- appending to a codex *paginated* file, each line gets the next envelope ordinal
  (``_lines``); only a write that reached the file uses one up.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._private_dirs import make_private_dirs
from .._session.history import History
from ._errors import RolloutError
from ._lines import Parsed, format_line, parse
from ._reading import warn_torn

if TYPE_CHECKING:
    from ._home import FsyncPolicy, RolloutConfig

__all__ = ["RolloutWriter"]

Item = dict[str, Any]


def _locked(path: Path, thread_id: str) -> RolloutError:
    return RolloutError(
        f"the rollout {path} of session {thread_id!r} is locked by another live writer (an agent with the "
        "same session id and rollout home, in this process or another); close that agent first, "
        "or open this one with another session_id"
    )


def _lock(fd: int, path: Path, thread_id: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise _locked(path, thread_id) from exc
    except OSError as exc:
        message = f"cannot lock the rollout {path}: {exc}; keep the rollout home on a local file system"
        raise RolloutError(message) from exc


def _live_rival(config: RolloutConfig, thread_id: str, mine: Path) -> Path | None:
    """Another file of ``thread_id`` whose writer lock is held (by another descriptor)."""
    for other in config._files(thread_id):
        try:
            fd = os.open(other, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if other != mine:
                return other
        finally:
            os.close(fd)
    return None


def _read_fd(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


class RolloutWriter:
    """Appends one session's history changes to its rollout file; see the module
    docstring for what reaches the OS and the disk when.

    The writer holds the file's lock until ``close()``. A failed write raises
    ``RolloutError`` and leaves the file ending at its last whole line.
    """

    def __init__(self, path: Path, fd: int, *, fsync: FsyncPolicy = "flush", size: int = 0) -> None:
        self.path = path
        self._fd: int | None = fd
        self._fsync = fsync
        self._size = size  # where the last whole line ends; we are the only writer (the lock)
        self._dirty = False  # a failed write may have left bytes after ``_size``
        self._ordinal: int | None = None  # a paginated file's next line ordinal (None: legacy, none written)

    @classmethod
    def open(cls, config: RolloutConfig, thread_id: str, meta: dict[str, Any], history: History) -> RolloutWriter:
        """Lock and continue ``thread_id``'s file, or create it with its ``session_meta``
        line, and bring it to ``history`` (the agent's starting history: empty, a
        fork's inherited history, or a resumed session's). Raises ``RolloutError`` when
        another writer holds the file or it cannot be written."""
        writer, created = cls._claim(config, thread_id)
        try:
            rival = _live_rival(config, thread_id, writer.path) if created else None
            if rival is not None:  # another writer started the same new thread meanwhile
                os.unlink(writer.path)
                raise _locked(rival, thread_id)
            writer._start(meta, parse(writer.path, _read_fd(writer._live_fd())), list(history))
        except BaseException as exc:
            writer.close()
            if isinstance(exc, OSError):
                raise RolloutError(f"cannot read or write the rollout {writer.path}: {exc}") from exc
            raise
        return writer

    @classmethod
    def _claim(cls, config: RolloutConfig, thread_id: str) -> tuple[RolloutWriter, bool]:
        path, fd = config.find(thread_id), None
        try:
            if path is None:
                path = config.new_path(thread_id)
                make_private_dirs(path.parent)
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                except FileExistsError:  # another writer created it this very second
                    pass
            created = fd is not None
            if fd is None:
                fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise RolloutError(
                f"cannot open the rollout of session {thread_id!r} under {config.home}: {exc}; "
                "check that the rollout home is a writable directory"
            ) from exc
        try:
            _lock(fd, path, thread_id)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, fsync=config.fsync), created

    def _start(self, meta: dict[str, Any], parsed: Parsed, wanted: list[Item]) -> None:
        self._size = parsed.end
        self._ordinal = parsed.next_ordinal
        if parsed.torn:
            self._truncate()
            warn_torn(self.path, parsed, "cut it off before appending", stacklevel=3)  # open()'s caller
        if parsed.meta is None:
            if parsed.end:
                raise RolloutError(
                    f"{self.path} has no session_meta line, so it is not a trio_agent rollout; "
                    "move it out of the rollout home or use another session id"
                )
            self._write([("session_meta", meta)])
            self.append(wanted)
            return
        written = parsed.history
        if wanted[: len(written)] == written:
            self.append(wanted[len(written):])
        else:  # the file says something else happened: record the history we continue from
            self.rewrite(wanted, reason="resume")

    def append(self, items: list[Item]) -> None:
        """One ``response_item`` line per item, in one write."""
        if items:
            self._write([("response_item", item) for item in items])

    def event(self, payload: dict[str, Any]) -> None:
        """An ``event_msg`` line (``payload`` has its own ``type``); loading skips it."""
        self._write([("event_msg", payload)])

    def rewrite(self, history: list[Item], *, reason: str, message: str = "") -> None:
        """History was replaced (compaction, truncation): a ``compacted`` line whose
        ``replacement_history`` is the whole new history and whose ``message`` is a local
        compaction's summary bridge text ("" otherwise), as codex writes it."""
        payload = {"message": message, "replacement_history": history, "trio_agent_reason": reason}
        self._write([("compacted", payload)])

    def _live_fd(self) -> int:
        if self._fd is None:
            raise RolloutError(f"the rollout {self.path} is closed")
        return self._fd

    def _write(self, lines: list[tuple[str, dict[str, Any]]]) -> None:
        """``lines`` (type, payload) in one write; in a paginated file each with the next
        ordinal, which only a write that succeeded uses up."""
        fd = self._live_fd()
        if self._dirty:
            self._truncate()
        first = self._ordinal
        data = "".join(format_line(kind, payload, None if first is None else first + index)
                       for index, (kind, payload) in enumerate(lines)).encode("utf-8")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            self._dirty = True
            try:
                self._truncate()
            except RolloutError:
                raise RolloutError(f"cannot append to {self.path}: {exc}; the file ends in a partial line") from exc
            raise RolloutError(f"cannot append to {self.path}: {exc}; the partial write was rolled back") from exc
        self._size += len(data)
        if first is not None:
            self._ordinal = first + len(lines)
        if self._fsync == "commit":
            self.flush()

    def _truncate(self) -> None:
        """Cut the file back to its last whole line."""
        try:
            os.ftruncate(self._live_fd(), self._size)
        except OSError as exc:
            raise RolloutError(f"cannot cut {self.path} back to its last whole line (at {self._size}): {exc}") from exc
        self._dirty = False

    def flush(self) -> None:
        """Make everything written so far durable (fsync; it waits on the disk)."""
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise RolloutError(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the file and release its lock (idempotent). Does not fsync: ``flush``
        first (``Rollout.close`` does)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
