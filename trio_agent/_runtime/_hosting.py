"""``HostHooks``: what the owner of an agent uses beyond its public surface.

The owners are the worker tools (``_workers.Workers``, which open a worker with
``spawn`` and suspend it when idle) and ``ThreadManager`` (which holds those workers
as threads and reads a loaded thread's history). ``Agent._host`` is this object; no
owner reaches into the agent's parts otherwise. Suspension: ``as_worker`` installs the
owner's ``unload`` (asked by ``request_unload``) and is told each automatic turn;
after the worker closed, ``suspended_state`` is its way back (committed history and
unread mail), which ``restore_mail`` puts back into the next load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._turns._turn import Turn

if TYPE_CHECKING:
    from .._session.history import History
    from .._session.ledger import TurnLedger
    from .._session.snapshot import SessionSnapshot
    from ._identity import SessionInfo
    from ._model._client import ModelClient
    from ._turns._input import Mail
    from ._turns._prompt_settings import PromptSettings
    from ._turns._queue import TurnQueue

__all__ = ["HostHooks"]


class HostHooks:
    """The hooks of one agent for its owner (see the module docstring)."""

    def __init__(self, *, queue: TurnQueue, ledger: TurnLedger, model: ModelClient, session: SessionInfo,
                 settings: PromptSettings) -> None:
        self._queue = queue
        self._ledger = ledger
        self._model = model
        self._session = session
        self._settings = settings
        self._unload: Callable[[], bool] | None = None  # set when the agent is a worker (as_worker)

    def as_worker(self, *, unload: Callable[[], bool], automatic: Callable[[Turn], None]) -> None:
        """The agent is a worker: ``unload`` asks its owner to suspend it when idle
        (False: it is busy); ``automatic`` is told each automatic turn it accepts (to be
        reported)."""
        self._unload = unload
        queue = self._queue
        queue.on_automatic = lambda state: automatic(Turn._create(state, queue))

    def request_unload(self) -> bool:
        """Ask the owner of a worker to close it now that it is idle, to be reloaded on
        demand (the app server's idle eviction); False when it will not: it is not a
        worker, or a turn of it runs or waits."""
        return self._unload() if self._unload is not None else False

    def suspended_state(self) -> tuple[SessionSnapshot, list[Mail]]:
        """A closed worker's way back: its committed history and the mail it had not read."""
        checkpoint = self._ledger.snapshot(self._model.chain)
        return self._session.snapshot(checkpoint), self._queue.mailbox.take_all()

    def restore_mail(self, mail: list[Mail]) -> None:
        """Mail a worker held when it was suspended, back in its mailbox (first, in order)."""
        for held in mail:
            self._queue.post_mail(held, self._settings.request())

    def history(self) -> History:
        """The committed history (persistent: later turns do not change the value returned)."""
        return self._ledger.history
