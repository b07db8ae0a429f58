"""The connection tap: what an observer of an agent sees of its connections.

One ``ConnectionTap`` per agent (the observer seam, ``_runtime/_observers.py``, hands
it to the model client, which gives it to both transports) is told of every
connection the agent opens -- each WebSocket (``websocket_opened``, or
``websocket_failed`` for a handshake that failed) and each HTTPS request
(``request_opened``) -- and returns the tap of that one connection, which sees what
is sent and received on it and how it ended. The choice is made once per connection
(a ``WebSocketLink`` subclass, a wrapped chunk iterator): a connection nobody taps
has no switch on its frame path.

A tap is called synchronously in the task doing the I/O, after the bytes were sent or
received; it must not raise or block (the cassette recorder buffers). This module
imports no transport library: the HTTPS path never loads trio-websocket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._record import Record

if TYPE_CHECKING:
    from .._errors import ResponsesError

__all__ = ["Answer", "ConnectionTap", "RequestTap", "SocketTap", "tap_all"]

Headers = Sequence[tuple[str, str]]


class Answer(Record):
    """The server's answer to a refused handshake (its status is the error's)."""

    __slots__ = ("headers", "body")  # noqa: RUF023  # field order

    def __init__(self, headers: list[tuple[str, str]], body: str) -> None:
        self.headers = headers
        self.body = body


class SocketTap(Protocol):
    """One WebSocket, from its handshake on."""

    def sent(self, message: str) -> None:
        """A text frame went out (a request, an interrupt)."""

    def received(self, message: str | bytes) -> None:
        """A message came in (before the model call reads it)."""

    def closed(self, *, by_server: bool, code: int | None, reason: str | None) -> None:
        """The socket is given up: closed by the server (its close code and reason;
        1006 for a dropped TCP connection) or by the client (``code`` None). Once."""


class RequestTap(Protocol):
    """One HTTPS request, from the POST on."""

    def head(self, status: int, headers: list[tuple[str, str]], error_body: str | None) -> None:
        """The response head; ``error_body``: the whole body of a non-2xx answer."""

    def received(self, chunk: bytes) -> None:
        """A chunk of the (event stream) body."""

    def body_ended(self, error: BaseException | None) -> None:
        """The body was read to its end (``error`` None), or reading it failed."""

    def closed(self, error: BaseException | None) -> None:
        """The request is over: ``error`` is what ended it early (None: the caller
        closed it normally, whether or not the body was read to its end). Once."""


class ConnectionTap(Protocol):
    """Every connection of one agent (see the module docstring)."""

    def websocket_opened(self, url: str, purpose: str, request_headers: Headers,
                         response_headers: Mapping[str, str]) -> SocketTap:
        """A handshake completed; ``purpose``: ``initial``, ``reconnect`` or ``warmup_fallback``."""

    def websocket_failed(self, url: str, purpose: str, error: ResponsesError, response: Answer | None) -> None:
        """A handshake failed (refused, rejected -- then ``response`` -- or timed out)."""

    def request_opened(self, url: str, headers: Headers, body: dict[str, Any]) -> RequestTap:
        """An HTTPS request is about to be POSTed with ``headers`` and ``body``."""


def tap_all(taps: Sequence[ConnectionTap]) -> ConnectionTap | None:
    """One tap that tells each of ``taps`` in turn (None for none; the tap itself for one)."""
    if len(taps) <= 1:
        return taps[0] if taps else None
    return _Taps(tuple(taps))


class _Taps:
    def __init__(self, taps: tuple[ConnectionTap, ...]) -> None:
        self._taps = taps

    def websocket_opened(self, url: str, purpose: str, request_headers: Headers,
                         response_headers: Mapping[str, str]) -> SocketTap:
        return _SocketTaps(tuple(t.websocket_opened(url, purpose, request_headers, response_headers)
                                 for t in self._taps))

    def websocket_failed(self, url: str, purpose: str, error: ResponsesError, response: Answer | None) -> None:
        for tap in self._taps:
            tap.websocket_failed(url, purpose, error, response)

    def request_opened(self, url: str, headers: Headers, body: dict[str, Any]) -> RequestTap:
        return _RequestTaps(tuple(t.request_opened(url, headers, body) for t in self._taps))


class _SocketTaps:
    def __init__(self, taps: tuple[SocketTap, ...]) -> None:
        self._taps = taps

    def sent(self, message: str) -> None:
        for tap in self._taps:
            tap.sent(message)

    def received(self, message: str | bytes) -> None:
        for tap in self._taps:
            tap.received(message)

    def closed(self, *, by_server: bool, code: int | None, reason: str | None) -> None:
        for tap in self._taps:
            tap.closed(by_server=by_server, code=code, reason=reason)


class _RequestTaps:
    def __init__(self, taps: tuple[RequestTap, ...]) -> None:
        self._taps = taps

    def head(self, status: int, headers: list[tuple[str, str]], error_body: str | None) -> None:
        for tap in self._taps:
            tap.head(status, headers, error_body)

    def received(self, chunk: bytes) -> None:
        for tap in self._taps:
            tap.received(chunk)

    def body_ended(self, error: BaseException | None) -> None:
        for tap in self._taps:
            tap.body_ended(error)

    def closed(self, error: BaseException | None) -> None:
        for tap in self._taps:
            tap.closed(error)
