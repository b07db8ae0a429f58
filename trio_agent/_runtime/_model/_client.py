"""The model client: one per agent; owns its transport, the response chain and counters.

Theory of operation: every attempt (warmup, generation or compaction) runs in an
*attempt slot* under one lock, so an agent's attempts are serialised and the first
turn naturally waits for the startup warmup. Entering a slot makes sure a usable
socket exists (``Connections``) and forgets the chain when ``store: false`` ids died
with an old socket; inside the slot the caller joins its pending input to history
(the exact boundary the request is built from) and then ``send``s: the body is an
incremental or full-replay request built from the ledger's history and the
``Chain`` (``RequestBodies``), and one exchange feeds every frame through the sans-IO
accumulator until the terminal frame. Entering the slot chooses the attempt's route
once (``_exchange.py``): the live socket, or HTTPS with this attempt's headers
(``HttpsAuth``); nothing later asks which transport it is.

The client reads history but never writes it. It owns the ``Chain`` and moves it as
the ledger publishes: a committed response's output chains on that response, a
rewrite (compaction) forgets it. Anything that loses the server-side chain -- a
dropped socket, a cancelled turn, a warmup failure -- resets it here. Retries and
their policy live with the caller (``_sampling``). All time is Trio time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..._config import AgentConfig, Transport
from ..._errors import ResponsesError
from ..._events import EventKind
from ..._session.conversation import Chain
from ..._session.ledger import Committed, LedgerEvent, Rewritten, TurnLedger
from ..._transport._quick_lock import QuickLock
from ..._units import ns
from ..._wire.request import RequestSettings
from ..._wire.stream import (
    AssistantMessageDone,
    CallDiscarded,
    ForeignFrame,
    MailFlag,
    ReasoningDelta,
    ResponseOutcome,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    TurnStateSeen,
)
from .._counters import TransportStats
from .._secrets import Redactor
from . import _call_events as events
from ._attempt import AttemptSlot, Held
from ._bodies import RequestBodies
from ._connections import Connections, EarlyLink
from ._https_auth import HttpsAuth
from ._prompt_cache import SharedWarmups, fingerprint
from ._response_feed import ResponseFeed
from ._websocket_exchange import WebSocketRoute

if TYPE_CHECKING:
    from ..._events import EventSink
    from ..._transport._early_dial import EarlyDial
    from ..._transport.https import HttpsTransport
    from ..._transport.tap import ConnectionTap
    from ..._transport.websocket import WebSocketLink
    from ._exchange import ResponseExchange, Route

__all__ = ["ModelClient", "fallback_status"]

#: Handshake answers that are about credentials, limits or the server's health, not
#: about a missing WebSocket endpoint: never a reason to fall back to HTTPS.
_NO_FALLBACK = frozenset({401, 403, 407, 408, 429})


def fallback_status(exc: ResponsesError) -> bool:
    """Whether ``exc`` is a handshake answered with a status that says "no WebSocket
    endpoint here" (404, 405, 426, 200, 400...): any status but ``101`` except
    credentials (401, 403, 407), timeouts and limits (408, 429) and server errors
    (5xx), which HTTPS would meet too."""
    return (exc.error_class == "handshake_rejected" and exc.status is not None
            and exc.status not in _NO_FALLBACK and exc.status < 500)

Emit = Callable[..., Any]
Defer = Callable[[Callable[[], object]], None]


class ModelClient:
    def __init__(
        self,
        config: AgentConfig,
        ledger: TurnLedger,
        sink: EventSink,
        nursery: trio.Nursery,
        *,
        chain: Chain | None = None,
        tap: ConnectionTap | None = None,
        redactor: Redactor | None = None,
        api_events: bool = True,
        early: EarlyLink | EarlyDial | None = None,
    ) -> None:
        """``tap``: the observer seam's connection tap, given to both transports;
        ``early``: the first socket (``_connections.EarlyLink``) or HTTPS connection
        (``_transport._early_dial``), started before the agent was built;
        ``api_events``: whether frames are reported as ``api.event`` (the application's
        choice, or an observer's that reads them: its sink keeps them out of
        ``agent.events``, ``_observers.ObservedSink``)."""
        self._config = config
        self._ledger = ledger
        self._emit: Emit = sink.emit
        # Events announcing a request are emitted once it is on the wire (EventSink.defer).
        self.defer: Defer = sink.defer
        self._flush = sink.flush
        self._lock = QuickLock()  # taken by every attempt: without trio.Lock's bookkeeping
        self._idle_timeout = config.responses.idle_timeout
        self._api_events = api_events
        self.stats = TransportStats()
        self.chain = chain or Chain()
        self.redactor = redactor if redactor is not None else Redactor()  # every credential sent
        if isinstance(config.auth, str):
            self.redactor.add(config.auth)
        self._tap = tap
        self._early_dial = early if not isinstance(early, EarlyLink) else None
        self._sockets = Connections(config, self._emit, nursery, self.stats, self.redactor, tap,
                                    early if isinstance(early, EarlyLink) else None)
        # The transport in use: the configured one, until a server with no WebSocket
        # endpoint moves a default-transport agent to HTTPS (``_fall_back``, once).
        self.transport = config.responses.transport
        self._chain_generation: int | None = None
        self.turn_state: str | None = None
        self._https: HttpsTransport | None = None
        self.unfinished: ResponseExchange | None = None  # a response whose rest is unread (settle)
        self.bodies = RequestBodies(config, ledger)
        self.portable = self.bodies.portable
        self._https_auth = HttpsAuth(config, self.redactor)
        # The startup warmup is not an accepted turn: closing the agent cancels it.
        self._warmup_scope = trio.CancelScope()
        ledger.subscribe(self._on_ledger)

    @property
    def generation(self) -> int:
        return self._sockets.generation

    # -- the chain follows the ledger --------------------------------------------------

    def _on_ledger(self, event: LedgerEvent) -> None:
        if isinstance(event, Committed):
            if event.response_id is not None:
                self.chain = self.chain.on(event.response_id, len(event.history))
        elif isinstance(event, Rewritten):
            if event.reason == "compaction" or self.chain.delta_start > event.unchanged:
                self.chain = Chain()  # the server's copy no longer matches: replay in full

    def forget_chain(self) -> None:
        """The next request replays in full (e.g. a missing checkpoint, on the same socket)."""
        self.chain = self.chain.reset()

    def invalidate(self, purpose: str) -> None:
        """Drop the socket and the chain; the next socket opens with ``purpose``."""
        self._sockets.invalidate(purpose)
        self.chain = self.chain.reset()

    def abandon(self) -> None:
        """Drop the socket (e.g. after a cancelled turn): the next request reconnects
        and replays in full."""
        self.invalidate("reconnect")

    # -- warmup ------------------------------------------------------------------------

    async def warmup(self, settings: RequestSettings, request: bool = True, *,
                     task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Send the ``generate: false`` warmup; failures fall back to a full first request.

        ``request=False`` (``open_agent(config, warmup=False)``: the first prompt is in
        hand) opens the socket only, still holding the model: that prompt, already
        waiting for the model, goes out as a full request the moment the socket is open,
        instead of one round trip later chained on a warmup. A prompt that merely arrives
        early (``prompt()`` right after ``open_agent``) still waits for the warmup and
        chains on it, as SPEC sec. 3 and codex's first turn do (it waits for its startup
        prewarm: ``consume_startup_prewarm_for_regular_turn``); pipelining it behind the
        warmup on one socket could not chain on an id not yet known, and two
        ``response.create`` in flight on one socket is not the Responses protocol."""
        with self._warmup_scope:
            async with self._lock:
                task_status.started()
                if self.portable or not request:
                    # No warmup request (``generate: false`` is OpenAI's; or the prompt
                    # is in hand): the socket only.
                    await self._open_early()
                else:
                    await self._warmup_locked(settings)
                self._learn_request(settings)

    def _learn_request(self, settings: RequestSettings) -> None:
        """Encode the first generation request's repeated part now (``RequestText``), while
        the agent waits for its first prompt, not on that request's way out."""
        websocket = self.transport is Transport.WEBSOCKET
        body = self.body(settings, warmup=False, websocket=websocket)
        self.body_text(body, settings, warmup=False, websocket=websocket)

    async def _warmup_locked(self, settings: RequestSettings) -> None:
        self._emit(
            EventKind.MODEL_WARMUP_STARTED, {"model": settings.model, "prompt_cache_key": settings.prompt_cache_key}
        )
        if not self._config.shared_prompt_cache:
            await self._warmup_request(settings)
            return
        key = fingerprint(settings.model, settings.prompt_cache_key, self._ledger.prefix)
        start = trio.current_time()
        if await SharedWarmups.claim(key) is not None:
            # Another agent warmed this prefix: no warmup of our own, a full first request.
            await self._open_early()  # before "completed": the agent is then ready to send
            self._emit(EventKind.MODEL_WARMUP_COMPLETED, {
                "source": "shared_prefix", "duration_ns": ns(trio.current_time() - start), "usage": None,
            })
            return
        succeeded = False
        try:
            succeeded = await self._warmup_request(settings)
        finally:
            SharedWarmups.record(key, succeeded=succeeded)

    async def _open_early(self) -> None:
        """Open the socket now, still holding the model, so that the first request -- a
        full one, the prefix being warm on the server -- does not wait for the connect
        and the handshake (about one round trip). A failure here is only reported
        (``model.connection.failed``); the first request connects again, as it would
        have without this."""
        try:
            await self._link(None)
        except ResponsesError:
            pass

    async def _link(self, turn_id: int | None) -> WebSocketLink | None:
        """The socket (``Connections.ensure``), or None once the agent has fallen back to
        HTTPS: a default-transport agent whose handshake is answered with a status that
        says "no WebSocket here" (``fallback_status``) goes on over HTTPS, once."""
        if self.transport is not Transport.WEBSOCKET:
            return None
        try:
            return await self._sockets.ensure(turn_id)
        except ResponsesError as exc:
            if not (self._config.responses.https_fallback and fallback_status(exc)):
                raise
            self._fall_back(exc)
            return None

    def _fall_back(self, exc: ResponsesError) -> None:
        self.transport = Transport.HTTPS
        self.chain = self.chain.reset()  # nothing chains across transports
        self._emit(EventKind.API_WARNING, {
            "code": "transport_fallback", "status": exc.status,
            "message": f"the server answered the WebSocket handshake with HTTP {exc.status}: it has no WebSocket "
                       f"endpoint at {self._config.websocket_url}; using HTTPS ({self._config.api_base_url}"
                       "/responses) from now on (--transport https says so up front)",
        })

    async def _warmup_request(self, settings: RequestSettings) -> bool:
        start = trio.current_time()
        sent_at = len(self._ledger.history)
        try:
            slot = await self.enter(None)
            if not slot.websocket:  # the server has no WebSocket endpoint: nothing to warm
                self._emit(EventKind.MODEL_WARMUP_FAILED, {
                    "duration_ns": ns(trio.current_time() - start),
                    "error": "no warmup: the agent fell back to HTTPS",
                })
                return False
            outcome = await slot.send(settings, phase="warmup", call_index=None, attempt=1, max_attempts=1,
                                      turn_id=None, preemption=None, warmup=True)
        except ResponsesError as exc:
            self.stats.warmup_duration_ns += ns(trio.current_time() - start)
            self._emit(
                EventKind.MODEL_WARMUP_FAILED, {"duration_ns": ns(trio.current_time() - start), "error": str(exc)}
            )
            self.invalidate("warmup_fallback")
            return False
        duration = ns(trio.current_time() - start)
        self.stats.warmup_duration_ns += duration
        self.stats.warmup_usage = self.stats.warmup_usage + outcome.usage
        self.chain = self.chain.on(outcome.response_id, sent_at)
        self._chain_generation = self._sockets.generation
        self._emit(EventKind.MODEL_WARMUP_COMPLETED, {
            "response_id": outcome.response_id, "source": "response", "attempt": 1,
            "connection_generation": self._sockets.generation, "duration_ns": duration, "usage": outcome.usage_raw,
        })
        return True

    # -- attempts ----------------------------------------------------------------------

    def attempt_slot(self, turn_id: int | None) -> Held:
        """``async with`` it to hold the model for one attempt: the socket (or HTTPS
        headers) is ready and the chain is what the request will use. Join pending
        input, then ``send``."""
        return Held(self._lock, self, turn_id)

    def enter_now(self) -> AttemptSlot | None:
        """``enter`` without a wait when the attempt goes on the live socket (the warm
        path); None when it needs one (a connect, HTTPS)."""
        link = self._sockets.link
        if self.transport is not Transport.WEBSOCKET or link is None or not link.usable:
            return None
        self.stats.response_attempts += 1
        return AttemptSlot(self, self._websocket_route(link))

    async def enter(self, turn_id: int | None) -> AttemptSlot:
        self.stats.response_attempts += 1
        return AttemptSlot(self, await self._route(turn_id))

    async def _route(self, turn_id: int | None) -> Route:
        """The attempt's route, chosen once: the socket, or HTTPS (configured, or after
        the fallback) with this attempt's headers."""
        link = None
        if self.transport is Transport.WEBSOCKET:
            sockets = self._sockets
            if sockets.usable:
                link = sockets.link  # the live socket, as ``_link`` would return it (one check, not two)
            else:
                if sockets.link is not None:
                    self.invalidate("reconnect")  # the server closed it: reconnect and replay
                link = await self._link(turn_id)
        if link is None:
            from ._https_exchange import HttpsRoute  # loaded by the first HTTPS attempt

            return HttpsRoute(self.https(), self._https_auth, await self._https_auth.credentials())
        return self._websocket_route(link)

    def _websocket_route(self, link: WebSocketLink) -> WebSocketRoute:
        if link.turn_state:
            self.turn_state = link.turn_state
        if self._sockets.generation != self._chain_generation and not self._config.store:
            self.chain = self.chain.reset()  # store: false ids die with their socket
        return WebSocketRoute(link, self._idle_timeout, self._sockets.finished)

    def body(self, settings: RequestSettings, *, warmup: bool, websocket: bool) -> dict[str, Any]:
        """The request body from history and the chain as they stand (``RequestBodies``)."""
        return self.bodies.body(settings, self.chain, self.turn_state if websocket else None,
                                warmup=warmup, websocket=websocket)

    def body_text(self, body: dict[str, Any], settings: RequestSettings, *, warmup: bool, websocket: bool) -> str:
        """``dumps(body)``, encoding only what changes from one request to the next."""
        return self.bodies.text(body, settings, self.turn_state if websocket else None,
                                warmup=warmup, websocket=websocket)

    def refused_fields(self, exc: ResponsesError) -> frozenset[str]:
        return self.bodies.refused_fields(exc)

    def drop_fields(self, fields: frozenset[str]) -> None:
        self.bodies.drop_fields(fields, self._emit)

    def feed(self, route: Route, phase: str, call_index: int | None, turn_id: int | None,
             mail: MailFlag | None = None, on_call: Callable[[dict[str, Any]], None] | None = None) -> ResponseFeed:
        """Where one exchange's frames go: events, the turn state, the accumulator;
        ``on_call`` is handed each finished tool call as it streams (``ToolCallReady``)."""
        def on_event(event: StreamEvent) -> None:
            if isinstance(event, TextDelta | AssistantMessageDone | ReasoningDelta):  # the common ones first
                events.stream_event(self._emit, event, call_index, turn_id)
            elif isinstance(event, ToolCallReady):
                if on_call is not None:
                    on_call(event.item)
            elif isinstance(event, TurnStateSeen):
                self.turn_state = event.value
            elif isinstance(event, CallDiscarded):
                self._emit(EventKind.API_WARNING, {
                    "code": "discarded_tool_call",
                    "message": f"ignored a tool call item of the response being read ({event.reason}: "
                               f"call_id {event.call_id}); it is not kept and never runs",
                }, turn_id)
            elif isinstance(event, ForeignFrame):
                self._emit(EventKind.API_WARNING, {
                    "code": "foreign_response_frame", "frame": event.frame_type, "response_id": event.response_id,
                    "live_response_id": event.live_response_id,
                    "message": f"ignored a {event.frame_type} frame of response {event.response_id!r}, "
                               "which is not the response being read",
                }, turn_id)

        feed = ResponseFeed(
            transport=route.transport_name, emit=self._emit, on_stream_event=on_event, phase=phase,
            call_index=call_index, turn_id=turn_id, stale=route.stale, api_events=self._api_events,
            defer=self.defer, flush=self._flush,
        )
        feed.accumulator.mail = mail  # whether mail waits, as data (see _wire.stream)
        return feed

    async def settle(self, *, others_first: bool = False) -> None:
        """Finish the last HTTPS response (read its rest, close it: the connection goes back
        to the pool). The runner calls this once a turn's result is out (``others_first``);
        the next attempt does it first in any case."""
        if self.unfinished is None:
            return
        if others_first:
            # Every task the turn's end woke (the one awaiting its result) takes its step
            # first: the first checkpoint puts this task in the next scheduler round, the
            # second in the round after it, whatever the order within a round.
            await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
        exchange, self.unfinished = self.unfinished, None
        if exchange is not None:
            await exchange.finish()

    def https(self) -> HttpsTransport:
        if self._https is None:
            from ..._transport.https import https_transport  # lazy: httpx only when HTTPS is used

            self._https = https_transport(self._config, self._tap, self._early_dial)
        return self._https

    def completed(self, outcome: ResponseOutcome, *, warmup: bool) -> None:
        if not warmup:
            self._chain_generation = self._sockets.generation
        if not outcome.chained:
            if outcome.clean_end:
                self.forget_chain()  # a cut response: keep the socket, replay in full
            else:
                self.invalidate("reconnect")  # the server never answered the interrupt

    @property
    def config(self) -> AgentConfig:
        return self._config

    @property
    def emit(self) -> Emit:
        return self._emit

    @property
    def idle_timeout(self) -> float:
        return self._idle_timeout

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        self._warmup_scope.cancel()
        self._sockets.close()
        if self._early_dial is not None:
            self._early_dial.discard()

    async def aclose(self) -> None:
        """Close the HTTPS client if this agent created it (``close`` drops the socket)."""
        try:
            await self.settle()
        finally:
            if self._early_dial is not None:
                await self._early_dial.aclose()  # unclaimed: no request went out
            if self._https is not None:
                await self._https.aclose()
