"""A model call with its retries: ``model.call.*``, attempt events, backoff.

Theory of operation: each attempt enters the model client's attempt slot (the lock,
a ready socket), runs the caller's ``join`` -- the request boundary, where pending
steers and injected items join history and forks branch from -- and sends. A
retryable failure abandons the socket (the model client forgets the chain, so the
retry replays in full and finished tools are never re-run) and backs off on Trio's
clock; a failure that is not retried drops the socket too unless the response reached
its own terminal frame, so the next turn never reads a dead response's leftovers;
a preempting steer skips the rest of the backoff (SPEC sec. 4). A missing
checkpoint is replayed once in full on the same socket. Compaction requests
(``_compaction``) use the same loop without a ``join``: a compaction request never
carries a steer.

A generation hands each tool call to the turn's ``StreamedCalls`` as its item finishes
streaming (the turn starts it at once: ``_calls/_in_flight``). An attempt that fails
after handing over calls is settled before anything else happens to it --
``failed_attempt`` keeps its finished items and drains those calls into history (codex
keeps a failed attempt's items and drains its in-flight tools first) -- so a retry's
request, rebuilt from history, carries each of them once with its real output, and a
call never runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..._errors import ApiError, CheckpointMissing, ResponsesError
from ..._events import EventKind
from ..._transport.retry import backoff_delay, should_retry
from ..._units import ns
from ..._wire.request import RequestSettings
from ..._wire.stream import ResponseOutcome
from . import _call_events as events
from ._client import ModelClient
from ._response_feed import ResponseFeed

if TYPE_CHECKING:
    from .._turns._turn import Preemption
    from ._attempt import AttemptSlot

__all__ = ["Sampler", "StreamedCalls"]

Join = Callable[[], None]


class StreamedCalls(Protocol):
    """Where a generation's tool calls go as they stream (``_calls/_in_flight.InFlightCalls``)."""

    def dispatch(self, call: dict[str, Any]) -> None:
        """Start ``call`` (its item just finished streaming)."""

    async def failed_attempt(self, kept: tuple[dict[str, Any], ...]) -> None:
        """The attempt failed: keep its finished items ``kept`` and drain the calls it
        dispatched into history (nothing if it dispatched none)."""


def _ended_cleanly(exc: ResponsesError) -> bool:
    """The failed response reached its own terminal frame (an ``error`` or
    ``response.failed`` frame), so the connection holds nothing more of it."""
    return isinstance(exc, ApiError) and exc.event is not None


async def _settle(calls: StreamedCalls | None, slot: AttemptSlot | None) -> None:
    """A failed attempt's calls go into history (see the module docstring)."""
    if calls is not None and slot is not None and slot.feed is not None:
        await calls.failed_attempt(slot.feed.accumulator.kept)


