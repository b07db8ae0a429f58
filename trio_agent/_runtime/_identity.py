"""An agent's session identity (for snapshots) and its rollout file."""

from __future__ import annotations

import time
import uuid
import warnings
from typing import TYPE_CHECKING, Any, final

from .._record import Record
from .._session.history import History
from .._session.ledger import Committed, LedgerEvent

if TYPE_CHECKING:
    from pathlib import Path

    from .._config import AgentConfig
    from .._rollout import RolloutError, RolloutWriter
    from .._session.conversation import ConversationSnapshot
    from .._session.snapshot import SessionSnapshot

__all__ = ["Rollout", "SessionInfo", "open_rollout"]

VERSION = "0.1.0"


class SessionInfo(Record):
    """What a snapshot needs besides the history."""

    __slots__ = ("model", "lineage_id", "prompt_cache_key", "workspace", "request_prefix", "instructions")  # noqa: RUF023  # field order

    def __init__(
        self, *, model: str, lineage_id: str, prompt_cache_key: str, workspace: str,
        request_prefix: tuple[dict[str, Any], ...], instructions: str,
    ) -> None:
        self.model = model
        self.lineage_id = lineage_id
        self.prompt_cache_key = prompt_cache_key
        self.workspace = workspace
        self.request_prefix = request_prefix
        self.instructions = instructions

    def snapshot(self, checkpoint: ConversationSnapshot) -> SessionSnapshot:
        from .._session.snapshot import SessionSnapshot  # imported by the first snapshot, not with the runtime

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
    """``agent.rollout``: the session's rollout file (``.path``).

    It follows the agent's ledger: every commit is appended as it happens and every
    rewrite is recorded as one (``RolloutWriter``); with ``RolloutConfig(fsync="commit")``
    each write is also fsynced. A write that fails never fails the turn; the error is
    kept and raised by the next ``flush`` (``flush_rollout()``), and the writer stops
    until then so the file never skips an item silently. The file stays locked
    against other writers until ``close``.
    """

    def __init__(self, writer: RolloutWriter) -> None:
        self._writer = writer
        self._pending_error: RolloutError | None = None
        self._behind: History | None = None  # history to resynchronise after a failed write
        self._closed = False

    @property
    def path(self) -> Path:
        return self._writer.path

    def on_ledger(self, event: LedgerEvent) -> None:
        from .._rollout import RolloutError  # loaded already: open_rollout made the writer

        if self._pending_error is not None:
            self._behind = event.history
            return
        try:
            if isinstance(event, Committed):
                self._writer.append(list(event.items))
            else:
                self._writer.rewrite(event.history.to_list(), reason=event.reason, message=event.message)
        except RolloutError as exc:
            self._pending_error = exc
            self._behind = event.history

    def record_event(self, payload: dict[str, Any]) -> None:
        """Persist an ``event_msg`` (e.g. a finished ``clock.sleep``); a failed write is
        kept for ``flush`` like a failed commit."""
        from .._rollout import RolloutError

        if self._pending_error is not None:
            return
        try:
            self._writer.event(payload)
        except RolloutError as exc:
            self._pending_error = exc

    def flush(self) -> None:
        """Write what a failed write left behind, then fsync (this waits on the disk,
        on the Trio thread); raises the kept error when the file still cannot be
        written."""
        from .._rollout import RolloutError

        if self._pending_error is not None and self._behind is not None:
            try:
                self._writer.rewrite(self._behind.to_list(), reason="recovery")
            except RolloutError as exc:
                raise exc from self._pending_error
            self._pending_error = None
            self._behind = None
        elif self._pending_error is not None:
            raise self._pending_error
        self._writer.flush()

    def close(self) -> None:
        """Flush (recover and fsync), then close the file and release its lock
        (idempotent). The agent is closing, so a failure here cannot be raised to a
        turn: it is issued as a ``RolloutWarning`` saying the file may be behind."""
        from .._rollout import RolloutError, RolloutWarning

        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
        except RolloutError as exc:
            warnings.warn(
                RolloutWarning(f"{exc}; the rollout may miss history committed since its last flush"), stacklevel=2
            )
        finally:
            self._writer.close()


def codex_turn_id(session_id: str, turn_id: int) -> str:
    """A stable UUID for turn ``turn_id`` of a session (Codex's event lines use UUIDs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"trio-agent:{session_id}:turn:{turn_id}"))


class TurnJournal:
    """Writes the per-turn ``event_msg`` lines Codex's pickers and UI read (legacy
    history mode): ``task_started`` and ``user_message`` when a turn starts,
    ``agent_message`` and ``task_complete`` when it completes (``task_complete`` with no
    message when it failed), ``turn_aborted`` when it was cancelled. They never change
    what a resume replays (``load_session`` reads only the history lines)."""

    def __init__(self, rollout: Rollout, session_id: str) -> None:
        self._rollout = rollout
        self._session_id = session_id
        self._started: dict[int, float] = {}  # turn id -> unix start (wall clock, for the file)

    def started(self, turn_id: int, user_text: str | None) -> None:
        now = time.time()
        self._started[turn_id] = now
        codex_id = codex_turn_id(self._session_id, turn_id)
        self._rollout.record_event({"type": "task_started", "turn_id": codex_id, "started_at": int(now),
                                    "model_context_window": None, "collaboration_mode_kind": "default"})
        if user_text is not None:
            self._rollout.record_event({"type": "user_message", "message": user_text, "images": [],
                                        "local_images": [], "text_elements": []})

    def finished(self, turn_id: int, status: str, final_message: str | None) -> None:
        now = time.time()
        started = self._started.pop(turn_id, now)
        codex_id = codex_turn_id(self._session_id, turn_id)
        if status == "cancelled":
            self._rollout.record_event({"type": "turn_aborted", "turn_id": codex_id, "reason": "interrupted"})
            return
        if final_message:
            self._rollout.record_event({"type": "agent_message", "message": final_message, "phase": "final_answer",
                                        "memory_citation": None})
        self._rollout.record_event({
            "type": "task_complete", "turn_id": codex_id, "last_agent_message": final_message or None,
            "started_at": int(started), "completed_at": int(now), "duration_ms": int((now - started) * 1000),
            "time_to_first_token_ms": None,
        })


def open_rollout(config: AgentConfig, info: SessionInfo, history: History, parent_id: str | None) -> Rollout | None:
    if config.rollout is None:
        return None
    # Imported here, not with the runtime: only an agent with a rollout file needs it.
    from .._rollout import RolloutConfig, RolloutWriter, rollout_timestamp

    settings = config.rollout
    assert isinstance(settings, RolloutConfig)  # AgentConfig checks it; its field names a protocol

    # What the Codex CLI needs to resume the file (reference/codex-rollout/REPORT.md sec. 5):
    # id, timestamp, cwd, originator, cli_version; source "cli" lists it in codex's pickers;
    # history_mode "legacy" (no ordinals); base_instructions carries our instructions over.
    meta: dict[str, Any] = {
        "session_id": config.session_id,
        "id": config.session_id,
        "timestamp": rollout_timestamp(),
        "cwd": info.workspace,
        "originator": "trio_agent",
        "cli_version": VERSION,
        "source": "cli",
        "thread_source": "user",
        "history_mode": "legacy",
        "model": config.model,
        "lineage_id": info.lineage_id,
        "base_instructions": {"text": info.instructions},
    }
    if settings.model_provider is not None:
        meta["model_provider"] = settings.model_provider
    if parent_id is not None:
        meta["parent_thread_id"] = parent_id
    return Rollout(RolloutWriter.open(settings, config.session_id, meta, history))
