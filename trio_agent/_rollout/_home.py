"""A rollout home and the sessions it holds: ``RolloutConfig`` (where rollouts live and
when they reach the disk; finding a thread's file, loading a session) and
``DurableSession`` (a session loaded from its rollout, ready to resume).

Resuming (issue 24): ``RolloutConfig.load_session(thread_id, workspace=...)`` or
``RolloutConfig.load_file(path)`` give a ``DurableSession``; its ``resume_config(config)``
is ``config`` with everything a resume needs that a user would otherwise have to know:
the session id, the rollout, the snapshot, the session's own instructions (a codex
session's base prompt), and the workspace -- the recorded one, or the one chosen when
loading, since the recorded directory may be gone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal, final, get_args

import attrs

from .._errors import ConfigError, InvalidSessionSnapshot
from .._session.snapshot import SessionSnapshot
from ._files import home_of, new_rollout_path, rollout_files
from ._reading import load_snapshot

if TYPE_CHECKING:
    from .._config import AgentConfig

__all__ = ["DurableSession", "FsyncPolicy", "RolloutConfig"]

FsyncPolicy = Literal["flush", "commit"]


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
        """Every rollout file of ``thread_id`` (the one glob of the home's files, for
        ``find`` and the writer's check for a rival)."""
        return rollout_files(self.home, thread_id)

    def new_path(self, thread_id: str) -> Path:
        """Where a new rollout of ``thread_id`` goes (always inside ``home``)."""
        return new_rollout_path(self.home, thread_id)

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
        snapshot, interrupted = load_snapshot(path, thread_id)
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
        home, thread_id = home_of(Path(path))
        config = cls(home, fsync=fsync)
        found = config.find(thread_id)
        if found is None or found.resolve() != Path(path).expanduser().resolve():
            raise InvalidSessionSnapshot(
                f"{home} holds a newer rollout of session {thread_id!r} ({found}); resume that one by its id"
            )
        return config.load_session(thread_id, workspace=workspace)