class Sampler:
    def __init__(self, model: ModelClient) -> None:
        self._model = model
        self._emit = model.emit
        self._max_attempts = model.config.max_attempts
        self._now = trio.lowlevel.current_clock().current_time  # trio.current_time(), one call

    @property
    def model(self) -> ModelClient:
        return self._model

    async def generate(
        self, settings: RequestSettings, *, call_index: int, turn_id: int, preemption: Preemption, join: Join,
        calls: StreamedCalls | None = None, started: float | None = None,
    ) -> ResponseOutcome:
        """One model call (``model.call.started``/``completed``/``failed``) with retries;
        its tool calls go to ``calls`` as they stream. ``started``: when the caller began
        the call (its own clock reading, reused), else now."""
        start = self._now() if started is None else started
        announced = False

        def announce_then_join() -> None:
            nonlocal announced
            if not announced:  # inside the first slot: after the warmup, with its chain
                announced = True
                previous = self._model.chain.previous_response_id
                self._model.defer(lambda: self._emit(EventKind.MODEL_CALL_STARTED, events.omit_none({
                    "call_index": call_index, "model": settings.model, "reasoning_mode": "standard",
                    "effort": settings.effort, "previous_response_id": previous,
                }), turn_id))
            join()

        try:
            outcome, feed, attempt = await self.with_retries(
                settings, "generation", call_index, turn_id, preemption, announce_then_join, calls=calls
            )
        except ResponsesError as exc:
            self._emit(EventKind.MODEL_CALL_FAILED, {
                "call_index": call_index, "model": settings.model,
                "duration_ns": ns(self._now() - start), "error": str(exc),
            }, turn_id)
            raise
        events.call_completed(
            self._emit, outcome, model=settings.model, call_index=call_index, attempt=attempt,
            generation=self._model.generation, started=start, sent=feed.sent_at,
            first_event=feed.first_event, first_output=feed.first_output, turn_id=turn_id, now=self._now(),
        )
        return outcome

    async def with_retries(
        self, settings: RequestSettings, phase: str, call_index: int, turn_id: int,
        preemption: Preemption | None, join: Join | None, *, tail: Sequence[dict[str, Any]] = (),
        text_only: bool = False, calls: StreamedCalls | None = None,
    ) -> tuple[ResponseOutcome, ResponseFeed, int]:
        """The outcome, the exchange that produced it, and which attempt that was
        (``tail`` and ``text_only``: see ``AttemptSlot.send``; ``calls``: ``generate``)."""
        model = self._model
        max_attempts = self._max_attempts
        attempt = 1
        checkpoint_replayed = False
        on_call = calls.dispatch if calls is not None else None
        while True:
            attempt_start = self._now()
            slot: AttemptSlot | None = None
            try:
                async with model.attempt_slot(turn_id) as slot:
                    if join is not None:
                        join()
                    outcome = await slot.send(
                        settings, phase=phase, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
                        turn_id=turn_id, preemption=preemption, tail=tail, text_only=text_only, on_call=on_call,
                    )
                    assert slot.feed is not None
                    return outcome, slot.feed, attempt
            except ResponsesError as exc:
                model.redactor.scrub(exc)  # before the error is reported anywhere
                same_socket = isinstance(exc, CheckpointMissing) and not checkpoint_replayed
                refused = frozenset() if same_socket else model.refused_fields(exc)
                retry = same_socket or bool(refused) or should_retry(exc, attempt, max_attempts)
                events.attempt_failed(
                    self._emit, exc, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
                    started=attempt_start, retryable=retry, generation=model.generation, turn_id=turn_id,
                    phase=phase,
                )
                if not retry:
                    if not _ended_cleanly(exc):
                        model.invalidate("reconnect")  # never read a dead response's leftovers
                    await _settle(calls, slot)
                    raise
                if same_socket:
                    checkpoint_replayed = True
                    model.forget_chain()
                    delay = 0.0
                elif refused:  # at once, without them: each field is dropped once (bounded)
                    model.drop_fields(refused)
                    delay = 0.0
                else:
                    model.invalidate("reconnect")
                    delay = backoff_delay(attempt, call_index=call_index, retry_after=exc.retry_after)
                await _settle(calls, slot)
                events.retrying(
                    self._emit, exc, call_index=call_index, attempt=attempt, max_attempts=max_attempts, delay=delay,
                    new_socket=not (same_socket or refused), generation=model.generation, turn_id=turn_id, phase=phase,
                )
                model.stats.response_retries += 1
                if delay:
                    await self._backoff(delay, preemption)
                attempt += 1

    async def _backoff(self, delay: float, preemption: Preemption | None) -> None:
        """Sleep ``delay`` on Trio's clock; a preempting steer skips the rest (SPEC sec. 4)."""
        start = trio.current_time()
        with trio.CancelScope() as scope:
            if preemption is None:
                await trio.sleep(delay)
            elif not preemption.pending:

                def skip() -> None:
                    scope.cancel()

                with preemption.hook(skip):
                    await trio.sleep(delay)
        self._model.stats.retry_backoff_duration_ns += ns(trio.current_time() - start)
