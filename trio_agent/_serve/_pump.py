"""The pump: the one task that reads the thread manager's events and turns them into
notifications (``_server`` has the server's concurrency shape).

Ordering. The pump is the only writer of a thread's notifications, in the order of
the agent's events. What a request handler must know before the pump sees the next
event (a turn's wire id and prompt, a steer's text) it registers under the thread's
``lock``, which the pump waits for at ``run.started``/``run.steered`` when a handler
holds it (a free lock is passed without a schedule point: nobody is registering, and
a ``trio.Lock`` is fair, so a free lock has no waiter either). A dynamic tool call
or an approval is *introduced* once its notifications are out: only then does the
server ask the client (``_asking``).

Cost per client (issue 23). The pump delivers every thread event that is ready in one
pass (at most ``PUMP_BURST + 1``) before it yields, so each client's burst is queued
together and goes in one write -- made by the pump itself at the end of the pass, from
each WebSocket at once (``_connection.Flusher.held``; issue 30), not by a task per client.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import trio

from .._events import AgentEvent, EventKind
from .._runtime import Agent
from .._threads import ThreadEvent, ThreadEvents, ThreadStatus
from ._connection import Flusher
from ._context import ServerContext
from ._shapes import TurnRecord
from ._thread_state import ThreadState, ThreadStates
from ._turn_durability import RECORDED, record_progress

__all__ = ["PUMP_BURST", "Pump"]

PUMP_BURST = 256  # thread events the pump delivers in one scheduler pass, when they are ready
Json = dict[str, Any]
# The kinds the pump tests every event against, as module globals: ``EventKind.X`` is a
# descriptor call on Python 3.11 (~0.13 us), several per event of every turn (issue 30).
_RUN_STARTED, _RUN_STEERED = EventKind.RUN_STARTED, EventKind.RUN_STEERED
_RUN_COMPLETED, _RUN_FAILED = EventKind.RUN_COMPLETED, EventKind.RUN_FAILED
_TOOL_CALL, _TOOL_RESULT = EventKind.TOOL_CALL, EventKind.TOOL_RESULT
_APPROVAL_REQUESTED = EventKind.APPROVAL_REQUESTED
# The kinds ``_on_thread_event`` does more for than map and publish (a lock to wait for,
# the record, a call or approval to introduce, a turn's end); the pump hands every other
# kind straight to the mapper (``_deliver_plain``). RECORDED is among them.
_AFTERWARDS = frozenset({_RUN_STARTED, _RUN_STEERED, _RUN_COMPLETED, _RUN_FAILED, _TOOL_CALL, _TOOL_RESULT,
                         _APPROVAL_REQUESTED}) | RECORDED


class Pump:
    """Delivers ``server``'s thread events to the states of ``states`` (``run``);
    ``done`` is set when it has delivered the last one."""

    def __init__(self, server: ServerContext, states: ThreadStates, flusher: Flusher | None = None) -> None:
        self._server = server
        self._states = states
        self._flusher = flusher
        self.done = trio.Event()

    async def run(self, events: ThreadEvents) -> None:
        flusher = self._flusher
        ready = events._ready()
        try:
            async for event in events:
                # What else is ready goes out in the same pass, each client's queue in one
                # write, made by the pump itself once the burst is queued (``_connection``).
                if flusher is not None:
                    flusher.hold()
                try:
                    left = PUMP_BURST
                    while True:
                        agent_event = event.event
                        if agent_event is not None and agent_event.kind not in _AFTERWARDS:
                            self._deliver_plain(event, agent_event)  # most events: no await, no lock
                        else:
                            await self._deliver(event)
                        if not ready or not left:
                            break
                        left -= 1
                        event = ready.popleft()
                finally:
                    if flusher is not None:
                        flusher.release()
                if ready:  # cut at PUMP_BURST: the writers and handlers run before the next burst
                    await trio.lowlevel.checkpoint()  # (the stream's get would not yield: _event_queue._BURST)
        finally:
            self.done.set()

    async def _deliver(self, event: ThreadEvent) -> None:
        try:
            await self._on_thread_event(event)
        except Exception:  # a bug in the mapping: lose this event's notifications, not every client
            _report(event)

    def _deliver_plain(self, tevent: ThreadEvent, event: AgentEvent) -> None:
        """``_deliver`` of an event whose kind needs nothing of ``_on_thread_event`` but
        the mapping and the publish (not in ``_AFTERWARDS``): a delta, an item, usage."""
        try:
            state = self._states.target(tevent.thread_id)
            if state is not None:
                self._server.publish(state, state.mapper.on_event(event))
        except Exception:
            _report(tevent)

    async def _on_thread_event(self, tevent: ThreadEvent) -> None:
        event = tevent.event
        if event is None:  # the manager's own: a status, a close
            self._on_manager_event(tevent)
            return
        # (an agent event that makes no message -- most frames' api.event -- never gets
        # here: the manager's relay leaves it out, ``_heard.makes_messages``)
        state = self._states.target(tevent.thread_id)
        if state is None:
            return
        server = self._server
        kind = event.kind
        try:
            if (kind is _RUN_STARTED or kind is _RUN_STEERED) and state.lock.locked():
                async with state.lock:  # a handler is registering what this event needs: after it
                    outs = state.mapper.on_event(event)
            else:  # (a free lock has nobody to wait for: no schedule point, issue 30)
                outs = state.mapper.on_event(event)
            if kind in RECORDED and not state.meta.ephemeral:  # a running turn, kept through a kill
                record_progress(server.store, state, event, outs)
            server.publish(state, outs)
        finally:
            if kind is _TOOL_CALL:  # even if mapping failed: the call must not wait forever
                _introduce(state, event.turn_id, event.payload)
            elif kind is _APPROVAL_REQUESTED:
                _introduce_approval(state, event.turn_id, event.payload)
        if kind is _TOOL_RESULT:
            call_id = event.payload.get("call_id")
            if isinstance(call_id, str):
                state.calls.forget(call_id)
        elif kind is _RUN_COMPLETED or kind is _RUN_FAILED:
            self._turn_ended(state, event.turn_id)

    def _on_manager_event(self, tevent: ThreadEvent) -> None:
        server = self._server
        if tevent.kind == "thread.status" and tevent.status is ThreadStatus.NOT_LOADED:
            state = self._states.target(tevent.thread_id)
            if state is not None:
                server.publish(state, state.mapper.set_status(ThreadStatus.NOT_LOADED))
        elif tevent.kind == "thread.closed":
            server.broadcast("thread/closed", {"threadId": tevent.thread_id})
            self._states.closed(tevent.thread_id)
            if self._states.target(tevent.thread_id) is None:  # no generation of it is loaded
                server.store.release(tevent.thread_id)

    def _turn_ended(self, state: ThreadState, agent_turn_id: int | None) -> None:
        mapper = state.mapper.wire_turn(agent_turn_id)
        if agent_turn_id is not None:
            state.handles.pop(agent_turn_id, None)
        if mapper is None:
            return
        mapper.record.history_end = _history_end(state.agent, agent_turn_id)
        meta = state.meta
        meta.updated_at = (mapper.record.completed_at_ms or self._server.now_ms()) // 1000
        if not meta.preview:
            meta.preview = _preview(mapper.record)
        if not meta.ephemeral:
            self._server.store.append_turn(meta.thread_id, mapper.record, state.mapper.usage_total)


def _report(event: ThreadEvent) -> None:
    print(f"trio-agent serve: internal error mapping {event.kind} of thread {event.thread_id}:", file=sys.stderr)
    traceback.print_exc(file=sys.stderr)


def _introduce(state: ThreadState, agent_turn_id: int | None, payload: Json) -> None:
    """A dynamic tool call's ``item/started`` is out: its request may go now (a call
    from a cell that outlived its turn names the latest turn)."""
    call_id = payload.get("call_id")
    if not isinstance(call_id, str) or payload.get("tool") not in state.mapper.dynamic_tools:
        return
    turn = state.mapper.wire_turn(agent_turn_id)
    turn_id = turn.record.id if turn is not None else state.mapper.turns[-1].id if state.mapper.turns else ""
    state.calls.introduce(call_id, turn_id)


def _introduce_approval(state: ThreadState, agent_turn_id: int | None, payload: Json) -> None:
    """An approval's item and status are out: its request may go now."""
    approval_id = payload.get("approval_id")
    turn = state.mapper.wire_turn(agent_turn_id)
    if isinstance(approval_id, str):
        state.gate.introduce(approval_id, turn.record.id if turn is not None else "")


def _history_end(agent: Agent | None, agent_turn_id: int | None) -> int | None:
    """Where turn ``agent_turn_id``'s history ends (``_rollback``), when that is certain:
    it is the agent's latest turn and nothing runs or waits, so nothing was added since."""
    if agent is None or agent_turn_id is None:
        return None
    stats = agent.statistics()
    if stats.turns_accepted != agent_turn_id or stats.running_turn is not None or stats.turns_queued:
        return None
    return stats.history_items


def _preview(record: TurnRecord) -> str:
    for item in record.items:
        if item.get("type") == "userMessage":
            texts = [part.get("text", "") for part in item.get("content", []) if part.get("type") == "text"]
            return " ".join(texts)[:200]
    return ""
