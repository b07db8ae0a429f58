"""Rollouts: a session's committed history as a JSONL file, and loading it back.

Layout (Codex-compatible): ``<home>/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<thread id>.jsonl``.
Every line is ``{"timestamp": <RFC 3339 UTC>, "type": ..., "payload": {...}}``: one
``session_meta`` line (written once per thread, also across resumes), then one
``response_item`` line per committed history item, appended as history is committed,
and a ``compacted`` line with ``replacement_history`` whenever history is rewritten
(compaction, or truncating tool outputs that no longer fit), so the file always
describes exactly the live history. ``load_session`` rebuilds a ``SessionSnapshot``
from it (``response_item`` lines append, a ``compacted`` line replaces).

Writes are small synchronous ``os.write`` calls on the Trio thread (no worker
thread, no Python-side buffer): a committed item is in the operating system when
it is committed. The fsync in ``flush`` is the only call that may wait on the disk.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, final

import attrs

from ._errors import AgentError, InvalidSessionSnapshot
from ._ids import session_id_problem
from ._jsontext import dumps
from ._session.history import History
from ._session.snapshot import SessionSnapshot

__all__ = ["DurableSession", "RolloutConfig", "RolloutError", "RolloutWriter"]


class RolloutError(AgentError):
    """A rollout file could not be written or read."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _line(kind: str, payload: dict[str, Any]) -> str:
    return dumps({"timestamp": _now(), "type": kind, "payload": payload}) + "\n"


def _check_thread_id(thread_id: str) -> None:
    problem = session_id_problem(thread_id)
    if problem is not None:
        raise InvalidSessionSnapshot(
            f"{thread_id!r:.80} is not a valid thread id: {problem}; pass the session id of an agent"
        )


@final
@attrs.frozen
class DurableSession:
    """A session loaded from its rollout (``RolloutConfig.load_session``)."""

    thread_id: str
    workspace: str
    rollout_path: Path
    snapshot: SessionSnapshot
    rollout_config: RolloutConfig

    def into_parts(self) -> tuple[str, SessionSnapshot, RolloutConfig]:
        """``(thread_id, snapshot, rollout_config)``: pass them as ``session_id=``,
        ``resume=`` and ``rollout=`` to continue the same thread and file."""
        return self.thread_id, self.snapshot, self.rollout_config


@final
@attrs.frozen
class RolloutConfig:
    """Where rollouts live: ``RolloutConfig(home)``."""

    home: Path = attrs.field(converter=Path)

    def find(self, thread_id: str) -> Path | None:
        """The rollout file of ``thread_id``, if one exists."""
        _check_thread_id(thread_id)
        sessions = self.home / "sessions"
        if not sessions.is_dir():
            return None
        matches = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
        return matches[-1] if matches else None

    def new_path(self, thread_id: str) -> Path:
        """Where a new rollout of ``thread_id`` goes (always inside ``home``)."""
        _check_thread_id(thread_id)
        now = datetime.datetime.now()
        folder = self.home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
        return folder / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{thread_id}.jsonl"

    def load_session(self, thread_id: str) -> DurableSession:
        """Rebuild the session of ``thread_id`` from its rollout."""
        path = self.find(thread_id)
        if path is None:
            raise InvalidSessionSnapshot(
                f"no rollout for thread {thread_id!r} under {self.home}; check the thread id and rollout home"
            )
        meta, history = read_history(path)
        if meta is None:
            raise InvalidSessionSnapshot(f"{path} has no session_meta line; it is not a trio_agent rollout")
        snapshot = SessionSnapshot(
            model=meta.get("model", ""),
            lineage_id=meta.get("lineage_id", thread_id),
            prompt_cache_key=thread_id,
            workspace=meta.get("cwd", ""),
            request_prefix=[],
            history=history,
            instructions=(meta.get("base_instructions") or {}).get("text"),
        )
        return DurableSession(thread_id, snapshot.workspace, path.resolve(), snapshot, self)


def read_history(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The ``session_meta`` payload and the history a rollout file describes.

    ``response_item`` lines append; a ``compacted`` line with ``replacement_history``
    replaces everything before it (as the Codex CLI does on resume). Raises
    ``InvalidSessionSnapshot`` for a line that is not JSON.
    """
    meta: dict[str, Any] | None = None
    history: list[dict[str, Any]] = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            line = json.loads(text)
        except ValueError as exc:
            raise InvalidSessionSnapshot(f"{path}:{number} is not JSON; the rollout is damaged") from exc
        kind = line.get("type") if isinstance(line, dict) else None
        payload = line.get("payload") if isinstance(line, dict) else None
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta" and meta is None:
            meta = payload
        elif kind == "response_item":
            history.append(payload)
        elif kind == "compacted" and isinstance(payload.get("replacement_history"), list):
            history = list(payload["replacement_history"])
    return meta, history


class RolloutWriter:
    """Appends one session's history changes to its rollout file.

    The file is opened ``O_APPEND`` and every change is one ``os.write`` of whole
    lines, so a committed item is in the operating system (it survives the process
    being killed) as soon as it is written; ``flush`` fsyncs for power-loss
    durability.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def open(cls, config: RolloutConfig, thread_id: str, meta: dict[str, Any], history: History) -> RolloutWriter:
        """Continue ``thread_id``'s file or create it with its ``session_meta`` line, and
        bring it to ``history`` (the agent's starting history: empty, a fork's
        inherited history, or a resumed session's)."""
        existing = config.find(thread_id)
        try:
            if existing is None:
                path = config.new_path(thread_id)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
                writer = cls(path, fd)
                writer._write(_line("session_meta", meta))
                writer.append(list(history))
                return writer
            _, written = read_history(existing)
            writer = cls(existing, os.open(existing, os.O_WRONLY | os.O_APPEND))
        except OSError as exc:
            raise RolloutError(f"cannot write the rollout under {config.home}: {exc}") from exc
        wanted = list(history)
        if wanted[: len(written)] == written:
            writer.append(wanted[len(written):])
        else:  # the file says something else happened: record the history we continue from
            writer.rewrite(wanted, reason="resume")
        return writer

    def append(self, items: list[dict[str, Any]]) -> None:
        """One ``response_item`` line per item."""
        if items:
            self._write("".join(_line("response_item", item) for item in items))

    def rewrite(self, history: list[dict[str, Any]], *, reason: str) -> None:
        """History was replaced (compaction, truncation): a ``compacted`` line whose
        ``replacement_history`` is the whole new history."""
        payload = {"message": "", "replacement_history": history, "trio_agent_reason": reason}
        self._write(_line("compacted", payload))

    def _write(self, text: str) -> None:
        if self._fd is None:
            raise RolloutError(f"the rollout {self.path} is closed")
        data = text.encode("utf-8")
        try:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
        except OSError as exc:
            raise RolloutError(f"cannot append to {self.path}: {exc}") from exc

    def flush(self) -> None:
        """Make everything written so far durable (fsync)."""
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise RolloutError(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
