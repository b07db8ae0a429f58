"""Restarting an MCP server whose connection is lost, with backoff, bounded.

A server that was up can lose its connection: a stdio server exits (its stdout ends),
a Streamable HTTP server forgets the session (it answers 404, "Session terminated", or
a bare 400 that a ping then meets too) or stops answering (the connection is refused
or reset). ``McpTools`` then starts it
again -- a new process, a new HTTP session -- after a backoff: ``BACKOFF`` seconds,
doubled with each attempt, at most ``MAX_BACKOFF``. At most ``MAX_RESTARTS`` attempts
in ``WINDOW`` seconds: past that the server is failed (``mcp.server.failed``, its
calls fail with that message) rather than restarted forever. Each attempt is an
``mcp.server.restarting`` event. A server that never came up (a bad command, a
wrong URL) is not restarted: that is configuration, not a crash. All on Trio's clock.

While it restarts the server is ``starting`` again: a call waits for it (``wait_up``,
up to its startup timeout) and then runs, or fails saying why. A call that was in
flight when the connection went is not sent again (it may have run); it fails with
the reason, and the next call waits for the restart.

``Session`` is one server's record: how its current connection ended (``drop``, from
the transport's read stream ending -- ``watched`` sees it -- or from a call that saw
the connection fail) and its recent restarts; ``run_restarting`` is the server task's
loop of connections.
"""

from __future__ import annotations

import collections
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self

import trio

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams
    from mcp.shared.message import SessionMessage

    from ._mcp_config import McpServer

__all__ = [
    "BACKOFF", "MAX_BACKOFF", "MAX_RESTARTS", "WINDOW", "Session", "connection_lost", "run_restarting", "wait_up",
    "watched",
]

MAX_RESTARTS = 5
WINDOW = 600.0
BACKOFF = 0.5
MAX_BACKOFF = 30.0
# What a failed request says when the connection under it is gone (the SDK's words).
_LOST = ("Connection closed", "Session terminated", "ConnectError", "RemoteProtocolError", "ReadError")
_HTTP_REFUSED = "Server returned an error response"  # the SDK's words for an HTTP error without a JSON-RPC body
_PROBE = 5.0


def connection_lost(message: str) -> bool:
    """Whether a request's error says the connection itself is gone."""
    return any(sign in message for sign in _LOST)


async def session_gone(client: Any, message: str) -> bool:
    """Whether a request that an HTTP server refused with a bare error status (a server
    that forgot the session may answer 400 rather than 404) failed because the session
    is gone: a ping then fails too (within ``_PROBE`` seconds)."""
    if _HTTP_REFUSED not in message:
        return False
    with trio.move_on_after(_PROBE):
        try:
            await client.send_ping()
        except Exception:
            return True
        return False
    return True  # no answer to a ping either


class _ServerView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def settled(self) -> trio.Event: ...
    @property
    def config(self) -> McpServer: ...


class Session:
    """One server's connections and restarts (see the module docstring)."""

    def __init__(self) -> None:
        self.reason: str | None = None  # how the current connection was lost, once it is
        self.dropped = False  # lost after it was up (else it is still starting, or failed to)
        self.attempt = 0  # the current connection's restart number in the window (0: the first start)
        self._restarts: collections.deque[float] = collections.deque()

    def drop(self, server: Any, reason: str) -> None:
        """``server``'s (a ``_mcp_ready.ServerState``) connection is gone (the first reason is
        kept). One that was up is ``starting`` again at once, so that calls wait for the
        restart; its task ends the connection (``server.lost``) and restarts it. One
        still starting fails to, and its own error says why."""
        if self.reason is None:
            self.reason = reason
        if server.state == "ready":
            self.dropped = True
            server.state, server.client = "starting", None
            server.deadline = math.inf  # calls wait through the backoff; the next connect sets it
            _unsettle(server)
            server.lost.set()

    def verdict(self, state: str, closing: bool) -> Literal["retry", "give_up"] | None:
        """After a connection ended in ``state``: restart it, give up (out of attempts),
        or neither (closed, or a first start that failed: the caller says which)."""
        if closing:
            return None
        attempt_failed = self.attempt > 0 and state in ("starting", "failed")
        if not (self.dropped or attempt_failed):
            return None
        now = trio.current_time()
        while self._restarts and self._restarts[0] <= now - WINDOW:
            self._restarts.popleft()
        return "retry" if len(self._restarts) < MAX_RESTARTS else "give_up"

    def next_attempt(self, error: str | None) -> tuple[int, float, str]:
        """Record a restart: ``(attempt, delay, reason)``; the record is reset for it.
        ``error``: why the last attempt failed, when it did."""
        self._restarts.append(trio.current_time())
        self.attempt = len(self._restarts)
        reason = self.reason or error or "it did not start again"
        self.reason, self.dropped = None, False
        return self.attempt, min(BACKOFF * 2 ** (self.attempt - 1), MAX_BACKOFF), reason

    def gave_up(self, name: str, error: str | None) -> str:
        last = self.reason or error or "it did not start again"
        return (f"MCP server {name} lost its connection {MAX_RESTARTS} times within {WINDOW:g} s and is not "
                f"restarted again; the last time: {last}")


