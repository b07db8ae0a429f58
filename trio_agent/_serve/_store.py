"""The server's own record of each durable thread, beside its rollout.

``<home>/app-server/threads/<thread id>.jsonl``: one ``meta`` line when the thread is
created (model, cwd, dynamic tools, instructions: what a cold resume must rebuild),
then one ``turn`` line per finished turn (its wire id, status, items and times, and
the thread's token usage total), so ``thread/read``, ``thread/list`` and a cold
``thread/resume`` show the same turns, with the same ids, as the live thread did. The
rollout stays the truth of the conversation (what the model sees); this file is the
protocol's view of it. Ephemeral threads write nothing.

Each line is one ``os.write`` on an ``O_APPEND`` descriptor (the rollout's policy): a
torn last line left by a killed process is skipped when read. Writing never fails a
turn: an ``OSError`` is reported once on stderr and the thread goes on.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .._jsontext import dumps
from ._shapes import ThreadMeta, TurnRecord

__all__ = ["StoredThread", "ThreadStore"]


@attrs.frozen
class StoredThread:
    meta: ThreadMeta
    turns: list[TurnRecord]
    usage_total: dict[str, Any] | None


class ThreadStore:
    def __init__(self, home: Path) -> None:
        self.folder = home / "app-server" / "threads"
        self._reported = False

    def _path(self, thread_id: str) -> Path:
        return self.folder / f"{thread_id}.jsonl"

    def _append(self, thread_id: str, line: dict[str, Any]) -> None:
        data = (dumps(line) + "\n").encode("utf-8")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path(thread_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._reported:
                self._reported = True
                print(f"trio-agent serve: cannot write the thread record under {self.folder}: {exc}; "
                      "thread/read and cold resumes will miss turns", file=sys.stderr)

    def create(self, meta: ThreadMeta, turns: Sequence[TurnRecord] = ()) -> None:
        self._append(meta.thread_id, {"type": "meta", "meta": meta.to_json()})
        for turn in turns:
            self._append(meta.thread_id, {"type": "turn", "turn": turn.stored(), "usageTotal": None})

    def update(self, meta: ThreadMeta) -> None:
        """The thread's settings changed (a sandbox or approval override): the last
        ``meta`` line is the one ``load`` returns."""
        self._append(meta.thread_id, {"type": "meta", "meta": meta.to_json()})

    def append_turn(self, thread_id: str, turn: TurnRecord, usage_total: dict[str, Any] | None) -> None:
        self._append(thread_id, {"type": "turn", "turn": turn.stored(), "usageTotal": usage_total})

    def load(self, thread_id: str) -> StoredThread | None:
        """The thread's record, or None when it has none (not made by this server)."""
        try:
            data = self._path(thread_id).read_bytes()
        except OSError:
            return None
        meta: ThreadMeta | None = None
        turns: list[TurnRecord] = []
        usage: dict[str, Any] | None = None
        for raw in data.split(b"\n"):
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a torn last line (or damage): skipped
            if not isinstance(line, dict):
                continue
            if line.get("type") == "meta" and isinstance(line.get("meta"), dict):
                meta = ThreadMeta.from_json(line["meta"])
            elif line.get("type") == "turn" and isinstance(line.get("turn"), dict):
                turns.append(TurnRecord.from_stored(line["turn"]))
                if isinstance(line.get("usageTotal"), dict):
                    usage = line["usageTotal"]
        if meta is None:
            return None
        return StoredThread(meta, turns, usage)
