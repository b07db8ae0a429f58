"""An agent's first TCP connection, dialed before the agent is built
(``_lifecycle.run_agent``, for ``open_agent(config, warmup=False)``). Over a WebSocket
it is the dial of the early socket (``_connections.EarlyLink``): the TCP handshake
travels while the transport is imported. The rest of this docstring is about HTTPS.

Why: the first request over HTTPS waits for a TCP connect (and TLS) before its bytes
leave -- a round trip or more that the agent's construction (tools, rollout, the
httpx import) can cover instead. httpx's pool owns its connections and has no way to
take one made elsewhere, so the agent's own client then dials through
``DialedTransport`` (httpcore's pool, HTTP/1.1, as httpx's default transport) with
:meth:`EarlyDial.dialer`: its first dial to the endpoint is this connection (the
wait for it counted in the request's connect timeout), every other one dials as
usual. A failed early connect is that first dial's failure, mapped and retried as
any connect error. The request, its headers and TLS (httpcore's, on the dialed
stream) are what they were. Not used with an application's ``http_client``, nor
where proxy variables are set (httpx routes through the proxy then).

An IP literal is connected from the caller's own task (a non-blocking ``connect``:
the SYN is out when :func:`start_early_dial` returns); a name is resolved and
connected by a task in the agent's nursery (``trio.open_tcp_stream``, as httpcore's
backend). The model client's ``close`` stops a dial under way
(:meth:`EarlyDial.discard`), its ``aclose`` closes an unclaimed connection.
"""

from __future__ import annotations

import errno
import os
import socket
import urllib.parse
from collections.abc import Awaitable, Callable

import trio

__all__ = ["EarlyDial", "early_dial_endpoint", "start_early_dial"]

Dialer = Callable[[str, int], Awaitable[trio.abc.Stream]]


def early_dial_endpoint(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of an endpoint an early dial may serve, or None (no host, or --
    HTTPS -- proxy variables that would route the request elsewhere)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        return None
    if parts.scheme in ("http", "https") and any(
            name.lower().endswith("_proxy") and value for name, value in os.environ.items()):
        return None  # HTTP_PROXY, https_proxy, ALL_PROXY, NO_PROXY...: httpx's own routing
    return parts.hostname, parts.port or (443 if parts.scheme in ("https", "wss") else 80)


class EarlyDial:
    """One TCP connection started ahead of the first request (module docstring)."""

    def __init__(self, host: str, port: int, dialer: Dialer | None, httpx_errors: bool = True) -> None:
        self.host, self.port = host, port
        self._dialer = dialer  # the application's (Responses.dialer), else TCP
        self._httpx_errors = httpx_errors  # False: the WebSocket transport's dial (OSError as is)
        self._done = trio.Event()
        self._stream: trio.abc.Stream | None = None
        self._error: BaseException | None = None
        self._claimed = False
        self._scope = trio.CancelScope()

    async def run(self, raw: socket.socket | None) -> None:
        """Finish the connect (``raw``: already under way), or dial (a name, a dialer)."""
        try:
            with self._scope:
                if raw is not None:
                    self._stream = await _finish_connect(raw, self.host, self.port)
                elif self._dialer is not None:
                    self._stream = await self._dialer(self.host, self.port)
                else:
                    self._stream = await trio.open_tcp_stream(self.host, self.port)
        except OSError as exc:  # refused, unreachable, DNS: the first dial's own failure
            self._error = exc
        finally:
            self._done.set()
        if self._scope.cancel_called and self._stream is not None:
            await trio.aclose_forcefully(self._stream)
            self._stream = None

    async def dialer(self, host: str, port: int) -> trio.abc.Stream:
        """The agent's HTTPS dialer: this connection first, for its endpoint; else a new one.
        Without an application's dialer, a failure reads as httpx's own transport says
        it (httpcore's ``ConnectError`` with the ``OSError``'s text)."""
        try:
            if not self._claimed and (host, port) == (self.host, self.port):
                self._claimed = True
                await self._done.wait()
                if self._error is not None:
                    raise self._error
                if self._stream is not None:
                    stream, self._stream = self._stream, None
                    return stream
            if self._dialer is not None:
                return await self._dialer(host, port)
            return await trio.open_tcp_stream(host, port)
        except OSError as exc:
            if self._dialer is not None or not self._httpx_errors:
                raise
            import httpcore  # loaded: this runs inside httpx's request

            raise httpcore.ConnectError(str(exc)) from exc

    def discard(self) -> None:
        """The model client closing: stop a dial under way (``aclose`` closes a connection)."""
        self._scope.cancel()

    async def aclose(self) -> None:
        """Close the connection if nobody claimed it."""
        stream, self._stream = self._stream, None
        if stream is not None:
            await trio.aclose_forcefully(stream)


async def _finish_connect(raw: socket.socket, host: str, port: int) -> trio.SocketStream:
    try:
        await trio.lowlevel.wait_writable(raw)
        error = raw.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:  # worded as trio.open_tcp_stream words it
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise OSError(f"all attempts to connect to {where} failed") from OSError(error, os.strerror(error))
    except BaseException:
        raw.close()
        raise
    return trio.SocketStream(trio.socket.from_stdlib_socket(raw))


def start_early_dial(nursery: trio.Nursery, url: str, dialer: Dialer | None,
                     *, httpx_errors: bool = True) -> EarlyDial | None:
    """Start the first connection to ``url``'s endpoint (None: none applies). An IP
    literal's SYN leaves before this returns; a name is resolved by the task."""
    endpoint = early_dial_endpoint(url)
    if endpoint is None:
        return None
    host, port = endpoint
    early = EarlyDial(host, port, dialer, httpx_errors)
    raw: socket.socket | None = None
    if dialer is None:
        family = _literal_family(host)
        if family is not None:
            raw = socket.socket(family, socket.SOCK_STREAM)
            raw.setblocking(False)
            code = raw.connect_ex((host, port))
            if code not in (0, errno.EINPROGRESS):
                raw.close()
                raw = None  # the task dials again and fails the ordinary way
    nursery.start_soon(early.run, raw)
    return early


def _literal_family(host: str) -> socket.AddressFamily | None:
    """The address family of an IP literal (None: a name, resolved by the task)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None
