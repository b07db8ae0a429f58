"""Rollouts: a session's committed history as a JSONL file, and loading it back.

Layout (Codex-compatible): ``<home>/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<thread id>.jsonl``.
Every line is ``{"timestamp": <RFC 3339 UTC>, "type": ..., "payload": {...}}``: one
``session_meta`` line (written once per thread, also across resumes), then one
``response_item`` line per committed history item, appended as history is committed.
Appends are buffered by the OS; ``flush_rollout()`` fsyncs. ``load_session`` rebuilds a
``SessionSnapshot`` whose history equals the file's ``response_item`` payloads.

Writes are small synchronous appends on the Trio thread (no worker thread); the
fsync in ``flush`` is the only call that may wait on the disk.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, final

import attrs

from ._errors import AgentError, InvalidSessionSnapshot
from ._session.history import History
from ._session.snapshot import SessionSnapshot

__all__ = ["DurableSession", "RolloutConfig", "RolloutError", "RolloutWriter"]


class RolloutError(AgentError):
    """A rollout file could not be written or read."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": _now(), "type": kind, "payload": payload}, separators=(",", ":"),
                      ensure_ascii=False) + "\n"


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
        sessions = self.home / "sessions"
        if not sessions.is_dir():
            return None
        matches = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
        return matches[-1] if matches else None

    def new_path(self, thread_id: str) -> Path:
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
        meta: dict[str, Any] | None = None
        history: list[dict[str, Any]] = []
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                line = json.loads(text)
            except ValueError as exc:
                raise InvalidSessionSnapshot(f"{path}:{number} is not JSON; the rollout is damaged") from exc
            if line.get("type") == "session_meta" and meta is None:
                meta = line["payload"]
            elif line.get("type") == "response_item":
                history.append(line["payload"])
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


def _count_items(path: Path) -> int:
    count = 0
    with path.open(encoding="utf-8") as lines:
        for text in lines:
            if '"type":"response_item"' in text:
                count += 1
    return count


class RolloutWriter:
    """Appends one session's committed history to its rollout file."""

    def __init__(self, path: Path, *, written: int) -> None:
        self.path = path
        self._written = written
        self._file = path.open("a", encoding="utf-8")

    @classmethod
    def open(cls, config: RolloutConfig, thread_id: str, meta: dict[str, Any]) -> RolloutWriter:
        """Continue ``thread_id``'s file (appending after the items already in it) or
        create a new one with its ``session_meta`` line."""
        existing = config.find(thread_id)
        try:
            if existing is not None:
                return cls(existing, written=_count_items(existing))
            path = config.new_path(thread_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as new:
                new.write(_line("session_meta", meta))
            return cls(path, written=0)
        except OSError as exc:
            raise RolloutError(f"cannot write the rollout under {config.home}: {exc}") from exc

    def append(self, history: History) -> None:
        """Write the items of ``history`` not written yet."""
        if len(history) <= self._written:
            return
        try:
            self._file.write("".join(_line("response_item", item) for item in history.since(self._written)))
        except OSError as exc:
            raise RolloutError(f"cannot append to {self.path}: {exc}") from exc
        self._written = len(history)

    def flush(self) -> None:
        """Make everything written so far durable (flush and fsync)."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise RolloutError(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()
