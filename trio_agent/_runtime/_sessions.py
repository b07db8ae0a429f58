"""An agent's session identity (for snapshots) and its rollout file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, final

import attrs

from .._rollout import RolloutError, RolloutWriter
from .._session.history import History
from .._session.snapshot import SessionSnapshot

if TYPE_CHECKING:
    from pathlib import Path

    from .._session.conversation import ConversationSnapshot
    from ._agent import Agent

__all__ = ["Rollout", "SessionInfo", "open_rollout"]

VERSION = "0.1.0"


@attrs.frozen
class SessionInfo:
    """What a snapshot needs besides the history."""

    model: str
    lineage_id: str
    prompt_cache_key: str
    workspace: str
    request_prefix: tuple[dict[str, Any], ...]
    instructions: str

    def snapshot(self, checkpoint: ConversationSnapshot) -> SessionSnapshot:
        prefix = [
            {k: v for k, v in item.items() if k != "id"} if item.get("type") == "additional_tools" else item
            for item in self.request_prefix
        ]
        return SessionSnapshot(
            model=self.model, lineage_id=self.lineage_id, prompt_cache_key=self.prompt_cache_key,
            workspace=self.workspace, request_prefix=prefix, history=list(checkpoint.history),
            instructions=self.instructions,
        )


@final
class Rollout:
    """``agent.rollout``: the path of the session's rollout file."""

    def __init__(self, writer: RolloutWriter) -> None:
        self._writer = writer
        self._pending_error: RolloutError | None = None

    @property
    def path(self) -> Path:
        return self._writer.path

    def append(self, history: History) -> None:
        try:
            self._writer.append(history)
            self._pending_error = None
        except RolloutError as exc:  # kept for flush(); the next append retries
            self._pending_error = exc

    def flush(self, history: History) -> None:
        self.append(history)
        if self._pending_error is not None:
            raise self._pending_error
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def open_rollout(agent: Agent, parent_id: str | None) -> Rollout | None:
    config = agent.config
    if config.rollout is None:
        return None
    info = agent.session_info()
    meta: dict[str, Any] = {
        "session_id": config.session_id,
        "id": config.session_id,
        "cwd": info.workspace,
        "originator": "trio_agent",
        "cli_version": VERSION,
        "source": "sdk",
        "model_provider": "openai",
        "model": config.model,
        "lineage_id": info.lineage_id,
        "base_instructions": {"text": info.instructions},
    }
    if parent_id is not None:
        meta["parent_thread_id"] = parent_id
    return Rollout(RolloutWriter.open(config.rollout, config.session_id, meta))
