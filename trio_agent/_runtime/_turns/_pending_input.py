"""Input that arrives while an agent may be busy: submit, start-if-idle, conditional
interrupt (SPEC sec. 10, the parts that need no mailbox).

- ``submit(prompt)`` steers the running turn when there is one that can still take a
  steer, and starts a turn otherwise; it says which.
- ``start_if_idle(prompt)`` starts a turn only when nothing is running or queued, and
  otherwise declines with a reason, recording nothing.
- ``inject(items)`` adds raw Responses items: they join the running turn at its next
  request boundary (a turn whose final answer just arrived samples once more for
  them), or wait for the next turn's first request when nothing is running.
- ``interrupt_if_no_pending_input(turn_id)`` cancels that running turn only when no
  input is waiting for it (no pending steer or injected item, no queued prompt); it
  answers before the cancellation completes, so a tool of that very turn can call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import trio

from ..._errors import InvalidPrompt, TurnNotSteerable
from ..._wire.request import RequestSettings
from ._queue import TurnQueue
from ._turn import Prompt, Turn, TurnState

if TYPE_CHECKING:
    from ._submission import Declined, Submission

__all__ = [
    "TurnInput",
    "checked_items",
    "inject",
    "interrupt_if_no_pending_input",
    "start_if_idle",
    "submit",
]


def _steerable(queue: TurnQueue) -> TurnState | None:
    live = queue.running
    if live is not None and live.steerable:
        return live
    return None


TurnInput = Prompt | list[dict[str, Any]]


def _accept(queue: TurnQueue, given: TurnInput, settings: RequestSettings) -> Turn:
    if isinstance(given, Prompt):
        return Turn._create(queue.accept(given, settings), queue)
    return Turn._create(queue.accept(None, settings, tuple(given)), queue)


async def submit(queue: TurnQueue, given: TurnInput, settings: RequestSettings) -> Submission:
    from ._submission import Submission  # built by the first submit(), not with the runtime

    live = _steerable(queue)
    if live is not None:
        turn = Turn._create(live, queue)
        if not isinstance(given, Prompt):
            await trio.lowlevel.checkpoint()
            if live.steerable:  # else it decided to finish in the meantime: start a turn instead
                live.add_items(given)
                return Submission("steered", turn)
        else:
            try:
                await turn.steer(given.text)
            except TurnNotSteerable:
                pass  # it decided to finish in the meantime: start a turn instead
            else:
                return Submission("steered", turn)
    return Submission("started", _accept(queue, given, settings))


async def start_if_idle(queue: TurnQueue, given: TurnInput, settings: RequestSettings) -> Turn | Declined:
    from ._submission import Declined  # built by the first start_if_idle(), not with the runtime

    await trio.lowlevel.checkpoint()
    if not queue.idle:
        return Declined("not_idle")
    return _accept(queue, given, settings)


async def inject(queue: TurnQueue, items: Sequence[dict[str, Any]]) -> Literal["joined", "queued"]:
    checked = _checked(items)
    await trio.lowlevel.checkpoint()
    live = _steerable(queue)
    queue.injected(checked, live is not None)
    if live is not None:
        live.add_items(checked)
        return "joined"
    queue.idle_items.extend(checked)
    queue.activity.notify("steer")
    return "queued"


def checked_items(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` as raw Responses items (``InvalidPrompt`` when they are not)."""
    return _checked(items)


def _checked(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(items, dict) or not items:
        raise InvalidPrompt("inject() takes a non-empty list of Responses items (dicts with a 'type')")
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise InvalidPrompt(f"every injected item must be a dict with a string 'type', got {item!r}")
    return [dict(item) for item in items]


def interrupt_if_no_pending_input(queue: TurnQueue, turn_id: int) -> bool:
    live = queue.running
    if live is None or live.turn_id != turn_id or queue.pending_input_for(live):
        return False
    return live.cancel()  # False when it is not running, or already being cancelled
