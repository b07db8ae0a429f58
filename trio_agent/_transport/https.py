"""The Responses HTTPS/SSE transport (httpx on Trio).

One ``httpx.AsyncClient`` per agent (creating one costs ~25 ms: it loads the CA
bundle), or the application's own ``http_client`` -- used for every request, so its
default headers arrive. Without an ``http_client``, a ``dialer`` makes the agent's
client open its connections through it (``_dialed_http``: the in-memory test seam).
``open_stream`` POSTs ``{base}/responses`` and yields the raw body chunks of a 2xx
response; anything else is mapped once, here, into a ``ResponsesError``, by cause and
as the WebSocket does (issue 8, item 10): 401/403 is ``AuthenticationError``; 429 and
5xx are retryable ``ApiError`` (``Retry-After`` honoured), other statuses terminal; a
refused or failed connect is ``ConnectionFailed`` (retryable; TLS failures terminal);
timeouts and a transport failure mid-request are retryable.
"""

from __future__ import annotations

import contextlib
import functools
import math
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
import trio

from .._errors import ApiError, ConnectionFailed, ConnectionLost, ProtocolError, ResponsesError, ResponseTimeout
from .._jsontext import dumps
from ._rejection import rejection_error, shown_body

if TYPE_CHECKING:
    from .._config import AgentConfig
    from ._early_dial import EarlyDial
    from .tap import ConnectionTap, RequestTap
    from .websocket import Dialer  # a type alias: the HTTPS path never loads trio-websocket

__all__ = ["HttpsTransport", "https_transport"]

_MAX_ERROR_BODY = 4096


class _SentTrace:
    """httpcore's trace extension, for one thing: ``on_sent`` once the request body is
    written (then the caller emits what waited for the request to be on its way).

    Then it takes itself out of the extensions of the request httpcore sends (the request
    its ``send_request_body.started`` names): httpcore reads the extension as each traced
    section of the request starts, so the sections after the body (the response head, the
    body, the close: six calls of a coroutine, each with its name formatted) are not
    traced."""

    __slots__ = ("_extensions", "_on_sent")

    def __init__(self, on_sent: Callable[[], object]) -> None:
        self._on_sent: Callable[[], object] | None = on_sent
        self._extensions: Any = None

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        if self._on_sent is None:
            return
        if name.endswith(".send_request_body.started"):
            self._extensions = getattr(info.get("request"), "extensions", None)
        elif name.endswith(".send_request_body.complete"):
            on_sent, self._on_sent = self._on_sent, None
            extensions = self._extensions
            if isinstance(extensions, dict) and extensions.get("trace") is self:
                del extensions["trace"]
            on_sent()


