"""The Responses WebSocket: one connection task per socket (trio-websocket).

Theory of operation: ``open_connection`` starts ``_connection_task`` in the agent's nursery with
``nursery.start``. The task dials TCP -- ``trio.open_tcp_stream``, or the
``Responses(dialer=...)`` seam that in-memory tests use -- layers TLS on top for ``wss://``,
performs the handshake in a nursery of its own that holds trio-websocket's reader task -- the
one reader per socket -- and reports the ready ``WebSocketLink`` through ``task_status``. It
then waits until the link is abandoned, closes the socket (bounded), and ends. One deadline
(``connect_timeout``) covers dialing and the handshake.

Failures (issue 7, bug 5) are sorted by one helper, ``split_expected``: the *expected foreign*
exceptions of a socket (``OSError`` -- refused, reset, DNS, TLS --, Trio's ``BrokenResourceError``,
trio-websocket's errors, the handshake-EOF and connect-timeout markers) are mapped; everything else
-- ``Cancelled`` (also inside groups), a ``KeyboardInterrupt``, a bug in our code or in a dialer's
stream -- propagates unchanged. Before the handshake an expected failure is raised out of
``nursery.start`` as ``ConnectionFailed`` (``AuthenticationError`` for a 401/403 rejection); after
it, it only means the socket is dead: the link becomes unusable and the model call reading it sees
``ConnectionLost``.

The per-frame path is trio-websocket's message queue, read by the model call itself
(no extra task or channel hop of ours); idle timeouts are one cancel scope per response
whose deadline is pushed forward, not a scope per frame. Sends go through one lock per
socket; the caller's cancel scope bounds a send (``send_timeout``).

Bursts cost one scheduler round, not one per frame (``_eager``: the reader delivers a
burst without a round per message, the send lock is taken without one when free);
``receive_text`` takes a message that waits with ``receive_nowait`` (the exchange's frame
loop does so itself through ``WebSocketLink.waiting``: no coroutine per frame). After the
handshake trio-websocket reads and writes the dialed stream itself (``_watched_stream``).

trio-websocket defaults are raised: 1 MiB max message -> 64 MiB (``response.completed``
frames can be large), 4 KiB receive buffer -> 256 KiB.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import Awaitable, Callable

import trio

from .._errors import ConnectionFailed, ConnectionLost, ResponsesError
from .._record import Record
from ._eager import EagerSend, eager_queue
from ._quick_lock import QuickLock
from ._rejection import rejection_error, shown_body
from ._tls import tls_context
from ._watched_stream import HandshakeEof, WatchedStream
from ._websocket_lean import trio_websocket  # without importlib.metadata (_websocket_lean)
from .tap import Answer, ConnectionTap

__all__ = ["Dialer", "WebSocketLink", "WebSocketOptions", "open_connection", "split_expected"]

CLOSE_GRACE = 1.0

Dialer = Callable[[str, int], Awaitable[trio.abc.Stream]]
"""``await dialer(host, port)`` -> a connected byte stream (``trio.open_tcp_stream``'s shape)."""


class WebSocketOptions(Record):
    """How to open one socket. ``handshake_timeout`` also bounds the handshake alone
    (None: ``connect_timeout`` only). ``tap`` (the observer seam's, ``tap.py``) is told
    of the socket -- chosen once per connection: a tapped socket's link is a
    ``_TappedLink``, so an untapped one has no switch on its frame path; ``purpose``
    (``initial``, ``reconnect``, ``warmup_fallback``) is what the tap is told it is for;
    ``sent``: called once the handshake's first bytes left (``_connections.EarlyLink``)."""

    __slots__ = (  # noqa: RUF023  # field order
        "url", "headers", "connect_timeout", "handshake_timeout", "send_timeout", "idle_timeout", "max_message_size",
        "receive_buffer_size", "message_queue_size", "ssl_context", "dialer", "tap", "purpose", "sent",
    )

    def __init__(
        self, url: str, headers: tuple[tuple[str, str], ...] = (), connect_timeout: float = 30.0,
        handshake_timeout: float | None = None, send_timeout: float = 30.0, idle_timeout: float = 300.0,
        max_message_size: int = 64 << 20, receive_buffer_size: int = 256 << 10, message_queue_size: int = 64,
        ssl_context: ssl.SSLContext | None = None, dialer: Dialer | None = None, tap: ConnectionTap | None = None,
        purpose: str = "initial", sent: Callable[[], object] | None = None,
    ) -> None:
        self.url = url
        self.headers = headers
        self.connect_timeout = connect_timeout
        self.handshake_timeout = handshake_timeout
        self.send_timeout = send_timeout
        self.idle_timeout = idle_timeout
        self.max_message_size = max_message_size
        self.receive_buffer_size = receive_buffer_size
        self.message_queue_size = message_queue_size
        self.ssl_context = ssl_context
        self.dialer = dialer
        self.tap = tap
        self.purpose = purpose
        self.sent = sent


class _ConnectTimeout(Exception):
    """Our own ``connect_timeout`` expired (a marker: a ``TooSlowError`` raised inside a
    dialer is that dialer's business, not our timeout)."""


class WebSocketLink:
    """One open socket. ``abandon()`` (sync, idempotent) makes its task close it."""

    def __init__(self, ws: trio_websocket.WebSocketConnection, options: WebSocketOptions) -> None:
        self._ws = ws
        queue = eager_queue(ws)
        self._eager: EagerSend | None = queue[0] if queue is not None else None
        self._queue: trio.MemoryReceiveChannel[str | bytes] | None = queue[1] if queue is not None else None
        # The messages already read, for a reader that takes one without a coroutine per
        # frame (``receive_nowait``; else ``receive_text``); None where every frame must
        # go through ``receive_text`` (a tapped link).
        self.waiting = self._queue
        self._options = options
        # How long one send may take; the caller bounds ``send_text`` with it (the
        # exchange's one cancel scope covers the send and then the read).
        self.send_timeout = options.send_timeout
        self._send_lock = QuickLock()  # trio.Lock's bookkeeping costs more than the send's checks
        self._abandoned = trio.Event()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in ws.handshake_headers}
        self.handshake_headers = headers  # the server's handshake response headers, lower-cased
        self.turn_state: str | None = headers.get("x-codex-turn-state")
        self.request_id: str | None = headers.get("x-request-id")
        self.server_model: str | None = headers.get("openai-model")
        self.reasoning_included = "x-reasoning-included" in headers

    @property
    def usable(self) -> bool:
        return not self._abandoned.is_set() and self._ws.closed is None

    def abandon(self) -> None:
        self._abandoned.set()

    @property
    def close_reason(self) -> trio_websocket.CloseReason | None:
        """Why the socket closed (code and reason), or None while it is open."""
        return self._ws.closed

    async def send_text(self, text: str) -> None:
        """Send one text frame (``ConnectionLost`` on failure). Not bounded here: the
        caller's cancel scope is (``send_timeout``)."""
        try:
            # Uncontended (the usual case): no schedule point before the send itself.
            try:
                self._send_lock.acquire_nowait()
            except trio.WouldBlock:
                await self._send_lock.acquire()
            try:
                await self._ws.send_message(text)
            finally:
                self._send_lock.release()
        except trio_websocket.ConnectionClosed as exc:
            self.abandon()  # a socket that failed a send is not used again
            raise ConnectionLost(
                f"failed to send a Responses WebSocket frame: {_reason(exc)}",
                error_class="send_transport",
                failure_phase="send",
            ) from exc

    def deliver_bursts(self, eager: bool) -> None:
        """Whether the reader hands a burst over in one round (True, the default) or yields
        after each frame that may be output (False: the first output of a burst reaches the
        model call before the rest is parsed -- what a response wants until its first output;
        the frames leading up to it, ``response.created`` and the like, go along at once)."""
        if self._eager is not None:
            self._eager.eager = eager

    async def receive_text(self) -> str | bytes:
        """The next message (``ConnectionLost`` when the socket closed). A message that
        already waits is returned without a schedule point (bounded by the queue size)."""
        if self._queue is not None:
            try:
                return self._queue.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                pass  # nothing waits, or the socket closed: get_message says which
        try:
            return await self._ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
            self.abandon()  # closed (or its reader died): not used again
            raise ConnectionLost(
                f"failed to receive a Responses WebSocket frame: {_reason(exc)}",
                error_class="receive_transport",
            ) from exc

    async def wait_abandoned(self) -> None:
        await self._abandoned.wait()

    async def _close(self) -> None:
        with trio.move_on_after(CLOSE_GRACE):
            try:
                await self._ws.aclose()
            except _EXPECTED:
                pass


