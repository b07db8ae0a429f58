"""Saved threads written straight into a home, as the server writes them: a rollout by
the runtime's ``RolloutWriter`` and a record by ``ThreadStore`` (a separate instance,
so no running server's index hears of it: "another program wrote it")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent._ids import uuid7
from trio_agent._rollout import RolloutWriter
from trio_agent._serve._shapes import ThreadMeta, TurnRecord
from trio_agent._serve._store import ThreadStore
from trio_agent._session.history import History

Json = dict[str, Any]


def user_message(text: str) -> Json:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def save_thread(home: Path, *, record: bool = True, prompt: str = "hello", completed_s: int | None = None,
                **fields: Any) -> ThreadMeta:
    """A thread with one turn (completed at ``completed_s``, if given); ``fields``:
    ``ThreadMeta`` fields (default: created now, in /work, model m, provider openai)."""
    thread_id = str(uuid7())
    meta = ThreadMeta(**{"thread_id": thread_id, "created_at": 1_700_000_000, "cwd": "/work", "model": "m",
                         "model_provider": "openai", "preview": prompt, **fields})
    session_meta = {"session_id": thread_id, "id": thread_id, "cwd": meta.cwd, "model": meta.model}
    RolloutWriter.open(ta.RolloutConfig(home), thread_id, session_meta, History([user_message(prompt)])).close()
    if record:
        turn = TurnRecord(str(uuid7()), status="completed", items=[
            {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": prompt, "text_elements": []}]}],
            started_at_ms=meta.created_at * 1000, completed_at_ms=completed_s * 1000 if completed_s else None)
        ThreadStore(home).create(meta, [turn])
    return meta


def rename(home: Path, meta: ThreadMeta, name: str) -> None:
    """What ``thread/name/set`` writes, by another program."""
    meta.name = name
    ThreadStore(home).update(meta)