class HttpsTransport:
    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.AsyncClient | None = None,
        connect_timeout: float = 30.0,
        idle_timeout: float = 300.0,
        handshake_timeout: float | None = None,
        dialer: Dialer | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tap: ConnectionTap | None = None,
    ) -> None:
        """``client``: the application's own (used as is, never closed here); else one is
        created for this transport, dialing through ``dialer`` when given and trusting
        ``ssl_context`` (default: the system CAs). ``tap`` (the observer seam's,
        ``tap.py``) is told of every request: chosen once per request, never per chunk."""
        self.url = base_url.rstrip("/") + "/responses"
        self.tap = tap
        self._headers_for: Sequence[tuple[str, str]] | None = None
        self._built_headers = httpx.Headers()
        self._url: httpx.URL | None = None  # parsed once, for the own client's requests
        self._merged: httpx.Headers | None = None  # the own client's defaults + _built_headers
        self._owned = client is None
        self._head_timeout = connect_timeout if handshake_timeout is None else handshake_timeout
        if client is not None:
            self._client = client
            return
        timeout = httpx.Timeout(connect=connect_timeout, read=idle_timeout, write=30.0, pool=connect_timeout)
        plain = self.url.startswith("http://")
        if dialer is None:
            context = ssl_context or (_no_tls_context() if plain else _ssl_context())
            self._client = httpx.AsyncClient(timeout=timeout, verify=context)
        else:
            from ._dialed_http import DialedTransport

            # a plain http:// endpoint needs no TLS context at all: none is made (the
            # process's first costs ~1.3 ms, on a cold run's path to its request)
            transport = DialedTransport(dialer, ssl_context=ssl_context or (None if plain else _ssl_context()),
                                        plain=plain)
            self._client = httpx.AsyncClient(timeout=timeout, transport=transport)

    def open_stream(
        self, body: dict[str, Any], headers: Sequence[tuple[str, str]], text: str | None = None,
        on_sent: Callable[[], object] | None = None, head_scope: trio.CancelScope | None = None,
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """POST ``body`` (whose JSON is ``text``, when known); ``async with`` it for the body
        chunks of a successful response. ``on_sent`` is called once the request's last
        byte is written, while the response is awaited (httpcore's trace extension).

        ``head_scope``: a cancel scope the caller has entered around the whole exchange
        (its read scope). Untapped, the head's timeout is then that scope's deadline,
        lifted once the head is in -- one scope per request instead of two nested --
        and when the deadline fires the Cancelled ends the caller's scope, which raises
        ``head_timeout()`` itself; tapped, the request keeps a scope of its own."""
        tap = self.tap
        if tap is None:
            # The same headers object every request (an API key's): httpx gets the same
            # normalised ``Headers``, built once, instead of a list to normalise again;
            # and no context manager of our own around the request's.
            if headers is not self._headers_for:
                self._headers_for = headers
                self._built_headers = httpx.Headers(
                    [("Content-Type", "application/json"), ("Accept", "text/event-stream"), *headers]
                )
                if self._owned:  # what build_request merges, merged once (nobody changes our client's)
                    self._url = self._url or httpx.URL(self.url)
                    self._merged = httpx.Headers(self._client.headers)
                    self._merged.update(self._built_headers)
            return self._open_stream(body, self._built_headers, None, text, on_sent, head_scope)
        return self._tapped_stream(tap, body, headers, text, on_sent)

    def head_timeout(self) -> ResponseTimeout:
        """The error of a request whose response head did not come within the handshake timeout."""
        return ResponseTimeout(
            f"the Responses HTTPS request to {self.url} got no response head within "
            f"{self._head_timeout:g} s (handshake_timeout)", error_class="https_head_timeout",
        )

    @property
    def whole_responses(self) -> bool:
        """Whether a caller reads each response to its end before it goes on (True when
        tapped: what the tap sees of one request is then never interleaved with what
        follows it); else the rest of a response may be read later."""
        return self.tap is not None

    @asynccontextmanager
    async def _tapped_stream(
        self, tap: ConnectionTap, body: dict[str, Any], headers: Sequence[tuple[str, str]], text: str | None,
        on_sent: Callable[[], object] | None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        # One tap per request, told the head, the chunks and how the request ended.
        request_headers = [("Content-Type", "application/json"), ("Accept", "text/event-stream"), *headers]
        # The tap is told what goes out: the client's own default headers (a user's
        # ``http_client`` may set some), overridden by the request's, as httpx merges them.
        sent = httpx.Headers(self._client.headers)
        sent.update(request_headers)
        watch = tap.request_opened(self.url, sent.multi_items(), body)
        try:
            async with self._open_stream(body, request_headers, watch, text, on_sent) as chunks:
                yield chunks
        except BaseException as exc:
            watch.closed(exc)
            raise
        watch.closed(None)

    @asynccontextmanager
    async def _open_stream(
        self, body: dict[str, Any], request_headers: list[tuple[str, str]] | httpx.Headers,
        watch: RequestTap | None, text: str | None = None, on_sent: Callable[[], object] | None = None,
        head_scope: trio.CancelScope | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        content = (dumps(body) if text is None else text).encode()  # lone surrogates become U+FFFD (``_jsontext``)
        client = self._client
        try:
            # What ``client.stream`` does, without its context manager and an exit stack.
            extensions = None if on_sent is None else {"trace": _SentTrace(on_sent)}
            merged = self._merged if request_headers is self._built_headers else None
            if merged is not None and self._url is not None and not client.cookies:
                # Our own client, untapped: what build_request builds (an absolute URL, no
                # query parameters, no cookies to send; the timeouts come with send), without
                # parsing the URL and merging the headers again on every request (~40 us).
                request = httpx.Request("POST", self._url, content=content, headers=merged, extensions=extensions)
            else:
                request = client.build_request("POST", self.url, content=content, headers=request_headers,
                                               extensions=extensions)
            if head_scope is None:
                with trio.move_on_after(self._head_timeout) as head:
                    response = await client.send(request, stream=True)
                if head.cancelled_caught:
                    raise self.head_timeout()
            else:  # the caller's scope bounds the head (see open_stream)
                head_scope.deadline = trio.current_time() + self._head_timeout
                try:
                    response = await client.send(request, stream=True)
                finally:
                    head_scope.deadline = math.inf
            try:
                if response.status_code // 100 != 2:
                    error, text = await _rejected(response)
                    if watch is not None:
                        watch.head(response.status_code, response.headers.multi_items(), text)
                    raise error
                raw = response.aiter_raw()
                try:
                    chunks: AsyncIterator[bytes] = raw
                    content_type = response.headers.get("content-type", "")
                    if content_type and "text/event-stream" not in content_type.lower():
                        with trio.move_on_after(self._head_timeout):  # its first bytes, as soon as a head
                            chunks = await _event_stream_or_fail(raw, response.status_code, content_type)
                    if watch is not None:
                        watch.head(response.status_code, response.headers.multi_items(), None)
                        chunks = _TappedChunks(chunks, watch)
                    yield chunks
                finally:
                    await raw.aclose()  # type: ignore[attr-defined]
            finally:
                await response.aclose()
        except httpx.ConnectTimeout as exc:
            raise ConnectionFailed(
                f"connecting to {self.url} timed out ({type(exc).__name__})", error_class="https_connect_timeout",
            ) from exc
        except httpx.TimeoutException as exc:
            raise ResponseTimeout(
                f"the Responses HTTPS request to {self.url} timed out ({type(exc).__name__})",
                error_class="https_timeout",
            ) from exc
        except httpx.TransportError as exc:
            tls = _tls_failure(exc)
            if tls is not None:
                raise ConnectionFailed(
                    f"TLS to {self.url} failed: {tls}; check the server certificate "
                    "(pass an http_client that trusts a private CA)",
                    error_class="https_tls", retryable=False,
                ) from exc
            if isinstance(exc, httpx.ConnectError):  # refused, unreachable, DNS: nothing was sent
                raise ConnectionFailed(
                    f"connecting to {self.url} failed: {exc}; check that the server is reachable",
                    error_class="https_connect",
                ) from exc
            raise ConnectionLost(
                f"the Responses HTTPS request to {self.url} failed: {type(exc).__name__}: {exc}",
                error_class="https_transport",
            ) from exc

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()


class _TappedChunks:
    """The body chunks, each shown to the request's tap (an iterator object, not an async
    generator: nothing is left for the garbage collector when a stream is given up)."""

    def __init__(self, inner: AsyncIterator[bytes], tap: RequestTap) -> None:
        self._inner = inner
        self._tap = tap

    def __aiter__(self) -> _TappedChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._inner.__anext__()
        except StopAsyncIteration:
            self._tap.body_ended(None)
            raise
        except Exception as exc:
            self._tap.body_ended(exc)
            raise
        self._tap.received(chunk)
        return chunk


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = exc
    for _ in range(8):  # walk the cause chain a few links deep
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: loading the CA bundle is what makes a new httpx
    client cost ~25 ms; with a shared context a client costs well under a millisecond.
    An agent's start-up has usually loaded it already, beside its other work (``_tls``)."""
    from ._tls import tls_context_now

    return tls_context_now("https")


@functools.cache
def _no_tls_context() -> ssl.SSLContext:
    """For a plain ``http://`` URL, which never uses TLS: a verifying context that trusts
    no CA (so it would fail closed), without loading the system bundle (~25 ms)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


_SSE_STARTS = (b"data:", b"event:", b"id:", b"retry:", b":")
_SHOWN_START = 300  # bytes of a body that is not an event stream, shown in the error


async def _event_stream_or_fail(raw: AsyncIterator[bytes], status: int, content_type: str) -> AsyncIterator[bytes]:
    """A 2xx answer not labelled ``text/event-stream``: still read as one when it starts
    like one (servers mislabel streams), else ``ProtocolError`` naming its content type
    and first bytes (a server that ignored ``stream: true`` and sent one JSON document,
    or a web page), instead of "the stream was cut inside an event"."""
    seen = b""
    async for chunk in raw:
        seen += chunk
        if seen.strip() or len(seen) > _SHOWN_START:
            break
    if not seen.strip() or seen.lstrip().startswith(_SSE_STARTS):
        return _replayed(seen, raw)
    start = seen[:_SHOWN_START].decode("utf-8", "replace")
    raise ProtocolError(
        f"the Responses API answered HTTP {status} with {content_type or 'no content type'}, not an event stream "
        f"(text/event-stream); it starts {start!r}. The server may not stream Responses (stream: true); check "
        "--api-base, which must name the server's Responses API (the agent posts to <base>/responses)",
        error_class="not_event_stream", retryable=False,
    )


async def _replayed(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first:
        yield first
    async for chunk in rest:
        yield chunk


async def _rejected(response: httpx.Response) -> tuple[ResponsesError, str]:
    """The error for a non-2xx response, and the (start of the) body it was made from."""
    status = response.status_code
    raw = await response.aread()  # error bodies are small JSON documents
    text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
    return rejection_error(
        status, text, response.headers.get("retry-after"), prefix="https",
        message=f"the Responses API answered HTTP {status}: {shown_body(text)}", other=ApiError,
    ), text


def https_transport(config: AgentConfig, tap: ConnectionTap | None = None,
                    early: EarlyDial | None = None) -> HttpsTransport:
    """The agent's HTTPS transport, from its config: the application's ``http_client``
    when given, else an own client that dials through ``Responses.dialer`` (if set) and
    trusts ``Responses.ssl_context`` (if set); timeouts from ``Responses``. ``early``:
    its first connection, started before the agent was built (``_early_dial``)."""
    responses = config.responses
    return HttpsTransport(
        config.api_base_url, client=responses.http_client, connect_timeout=responses.connect_timeout,
        idle_timeout=responses.idle_timeout, handshake_timeout=responses.handshake_timeout,
        dialer=early.dialer if early is not None else responses.dialer, ssl_context=responses.ssl_context, tap=tap,
    )