def _unsettle(server: Any) -> None:
    """A fresh ``settled`` for a restart (the old one set: its waiters wait on the new one)."""
    server.settled.set()
    server.settled = trio.Event()


async def run_restarting(server: Any, connect: Callable[[Any], Awaitable[None]], emit: Callable[..., Any],
                         closing: Callable[[], bool]) -> None:
    """Run ``connect(server)`` (one connection of a ``_mcp_ready.ServerState``, which ends
    ``starting`` when it is to be restarted), again after a backoff while it does."""
    from .._events import EventKind
    from ._mcp_listing import ToolListing

    while True:
        await connect(server)
        if server.state != "starting" or closing():  # no restart: done
            return
        attempt, delay, reason = server.session.next_attempt(server.error)
        server.state, server.error, server.client, server.http_error = "starting", None, None, None
        server.deadline = math.inf  # calls wait through the backoff; the next connect sets it
        server.scope, server.lost, server.listing = trio.CancelScope(), trio.Event(), ToolListing()
        _unsettle(server)
        emit(EventKind.MCP_SERVER_RESTARTING, {
            "server": server.name, "attempt": attempt, "max_attempts": MAX_RESTARTS,
            "delay_ns": int(delay * 1e9), "reason": reason[:2000]}, None)
        with server.scope:  # close() cancels it
            await trio.sleep(delay)
        if closing():
            server.state, server.error = "closed", f"MCP server {server.name} was closed while restarting"
            server.settled.set()
            return
        server.scope = trio.CancelScope()  # a scope is entered once: a fresh one to connect in


@asynccontextmanager
async def watched(transport: AbstractAsyncContextManager[TransportStreams],
                  lose: Callable[[str], None]) -> AsyncIterator[TransportStreams]:
    """``transport`` with its read stream watched: its end calls ``lose``."""
    async with transport as (read, write):
        yield _Watched(read, lose), write


class _Watched:
    """A transport's read stream whose end (EOF, closed) loses the connection."""

    def __init__(self, inner: Any, lose: Callable[[str], None]) -> None:
        self._inner = inner
        self._lose = lose

    def __getattr__(self, name: str) -> Any:  # aclose, last_context (the SDK's dispatcher reads it): the stream's
        return getattr(self._inner, name)

    def _check(self, exc: BaseException) -> None:
        """The stream's end (EOF, closed) loses the connection; other errors pass."""
        import anyio  # the [mcp] extra, as the SDK is

        if isinstance(exc, StopAsyncIteration | anyio.EndOfStream | anyio.ClosedResourceError
                      | anyio.BrokenResourceError):
            self._lose("the server closed the connection (did it exit?)")

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()  # type: ignore[no-any-return]
        except Exception as exc:  # StopAsyncIteration among them
            self._check(exc)
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self._inner.__anext__()  # type: ignore[no-any-return]
        except Exception as exc:  # StopAsyncIteration among them
            self._check(exc)
            raise

    async def __aenter__(self) -> Self:  # dunders are not found through __getattr__
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)  # type: ignore[no-any-return]


async def wait_up(server: _ServerView) -> None:
    """Wait while ``server`` starts (or restarts), up to its startup timeout."""
    deadline = trio.current_time() + server.config.startup_timeout
    while server.state == "starting" and trio.current_time() < deadline:
        with trio.move_on_at(deadline):
            await server.settled.wait()  # a restart replaces the event: read it again
        await trio.lowlevel.checkpoint()
