"""A rollout home and the sessions it holds: ``RolloutConfig`` (where rollouts live and
when they reach the disk; finding a thread's file, loading a session -- as a
``DurableSession``, ``_durable``: a session loaded from its rollout, ready to resume).

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
from typing import TYPE_CHECKING, Literal, get_args

import attrs

from .._errors import ConfigError, InvalidSessionSnapshot
from ._files import home_of, new_rollout_path, rollout_files

if TYPE_CHECKING:
    from . import DurableSession  # the package's lazy name (_durable)

__all__ = ["FsyncPolicy", "RolloutConfig"]

FsyncPolicy = Literal["flush", "commit"]


def _check_fsync(instance: object, attribute: object, value: object) -> None:
    if value not in get_args(FsyncPolicy):
        raise ConfigError(f"RolloutConfig(fsync={value!r:.40}) is not a policy; pass fsync='flush' or fsync='commit'")


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
        from . import DurableSession  # the package's lazy name (_durable): the resume path

        return DurableSession._load(self, thread_id, workspace)

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
