"""Rollouts: a session's committed history as a JSONL file, and loading it back.

Layout (Codex-compatible): ``<home>/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<thread id>.jsonl``.
Every line is ``{"timestamp": <RFC 3339 UTC>, "type": ..., "payload": {...}}``: one
``session_meta`` line (written once per thread, also across resumes), then one
``response_item`` line per committed history item, appended as history is committed,
and a ``compacted`` line with ``replacement_history`` whenever history is rewritten
(compaction, or truncating tool outputs that no longer fit), so the file always
describes exactly the live history. ``load_session`` rebuilds a ``SessionSnapshot``
from it (``response_item`` lines append, a ``compacted`` line replaces).

Theory of operation (durability, issue 8):

- *In the OS when committed.* Each history change is one ``os.write`` of whole lines
  on an ``O_APPEND`` descriptor, on the Trio thread (no worker thread, no Python-side
  buffer), so a committed item survives the process being killed as soon as it is
  committed. ``fsync`` is the only call that may wait on the disk: on
  ``flush_rollout()`` and close, or after every commit with ``fsync="commit"``.
- *A line is committed when its newline is.* A process killed in the middle of a
  write can leave a *torn last line* (bytes without their newline). Readers skip it
  with a ``RolloutWarning``; a writer resuming the file cuts it off before appending.
  Anything unreadable before the last newline is damage: ``InvalidSessionSnapshot``
  naming the file, line and what was wrong (what counts as damage: ``_rollout_lines``).
- *A failed write is rolled back.* The writer knows where its last whole line ends
  and cuts the file back there when a write fails part-way (disk full, file size
  limit), so later appends never glue onto a fragment.
- *A killed turn is closed on load.* The journal's lines (``TurnJournal``) say which
  turn began and never ended; ``load_session`` answers its open calls, commits its
  prompt if it had not reached the file, and adds the ``<turn_aborted>`` marker
  (once; ``_rollout_closing``), so the next request tells the model what the thread
  view (``trio-agent serve``) shows: that turn, interrupted, with what it committed.
- *One writer per thread.* A writer holds ``flock(LOCK_EX | LOCK_NB)`` on its file for
  its whole life; a second writer of the same thread, in this process or another, is
  refused with ``RolloutError``. The kernel drops the lock when the descriptor is closed
  or its process dies, SIGKILL included (descriptors are not inherited by commands).
- *Codex's files stay codex's.* A resumed codex rollout is appended to in its own
  format: a *paginated* one (``history_mode: "paginated"``, every line numbered by an
  envelope ``ordinal``) gets the ordinals that continue its sequence on every line we
  write -- codex refuses a file whose last line has none -- and only a write that
  reached the file uses one up; a legacy one gets none, as codex writes it.

Resuming (issue 24): ``load_session(thread_id, workspace=...)`` or
``RolloutConfig.load_file(path)`` give a ``DurableSession``; its ``resume_config(config)``
is ``config`` with everything a resume needs that a user would otherwise have to know:
the session id, the rollout, the snapshot, the session's own instructions (a codex
session's base prompt), and the workspace -- the recorded one, or the one chosen when
loading, since the recorded directory may be gone.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, final, get_args

import attrs

from ._errors import AgentError, ConfigError, InvalidSessionSnapshot
from ._ids import session_id_problem
from ._jsontext import dumps
from ._rollout_closing import INTERRUPTED_OUTPUT, INTERRUPTED_TEXT, close_interrupted_turn
from ._rollout_lines import Parsed, parse
from ._session.history import History
from ._session.snapshot import SessionSnapshot

if TYPE_CHECKING:
    from ._config import AgentConfig

__all__ = ["INTERRUPTED_OUTPUT", "INTERRUPTED_TEXT", "DurableSession", "FsyncPolicy", "RolloutConfig", "RolloutError",
           "RolloutWarning", "RolloutWriter", "read_history"]

Item = dict[str, Any]
FsyncPolicy = Literal["flush", "commit"]

# What the model is told about a turn its process did not live to finish (load_session).


class RolloutError(AgentError):
    """A rollout file could not be written, read or locked.

    Raised by ``open_agent`` when the session's rollout cannot be opened (another live
    writer holds it, the home is not writable), and by ``flush_rollout()`` when a write
    or fsync failed.
    """


class RolloutWarning(UserWarning):
    """A rollout was usable, but not clean (issued with ``warnings.warn``).

    Issued when a torn last line (a process died mid-write) is skipped by
    ``read_history``/``load_session`` or cut off by a resuming writer, and when an
    agent closes with history it could not write or fsync. Filter it with the
    ``warnings`` module; make it an error (``-W error::...``) to refuse such files.
    """


def rollout_timestamp() -> str:
    """Now, as the RFC 3339 UTC millisecond timestamp every rollout line carries."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


