"""The Responses WebSocket: one connection task per socket (trio-websocket).

Theory of operation: ``open_connection`` starts ``_connection_task`` in the agent's
nursery with ``nursery.start``. The task opens TCP (and TLS), performs the handshake
in a nursery of its own that holds trio-websocket's reader task -- the one reader per
socket -- and reports the ready ``WebSocketLink`` through ``task_status``. It then
waits until the link is abandoned, closes the socket (bounded), and ends. Handshake
failures are raised out of ``nursery.start`` already mapped to ``ConnectionFailed``.

The per-frame path is just ``get_message()``: model calls read the socket directly
(no extra task or channel hop); idle timeouts are one cancel scope per response whose
deadline is pushed forward, not a scope per frame. Sends go through one lock per
socket with a send timeout.

trio-websocket defaults are raised: 1 MiB max message -> 64 MiB (``response.completed``
frames can be large), 4 KiB receive buffer -> 256 KiB.
"""

from __future__ import annotations

import ssl
import urllib.parse
from typing import Any

import attrs
import trio
import trio_websocket

from .._errors import ConnectionFailed, ConnectionLost, ResponseTimeout
from .retry import classify_status, parse_retry_after

__all__ = ["WebSocketLink", "WebSocketOptions", "open_connection"]

CLOSE_GRACE = 1.0


@attrs.frozen
class WebSocketOptions:
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    connect_timeout: float = 30.0
    send_timeout: float = 30.0
    idle_timeout: float = 300.0
    max_message_size: int = 64 << 20
    receive_buffer_size: int = 256 << 10
    message_queue_size: int = 64
    ssl_context: ssl.SSLContext | None = None


class _HandshakeEof(Exception):
    """The server closed TCP (or TLS failed) before the WebSocket handshake completed."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(str(cause) if cause else "the server closed the connection")
        self.cause = cause


class _WatchedStream(trio.abc.Stream):
    """Raises ``_HandshakeEof`` on EOF or a broken stream (a failed TLS handshake, say)
    before the WebSocket handshake: trio-websocket would otherwise wait for the connect
    timeout. A plain pass-through afterwards."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.handshake_done = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self.inner.send_all(data)
        except trio.BrokenResourceError as exc:
            if self.handshake_done:
                raise
            raise _HandshakeEof(exc.__cause__ or exc) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        try:
            data = await self.inner.receive_some(max_bytes)
        except trio.BrokenResourceError as exc:
            if self.handshake_done:
                raise
            raise _HandshakeEof(exc.__cause__ or exc) from exc
        if not data and not self.handshake_done:
            raise _HandshakeEof
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


class WebSocketLink:
    """One open socket. ``abandon()`` (sync, idempotent) makes its task close it."""

    def __init__(self, ws: trio_websocket.WebSocketConnection, options: WebSocketOptions) -> None:
        self._ws = ws
        self._options = options
        self._send_lock = trio.Lock()
        self._abandoned = trio.Event()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in ws.handshake_headers}
        self.turn_state: str | None = headers.get("x-codex-turn-state")
        self.request_id: str | None = headers.get("x-request-id")
        self.server_model: str | None = headers.get("openai-model")
        self.reasoning_included = "x-reasoning-included" in headers

    @property
    def usable(self) -> bool:
        return not self._abandoned.is_set() and self._ws.closed is None

    def abandon(self) -> None:
        self._abandoned.set()

    async def send_text(self, text: str) -> None:
        """Send one text frame (``ConnectionLost``/``ResponseTimeout`` on failure)."""
        try:
            with trio.fail_after(self._options.send_timeout):
                async with self._send_lock:
                    await self._ws.send_message(text)
        except trio.TooSlowError as exc:
            raise ResponseTimeout(
                f"sending a Responses WebSocket frame took over {self._options.send_timeout:g} s",
                error_class="send_timeout",
                failure_phase="send",
            ) from exc
        except trio_websocket.ConnectionClosed as exc:
            raise ConnectionLost(
                f"failed to send a Responses WebSocket frame: {_reason(exc)}",
                error_class="send_transport",
                failure_phase="send",
            ) from exc

    async def receive_text(self) -> str | bytes:
        """The next message (``ConnectionLost`` when the socket closed)."""
        try:
            return await self._ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
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
            except (trio_websocket.ConnectionClosed, trio.BrokenResourceError, OSError):
                pass


