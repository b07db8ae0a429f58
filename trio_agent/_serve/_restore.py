"""The turn a killed server left, found from the thread record and the rollout
(issue 23, item 2; the theory of operation is ``_turn_durability``'s).

``restored_turns`` is what ``thread/read``, ``thread/turns/list`` and a cold
``thread/resume`` add to the record's turns of an unloaded thread; it reads the
rollout's end only (``read_last_turn``), never the whole file:

- the record's last ``turn_started`` without a ``turn`` line, when it is the rollout's
  last turn (same journal id): rebuilt from the rollout's lines, ``interrupted`` (or
  ``completed``, when the rollout says it ended and only the record's ``turn`` line
  is missing) -- unless the rollout has nothing of it but its start line (no prompt,
  nothing committed: the model gets nothing of it either);
- else the rollout's last turn, when it is a killed turn (``_rollout._closing``) the
  record never saw start (the kill came within the few writes between the journal's
  ``task_started`` and the record's ``turn_started``): rebuilt from its lines alone,
  with the rollout's id for its own.

A ``turn_started`` the rollout has nothing of (its lines lost: a power loss before
they reached the disk, an edit) is not shown: the model does not get it either.

Once a cold resume has loaded the agent (whose history the load closed), the
restored turn is written as a ``turn`` line (``"restored": true``,
``record_restored``), so later loads show it from the record and do not rebuild it.
"""

from __future__ import annotations

import itertools
import uuid
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._errors import InvalidSessionSnapshot
from .._rollout import RolloutWarning
from .._rollout._closing import is_killed, read_last_turn
from ._turn_durability import restored_turn

if TYPE_CHECKING:
    from .._rollout._lines import TurnLines
    from .._runtime import Agent
    from ._context import ServerContext
    from ._shapes import TurnRecord
    from ._store import StoredThread
    from ._thread_state import ThreadState

__all__ = ["record_restored", "restored_turns"]


def restored_turns(server: ServerContext, thread_id: str, stored: StoredThread) -> list[TurnRecord]:
    """The turn a killed server left of ``thread_id`` (none or one; see the module
    docstring), ready to follow ``stored.turns``."""
    last = _last_rollout_turn(server, thread_id)
    if last is None:
        return []
    new_id = _stable_ids(thread_id, last.turn_id)
    started = stored.unfinished[-1] if stored.unfinished else None
    if started is not None and started.rollout_turn_id == last.turn_id:
        if last.ended is None and last.prompt is None and not last.entries:
            return []  # the rollout has only its start: the model gets nothing of it
        return [restored_turn(started, last, thread_id=thread_id, new_id=new_id)]
    if last.turn_id not in stored.rollout_turns and is_killed(last):
        return [restored_turn(None, last, thread_id=thread_id, new_id=new_id)]
    return []


def record_restored(server: ServerContext, state: ThreadState, agent: Agent, restored: list[TurnRecord]) -> None:
    """After a cold resume: ``restored`` (``restored_turns``) is the thread's now."""
    if not restored or state.meta.ephemeral:
        return
    restored[-1].history_end = agent.statistics().history_items  # nothing runs yet: where its history ends
    for turn in restored:
        server.store.append_turn(state.thread_id, turn, state.mapper.usage_total, restored=True)


def _stable_ids(thread_id: str, turn_id: str) -> Callable[[], str]:
    """Ids for the items a rebuild makes: the same each time it is rebuilt (a
    ``thread/read`` and the ``thread/resume`` after it show the same turn)."""
    count = itertools.count(1)
    return lambda: str(uuid.uuid5(uuid.NAMESPACE_URL, f"trio-agent:{thread_id}:restored:{turn_id}:{next(count)}"))


def _last_rollout_turn(server: ServerContext, thread_id: str) -> TurnLines | None:
    """The last turn the thread's rollout began, or None (no rollout, no journal, or a
    rollout that cannot be read: then its load says why)."""
    try:
        path = server.index.rollouts.find(thread_id)
        with warnings.catch_warnings():  # a torn last line (its writer was killed) is expected here
            warnings.simplefilter("ignore", RolloutWarning)
            return read_last_turn(path)[0] if path is not None else None
    except (InvalidSessionSnapshot, OSError):
        return None
