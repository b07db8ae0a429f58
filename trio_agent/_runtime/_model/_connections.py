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
    from ..._transport.tap import ConnectionTap
    from ..._transport.websocket import WebSocketLink

__all__ = ["Connections"]


class Connections:
    def __init__(
        self, config: AgentConfig, emit: Callable[..., Any], nursery: trio.Nursery, stats: TransportStats,
        redactor: Redactor, tap: ConnectionTap | None = None,
    ) -> None:
        self._config = config
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
        if self.link is not None:
            self.link.abandon()
            self.link = None

    @property
    def usable(self) -> bool:
        return self.link is not None and self.link.usable

    async def _open(self, open_connection: Any, options_type: Any, purpose: str) -> WebSocketLink:
        """Handshake once; with ChatGPT auth a 401 asks the source to recover once and
        handshakes again (SPEC sec. 6). The headers are fetched per connection (a token
        may have been refreshed); a failing auth source fails it like a refusal."""
        recovered = False
        while True:
            headers, snapshot = await websocket_auth(self._config)
            self._redactor.add(snapshot.token if snapshot is not None else None)
            options = options_type(
                url=self._config.websocket_url, headers=tuple(headers),
                connect_timeout=self._config.responses.connect_timeout,
                handshake_timeout=self._config.responses.handshake_timeout,
                idle_timeout=self._config.responses.idle_timeout,
                ssl_context=self._config.responses.ssl_context, dialer=self._config.responses.dialer,
                tap=self._tap, purpose=purpose,
            )
            try:
                link: WebSocketLink = await open_connection(self._nursery, options)
            except ResponsesError as exc:
                if not isinstance(exc, AuthenticationError) or exc.status != 401 or snapshot is None or recovered:
                    raise
                recovered = True
                await recover_unauthorized(self._config, snapshot)
                continue
            if self._closed:  # see the module docstring: close() ran during the handshake
                link.abandon()
                raise _closed_error()
            return link

    async def ensure(self, turn_id: int | None) -> WebSocketLink:
        """The live socket, opening one (with connection events) when there is none."""
        if self.link is not None and self.link.usable:
            return self.link
        from ..._transport.websocket import WebSocketOptions, open_connection  # lazy: lean `import trio_agent`

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
            link = await self._open(open_connection, WebSocketOptions, purpose)
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
