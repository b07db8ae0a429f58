"""The turn runner: runs accepted turns one at a time, each in a nursery of its own.

Theory of operation (SPEC sec. 4): ``run(queue)`` takes turns FIFO. A turn records its prompt
with the mail waiting for it (plus, on the session's first turn, the context messages; on later
turns it may compact first), then loops over steps: sample (pending steers and injected items
join at the request boundary, inside the model's attempt slot) while each tool call of the
response starts as its item streams, commit the response, ask the planner what next, record the
calls' outputs in model order as they finish, maybe compact. The turn's nursery's scope is its
cancel scope, and every step's calls run in that nursery (a step opens none: a warm turn's one
step costs a scope less), one at a time (``parallel_tool_calls`` is off; an ``exec`` cell runs
its nested calls concurrently): ``_calls/_in_flight`` says how, and what becomes of them when
the response is cut, preempted, fails or the turn is cancelled. Expected failures become values
(``TurnFailed``, ``TurnCancelled``) and exactly one terminal event; only bugs escape.

The runner is built from what it needs -- the ledger (the one writer of history), the sampler and
model client, the tool dispatcher, the reporter, the fork point -- and knows nothing of ``Agent``.

When the turn's scope is cancelled, unanswered tool calls (those started, and every call of a
committed response) are paired with ``aborted by user`` outputs, the ``<turn_aborted>`` marker is
recorded, the socket is dropped and the terminal event emitted. That cleanup is plain synchronous
code -- it cannot be interrupted, so it needs no shield -- while the tools' own cleanup (killing
process groups, stopping cells) is shielded and time-bounded where it awaits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from ..._config import context_window
from ..._errors import AgentError, ResponsesError, TurnCancelled, TurnFailed
from ..._session.compaction import auto_compact_limit, estimate_history_tokens, estimate_tokens
from ..._session.context import permissions_message
from ..._session.conversation import ConversationSnapshot
from ..._session.ledger import TurnLedger
from ..._session.planner import FinishTurn, RunTools, SampleAgain, plan_next
from ..._units import ns
from .._calls._in_flight import InFlightCalls
from .._calls._tool_dispatch import ToolDispatcher
from .._calls._tool_runner import Runner, ToolOutcome, run_call
from .._counters import TurnStats
from .._identity import SessionInfo
from .._model._client import ModelClient
from .._model._compaction import Compactor
from .._model._sampling import Sampler
from ._context_io import agents_md_fingerprint, agents_md_watch, context_user_message, today
from ._input import Mail
from ._queue import TurnQueue
from ._reporter import TurnReporter
from ._turn import TurnResult, TurnState, TurnStatus

__all__ = ["ForkPoint", "TurnRunner"]


class ForkPoint:
    """The latest boundary ``fork()`` branches from (None before the first one)."""

    __slots__ = ("latest",)

    def __init__(self, latest: ConversationSnapshot | None = None) -> None:
        self.latest = latest


class _Live:
    """Per-turn bookkeeping the cancel path needs: the calls not answered yet (``calls``:
    the current step's, each from the moment it starts, and every call of a committed
    response)."""

    def __init__(self) -> None:
        self.calls: InFlightCalls | None = None
        self.nursery: trio.Nursery  # the turn's (its scope is the turn's cancel scope), set as it starts
        self.model_call_index = 0
        self.drain = False  # whether the next request takes pending input
        self.input_recorded = False  # the turn's own prompt/items are in history
        self.start = 0.0  # when the turn started


class TurnRunner:
    def __init__(
        self,
        *,
        ledger: TurnLedger,
        model: ModelClient,
        tools: ToolDispatcher,
        reporter: TurnReporter,
        fork_point: ForkPoint,
        session: SessionInfo,
        workspace: Path,
        context_recorded: bool,
        permissions: Callable[[], dict[str, Any]] = permissions_message,
    ) -> None:
        self._ledger = ledger
        self._model = model
        self._sampler = Sampler(model)
        self._compactor = Compactor(self._sampler)  # remote first; local once the server declined
        self._tools = tools
        self._reporter = reporter
        self._fork_point = fork_point
        self._session = session
        self._workspace = workspace
        self._context_recorded = context_recorded
        self._permissions = permissions  # the developer message with the sandbox mode and approval policy
        self._tell_permissions = False  # set_permissions changed them since the model was told
        # The first turn's context messages, gathered when the runner starts (see run),
        # with the date they state, the paths that tell an AGENTS.md change and their
        # fingerprint when they were read.
        self._context_ahead: tuple[str, tuple[str, ...], tuple[object, ...], list[dict[str, Any]]] | None = None
        self._last_total_tokens = 0  # usage.total_tokens of the last response (auto-compaction)
        self._emit = model.emit
        self._queue: TurnQueue | None = None
        # ``trio.current_time()`` is three calls deep; a runner lives in one run: its clock is looked up once.
        self._now = trio.lowlevel.current_clock().current_time

    def permissions_changed(self) -> None:
        """The sandbox or approval policy changed: the next turn tells the model."""
        self._tell_permissions = True
        self._context_ahead = None  # gathered with the old permissions

    def _context_messages(self) -> list[dict[str, Any]]:
        """The session's context messages: those gathered ahead when still current."""
        ahead, self._context_ahead = self._context_ahead, None
        date = today()
        # Still current: the same date, and no AGENTS.md written, removed or added since
        # (an agent may wait long for its first prompt: a warm daemon's spare does).
        if ahead is not None and ahead[0] == date and ahead[2] == agents_md_fingerprint(ahead[1]):
            return ahead[3]
        return [self._permissions(), context_user_message(self._workspace, current_date=date)]

    async def run(self, queue: TurnQueue) -> None:
        """Run turns until the queue is closed and empty (or this task is cancelled:
        then the turns still queued end as cancelled, each with its terminal event)."""
        self._queue = queue
        if not self._context_recorded:
            # Reading AGENTS.md and the environment is done now, while the startup
            # warmup is on the network, instead of on the first prompt's way to its request.
            date = today()
            watch = agents_md_watch(self._workspace)
            fingerprint = agents_md_fingerprint(watch)  # before the read: a write during it is seen
            messages = [self._permissions(), context_user_message(self._workspace, current_date=date)]
            self._context_ahead = (date, watch, fingerprint, messages)
        try:
            while (state := await queue.next()) is not None:
                try:
                    await self._run_turn(state, queue)
                finally:
                    queue.finished(state)
                if self._model.unfinished is not None:  # after the result is out: an HTTPS response's close
                    await self._model.settle(others_first=True)
        finally:
            queue.cancel_remaining()

    # -- one turn --------------------------------------------------------------------

    async def _run_turn(self, state: TurnState, queue: TurnQueue) -> None:
        state.start()
        self._reporter.started(state)
        stats = TurnStats()
        live = _Live()
        start = live.start = self._now()
        failure: AgentError | None = None
        crash: BaseException | None = None  # (a bug may raise a group itself)
        try:
            async with trio.open_nursery() as nursery:  # the turn's scope; every step's calls run in it
                state.run_in(nursery.cancel_scope)
                live.nursery = nursery
                try:
                    result = await self._drive(state, queue, stats, live)
                except AgentError as exc:  # ended by _fail (below, ungrouped) once its calls have ended
                    failure = exc
                except Exception as exc:  # a bug: its calls are cancelled, then it is reported ungrouped
                    crash = exc
                    nursery.cancel_scope.cancel()
                else:
                    if not state.done.is_set():  # (else _step completed it)
                        self._complete(state, stats, live, result)
            if crash is not None:
                raise crash
            if failure is not None:
                cause = failure if isinstance(failure, ResponsesError) else None
                self._fail(state, stats, live, start, TurnFailed(str(failure), responses_error=cause), failure)
            if state.done.is_set():
                return
        except (trio.Cancelled, BaseExceptionGroup) as exc:  # cancellation can arrive grouped
            if crash is not None and exc is not crash:  # cancelled as a bug cancelled the calls: keep the bug
                self._fail(state, stats, live, start, TurnFailed(f"internal error: {crash!r}"), crash)
                raise BaseExceptionGroup("a bug in a turn, as the agent was cancelled", [crash, exc]) from None
            if isinstance(exc, trio.Cancelled) or exc.split(trio.Cancelled)[1] is None:  # (cancelled alone)
                self._abort(state, stats, live, start)
            else:
                self._fail(state, stats, live, start, TurnFailed(f"internal error: {exc!r}"), exc)
            raise
        except Exception as exc:  # a bug: report it on the turn, then let it crash the agent
            self._fail(state, stats, live, start, TurnFailed(f"internal error: {exc!r}"), exc)
            raise
        # Only reached when our own scope was cancelled (turn.cancel()).
        self._abort(state, stats, live, start)

    async def _drive(self, state: TurnState, queue: TurnQueue, stats: TurnStats, live: _Live) -> TurnResult:
        if state.compact:
            return await self._compact_turn(state, stats, live)
        ledger = self._ledger
        if not self._context_recorded:
            ledger.record_context(self._context_messages())
            self._context_recorded = True
            self._tell_permissions = False
        else:
            await self._maybe_compact(state, stats, live)  # before the new prompt joins (SPEC sec. 8)
        if self._tools.offer_direct_tools(ledger):  # at a turn's start (_tools._mcp_direct)
            self._model.forget_chain()  # the prefix changed: the next request replays in full
        if self._tell_permissions:  # codex: a changed sandbox or policy is a new developer message
            self._tell_permissions = False
            ledger.record_context([self._permissions()])
        self._record_own_input(state, live, starting=True)
        idle_items = queue.take_idle_items()
        if idle_items:  # injected while idle: they join this turn's first request
            ledger.join_items(idle_items)
        # A user turn's first request samples its own input alone (and the mail that
        # waited for it, recorded above); steers, and mail posted since it started, join
        # at the next model boundary (codex: can_drain_pending_input). An automatic turn
        # takes what waits with its first request; an interrupting steer always joins
        # the next request built (InstantInterrupt).
        live.drain = state.automatic

        def join() -> None:
            self._join_pending(state, stats, drain=live.drain or state.preemption.pending)

        while True:
            live.model_call_index += 1
            stats.model_calls += 1
            done = await self._step(state, stats, live, join)
            if isinstance(done, TurnResult):
                return done
            if await self._maybe_compact(state, stats, live) and done:
                # codex.md 3.6: the model (or its tools) still owes a continuation, so the
                # first request after compaction is that continuation alone; pending
                # steers join the request after it.
                live.drain = False

    async def _step(
        self, state: TurnState, stats: TurnStats, live: _Live, join: Callable[[], None]
    ) -> TurnResult | bool:
        """One model call and its tool calls, each started as its item streams, in the
        turn's nursery (``_calls/_in_flight``), all recorded when it returns (or raises: a
        failed attempt drained them); the turn's result, or whether the model owes more."""
        ledger = self._ledger
        calls = live.calls = InFlightCalls(live.nursery, ledger, self._call_runner(state, stats, live))
        call_start = self._now()
        try:
            outcome = await self._sampler.generate(
                state.settings, call_index=live.model_call_index, turn_id=state.turn_id,
                preemption=state.preemption, join=join, calls=calls, started=call_start,
            )
        finally:
            stats.model_duration_ns += ns(self._now() - call_start)
        stats.usage = stats.usage + outcome.usage
        stats.last_response_id = outcome.response_id
        self._last_total_tokens = outcome.usage.total_tokens
        ledger.commit_response(outcome.response_id if outcome.chained else None, outcome.history_items)
        live.drain = True
        tool_calls = outcome.tool_calls  # a property that filters the output: read once
        if tool_calls or calls:  # (else nothing to dispatch, nor to mark committed)
            calls.dispatch_rest(tool_calls)
        step = plan_next(
            tool_calls=tool_calls,
            end_turn=outcome.end_turn,
            final_message=outcome.final_message,
            pending_steers=state.pending_count,
        )
        if isinstance(step, FinishTurn):
            state.stop_steering()  # decided synchronously: no steer can slip in now
            checkpoint = ledger.snapshot(self._model.chain)
            self._fork_point.latest = checkpoint
            result = TurnResult(
                state.turn_id, step.message, outcome.response_id, checkpoint=checkpoint,
                lineage=self._session.prompt_cache_key, session=self._session,
            )
            if not calls:  # no call left: out before the nursery's exit and its schedule point
                self._complete(state, stats, live, result)
            return result
        if isinstance(step, RunTools):  # each output recorded in model order, as its call finishes
            await calls.record(step.calls)
        else:
            assert isinstance(step, SampleAgain)
        return bool(tool_calls) or outcome.end_turn is False

    def _complete(self, state: TurnState, stats: TurnStats, live: _Live, result: TurnResult) -> None:
        """Terminal event, result, queue told (idle once the result is read); waiting mail joins history."""
        self._record_pending(state, stats, keep_triggering=True)
        self._reporter.completed(state, stats, live.start, result.final_message)
        self._ended(state, TurnStatus.COMPLETED, result=result)
        assert self._queue is not None
        self._queue.finished(state)  # again in run (idempotent)

    def _record_own_input(self, state: TurnState, live: _Live, *, starting: bool = False) -> None:
        """The turn's own input enters history (once, also when the turn ends before its
        first request: a failed or cancelled pre-turn compaction keeps the prompt).

        ``starting`` (the turn is about to sample): the mail waiting now, queue-only
        or triggering, enters with it, so the first request carries it (issue 27 item
        3; codex.md 3.2: mail waiting for the next turn is delivered with it), in the
        order of arrival: mail posted before the turn was accepted precedes its own
        input, mail posted since follows it. A turn that ends before sampling leaves
        the mail waiting (a failure records the queue-only mail after its input; a cancel
        leaves all of it for the next turn)."""
        if live.input_recorded:
            return
        live.input_recorded = True
        ledger = self._ledger
        before: list[Mail] = []
        after: list[Mail] = []
        if starting and self._queue is not None and len(self._queue.mailbox):
            before, after = self._queue.mailbox.take_split(state.mail_mark)
        if before:
            ledger.join_items([mail.item for mail in before])
        if state.prompt is not None:
            ledger.record_prompt(state.prompt.content())
        elif state.mail:
            ledger.join_items(list(state.mail))  # the mail that started it
        else:
            ledger.record_raw(list(state.items))  # raw items, exactly as given
        if after:
            ledger.join_items([mail.item for mail in after])

    def _join_pending(self, state: TurnState, stats: TurnStats, *, drain: bool) -> None:
        """The request boundary: pending input joins, in order (when ``drain``), and forks
        branch from here."""
        if drain:
            state.preemption.clear()  # the steers join this request: nothing left to preempt for
            self._record_pending(state, stats)
        self._fork_point.latest = self._ledger.snapshot(self._model.chain)

    def _record_pending(self, state: TurnState, stats: TurnStats, *, keep_triggering: bool = False) -> None:
        """Record every piece of pending input into history, in order of kind: injected
        items, steers (each with ``run.steered``), mail. With ``keep_triggering``
        triggering mail stays in the mailbox (to start a turn of its own)."""
        ledger = self._ledger
        if injected := state.take_injected():
            ledger.join_items(injected)
        while (text := state.next_steer()) is not None:
            ledger.join_steer(text)
            stats.steers += 1
            self._reporter.steered(state, stats.steers, text)
        if self._queue is not None and len(self._queue.mailbox):
            mailbox = self._queue.mailbox
            mail = mailbox.take_queue_only() if keep_triggering else mailbox.take_all()
            if mail:
                ledger.join_items([m.item for m in mail])

    def _call_runner(
        self, state: TurnState, stats: TurnStats, live: _Live
    ) -> Callable[[dict[str, Any]], Awaitable[ToolOutcome]]:
        """How a call of this step runs, in its own task (``InFlightCalls``)."""
        index = live.model_call_index
        tools = self._tools

        def resolve(call: dict[str, Any]) -> Runner | None:
            return tools.runner_for(call, state, index, stats)

        async def run(call: dict[str, Any]) -> ToolOutcome:
            return await run_call(call, resolve, emit=self._emit, turn_id=state.turn_id, model_call_index=index,
                                  stats=stats)

        return run

    async def _maybe_compact(self, state: TurnState, stats: TurnStats, live: _Live) -> bool:
        """Compact when the active context reached the auto-compact limit (SPEC sec. 8);
        True if it did."""
        window = context_window(state.settings.model)
        limit = auto_compact_limit(window)
        active = self._last_total_tokens + estimate_history_tokens(self._ledger.history, self._model.chain.delta_start)
        if active < limit:
            return False
        await self._compact(state, stats, live, window, active, limit)
        return True

    async def _compact_turn(self, state: TurnState, stats: TurnStats, live: _Live) -> TurnResult:
        """A manual compaction (``Agent.compact``): one compaction (remote, or local:
        ``_compaction``), whatever the size of the context; the turn has no input of its own."""
        live.input_recorded = True
        window = context_window(state.settings.model)
        active = self._last_total_tokens + estimate_history_tokens(self._ledger.history, self._model.chain.delta_start)
        response_id = await self._compact(state, stats, live, window, active, auto_compact_limit(window))
        self._context_recorded = True  # the compacted history carries the context messages
        checkpoint = self._ledger.snapshot(self._model.chain)
        self._fork_point.latest = checkpoint
        return TurnResult(state.turn_id, "", response_id, checkpoint=checkpoint,
                          lineage=self._session.prompt_cache_key, session=self._session)

    async def _compact(self, state: TurnState, stats: TurnStats, live: _Live, window: int, active: int,
                       limit: int) -> str | None:
        """Compact now and install the summary; the compaction's response id."""
        ledger = self._ledger
        if estimate_tokens([*ledger.prefix, *ledger.history]) > window:
            ledger.truncate_tool_outputs(window)
        stats.compactions += 1
        start = trio.current_time()
        try:
            done = await self._compactor.compact(
                state.settings, after_call_index=live.model_call_index, turn_id=state.turn_id,
                active_tokens=active, limit=limit,
            )
        finally:
            stats.model_duration_ns += ns(trio.current_time() - start)
        stats.usage = stats.usage + done.usage
        installed = done.install(ledger, permissions=self._permissions(), context=context_user_message(self._workspace))
        self._tell_permissions = False  # the compacted history carries the current ones
        self._last_total_tokens = estimate_tokens([*ledger.prefix, *installed])
        return done.response_id

    # -- endings (each emits exactly one terminal event) ---------------------------------

    def _ended(self, state: TurnState, status: TurnStatus, *, result: TurnResult | None = None,
               error: AgentError | None = None) -> None:
        self._tools.turn_ended(state.turn_id)
        state.finish(status, result=result, error=error)

    def _fail(self, state: TurnState, stats: TurnStats, live: _Live, start: float, error: TurnFailed,
              cause: BaseException) -> None:
        error.__cause__ = cause
        # Input this turn accepted is never lost: its own input and what was pending are
        # recorded once and never resent as input (triggering mail stays, to start one
        # turn of its own).
        self._record_own_input(state, live)
        if live.calls is not None:  # a bug cut the step short: history stays valid
            live.calls.pair_unanswered(self._emit, state.turn_id)
        self._record_pending(state, stats, keep_triggering=True)
        self._reporter.failed(state, stats, start, error, status="failed")
        self._ended(state, TurnStatus.FAILED, error=error)

    def _abort(self, state: TurnState, stats: TurnStats, live: _Live, start: float) -> None:
        """Pair unanswered calls, record the abort marker, drop the socket; then the terminal event.

        Everything here is synchronous (history, events), so it cannot be interrupted
        and needs no shield; tool processes are killed by their own shielded, bounded
        cleanup as the turn's scope unwinds.
        """
        self._record_own_input(state, live)  # SPEC sec. 4: the prompt stays in history
        if live.calls is not None:
            live.calls.pair_unanswered(self._emit, state.turn_id)
        if not state.compact:  # a cancelled manual compaction had no input to mark as aborted
            self._ledger.mark_aborted()
        self._model.abandon()
        self._fork_point.latest = self._ledger.snapshot(self._model.chain)
        error = TurnCancelled(f"turn {state.turn_id} was cancelled")
        self._reporter.failed(state, stats, start, error, status="cancelled")
        self._ended(state, TurnStatus.CANCELLED, error=error)