class _TappedLink(WebSocketLink):
    """A ``WebSocketLink`` whose frames and close its tap sees (``WebSocketOptions.tap``)."""

    def __init__(self, ws: trio_websocket.WebSocketConnection, options: WebSocketOptions, tap: ConnectionTap) -> None:
        super().__init__(ws, options)
        self.waiting = None  # the tap sees every frame (receive_text)
        self._tap = tap.websocket_opened(options.url, options.purpose, options.headers, self.handshake_headers)
        self._close_told = False

    async def send_text(self, text: str) -> None:
        await super().send_text(text)
        self._tap.sent(text)

    async def receive_text(self) -> str | bytes:
        message = await super().receive_text()
        self._tap.received(message)
        return message

    def abandon(self) -> None:
        if not self._close_told:
            self._close_told = True
            reason = self.close_reason  # None: the client gives it up; else the server closed it (1006: dropped)
            self._tap.closed(by_server=reason is not None, code=reason.code if reason is not None else None,
                             reason=reason.reason if reason is not None else None)
        super().abandon()


def _reason(exc: trio_websocket.ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None:
        return "the connection closed"
    detail = f" ({reason.reason})" if reason.reason else ""
    return f"the connection closed with code {reason.code} {reason.name}{detail}"


async def open_connection(nursery: trio.Nursery, options: WebSocketOptions) -> WebSocketLink:
    """Connect and handshake; the socket's task lives in ``nursery`` until abandoned.

    Raises ``ConnectionFailed`` / ``AuthenticationError`` for an expected failure;
    anything else (cancellation included) propagates unchanged."""
    link: WebSocketLink = await nursery.start(_connection_task, options)
    return link


# The exceptions a socket is expected to fail with; everything else is not ours to map.
_EXPECTED: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable, DNS (gaierror), TLS (ssl.SSLError)
    trio.BrokenResourceError,
    trio_websocket.HandshakeError,  # incl. ConnectionRejected
    trio_websocket.ConnectionClosed,
    HandshakeEof,
    _ConnectTimeout,
)