_now = rollout_timestamp


def _line(kind: str, payload: dict[str, Any], ordinal: int | None = None) -> str:
    if ordinal is None:
        return dumps({"timestamp": _now(), "type": kind, "payload": payload}) + "\n"
    return dumps({"timestamp": _now(), "ordinal": ordinal, "type": kind, "payload": payload}) + "\n"


def _check_thread_id(thread_id: str) -> None:
    problem = session_id_problem(thread_id)
    if problem is not None:
        raise InvalidSessionSnapshot(
            f"{thread_id!r:.80} is not a valid thread id: {problem}; pass the session id of an agent"
        )


def _check_fsync(instance: object, attribute: object, value: object) -> None:
    if value not in get_args(FsyncPolicy):
        raise ConfigError(f"RolloutConfig(fsync={value!r:.40}) is not a policy; pass fsync='flush' or fsync='commit'")


@final
@attrs.frozen
class DurableSession:
    """A session loaded from its rollout (``RolloutConfig.load_session``).

    ``interrupted_calls`` are the ids of tool calls the file holds without an output
    (the process died mid-turn); the snapshot answers each as aborted and closes the
    turn with a ``<turn_aborted>`` message so it can be resumed.
    """

    thread_id: str
    workspace: str
    rollout_path: Path
    snapshot: SessionSnapshot
    rollout_config: RolloutConfig
    interrupted_calls: tuple[str, ...] = ()

    def into_parts(self) -> tuple[str, SessionSnapshot, RolloutConfig]:
        """``(thread_id, snapshot, rollout_config)``: pass them as ``session_id=``,
        ``resume=`` and ``rollout=`` to continue the same thread and file."""
        return self.thread_id, self.snapshot, self.rollout_config

    @property
    def instructions(self) -> str | None:
        """The session's own instructions (its ``session_meta.base_instructions``: ours,
        or codex's base prompt), which a resuming agent must use; None when the file
        records none (any instructions resume it)."""
        return self.snapshot.instructions

    def in_workspace(self, workspace: str | os.PathLike[str]) -> DurableSession:
        """The same session, to be resumed in ``workspace`` instead of the directory it
        recorded (gone, or moved): the snapshot's workspace becomes it, so ``resume=``
        accepts an agent running there, and -- when that is another directory and the
        session has history -- its history ends with a new ``<environment_context>``
        message naming it (and its ``AGENTS.md``), as codex tells the model on a resume
        in another directory; a resumed agent's rollout records it when the agent opens."""
        where = os.path.realpath(workspace)
        history = self.snapshot.history
        if history and (not self.workspace or os.path.realpath(self.workspace) != where):
            from ._ids import new_item_id
            from ._runtime._context_io import context_user_message

            history = [*history, {"type": "message", "id": new_item_id("message"), **context_user_message(Path(where))}]
        snapshot = attrs.evolve(self.snapshot, workspace=where, history=history)
        return attrs.evolve(self, workspace=where, snapshot=snapshot)

    def resume_config(self, config: AgentConfig) -> AgentConfig:
        """``config`` set to continue this session in its own file: its ``session_id``,
        ``rollout``, ``resume=`` snapshot (none for a session without history yet: the
        agent continues the file from the start), the session's ``workspace`` (choose
        another with ``load_session(..., workspace=)``) and its ``instructions`` when it
        records any. Everything else -- auth, model, tools, sandbox -- is ``config``'s.
        Raises what ``AgentConfig`` raises (``ConfigError``, ``InvalidSessionSnapshot``)."""
        return attrs.evolve(
            config, session_id=self.thread_id, rollout=self.rollout_config, workspace=Path(self.workspace),
            resume=self.snapshot if self.snapshot.history else None,
            instructions=self.instructions if self.instructions is not None else config.instructions,
        )


