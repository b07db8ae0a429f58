"""The tool calls of one model call, started while their response streams (codex.md 3.4).

Theory of operation: the runner runs each turn in a nursery (its scope is the turn's
cancel scope) and opens an ``InFlightCalls`` over it for each model call. The response's feed hands over each
finished tool call the moment its ``response.output_item.done`` is read
(``ToolCallReady``): ``dispatch`` gives the call a task of its own in that nursery,
which waits for the call dispatched before it, then runs it (``run_call``: the
``tool.call`` and ``tool.result`` events). So a call starts while the rest of the
response streams, calls still run one at a time in model order (``parallel_tool_calls``
is off; an ``exec`` cell's nested calls run concurrently inside it, as before). A
response without a call costs this object alone (the turn's nursery is entered once
per turn), nothing per frame. When the response has ended, the calls
it holds that never streamed as items (a server that sends them only in
``response.completed``) are dispatched behind the others (``dispatch_rest``).

Only the runner's task writes history (docs/architecture.md, "State, and which task
writes it"): a call's task only runs the call and keeps its outcome; every method here
that writes -- ``record``, ``failed_attempt``, ``pair_unanswered`` -- is called by the
runner's task, after the response's items are committed, and records each output once,
in model order, also when the call finished before its response did.

How the stream can end, and what becomes of the calls already dispatched:

- completed, cut by mail, or preempted by a steer (an interrupted response, or HTTPS's
  dropped stream): the response's kept items are committed, then every dispatched call
  is drained with its real output (calls that arrived after the cut or the preemption
  were never dispatched nor kept: ``_wire.stream``);
- failed (a dropped socket, ``response.failed``, a timeout...): as codex keeps the items
  of a failed attempt and drains its in-flight tools first, ``failed_attempt`` commits
  the attempt's kept items (unchained: ``ledger.commit_response(None, ...)``) and
  drains every dispatched call with its real output, before the sampler retries or
  gives up. The retry's request is rebuilt from history, so it carries those calls and
  outputs exactly once, and no call runs twice; when the turn fails instead, history
  keeps each call paired with its output. An attempt that failed before any call was
  dispatched commits nothing (as before: its request is simply sent again);
- cancelled (``turn.cancel()``): nothing more is dispatched, and ``pair_unanswered``
  answers every call that started, or whose item is in history: with its real output
  when it had finished, else with an ``aborted`` output and a ``tool.result`` of status
  ``cancelled`` (SPEC sec. 4). A call whose response was never committed enters history
  only if it had started (and then before its output); the rest of that response
  (partial model output) never does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from ..._events import EventKind
from ..._session.ledger import TurnLedger
from ..._units import ns
from ..._wire.stream_events import HISTORY_TYPES, usable_call_id
from ._tool_runner import ToolOutcome, tool_name

__all__ = ["CallSlot", "InFlightCalls"]

Item = dict[str, Any]


class CallSlot:
    """One dispatched call: when it started, its outcome once it finished."""

    __slots__ = ("call", "committed", "done", "outcome", "started_at")

    def __init__(self, call: Item, committed: bool) -> None:
        self.call = call
        self.committed = committed  # its item is in history
        self.started_at: float | None = None
        self.outcome: ToolOutcome | None = None
        self.done = trio.Event()


class InFlightCalls:
    """See the module docstring. ``run`` runs one call (in the call's own task)."""

    def __init__(
        self, nursery: trio.Nursery, ledger: TurnLedger, run: Callable[[Item], Awaitable[ToolOutcome]]
    ) -> None:
        self._nursery = nursery
        self._ledger = ledger
        self._run = run
        self._slots: dict[str, CallSlot] = {}  # by call id, in model order; unrecorded ones
        self._last: CallSlot | None = None  # the call the next one waits for
        self.committed_at = 0.0  # when the response's items were committed

    def __bool__(self) -> bool:
        return bool(self._slots)

    # -- dispatching (the feed, in the runner's task) ------------------------------------

    def dispatch(self, call: Item, *, committed: bool = False) -> None:
        """Start ``call`` once the calls dispatched before it have finished (synchronous:
        the feed calls it as the call's item is read)."""
        call_id = usable_call_id(call)
        assert call_id is not None and call_id not in self._slots, call_id  # the accumulator's promise
        slot = CallSlot(call, committed)
        self._slots[call_id] = slot
        previous, self._last = self._last, slot
        self._nursery.start_soon(self._call, slot, previous)

    async def _call(self, slot: CallSlot, previous: CallSlot | None) -> None:
        if previous is not None:
            await previous.done.wait()
        slot.started_at = trio.current_time()
        slot.outcome = await self._run(slot.call)
        slot.done.set()

    def dispatch_rest(self, calls: Iterable[Item]) -> None:
        """The response ended and its items are committed: the calls it holds that were
        not dispatched while it streamed go after the others, in model order."""
        self.committed_at = trio.current_time()
        for slot in self._slots.values():
            slot.committed = True
        for call in calls:
            call_id = usable_call_id(call)
            if call_id not in self._slots:
                self.dispatch(call, committed=True)

    # -- recording (the runner's task) -----------------------------------------------------

    async def record(self, calls: Iterable[Item]) -> None:
        """Wait for each of ``calls`` (committed) in model order and record its output."""
        for call in calls:
            call_id = usable_call_id(call)
            assert call_id is not None
            slot = self._slots[call_id]
            await slot.done.wait()
            self._record(call_id, slot)

    def _record(self, call_id: str, slot: CallSlot) -> None:
        assert slot.outcome is not None
        del self._slots[call_id]
        if self._last is slot:
            self._last = None
        self._ledger.record_tool_output(slot.call, slot.outcome.output, slot.outcome.extra_items)

    async def failed_attempt(self, kept: tuple[Item, ...]) -> None:
        """The attempt failed after dispatching calls: keep its finished items, drain
        every dispatched call and record its real output (the retry's request, built
        from history, carries them; see the module docstring). Nothing when no call was
        dispatched."""
        if not self._slots:
            return
        self._ledger.commit_response(None, [item for item in kept if item.get("type") in HISTORY_TYPES])
        self.committed_at = trio.current_time()
        for slot in self._slots.values():
            slot.committed = True
        await self.record([slot.call for slot in list(self._slots.values())])

    def pair_unanswered(self, emit: Callable[..., Any], turn_id: int) -> None:
        """The turn ends early (cancelled, or a bug): answer every call that started or
        whose item is in history (see the module docstring). Synchronous: it cannot be
        interrupted."""
        slots = [slot for slot in self._slots.values() if slot.committed or slot.started_at is not None]
        self._slots.clear()
        self._last = None
        if not slots:
            return
        uncommitted = [slot.call for slot in slots if not slot.committed]
        if uncommitted:  # started while its response streamed: its item enters history first
            self._ledger.commit_response(None, uncommitted)
        now = trio.current_time()
        for slot in slots:
            if slot.outcome is not None:  # it had finished: its real output (tool.result is out)
                self._ledger.record_tool_output(slot.call, slot.outcome.output, slot.outcome.extra_items)
                continue
            elapsed = now - (slot.started_at if slot.started_at is not None else self.committed_at or now)
            output = self._ledger.pair_aborted(slot.call, elapsed)["output"]
            emit(
                EventKind.TOOL_RESULT,
                {"call_id": usable_call_id(slot.call) or "", "tool": tool_name(slot.call), "status": "cancelled",
                 "duration_ns": ns(elapsed), "result": output},
                turn_id,
            )