def split_expected(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """``(failure, rest)``: the first expected foreign failure in ``exc`` (or None), and
    what must still propagate (or None): ``exc`` itself when it holds no expected
    failure, else the group without its expected parts -- every ``Cancelled`` and every
    other exception kept, with its traceback."""
    if not isinstance(exc, BaseExceptionGroup):
        return (exc, None) if isinstance(exc, _EXPECTED) else (None, exc)
    matched, rest = exc.split(_EXPECTED)
    if matched is None:
        return None, exc  # split() copies the group; nothing was taken out of it
    failure: BaseException | None = matched
    while isinstance(failure, BaseExceptionGroup):
        failure = failure.exceptions[0]
    return failure, rest


async def _connection_task(
    options: WebSocketOptions, *, task_status: trio.TaskStatus[WebSocketLink]
) -> None:
    deadline = trio.current_time() + options.connect_timeout
    started = False
    try:
        watched = WatchedStream(await _dial(options, deadline), options.sent)
        try:
            async with trio.open_nursery() as reader_nursery:
                ws = await _handshake(reader_nursery, watched, options, deadline)
                link = WebSocketLink(ws, options) if options.tap is None else _TappedLink(ws, options, options.tap)
                watched.handshake_done = True
                if watched.sent is None and getattr(ws, "_stream", None) is watched:
                    ws._stream = watched.inner  # a pass-through from now on: one layer less per send and read
                task_status.started(link)
                started = True
                try:
                    await link.wait_abandoned()
                    await link._close()
                finally:
                    # Whatever happened (remote close, abandon, cancellation, a dead
                    # reader), the link is unusable from here and the reader stops.
                    link.abandon()
                    reader_nursery.cancel_scope.cancel()
        finally:
            await _close_quietly(watched)
    except BaseException as exc:
        failure, rest = split_expected(exc)
        # Cancelled, KeyboardInterrupt, bugs: unchanged (a group keeps each of them).
        if rest is exc:
            raise
        if rest is not None:
            raise rest  # noqa: B904  # part of the same group, not a new error
        assert failure is not None
        if not started:
            error = _map_handshake_error(failure, options)
            if options.tap is not None:
                options.tap.websocket_failed(options.url, options.purpose, error, _answer(failure))
            raise error from exc
        # After the handshake an expected failure only means the socket is dead; the
        # model call reading it sees ConnectionLost and retries.


async def _close_quietly(stream: trio.abc.Stream) -> None:
    """Close at once; a dead socket failing to close is no news, and must not replace
    the exception in flight (a bug, a ``Cancelled``)."""
    try:
        await trio.aclose_forcefully(stream)
    except _EXPECTED:
        pass


async def _dial(options: WebSocketOptions, deadline: float) -> trio.abc.Stream:
    parts = urllib.parse.urlsplit(options.url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    dial = options.dialer or trio.open_tcp_stream
    with trio.CancelScope(deadline=deadline) as scope:
        stream = await dial(host, port)
    if scope.cancelled_caught:
        raise _ConnectTimeout
    if not secure:
        return stream
    # TLS over whatever was dialed (what trio.open_ssl_over_tcp_stream does over TCP);
    # its handshake runs on the first send, under the handshake's deadline.
    context = options.ssl_context or await tls_context("websocket")  # one per process, loaded ahead (_tls)
    return trio.SSLStream(stream, context, server_hostname=host, https_compatible=True)


async def _handshake(
    nursery: trio.Nursery, watched: WatchedStream, options: WebSocketOptions, deadline: float
) -> trio_websocket.WebSocketConnection:
    parts = urllib.parse.urlsplit(options.url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "wss" else 80)
    resource = parts.path or "/"
    if parts.query:
        resource += "?" + parts.query
    host_header = host if port in (80, 443) else f"{host}:{port}"
    if options.handshake_timeout is not None:
        deadline = min(deadline, trio.current_time() + options.handshake_timeout)
    with trio.CancelScope(deadline=deadline) as scope:
        return await trio_websocket.wrap_client_stream(
            nursery,
            watched,  # type: ignore[arg-type]  # any trio Stream works; the hint is narrow
            host_header,
            resource,
            extra_headers=[(k.encode(), v.encode()) for k, v in options.headers],
            message_queue_size=options.message_queue_size,
            max_message_size=options.max_message_size,
            receive_buffer_size=options.receive_buffer_size,
        )
    assert scope.cancelled_caught
    raise _ConnectTimeout


def _answer(failure: BaseException) -> Answer | None:
    """A refused handshake's answer, for the tap."""
    if not isinstance(failure, trio_websocket.ConnectionRejected):
        return None
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in failure.headers or ()]
    return Answer(headers, (failure.body or b"").decode("utf-8", "replace"))


def _map_handshake_error(leaf: BaseException, options: WebSocketOptions) -> ResponsesError:
    where = f"connecting to {options.url}"
    if isinstance(leaf, _ConnectTimeout):
        limit = options.connect_timeout
        if options.handshake_timeout is not None and options.handshake_timeout < limit:
            limit = options.handshake_timeout
        return ConnectionFailed(
            f"{where} timed out (connect_timeout {options.connect_timeout:g} s, handshake within "
            f"{limit:g} s); raise Responses(connect_timeout=...) for a slow network",
            error_class="handshake_timeout",
        )
    if isinstance(leaf, trio_websocket.ConnectionRejected):
        return _rejected(leaf, where)
    if isinstance(leaf, HandshakeEof):
        if isinstance(leaf.cause, ssl.SSLError):
            return ConnectionFailed(
                f"{where}: TLS failed: {leaf.cause}; check the server certificate "
                "(Responses(ssl_context=...) for a private CA)",
                error_class="handshake_tls", retryable=False,
            )
        return ConnectionFailed(f"{where}: the server closed the connection during the handshake ({leaf})")
    if isinstance(leaf, trio_websocket.ConnectionClosed):
        return ConnectionFailed(f"{where}: {_reason(leaf)} during the handshake")
    # OSError (refused, DNS, reset), BrokenResourceError, other handshake errors
    return ConnectionFailed(f"{where} failed: {leaf!r}; check that the server is reachable")


def _rejected(exc: trio_websocket.ConnectionRejected, where: str) -> ResponsesError:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in exc.headers or ()}
    body = (exc.body or b"")[:64 << 10].decode("utf-8", "replace")  # bounded, as HTTPS reads at most 4 KiB
    shown = shown_body(body)
    message = f"{where}: the server rejected the handshake with HTTP {exc.status_code}{': ' + shown if shown else ''}"
    if exc.status_code not in (401, 403, 407, 408, 429) and exc.status_code < 500:
        message += ("; if this server has no WebSocket endpoint (most servers other than OpenAI's), use HTTPS: "
                    "--transport https (Responses(transport=ta.Transport.HTTPS)), or leave the transport and "
                    "the WebSocket URL unset to fall back to HTTPS on its own")
    return rejection_error(
        exc.status_code, body, headers.get("retry-after"), prefix="handshake", message=message, other=ConnectionFailed
    )