def _reason(exc: trio_websocket.ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None:
        return "the connection closed"
    detail = f" ({reason.reason})" if reason.reason else ""
    return f"the connection closed with code {reason.code} {reason.name}{detail}"


def idle_timeout_error(seconds: float) -> ResponseTimeout:
    return ResponseTimeout(f"no Responses WebSocket frame arrived for {seconds:g} s")


async def open_connection(nursery: trio.Nursery, options: WebSocketOptions) -> WebSocketLink:
    """Connect and handshake; the socket's task lives in ``nursery`` until abandoned."""
    link: WebSocketLink = await nursery.start(_connection_task, options)
    return link


async def _connection_task(
    options: WebSocketOptions, *, task_status: trio.TaskStatus[WebSocketLink]
) -> None:
    started = False
    try:
        async with trio.open_nursery() as reader_nursery:
            ws, watched = await _handshake(reader_nursery, options)
            try:
                link = WebSocketLink(ws, options)
                watched.handshake_done = True
                task_status.started(link)
                started = True
                await link.wait_abandoned()
                await link._close()
            finally:
                # Whatever happened (remote close, abandon, cancellation), the TCP
                # stream is closed here and the reader task stops with it.
                await trio.aclose_forcefully(watched)
                reader_nursery.cancel_scope.cancel()
    except BaseException as exc:  # mapped below; Cancelled always propagates
        if _contains_cancelled(exc):
            raise
        if not started:
            raise _map_handshake_error(exc, options) from exc
        # After the handshake, errors of the reader task only mean the socket is dead;
        # the model call reading it sees ConnectionClosed and retries.


async def _handshake(
    nursery: trio.Nursery, options: WebSocketOptions
) -> tuple[trio_websocket.WebSocketConnection, _WatchedStream]:
    parts = urllib.parse.urlsplit(options.url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    resource = parts.path or "/"
    if parts.query:
        resource += "?" + parts.query
    with trio.fail_after(options.connect_timeout):
        if secure:
            context = options.ssl_context or ssl.create_default_context()
            stream: trio.abc.Stream = await trio.open_ssl_over_tcp_stream(
                host, port, ssl_context=context, https_compatible=True
            )
        else:
            stream = await trio.open_tcp_stream(host, port)
        watched = _WatchedStream(stream)
        host_header = host if port in (80, 443) else f"{host}:{port}"
        try:
            ws = await trio_websocket.wrap_client_stream(
                nursery,
                watched,  # type: ignore[arg-type]  # any trio Stream works; the hint is narrow
                host_header,
                resource,
                extra_headers=[(k.encode(), v.encode()) for k, v in options.headers],
                message_queue_size=options.message_queue_size,
                max_message_size=options.max_message_size,
                receive_buffer_size=options.receive_buffer_size,
            )
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
    return ws, watched


def _contains_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(trio.Cancelled) is not None and exc.subgroup(
            lambda e: not isinstance(e, trio.Cancelled | BaseExceptionGroup)
        ) is None
    return False


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        non_cancel = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        exc = (non_cancel or list(exc.exceptions))[0]
    return exc


def _map_handshake_error(exc: BaseException, options: WebSocketOptions) -> ConnectionFailed:
    leaf = _leaf(exc)
    where = f"connecting to {options.url}"
    if isinstance(leaf, trio.TooSlowError):
        return ConnectionFailed(
            f"{where} timed out after {options.connect_timeout:g} s", error_class="handshake_timeout"
        )
    if isinstance(leaf, trio_websocket.ConnectionRejected):
        return _rejected(leaf, where)
    if isinstance(leaf, _HandshakeEof):
        if isinstance(leaf.cause, ssl.SSLError):
            return ConnectionFailed(
                f"{where}: TLS failed: {leaf.cause}; check the server certificate "
                "(Responses(ssl_context=...) for a private CA)",
                error_class="handshake_tls", retryable=False,
            )
        return ConnectionFailed(f"{where}: the server closed the connection during the handshake ({leaf})")
    if isinstance(leaf, OSError | trio.BrokenResourceError | trio_websocket.HandshakeError):
        return ConnectionFailed(f"{where} failed: {leaf!r}")
    if isinstance(leaf, trio_websocket.ConnectionClosed):
        return ConnectionFailed(f"{where}: {_reason(leaf)} during the handshake")
    return ConnectionFailed(f"{where} failed unexpectedly: {leaf!r}", retryable=False)


def _rejected(exc: trio_websocket.ConnectionRejected, where: str) -> ConnectionFailed:
    status = exc.status_code
    headers: dict[str, Any] = {k.decode().lower(): v.decode() for k, v in exc.headers or ()}
    body = (exc.body or b"").decode("utf-8", "replace")[:500]
    retry_after = parse_retry_after(headers.get("retry-after"))
    error_class, retryable = classify_status(status, "handshake")
    hint = " check the API key" if status in (401, 403) else ""
    return ConnectionFailed(
        f"{where}: the server rejected the handshake with HTTP {status}{': ' + body if body else ''}"
        + (f";{hint}" if hint else ""),
        error_class=error_class,
        retryable=retryable,
        retry_after=retry_after,
        status=status,
    )
