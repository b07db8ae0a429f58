"""The rollout's own error and warning (the shared hierarchy they join is
``trio_agent._errors``): every module of the package raises or issues them, so they
sit below all of them."""

from __future__ import annotations

from .._errors import AgentError

__all__ = ["RolloutError", "RolloutWarning"]


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