@attrs.frozen  # not final: trio-agent serve's ``IndexedRollouts`` finds rollouts through its index
class RolloutConfig:
    """Where rollouts live and when they reach the disk: ``RolloutConfig(home, fsync="flush")``.

    Whatever the policy, a committed item is written to the OS when it is committed
    (one ``os.write``): it survives the process being killed. ``fsync`` says when it
    also survives the machine losing power:

    - ``"flush"`` (default): fsync on ``agent.flush_rollout()`` and when the agent
      closes. A commit costs only its write; a crash of the machine can lose what was
      committed since the last fsync.
    - ``"commit"``: fsync after every write, so each commit is on disk before the turn
      goes on. The fsync runs on the Trio thread and blocks the event loop (every agent
      of the process) until the disk answers. A turn with one tool call commits about
      five times.

    Measured on the development machine (2-vCPU Firecracker VM, ext4 on virtio-blk,
    Linux 6.18), 1000 appends each: the write alone 2 us (300-byte line) to 16 us
    (64 KiB); an fsync after it median 0.15-0.23 ms, p99 0.3-1.5 ms, worst 3.2 ms.
    That virtual disk acknowledges fast; a physical disk without a write cache or a
    network file system can be 10-100 times slower per fsync.

    Raises ``ConfigError`` for any other ``fsync`` value.
    """

    home: Path = attrs.field(converter=Path)
    fsync: FsyncPolicy = attrs.field(default="flush", validator=_check_fsync)
    # The Codex provider id written in ``session_meta.model_provider``. Codex refuses to
    # resume a rollout whose provider differs from the one it is configured with, so the
    # default (None) omits the field and codex uses its own; set it (e.g. "openai") only
    # to pin the provider a resuming codex must use.
    model_provider: str | None = attrs.field(default=None)

    def find(self, thread_id: str) -> Path | None:
        """The rollout file of ``thread_id``, if one exists."""
        found = self._files(thread_id)
        return found[-1] if found else None

    def _files(self, thread_id: str) -> list[Path]:
        _check_thread_id(thread_id)
        sessions = self.home / "sessions"
        if not sessions.is_dir():
            return []
        return sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))

    def new_path(self, thread_id: str) -> Path:
        """Where a new rollout of ``thread_id`` goes (always inside ``home``)."""
        _check_thread_id(thread_id)
        now = datetime.datetime.now()
        folder = self.home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
        return folder / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{thread_id}.jsonl"

    def load_session(self, thread_id: str, *, workspace: str | os.PathLike[str] | None = None) -> DurableSession:
        """Rebuild the session of ``thread_id`` from its rollout, ready to resume
        (``DurableSession.resume_config`` makes the agent's config of it).

        ``workspace`` is where the resumed agent runs: by default the one the session
        recorded (``session_meta.cwd``), which an agent can resume only while it is a
        directory; another one (that recorded directory is gone, or the work moved)
        becomes the snapshot's, so ``resume=`` accepts it.

        A torn last line is skipped with a ``RolloutWarning``; a damaged line before it
        raises ``InvalidSessionSnapshot``, as does a ``session_meta.id`` other than the
        thread id. Tool calls left without an output by a process that died mid-turn
        are answered as aborted (``interrupted_calls``), and a turn it began and never
        ended (the journal's ``task_started`` without its end) is closed with the
        ``<turn_aborted>`` marker, as a cancelled turn is. Reading takes no lock: a
        live agent's file loads as far as it is written. Codex's rollouts load too
        (their ``base_instructions`` become ``instructions``); appending to one keeps
        it resumable by codex (``RolloutWriter``).
        """
        path = self.find(thread_id)
        if path is None:
            raise InvalidSessionSnapshot(
                f"no rollout for thread {thread_id!r} under {self.home}; check the thread id and rollout home"
            )
        parsed = _read(path, "skipped it; the session loads without it")
        meta = parsed.meta
        if meta is None:
            raise InvalidSessionSnapshot(f"{path} has no session_meta line; it is not a trio_agent rollout")
        if isinstance(meta.get("id"), str) and meta["id"] != thread_id:
            raise InvalidSessionSnapshot(
                f"{path} records session {meta['id']!r:.80}, but its name says {thread_id!r}; rename it after its "
                "session_meta.id or move it out of the rollout home"
            )
        history, interrupted = close_interrupted_turn(parsed.history, parsed.last_turn)
        snapshot = SessionSnapshot(
            model=_text(meta, "model", ""),
            lineage_id=_text(meta, "lineage_id", thread_id),
            prompt_cache_key=thread_id,
            workspace=_text(meta, "cwd", ""),
            request_prefix=[],
            history=history,
            instructions=(meta.get("base_instructions") or {}).get("text"),
        )
        session = DurableSession(thread_id, snapshot.workspace, path.resolve(), snapshot, self, interrupted)
        return session if workspace is None else session.in_workspace(workspace)

    @classmethod
    def load_file(cls, path: str | os.PathLike[str], *, workspace: str | os.PathLike[str] | None = None,
                  fsync: FsyncPolicy = "flush") -> DurableSession:
        """``load_session`` of the rollout file ``path`` (ours or codex's), with the home
        it lies in (``<home>/sessions/YYYY/MM/DD/rollout-...-<thread id>.jsonl``) as the
        session's ``rollout_config``, so a resumed agent appends to that very file.
        ``InvalidSessionSnapshot`` when the file is not so placed or named, or when the
        home holds a newer file of the same thread."""
        from ._rollout_files import home_of

        home, thread_id = home_of(Path(path))
        config = cls(home, fsync=fsync)
        found = config.find(thread_id)
        if found is None or found.resolve() != Path(path).expanduser().resolve():
            raise InvalidSessionSnapshot(
                f"{home} holds a newer rollout of session {thread_id!r} ({found}); resume that one by its id"
            )
        return config.load_session(thread_id, workspace=workspace)


