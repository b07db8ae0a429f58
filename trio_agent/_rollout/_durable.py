"""A session loaded from its rollout, ready to resume: ``DurableSession``, whose ``_load``
is the load behind ``RolloutConfig.load_session`` (``_home``), with the snapshot it
rebuilds (``load_snapshot``).

A module of its own, imported by the first load (or the first read of
``trio_agent.DurableSession``): a run that starts a new session -- ``trio-agent run``
keeps one -- needs ``RolloutConfig`` and the writer, never these, nor the snapshots'
module (``_session.snapshot``): two attrs classes and their module, ~1.5 ms of a cold
run's path to its request.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import attrs

from .._errors import InvalidSessionSnapshot
from .._session.snapshot import SessionSnapshot
from ._closing import close_interrupted_turn
from ._home import RolloutConfig
from ._reading import read_parsed

if TYPE_CHECKING:
    from .._config import AgentConfig

__all__ = ["DurableSession", "load_snapshot"]


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

    @classmethod
    def _load(cls, config: RolloutConfig, thread_id: str, workspace: str | os.PathLike[str] | None) -> DurableSession:
        """``RolloutConfig.load_session`` (its docstring says what a load does), which
        reaches this through the package's lazy name (no import cycle with ``_home``)."""
        path = config.find(thread_id)
        if path is None:
            raise InvalidSessionSnapshot(
                f"no rollout for thread {thread_id!r} under {config.home}; check the thread id and rollout home"
            )
        snapshot, interrupted = load_snapshot(path, thread_id)
        session = cls(thread_id, snapshot.workspace, path.resolve(), snapshot, config, interrupted)
        return session if workspace is None else session.in_workspace(workspace)

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
            from .._ids import new_item_id
            from .._runtime._turns._context_io import context_user_message

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


def load_snapshot(path: Path, thread_id: str) -> tuple[SessionSnapshot, tuple[str, ...]]:
    """The snapshot of session ``thread_id`` that its rollout ``path`` describes, closed
    (``_closing``), and the ids of the calls that closing answered. Called by
    ``DurableSession._load``, behind ``RolloutConfig.load_session``, whose caller a
    torn-line warning names."""
    parsed = read_parsed(path, "skipped it; the session loads without it", stacklevel=4)
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
    return snapshot, interrupted


def _text(meta: dict[str, Any], key: str, default: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) else default
