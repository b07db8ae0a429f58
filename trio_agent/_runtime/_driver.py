"""Run one turn: the loop of model calls and tool calls inside the turn's cancel scope.

Theory of operation (SPEC sec. 4): the runner task calls ``run_turn`` for each
accepted turn, FIFO. The turn records its prompt (plus, on the session's first turn,
the context messages; on later turns it may compact first), then loops: sample (pending
steers join at the request boundary, inside the model lock), commit the response, ask
the planner what next, run the tool calls one at a time in the turn's cancel scope
(``parallel_tool_calls`` is off; an ``exec`` cell runs its nested calls concurrently),
maybe compact. Expected failures become values (``TurnFailed``, ``TurnCancelled``) and
exactly one terminal event; only bugs escape to the agent nursery.

When the turn's scope is cancelled, unanswered tool calls are paired with
``aborted by user`` outputs, the ``<turn_aborted>`` marker is recorded, the rollout is
appended, the socket is dropped and the terminal event emitted. That cleanup is plain
synchronous code -- it cannot be interrupted, so it needs no shield -- while the tools'
own cleanup (killing process groups, stopping cells) is shielded and time-bounded
where it awaits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .._config import context_window
from .._errors import AgentError, ResponsesError, TurnCancelled, TurnFailed
from .._events import EventKind
from .._session.compaction import auto_compact_limit, compacted_history, estimate_tokens, truncate_tool_outputs
from .._session.context import TURN_ABORTED_TEXT, permissions_message, user_message
from .._session.history import History
from .._session.planner import FinishTurn, RunTools, SampleAgain, plan_next
from ._stats import TurnStats
from ._tool_runner import aborted_output, output_item, run_call
from ._turn import TurnResult, TurnState, TurnStatus

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["run_turn"]

_NS = 1_000_000_000


class _Live:
    """Per-turn bookkeeping the cancel path needs: the calls not answered yet."""

    def __init__(self) -> None:
        self.pending_calls: list[tuple[dict[str, Any], float]] = []
        self.model_call_index = 0


async def run_turn(agent: Agent, state: TurnState) -> None:
    if state.status is TurnStatus.CANCELLED:  # cancelled while queued: a tombstone
        emit_cancelled_without_running(agent, state)
        return
    state.status = TurnStatus.RUNNING
    state.steerable = True
    state.ran = True
    state.started.set()
    agent.emit(EventKind.RUN_STARTED, agent.run_started_payload(state), state.turn_id)
    stats = TurnStats()
    live = _Live()
    start = trio.current_time()
    try:
        with state.cancel_scope:
            result = await _drive(agent, state, stats, live)
            _finish(agent, state, stats, start, TurnStatus.COMPLETED, result=result)
            return
    except ResponsesError as exc:
        _fail(agent, state, stats, start, TurnFailed(str(exc), responses_error=exc), exc)
        return
    except AgentError as exc:
        _fail(agent, state, stats, start, TurnFailed(str(exc)), exc)
        return
    except trio.Cancelled:
        _abort(agent, state, stats, live, start)
        raise
    except BaseExceptionGroup as group:  # cancellation can arrive grouped from inner nurseries
        if group.subgroup(lambda exc: not isinstance(exc, trio.Cancelled | BaseExceptionGroup)) is None:
            _abort(agent, state, stats, live, start)
        else:
            _fail(agent, state, stats, start, TurnFailed(f"internal error: {group!r}"), group)
        raise
    except Exception as exc:  # a bug: report it on the turn, then let it crash the agent
        _fail(agent, state, stats, start, TurnFailed(f"internal error: {exc!r}"), exc)
        raise
    # Only reached when our own scope was cancelled (turn.cancel()).
    _abort(agent, state, stats, live, start)


async def _drive(agent: Agent, state: TurnState, stats: TurnStats, live: _Live) -> TurnResult:
    conversation = agent.conversation
    if not agent.context_recorded:
        conversation.record([permissions_message(), agent.context_message()])
        agent.context_recorded = True
    else:
        await _maybe_compact(agent, state, stats, live)  # before the new prompt joins (SPEC sec. 8)
    conversation.record([{**user_message(""), "content": state.prompt.content()}])
    if agent.next_turn_items:  # injected while idle: they join this turn's first request
        conversation.record(agent.next_turn_items)
        agent.next_turn_items = []
    def at_request() -> None:
        # The boundary a request is built at (inside the model lock, before every
        # attempt): pending steers join here, in order, and forks branch from here.
        _drain_steers(agent, state, stats)
        agent.publish_fork_point()

    while True:
        live.model_call_index += 1
        stats.model_calls += 1
        call_start = trio.current_time()
        try:
            outcome = await agent.model.generate(
                state.settings, call_index=live.model_call_index, turn_id=state.turn_id,
                preemption=state.preemption, on_request=at_request,
            )
        finally:
            stats.model_duration_ns += int((trio.current_time() - call_start) * _NS)
        stats.usage = stats.usage + outcome.usage
        stats.last_response_id = outcome.response_id
        agent.last_total_tokens = outcome.usage.total_tokens
        if outcome.chained:
            conversation.record_response(outcome.response_id, outcome.history_items)
        else:  # an interrupt the server never answered: keep what arrived, replay in full
            conversation.record(outcome.history_items)
            conversation.reset_chain()
        step = plan_next(
            tool_calls=outcome.tool_calls,
            end_turn=outcome.end_turn,
            final_message=outcome.final_message,
            pending_steers=len(state.steers) + len(state.injected),
        )
        if isinstance(step, FinishTurn):
            state.steerable = False  # decided synchronously: no steer can slip in now
            agent.fork_point = checkpoint = conversation.snapshot()
            return TurnResult(
                state.turn_id, step.message, outcome.response_id, checkpoint=checkpoint, lineage=agent.lineage,
                session=agent.session_info(),
            )
        if isinstance(step, RunTools):
            await _run_tools(agent, state, stats, live, step)
        else:
            assert isinstance(step, SampleAgain)
        await _maybe_compact(agent, state, stats, live)


async def _maybe_compact(agent: Agent, state: TurnState, stats: TurnStats, live: _Live) -> None:
    """Compact when the active context reached the auto-compact limit (SPEC sec. 8)."""
    conversation = agent.conversation
    window = context_window(agent.config.model)
    limit = auto_compact_limit(window)
    active = agent.last_total_tokens + estimate_tokens(conversation.incremental_input())
    if active < limit:
        return
    if estimate_tokens([*conversation.prefix, *conversation.history]) > window:
        rewritten = truncate_tool_outputs(conversation.history.to_list(), window=window)
        conversation.history = History(rewritten)
    stats.compactions += 1
    start = trio.current_time()
    try:
        outcome = await agent.model.compact(
            state.settings, after_call_index=live.model_call_index, turn_id=state.turn_id,
            active_tokens=active, limit=limit,
        )
    finally:
        stats.model_duration_ns += int((trio.current_time() - start) * _NS)
    stats.usage = stats.usage + outcome.usage
    summary = next(i for i in outcome.output if i.get("type") in ("compaction", "compaction_summary"))
    installed = compacted_history(
        conversation.history.to_list(), summary, permissions=conversation.with_id(permissions_message()),
        context=conversation.with_id(agent.context_message()),
    )
    conversation.history = History(installed)
    conversation.reset_chain()
    conversation.delta_start = 0
    agent.last_total_tokens = estimate_tokens([*conversation.prefix, *installed])


async def _run_tools(agent: Agent, state: TurnState, stats: TurnStats, live: _Live, step: RunTools) -> None:
    now = trio.current_time()
    live.pending_calls = [(call, now) for call in step.calls]
    while live.pending_calls:
        call, _ = live.pending_calls[0]
        live.pending_calls[0] = (call, trio.current_time())
        outcome = await run_call(
            call,
            agent.tool_runner_for(call, state, live.model_call_index, stats),
            emit=agent.emit,
            turn_id=state.turn_id,
            model_call_index=live.model_call_index,
            stats=stats,
        )
        agent.conversation.record([output_item(call, outcome.output), *outcome.extra_items])
        live.pending_calls.pop(0)


def _drain_steers(agent: Agent, state: TurnState, stats: TurnStats) -> None:
    state.preemption.clear()  # the steers join this request: nothing left to preempt for
    if state.injected:
        agent.conversation.record(state.injected)
        state.injected = []
    while state.steers:
        text = state.steers.popleft()
        agent.conversation.record([user_message(text)])
        stats.steers += 1
        agent.emit(
            EventKind.RUN_STEERED,
            {"steer_index": stats.steers, "instruction_bytes": len(text.encode())},
            state.turn_id,
        )


def _abort(agent: Agent, state: TurnState, stats: TurnStats, live: _Live, start: float) -> None:
    """Pair unanswered calls, record the abort marker, drop the socket; then the terminal event.

    Everything here is synchronous (history, events), so it cannot be interrupted
    and needs no shield; tool processes are killed by their own shielded, bounded
    cleanup as the turn's scope unwinds.
    """
    now = trio.current_time()
    for call, call_start in live.pending_calls:
        elapsed = now - call_start
        output = aborted_output(elapsed)
        agent.conversation.record([output_item(call, output)])
        agent.emit(
            EventKind.TOOL_RESULT,
            {"call_id": call.get("call_id", ""), "tool": call.get("name", ""), "status": "cancelled",
             "duration_ns": int(elapsed * _NS), "result": output},
            state.turn_id,
        )
    live.pending_calls = []
    agent.conversation.record([user_message(TURN_ABORTED_TEXT)])
    agent.model.abandon()
    agent.fork_point = agent.conversation.snapshot()
    error = TurnCancelled(f"turn {state.turn_id} was cancelled")
    agent.emit(EventKind.RUN_ERROR, {"message": str(error)}, state.turn_id)
    agent.emit(
        EventKind.RUN_FAILED, agent.terminal_payload(state, stats, start, "cancelled"), state.turn_id
    )
    state.terminal_emitted = True
    agent.persist_rollout()
    state.finish(TurnStatus.CANCELLED, error=error)


def _finish(agent: Agent, state: TurnState, stats: TurnStats, start: float, status: TurnStatus,
            *, result: TurnResult) -> None:
    agent.emit(
        EventKind.RUN_COMPLETED, agent.terminal_payload(state, stats, start, "completed"), state.turn_id
    )
    state.terminal_emitted = True
    agent.persist_rollout()
    state.finish(status, result=result)


def _fail(agent: Agent, state: TurnState, stats: TurnStats, start: float, error: TurnFailed,
          cause: BaseException) -> None:
    error.__cause__ = cause
    agent.emit(EventKind.RUN_ERROR, {"message": str(error)}, state.turn_id)
    agent.emit(EventKind.RUN_FAILED, agent.terminal_payload(state, stats, start, "failed"), state.turn_id)
    state.terminal_emitted = True
    agent.persist_rollout()
    state.finish(TurnStatus.FAILED, error=error)


def emit_cancelled_without_running(agent: Agent, state: TurnState) -> None:
    """The events of a turn cancelled before it ran (queued, or the agent closing):
    ``run.started``, ``run.error``, ``run.failed`` with status ``cancelled``."""
    start = trio.current_time()
    agent.emit(EventKind.RUN_STARTED, agent.run_started_payload(state), state.turn_id)
    agent.emit(EventKind.RUN_ERROR, {"message": f"turn {state.turn_id} was cancelled"}, state.turn_id)
    agent.emit(
        EventKind.RUN_FAILED, agent.terminal_payload(state, TurnStats(), start, "cancelled"), state.turn_id
    )
    state.terminal_emitted = True
    if not state.done.is_set():
        state.finish(TurnStatus.CANCELLED, error=TurnCancelled(f"turn {state.turn_id} was cancelled"))