# -- reading ------------------------------------------------------------------------------


def read_history(path: Path) -> tuple[dict[str, Any] | None, list[Item]]:
    """The ``session_meta`` payload and the history a rollout file describes, as written.

    ``response_item`` lines append; a ``compacted`` line with ``replacement_history``
    replaces everything before it (as the Codex CLI does on resume). A torn last line
    is skipped with a ``RolloutWarning``; raises ``InvalidSessionSnapshot`` for a
    damaged line before it (not UTF-8 JSON, nested too deep, or not a rollout line of
    the right shape), and ``RolloutError`` when the file cannot be read.
    """
    parsed = _read(path, "skipped it")
    return parsed.meta, parsed.history


def _read(path: Path, action: str) -> Parsed:
    """Parse ``path`` for ``read_history``/``load_session``; a warning names their caller."""
    try:
        parsed = parse(path, path.read_bytes())
    except OSError as exc:
        raise RolloutError(f"cannot read the rollout {path}: {exc}") from exc
    _warn_torn(path, parsed, action, stacklevel=3)
    return parsed


def _text(meta: dict[str, Any], key: str, default: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) else default


def _warn_torn(path: Path, parsed: Parsed, action: str, *, stacklevel: int) -> None:
    """``stacklevel`` counts from the caller of ``_warn_torn`` (1)."""
    if parsed.torn:
        message = (f"the rollout {path} ends with a torn line ({parsed.torn} bytes without a newline at byte "
                   f"{parsed.end}: its writer died mid-write, or is writing it now; none of it is committed); "
                   f"{action}")
        warnings.warn(RolloutWarning(message), stacklevel=stacklevel + 1)


# -- writing ------------------------------------------------------------------------------


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
                path.parent.mkdir(parents=True, exist_ok=True)
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
            _warn_torn(self.path, parsed, "cut it off before appending", stacklevel=3)  # open()'s caller
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
        data = "".join(_line(kind, payload, None if first is None else first + index)
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
