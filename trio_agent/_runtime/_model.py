"""The model client: one per agent; owns its transport, attempts, retries and counters.

Theory of operation: every request (warmup or generation) runs under one lock, so
an agent's attempts are serialised and the first turn naturally waits for the
startup warmup. An attempt makes sure a usable socket exists (``Connections``),
decides between an incremental and a full-replay body, sends it and feeds every
frame through the sans-IO ``ResponseAccumulator`` until the terminal frame
(``Exchange`` / ``HttpsExchange``). A retryable failure abandons the socket, forgets
the server-side chain (the retry replays in full, so finished tools are never
re-run) and backs off on Trio's clock; a missing checkpoint is replayed once in full
on the same socket. All time is Trio time, so ``MockClock`` drives timeouts and
backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from .._config import AgentConfig, ChatGptAuth, History, Transport
from .._errors import CheckpointMissing, ProtocolError, ResponsesError
from .._events import EventKind
from .._session.compaction import COMPACTION_TRIGGER
from .._session.conversation import Conversation
from .._transport.retry import backoff_delay, should_retry
from .._wire.request import RequestSettings, build_response_create
from .._wire.stream import ResponseOutcome, TurnStateSeen
from . import _model_events as events
from ._auth import https_headers
from ._connections import Connections
from ._exchange import Exchange
from ._model_events import ns, omit_none
from ._prompt_cache import SharedWarmups, fingerprint
from ._stats import TransportStats

if TYPE_CHECKING:
    from ._turn import Preemption

__all__ = ["ModelClient"]

Emit = Callable[..., Any]


class ModelClient:
    def __init__(
        self,
        config: AgentConfig,
        conversation: Conversation,
        emit: Emit,
        nursery: trio.Nursery,
        *,
        idle_timeout: float = 300.0,
        connect_timeout: float = 30.0,
    ) -> None:
        self._config = config
        self._conversation = conversation
        self._emit = emit
        self._lock = trio.Lock()
        self._idle_timeout = idle_timeout
        self._connect_timeout = connect_timeout
        self.stats = TransportStats()
        self._sockets = Connections(
            config, emit, nursery, self.stats, connect_timeout=connect_timeout, idle_timeout=idle_timeout
        )
        self._chain_generation: int | None = None
        self.turn_state: str | None = None
        self._https: Any = None
        # The startup warmup is not an accepted turn: closing the agent cancels it.
        self._warmup_scope = trio.CancelScope()

    # -- public ----------------------------------------------------------------------

    async def warmup(self, settings: RequestSettings, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Send the ``generate: false`` warmup; failures fall back to a full first request."""
        with self._warmup_scope:
            async with self._lock:
                task_status.started()
                await self._warmup_locked(settings)

    async def _warmup_locked(self, settings: RequestSettings) -> None:
        self._emit(
            EventKind.MODEL_WARMUP_STARTED, {"model": settings.model, "prompt_cache_key": settings.prompt_cache_key}
        )
        if not self._config.shared_prompt_cache:
            await self._warmup_request(settings)
            return
        key = fingerprint(settings.model, settings.prompt_cache_key, self._conversation.prefix)
        start = trio.current_time()
        if await SharedWarmups.claim(key) is not None:
            # Another agent warmed this prefix: no warmup of our own, a full first request.
            self._emit(EventKind.MODEL_WARMUP_COMPLETED, {
                "source": "shared_prefix", "duration_ns": ns(trio.current_time() - start), "usage": None,
            })
            return
        succeeded = False
        try:
            succeeded = await self._warmup_request(settings)
        finally:
            SharedWarmups.record(key, succeeded=succeeded)

    async def _warmup_request(self, settings: RequestSettings) -> bool:
        start = trio.current_time()
        sent_at = len(self._conversation.history)
        try:
            outcome = await self._attempt(
                settings, phase="warmup", call_index=None, attempt=1, max_attempts=1, turn_id=None, warmup=True
            )
        except ResponsesError as exc:
            self.stats.warmup_duration_ns += ns(trio.current_time() - start)
            self._emit(
                EventKind.MODEL_WARMUP_FAILED, {"duration_ns": ns(trio.current_time() - start), "error": str(exc)}
            )
            self._invalidate("warmup_fallback")
            return False
        duration = ns(trio.current_time() - start)
        self.stats.warmup_duration_ns += duration
        self.stats.warmup_usage = self.stats.warmup_usage + outcome.usage
        self._conversation.chain_on(outcome.response_id)
        self._conversation.delta_start = sent_at
        self._chain_generation = self._sockets.generation
        self._emit(EventKind.MODEL_WARMUP_COMPLETED, {
            "response_id": outcome.response_id, "source": "response", "attempt": 1,
            "connection_generation": self._sockets.generation, "duration_ns": duration, "usage": outcome.usage_raw,
        })
        return True

    async def generate(
        self,
        settings: RequestSettings,
        *,
        call_index: int,
        turn_id: int,
        preemption: Preemption | None = None,
        on_request: Callable[[], None] | None = None,
    ) -> ResponseOutcome:
        """One model call with retries; emits ``model.call.*`` and attempt events.

        ``on_request`` runs right before each attempt's body is built, inside the lock:
        the exact boundary the request is sent from (the driver joins pending steers
        and publishes the fork point there; a retry replays in full, so steers that
        arrived during the backoff ride along).
        """
        async with self._lock:
            self._emit(EventKind.MODEL_CALL_STARTED, omit_none({
                "call_index": call_index, "model": settings.model, "reasoning_mode": "standard",
                "effort": settings.effort, "previous_response_id": self._conversation.previous_response_id,
            }), turn_id)
            start = trio.current_time()
            try:
                return await self._generate_with_retries(
                    settings, call_index, turn_id, preemption, on_request
                )
            except ResponsesError as exc:
                self._emit(EventKind.MODEL_CALL_FAILED, {
                    "call_index": call_index, "model": settings.model,
                    "duration_ns": ns(trio.current_time() - start), "error": str(exc),
                }, turn_id)
                raise

    async def compact(
        self,
        settings: RequestSettings,
        *,
        after_call_index: int,
        turn_id: int,
        active_tokens: int,
        limit: int,
    ) -> ResponseOutcome:
        """A compaction request (``model.compaction.*`` events); returns the response
        whose output holds exactly one ``compaction`` item (``ProtocolError`` otherwise)."""
        async with self._lock:
            self._emit(EventKind.MODEL_COMPACTION_STARTED, {
                "after_model_call_index": after_call_index, "active_context_tokens": active_tokens,
                "auto_compact_token_limit": limit, "previous_response_id": self._conversation.previous_response_id,
            }, turn_id)
            start = trio.current_time()
            try:
                outcome = await self._generate_with_retries(
                    settings, after_call_index, turn_id, None, None, phase="compaction"
                )
                items = [i for i in outcome.output if i.get("type") in ("compaction", "compaction_summary")]
                if len(items) != 1:
                    raise ProtocolError(
                        f"remote compaction returned {len(items)} compaction items; expected exactly one",
                        error_class="invalid_compaction_output",
                    )
            except ResponsesError as exc:
                self._emit(EventKind.MODEL_COMPACTION_FAILED, {
                    "after_model_call_index": after_call_index, "duration_ns": ns(trio.current_time() - start),
                    "error": str(exc),
                }, turn_id)
                raise
            self._emit(EventKind.MODEL_COMPACTION_COMPLETED, {
                "after_model_call_index": after_call_index, "response_id": outcome.response_id, "attempt": 1,
                "connection_generation": self._sockets.generation, "status": outcome.status,
                "duration_ns": ns(trio.current_time() - start), "usage": outcome.usage_raw,
            }, turn_id)
            return outcome

    def abandon(self) -> None:
        """Drop the socket (e.g. after a cancelled turn): the next request reconnects
        and replays in full."""
        self._invalidate("reconnect")

    def close(self) -> None:
        self._warmup_scope.cancel()
        self._sockets.close()

    async def aclose(self) -> None:
        """Close the HTTPS client if this agent created it (``close`` drops the socket)."""
        if self._https is not None:
            await self._https.aclose()

    # -- attempts ----------------------------------------------------------------------

    async def _generate_with_retries(
        self,
        settings: RequestSettings,
        call_index: int,
        turn_id: int,
        preemption: Preemption | None,
        on_request: Callable[[], None] | None,
        phase: str = "generation",
    ) -> ResponseOutcome:
        max_attempts = self._config.max_attempts
        attempt = 1
        checkpoint_replayed = False
        while True:
            attempt_start = trio.current_time()
            try:
                return await self._attempt(
                    settings, phase=phase, call_index=call_index, attempt=attempt,
                    max_attempts=max_attempts, turn_id=turn_id, preemption=preemption, on_request=on_request,
                )
            except ResponsesError as exc:
                same_socket = isinstance(exc, CheckpointMissing) and not checkpoint_replayed
                retry = same_socket or should_retry(exc, attempt, max_attempts)
                events.attempt_failed(
                    self._emit, exc, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
                    started=attempt_start, retryable=retry, generation=self._sockets.generation, turn_id=turn_id,
                    phase=phase,
                )
                if not retry:
                    raise
                if same_socket:
                    checkpoint_replayed = True
                    self._conversation.reset_chain()
                    delay = 0.0
                else:
                    self._invalidate("reconnect")
                    delay = backoff_delay(attempt, call_index=call_index, retry_after=exc.retry_after)
                events.retrying(
                    self._emit, exc, call_index=call_index, attempt=attempt, max_attempts=max_attempts, delay=delay,
                    new_socket=not same_socket, generation=self._sockets.generation, turn_id=turn_id, phase=phase,
                )
                self.stats.response_retries += 1
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

                async def skip() -> None:
                    scope.cancel()

                with preemption.hook(skip):
                    await trio.sleep(delay)
        self.stats.retry_backoff_duration_ns += ns(trio.current_time() - start)

    async def _attempt(
        self,
        settings: RequestSettings,
        *,
        phase: str,
        call_index: int | None,
        attempt: int,
        max_attempts: int,
        turn_id: int | None,
        warmup: bool = False,
        preemption: Preemption | None = None,
        on_request: Callable[[], None] | None = None,
    ) -> ResponseOutcome:
        self.stats.response_attempts += 1
        websocket = self._config.responses.transport is Transport.WEBSOCKET
        if websocket:
            if self._sockets.link is not None and not self._sockets.usable:
                self._invalidate("reconnect")  # the server closed it: reconnect and replay
            link = await self._sockets.ensure(turn_id)
            if link.turn_state:
                self.turn_state = link.turn_state
            if self._sockets.generation != self._chain_generation and not settings.store:
                self._conversation.reset_chain()  # store: false ids die with their socket
        if on_request is not None:
            on_request()
        body = self._body(settings, warmup=warmup, websocket=websocket)
        if phase == "compaction":
            body["input"].append(dict(COMPACTION_TRIGGER))
        events.attempt_started(
            self._emit, body, phase=phase, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
            generation=self._sockets.generation, turn_id=turn_id,
        )
        on_event = self._on_stream_event(call_index, turn_id)
        if websocket:
            exchange: Any = Exchange(
                link, emit=self._emit, on_stream_event=on_event, phase=phase, call_index=call_index,
                turn_id=turn_id, idle_timeout=self._idle_timeout, preemption=preemption,
            )
            outcome = await exchange.run(body)
            if not outcome.chained:
                self._invalidate("reconnect")  # the server never answered the interrupt
        else:
            exchange, outcome = await self._https_exchange(body, phase, call_index, turn_id, preemption, on_event)
        assert isinstance(outcome, ResponseOutcome)
        if not warmup:
            self._chain_generation = self._sockets.generation
        if phase == "generation":
            events.call_completed(
                self._emit, outcome, model=self._config.model, call_index=call_index,
                generation=self._sockets.generation, sent=exchange.sent_at, first_event=exchange.first_event,
                first_output=exchange.first_output, turn_id=turn_id,
            )
        return outcome

    def _body(self, settings: RequestSettings, *, warmup: bool, websocket: bool) -> dict[str, Any]:
        conversation = self._conversation
        turn_state = self.turn_state if websocket else None
        if warmup:
            return build_response_create(settings, conversation.prefix, generate=False, turn_state=turn_state)
        # HTTPS with store: false cannot chain at all (SPEC sec. 2).
        full = (
            self._config.responses.history is History.FULL_REPLAY
            or not conversation.can_chain
            or (not settings.store and not websocket)
        )
        if full:
            return build_response_create(
                settings, conversation.full_input(), websocket=websocket, turn_state=turn_state
            )
        return build_response_create(
            settings, conversation.incremental_input(), previous_response_id=conversation.previous_response_id,
            websocket=websocket, turn_state=turn_state,
        )

    async def _https_exchange(
        self, body: dict[str, Any], phase: str, call_index: int | None, turn_id: int | None,
        preemption: Preemption | None, on_event: Callable[[Any], None],
    ) -> tuple[Any, ResponseOutcome]:
        from ._https_exchange import HttpsExchange

        if self._https is None:
            from .._transport.https import HttpsTransport  # lazy: httpx only when HTTPS is used

            self._https = HttpsTransport(
                self._config.api_base_url, client=self._config.responses.http_client,
                connect_timeout=self._connect_timeout, idle_timeout=self._idle_timeout,
            )
        recovered = False
        while True:
            exchange = HttpsExchange(
                self._https, emit=self._emit, on_stream_event=on_event, phase=phase, call_index=call_index,
                turn_id=turn_id, preemption=preemption,
            )
            headers, snapshot = await https_headers(self._config)
            try:
                return exchange, await exchange.run(body, headers)
            except ResponsesError as exc:
                # ChatGPT auth: a 401 asks the source to recover once, then retries.
                if exc.status != 401 or snapshot is None or recovered:
                    raise
                recovered = True
                assert isinstance(self._config.auth, ChatGptAuth)
                await self._config.auth.source.recover_unauthorized(snapshot)

    def _on_stream_event(self, call_index: int | None, turn_id: int | None) -> Callable[[Any], None]:
        def on_event(event: Any) -> None:
            if isinstance(event, TurnStateSeen):
                self.turn_state = event.value
            else:
                events.stream_event(self._emit, event, call_index, turn_id)

        return on_event

    def _invalidate(self, purpose: str) -> None:
        self._sockets.invalidate(purpose)
        self._conversation.reset_chain()
