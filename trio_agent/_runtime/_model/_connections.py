"""The agent's WebSocket: at most one live socket, its purpose, generation and events.

A socket is opened on demand (``ensure``) with a ``purpose`` of ``initial``,
``warmup_fallback`` or ``reconnect`` and a fresh ``connection_generation``;
``invalidate`` abandons it (its task closes it) and says why the next one opens.
Forgetting the server-side chain when a socket goes is the caller's business.

``close`` (the agent is shutting down) abandons the socket and refuses new ones. A
handshake that completes in the same scheduling tick as ``close`` -- its task was
already woken with the server's answer, so the cancellation of the caller cannot reach
it before it reports the link -- hands back a link ``close`` never saw; ``ensure``
checks the closed flag right after the handshake (no checkpoint between) and abandons
that link itself, so its task ends and the agent's nursery can exit.

An early socket (``EarlyLink``): the block of a root opened with ``warmup=False`` (its
first prompt in hand: ``trio-agent run``; ``_lifecycle.run_agent``) starts its first
socket before the agent is built -- the connect and the handshake request on their
way, their round trip spent building the agent (tools, rollout, permissions) instead
of after it. It is that agent's first ``ensure``'s handshake, done sooner: the
same ``_open`` (headers, the 401 recovery), the same options, the same connection
events (emitted by ``ensure``, which waits for the outcome), and its failure is that
``ensure``'s failure -- one attempt on the wire, as before, with the same error and the
same retries above it. Nothing else changes: a later socket, a fork's (seeded), a
tapped agent's (tracing, a cassette: the tap is made with the agent), any agent opened
with the default ``warmup=True`` open as before. What differs is only an agent whose
construction fails (a locked rollout): its early socket had opened, and is closed.
Its task runs in the agent's nursery; unclaimed at ``close``, its link is abandoned
as soon as it exists.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..._config import AgentConfig, Transport
from ..._errors import AuthenticationError, ConnectionFailed, ResponsesError
from ..._events import EventKind
from ..._transport.auth import recover_unauthorized, websocket_auth
from ..._units import ns
from .._counters import TransportStats
from .._secrets import Redactor

if TYPE_CHECKING:
    from ..._transport._early_dial import EarlyDial
    from ..._transport.tap import ConnectionTap
    from ..._transport.websocket import Dialer, WebSocketLink

__all__ = ["Connections", "EarlyLink"]


async def _open_link(
    config: AgentConfig, nursery: trio.Nursery, redactor: Callable[[str | None], None], purpose: str,
    tap: ConnectionTap | None = None, sent: Callable[[], object] | None = None, dialer: Dialer | None = None,
) -> WebSocketLink:
    """Handshake once; with ChatGPT auth a 401 asks the source to recover once and
    handshakes again (SPEC sec. 6). The headers are fetched per connection (a token
    may have been refreshed); a failing auth source fails it like a refusal."""
    from ..._transport.websocket import WebSocketOptions, open_connection  # lazy: lean `import trio_agent`

    recovered = False
    while True:
        headers, snapshot = await websocket_auth(config)
        redactor(snapshot.token if snapshot is not None else None)
        options = WebSocketOptions(
            url=config.websocket_url, headers=tuple(headers),
            connect_timeout=config.responses.connect_timeout,
            handshake_timeout=config.responses.handshake_timeout,
            idle_timeout=config.responses.idle_timeout,
            ssl_context=config.responses.ssl_context, dialer=dialer or config.responses.dialer,
            tap=tap, purpose=purpose, sent=sent,
        )
        try:
            return await open_connection(nursery, options)
        except ResponsesError as exc:
            if not isinstance(exc, AuthenticationError) or exc.status != 401 or snapshot is None or recovered:
                raise
            recovered = True
            sent = None  # told already: the first handshake's bytes left
            await recover_unauthorized(config, snapshot)


class EarlyLink:
    """A root agent's first socket, opened before the agent is built (module docstring).

    ``run`` (a task in the agent's nursery) opens it; ``sent`` is set once the
    handshake's first bytes are out, or the attempt ended -- the opener waits for that,
    then builds the agent. ``Connections`` claims the outcome (``claim``) or, at close,
    ``discard``s it."""

    def __init__(self, config: AgentConfig, nursery: trio.Nursery, dial: EarlyDial | None = None) -> None:
        self._config = config
        self._nursery = nursery
        self._dial = dial  # its TCP connect, already under way (_transport._early_dial)
        self.sent = trio.Event()
        self._done = trio.Event()
        self._link: WebSocketLink | None = None
        self._error: ResponsesError | None = None
        self._tokens: list[str | None] = []  # the credentials sent, for the agent's redactor
        self._scope = trio.CancelScope()  # discard() cancels an opening under way

    async def run(self) -> None:
        try:
            with self._scope:
                self._link = await _open_link(self._config, self._nursery, self._tokens.append, "initial",
                                              sent=self.sent.set, dialer=self._dial.dialer if self._dial else None)
        except ResponsesError as exc:  # the first ensure's failure (ConnectionFailed, AuthenticationError)
            self._error = exc
        finally:
            self.sent.set()
            self._done.set()
            if self._dial is not None:  # its connection unclaimed (a failure before the dial): closed
                self._dial.discard()
                await self._dial.aclose()
        if self._scope.cancel_called:  # discarded: nobody will claim it
            if self._link is not None:
                self._link.abandon()
            self._error = _closed_error()

    async def claim(self, redactor: Redactor) -> WebSocketLink:
        """The socket, once open, or its opening's error."""
        await self._done.wait()
        for token in self._tokens:
            redactor.add(token)
        if self._error is not None:
            raise self._error
        assert self._link is not None
        return self._link

    def discard(self) -> None:
        """Unclaimed and the agent closing: abandon the socket, or stop its opening."""
        self._scope.cancel()
        if self._link is not None:
            self._link.abandon()


class Connections:
    def __init__(
        self, config: AgentConfig, emit: Callable[..., Any], nursery: trio.Nursery, stats: TransportStats,
        redactor: Redactor, tap: ConnectionTap | None = None, early: EarlyLink | None = None,
    ) -> None:
        self._config = config
        self._early = early  # the first socket, opened before the agent was built (EarlyLink)
        self._tap = tap  # the observer seam's: each socket is told to it (chosen once, per connection)
        self._redactor = redactor
        self._emit = emit
        self._nursery = nursery
        self._stats = stats
        self.link: WebSocketLink | None = None
        self.generation = 0
        self.next_purpose = "initial"
        self._closed = False
        # Ids of the latest responses that ended on the current socket: a frame naming one
        # of them later is a leftover, never the next answer (bounded; WebSocketRoute).
        self.finished: collections.deque[str] = collections.deque(maxlen=16)

    def invalidate(self, purpose: str) -> None:
        if self.link is not None:
            self.link.abandon()
            self.link = None
        self.next_purpose = purpose

    def close(self) -> None:
        """Abandon the socket and open no other (idempotent)."""
        self._closed = True
        if self._early is not None:
            self._early.discard()
            self._early = None
        if self.link is not None:
            self.link.abandon()
            self.link = None

    @property
    def usable(self) -> bool:
        return self.link is not None and self.link.usable

    async def _open(self, purpose: str) -> WebSocketLink:
        """The first socket from ``EarlyLink`` when there is one, else a handshake now."""
        if self._early is not None:
            early, self._early = self._early, None
            try:
                link = await early.claim(self._redactor)
            except BaseException:
                early.discard()  # its error, or the caller cancelled: a socket opened later is abandoned
                raise
        else:
            link = await _open_link(self._config, self._nursery, self._redactor.add, purpose, self._tap)
        if self._closed:  # see the module docstring: close() ran during the handshake
            link.abandon()
            raise _closed_error()
        return link

    async def ensure(self, turn_id: int | None) -> WebSocketLink:
        """The live socket, opening one (with connection events) when there is none."""
        if self.link is not None and self.link.usable:
            return self.link
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise _closed_error()
        purpose = self.next_purpose
        self.generation += 1
        self.finished.clear()
        self._stats.connection_attempts += 1
        if purpose != "initial":
            self._stats.websocket_reconnects += 1
        base = {"transport": Transport.WEBSOCKET.value, "attempt": self._stats.connection_attempts,
                "purpose": purpose}
        self._emit(EventKind.MODEL_CONNECTION_STARTED, {
            **base, "websocket_url": self._config.websocket_url.split("?", 1)[0],
            "connection_generation": self.generation,
        }, turn_id)
        start = trio.current_time()
        try:
            link = await self._open(purpose)
        except ResponsesError as exc:  # ConnectionFailed, AuthenticationError
            self._redactor.scrub(exc)
            self._stats.connection_duration_ns += ns(trio.current_time() - start)
            self._emit(EventKind.MODEL_CONNECTION_FAILED, {
                **base, "duration_ns": ns(trio.current_time() - start), "error": str(exc),
                "connection_generation": self.generation,
            }, turn_id)
            raise
        duration = ns(trio.current_time() - start)
        self._stats.connection_duration_ns += duration
        self.link = link
        self.next_purpose = "reconnect"
        self._emit(EventKind.MODEL_CONNECTION_COMPLETED, {
            **base, "duration_ns": duration, "http_status": 101, "request_id": link.request_id,
            "server_model": link.server_model, "server_reasoning_included": link.reasoning_included,
            "connection_generation": self.generation,
        }, turn_id)
        return link


def _closed_error() -> ConnectionFailed:
    return ConnectionFailed("the agent is closing: no Responses WebSocket is opened for it any more",
                            error_class="agent_closing", retryable=False)
