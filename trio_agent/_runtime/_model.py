"""The model client: one per agent; owns its socket, attempts, retries and counters.

Theory of operation: every request (warmup or generation) runs under one lock, so
an agent's attempts are serialised and the first turn naturally waits for the
startup warmup. An attempt makes sure a usable socket exists (opening one with a
``purpose`` of ``initial``, ``warmup_fallback`` or ``reconnect``), decides between an
incremental and a full-replay body, sends it and feeds every frame through the
sans-IO ``ResponseAccumulator`` until the terminal frame. A retryable failure
abandons the socket, forgets the server-side chain (the retry replays in full, so
finished tools are never re-run) and backs off on Trio's clock; a missing checkpoint
is replayed once in full on the same socket. All time is Trio time, so
``MockClock`` drives timeouts and backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from .._config import AgentConfig, History, Transport
from .._errors import CheckpointMissing, ConnectionFailed, ResponsesError
from .._events import EventKind
from .._session.conversation import Conversation
from .._transport.retry import backoff_delay, should_retry
from .._wire.request import RequestSettings, build_response_create
from .._wire.stream import (
    AssistantMessageDone,
    ReasoningDelta,
    ResponseOutcome,
    TextDelta,
    TurnStateSeen,
)
from ._exchange import Exchange
from ._stats import TransportStats

if TYPE_CHECKING:
    from .._transport.websocket import WebSocketLink, WebSocketOptions
    from ._turn import Preemption

__all__ = ["ModelClient"]

Emit = Callable[..., Any]
_NS = 1_000_000_000
VERSION = "0.1.0"


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


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
        self._nursery = nursery
        self._lock = trio.Lock()
        self._link: WebSocketLink | None = None
        self._generation = 0
        self._chain_generation: int | None = None
        self._next_purpose = "initial"
        self._idle_timeout = idle_timeout
        self._connect_timeout = connect_timeout
        self.turn_state: str | None = None
        self.stats = TransportStats()
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
            EventKind.MODEL_WARMUP_STARTED,
            {"model": settings.model, "prompt_cache_key": settings.prompt_cache_key},
        )
        start = trio.current_time()
        sent_at = len(self._conversation.history)
        try:
            outcome = await self._attempt(
                settings, phase="warmup", call_index=None, attempt=1, max_attempts=1,
                turn_id=None, warmup=True,
            )
        except ResponsesError as exc:
            self.stats.warmup_duration_ns += _ns(trio.current_time() - start)
            self._emit(
                EventKind.MODEL_WARMUP_FAILED,
                {"duration_ns": _ns(trio.current_time() - start), "error": str(exc)},
            )
            self._invalidate("warmup_fallback")
            return
        duration = _ns(trio.current_time() - start)
        self.stats.warmup_duration_ns += duration
        self.stats.warmup_usage = self.stats.warmup_usage + outcome.usage
        self._conversation.chain_on(outcome.response_id)
        self._conversation.delta_start = sent_at
        self._chain_generation = self._generation
        self._emit(
            EventKind.MODEL_WARMUP_COMPLETED,
            {
                "response_id": outcome.response_id,
                "source": "response",
                "attempt": 1,
                "connection_generation": self._generation,
                "duration_ns": duration,
                "usage": outcome.usage_raw,
            },
        )

    async def generate(
        self,
        settings: RequestSettings,
        *,
        call_index: int,
        turn_id: int,
        preemption: Preemption | None = None,
        before_retry: Callable[[], None] | None = None,
    ) -> ResponseOutcome:
        """One model call with retries; emits ``model.call.*`` and attempt events.

        ``before_retry`` runs before every retry attempt (the driver joins pending
        steers there: a retry replays in full anyway, so they ride along).
        """
        async with self._lock:
            self._emit(
                EventKind.MODEL_CALL_STARTED,
                _omit_none({
                    "call_index": call_index,
                    "model": settings.model,
                    "reasoning_mode": "standard",
                    "effort": settings.effort,
                    "previous_response_id": self._conversation.previous_response_id,
                }),
                turn_id,
            )
            start = trio.current_time()
            try:
                outcome = await self._generate_with_retries(settings, call_index, turn_id, preemption, before_retry)
            except ResponsesError as exc:
                self._emit(
                    EventKind.MODEL_CALL_FAILED,
                    {
                        "call_index": call_index,
                        "model": settings.model,
                        "duration_ns": _ns(trio.current_time() - start),
                        "error": str(exc),
                    },
                    turn_id,
                )
                raise
            return outcome

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
        self.stats.retry_backoff_duration_ns += _ns(trio.current_time() - start)

    def abandon(self) -> None:
        """Drop the socket (e.g. after a cancelled turn): the next request reconnects
        and replays in full."""
        self._invalidate("reconnect")

    def close(self) -> None:
        self._warmup_scope.cancel()
        if self._link is not None:
            self._link.abandon()
            self._link = None

    # -- attempts ----------------------------------------------------------------------

    async def _generate_with_retries(
        self,
        settings: RequestSettings,
        call_index: int,
        turn_id: int,
        preemption: Preemption | None,
        before_retry: Callable[[], None] | None,
    ) -> ResponseOutcome:
        max_attempts = self._config.max_attempts
        attempt = 1
        checkpoint_replayed = False
        while True:
            attempt_start = trio.current_time()
            try:
                return await self._attempt(
                    settings, phase="generation", call_index=call_index, attempt=attempt,
                    max_attempts=max_attempts, turn_id=turn_id, preemption=preemption,
                )
            except ResponsesError as exc:
                retry_same_socket = isinstance(exc, CheckpointMissing) and not checkpoint_replayed
                retry = retry_same_socket or should_retry(exc, attempt, max_attempts)
                self._emit_attempt_failed(exc, call_index, attempt, max_attempts, attempt_start, retry, turn_id)
                if not retry:
                    raise
                if retry_same_socket:
                    checkpoint_replayed = True
                    self._conversation.reset_chain()
                    delay = 0.0
                else:
                    self._invalidate("reconnect")
                    delay = backoff_delay(attempt, call_index=call_index, retry_after=exc.retry_after)
                self._emit_retrying(exc, call_index, attempt, max_attempts, delay, not retry_same_socket, turn_id)
                self.stats.response_retries += 1
                if delay:
                    await self._backoff(delay, preemption)
                if before_retry is not None:
                    before_retry()
                attempt += 1

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
    ) -> ResponseOutcome:
        self.stats.response_attempts += 1
        if self._config.responses.transport is Transport.HTTPS:
            return await self._https_attempt(
                settings, phase=phase, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
                turn_id=turn_id, preemption=preemption,
            )
        link = await self._ensure_link(turn_id)
        body = self._body(settings, warmup=warmup)
        self._emit_attempt_started(body, phase, call_index, attempt, max_attempts, turn_id)
        outcome = await self._exchange(
            link, body, phase=phase, call_index=call_index, turn_id=turn_id, preemption=preemption
        )
        if not warmup:
            self._chain_generation = self._generation
        return outcome

    def _emit_attempt_started(
        self, body: dict[str, Any], phase: str, call_index: int | None, attempt: int, max_attempts: int,
        turn_id: int | None,
    ) -> None:
        self._emit(
            EventKind.MODEL_ATTEMPT_STARTED,
            _omit_none({
                "phase": phase,
                "model_call_index": call_index,
                "attempt": attempt,
                "max_attempts": max_attempts,
                "replay_mode": "incremental" if "previous_response_id" in body else "full_history",
                "previous_response_id": body.get("previous_response_id"),
                "connection_generation": self._generation,
            }, keep=("model_call_index",)),
            turn_id,
        )

    def _body(self, settings: RequestSettings, *, warmup: bool, websocket: bool = True) -> dict[str, Any]:
        conversation = self._conversation
        turn_state = self.turn_state if websocket else None
        if warmup:
            return build_response_create(settings, conversation.prefix, generate=False, turn_state=turn_state)
        # A server-side chain needs stored responses, or (store: false) the very socket
        # that produced it; HTTPS with store: false always replays (SPEC sec. 2).
        same_socket = websocket and self._chain_generation == self._generation
        full = (
            self._config.responses.history is History.FULL_REPLAY
            or not conversation.can_chain
            or (not settings.store and not same_socket)
        )
        if full:
            return build_response_create(
                settings, conversation.full_input(), websocket=websocket, turn_state=turn_state
            )
        return build_response_create(
            settings,
            conversation.incremental_input(),
            previous_response_id=conversation.previous_response_id,
            websocket=websocket,
            turn_state=turn_state,
        )

    async def _https_attempt(
        self,
        settings: RequestSettings,
        *,
        phase: str,
        call_index: int | None,
        attempt: int,
        max_attempts: int,
        turn_id: int | None,
        preemption: Preemption | None,
    ) -> ResponseOutcome:
        from ._https_exchange import HttpsExchange

        transport = self._https_transport()
        body = self._body(settings, warmup=False, websocket=False)
        self._emit_attempt_started(body, phase, call_index, attempt, max_attempts, turn_id)
        recovered = False
        while True:
            exchange = HttpsExchange(
                transport, emit=self._emit,
                on_stream_event=lambda event: self._stream_event(event, call_index, turn_id),
                phase=phase, call_index=call_index, turn_id=turn_id, preemption=preemption,
            )
            headers, snapshot = await _https_headers(self._config)
            try:
                outcome = await exchange.run(body, headers)
            except ResponsesError as exc:
                # ChatGPT auth: a 401 asks the source to recover once, then retries.
                if exc.status != 401 or snapshot is None or recovered:
                    raise
                recovered = True
                await self._config.auth.source.recover_unauthorized(snapshot)  # type: ignore[union-attr]
                continue
            self._call_completed(
                outcome, phase, call_index, turn_id, exchange.sent_at, exchange.first_event, exchange.first_output
            )
            return outcome

    def _https_transport(self) -> Any:
        if self._https is None:
            from .._transport.https import HttpsTransport  # lazy: httpx only when HTTPS is used

            self._https = HttpsTransport(
                self._config.api_base_url, client=self._config.responses.http_client,
                connect_timeout=self._connect_timeout, idle_timeout=self._idle_timeout,
            )
        return self._https

    async def aclose(self) -> None:
        """Close the HTTPS client if this agent created it (the socket is closed by ``close``)."""
        if self._https is not None:
            await self._https.aclose()

    async def _exchange(
        self,
        link: WebSocketLink,
        body: dict[str, Any],
        *,
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        preemption: Preemption | None = None,
    ) -> ResponseOutcome:
        exchange = Exchange(
            link,
            emit=self._emit,
            on_stream_event=lambda event: self._stream_event(event, call_index, turn_id),
            phase=phase,
            call_index=call_index,
            turn_id=turn_id,
            idle_timeout=self._idle_timeout,
            preemption=preemption,
        )
        outcome = await exchange.run(body)
        if not outcome.chained:
            # The server never answered the interrupt: give the socket up.
            self._invalidate("reconnect")
        self._call_completed(
            outcome, phase, call_index, turn_id, exchange.sent_at, exchange.first_event, exchange.first_output
        )
        return outcome

    def _stream_event(self, event: Any, call_index: int | None, turn_id: int | None) -> None:
        if isinstance(event, TextDelta):
            payload = _omit_none({
                "model_call_index": call_index, "item_id": event.item_id, "phase": event.phase,
                "text": event.text,
            })
            self._emit(EventKind.ASSISTANT_DELTA, payload, turn_id)
        elif isinstance(event, AssistantMessageDone):
            payload = _omit_none({
                "model_call_index": call_index, "item_id": event.item_id, "phase": event.phase,
                "text": event.text,
            })
            self._emit(EventKind.ASSISTANT_MESSAGE, payload, turn_id)
        elif isinstance(event, ReasoningDelta):
            self._emit(
                EventKind.REASONING_SUMMARY_DELTA,
                {"model_call_index": call_index, "text": event.text},
                turn_id,
            )
        elif isinstance(event, TurnStateSeen):
            self.turn_state = event.value

    def _call_completed(
        self,
        outcome: ResponseOutcome,
        phase: str,
        call_index: int | None,
        turn_id: int | None,
        sent: float,
        first_event: float | None,
        first_output: float | None,
    ) -> None:
        if phase != "generation":
            return
        now = trio.current_time()
        self._emit(
            EventKind.MODEL_CALL_COMPLETED,
            {
                "call_index": call_index,
                "model": self._config.model,
                "response_id": outcome.response_id,
                "attempt": 1,
                "connection_generation": self._generation,
                "status": outcome.status,
                "duration_ns": _ns(now - sent),
                "time_to_first_event_ns": _ns((first_event or now) - sent),
                "time_to_first_output_ns": _ns(first_output - sent) if first_output else None,
                "tool_calls": len(outcome.tool_calls),
                "usage": outcome.usage_raw,
            },
            turn_id,
        )

    # -- connections --------------------------------------------------------------------

    def _invalidate(self, purpose: str) -> None:
        if self._link is not None:
            self._link.abandon()
            self._link = None
        self._next_purpose = purpose
        self._conversation.reset_chain()

    async def _ensure_link(self, turn_id: int | None) -> WebSocketLink:
        if self._link is not None and self._link.usable:
            return self._link
        if self._link is not None:
            self._invalidate("reconnect")
        purpose = self._next_purpose
        self._generation += 1
        self.stats.connection_attempts += 1
        if purpose != "initial":
            self.stats.websocket_reconnects += 1
        base = {
            "transport": Transport.WEBSOCKET.value,
            "attempt": self.stats.connection_attempts,
            "purpose": purpose,
        }
        self._emit(
            EventKind.MODEL_CONNECTION_STARTED,
            {**base, "websocket_url": _strip_query(self._config.websocket_url),
             "connection_generation": self._generation},
            turn_id,
        )
        start = trio.current_time()
        from .._transport.websocket import open_connection  # lazy: keeps `import trio_agent` lean

        try:
            link = await open_connection(self._nursery, await self._options())
        except ConnectionFailed as exc:
            duration = _ns(trio.current_time() - start)
            self.stats.connection_duration_ns += duration
            self._emit(
                EventKind.MODEL_CONNECTION_FAILED,
                {**base, "duration_ns": duration, "error": str(exc),
                 "connection_generation": self._generation},
                turn_id,
            )
            raise
        duration = _ns(trio.current_time() - start)
        self.stats.connection_duration_ns += duration
        self._link = link
        self._next_purpose = "reconnect"
        if link.turn_state:
            self.turn_state = link.turn_state
        self._emit(
            EventKind.MODEL_CONNECTION_COMPLETED,
            {**base, "duration_ns": duration, "http_status": 101, "request_id": link.request_id,
             "server_model": link.server_model,
             "server_reasoning_included": link.reasoning_included,
             "connection_generation": self._generation},
            turn_id,
        )
        return link

    async def _options(self) -> WebSocketOptions:
        from .._transport.websocket import WebSocketOptions

        config = self._config
        session = config.session_id
        headers = [
            *await _auth_headers(config),
            ("OpenAI-Beta", "responses_websockets=2026-02-06"),
            ("x-openai-internal-codex-responses-lite", "true"),
            ("session-id", session),
            ("thread-id", session),
            ("x-client-request-id", session),
            ("x-responsesapi-include-timing-metrics", "true"),
            ("User-Agent", f"trio-agent/{VERSION}"),
        ]
        return WebSocketOptions(
            url=config.websocket_url,
            headers=tuple(headers),
            connect_timeout=self._connect_timeout,
            idle_timeout=self._idle_timeout,
        )

    # -- events ------------------------------------------------------------------------

    def _emit_attempt_failed(
        self, exc: ResponsesError, call_index: int, attempt: int, max_attempts: int,
        start: float, retryable: bool, turn_id: int,
    ) -> None:
        self._emit(
            EventKind.MODEL_ATTEMPT_FAILED,
            {
                "phase": "generation", "model_call_index": call_index, "attempt": attempt,
                "max_attempts": max_attempts, "duration_ns": _ns(trio.current_time() - start),
                "failure_phase": exc.failure_phase, "error_class": exc.error_class,
                "retryable": retryable, "connection_generation": self._generation,
                "error": str(exc),
            },
            turn_id,
        )

    def _emit_retrying(
        self, exc: ResponsesError, call_index: int, attempt: int, max_attempts: int,
        delay: float, new_socket: bool, turn_id: int,
    ) -> None:
        self._emit(
            EventKind.MODEL_ATTEMPT_RETRYING,
            {
                "phase": "generation", "model_call_index": call_index, "attempt": attempt,
                "next_attempt": attempt + 1, "max_attempts": max_attempts,
                "failure_phase": exc.failure_phase, "error_class": exc.error_class,
                "delay_ns": _ns(delay), "server_requested_delay": exc.retry_after is not None,
                "opens_new_socket": new_socket, "replay_mode": "full_history",
                "connection_generation": self._generation, "error": str(exc),
            },
            turn_id,
        )


async def _https_headers(config: AgentConfig) -> tuple[list[tuple[str, str]], Any]:
    """HTTPS request headers, and the ChatGPT auth snapshot they came from (or None)."""
    from .._config import ChatGptAuth

    session = config.session_id
    common = [
        ("x-openai-internal-codex-responses-lite", "true"),
        ("session-id", session),
        ("thread-id", session),
        ("x-client-request-id", session),
        ("User-Agent", f"trio-agent/{VERSION}"),
    ]
    if isinstance(config.auth, ChatGptAuth):
        snapshot = await config.auth.source.snapshot()
        auth = [("Authorization", f"Bearer {snapshot.token}")]
        if snapshot.account_id:
            auth.append(("ChatGPT-Account-ID", snapshot.account_id))
        return auth + common, snapshot
    return [("Authorization", f"Bearer {config.auth}"), *common], None


async def _auth_headers(config: AgentConfig) -> list[tuple[str, str]]:
    from .._config import ChatGptAuth

    if isinstance(config.auth, ChatGptAuth):
        snapshot = await config.auth.source.snapshot()
        headers = [("Authorization", f"Bearer {snapshot.token}")]
        if snapshot.account_id:
            headers.append(("ChatGPT-Account-ID", snapshot.account_id))
        return headers
    return [("Authorization", f"Bearer {config.auth}")]


def _strip_query(url: str) -> str:
    return url.split("?", 1)[0]


def _omit_none(payload: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if v is not None or k in keep}
