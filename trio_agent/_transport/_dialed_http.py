"""httpx over a ``Responses(dialer=...)``: the HTTPS half of the dialer seam.

httpx sends through httpcore, and httpcore opens connections through a *network
backend*. ``DialedTransport`` is an ``httpx.AsyncBaseTransport`` around an httpcore
connection pool whose backend calls the dialer instead of ``trio.open_tcp_stream``;
TLS is layered on the dialed stream by httpcore (``start_tls``) for ``https://``.

Failures keep their shape: an ``OSError`` / ``BrokenResourceError`` of the dialer or
the stream becomes httpcore's ``ConnectError`` / ``ReadError`` / ``WriteError``, our own
timeouts (Trio's clock, so ``MockClock`` drives them) the matching ``*Timeout``, and
every httpcore error is re-raised as the httpx error of the same name -- so
``HttpsTransport`` maps them exactly as it maps a real socket's. Anything else (a bug
in a dialer's stream, ``Cancelled``) propagates unchanged.
"""

from __future__ import annotations

import contextlib
import math
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpcore
import httpx
import trio

if TYPE_CHECKING:
    from .websocket import Dialer  # a type alias: the HTTPS path never loads trio-websocket

__all__ = ["DialedTransport"]

_EXPECTED = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


@contextlib.contextmanager
def _io(error: type[Exception], timeout_error: type[Exception], timeout: float | None) -> Iterator[None]:
    """Run the body within ``timeout`` seconds, mapping a stream's failures to httpcore's."""
    try:
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            yield
    except _EXPECTED as exc:
        raise error(f"{type(exc).__name__}: {exc}") from exc
    if scope.cancelled_caught:
        raise timeout_error(f"timed out after {timeout:g} s")


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109  # httpcore's interface
        with _io(httpcore.ReadError, httpcore.ReadTimeout, timeout):
            return bytes(await self._stream.receive_some(max_bytes))
        raise AssertionError("unreachable: _io raises on timeout")

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109  # httpcore's interface
        if buffer:
            with _io(httpcore.WriteError, httpcore.WriteTimeout, timeout):
                await self._stream.send_all(buffer)

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None  # noqa: ASYNC109  # httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        tls = trio.SSLStream(self._stream, ssl_context, server_hostname=server_hostname, https_compatible=True)
        try:
            with _io(httpcore.ConnectError, httpcore.ConnectTimeout, timeout):
                await tls.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(self._stream)
            raise
        return _Stream(tls)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self, dialer: Dialer) -> None:
        self._dialer = dialer

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,  # noqa: ASYNC109  # httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        with _io(httpcore.ConnectError, httpcore.ConnectTimeout, timeout):
            return _Stream(await self._dialer(host, port))
        raise AssertionError("unreachable: _io raises on timeout")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None  # noqa: ASYNC109  # httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a dialer opens TCP-style streams; unix sockets are not supported")

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


# httpcore error -> the httpx error of the same meaning; subclasses first.
_TO_HTTPX: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _as_httpx() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core, ours in _TO_HTTPX:
            if isinstance(exc, core):
                raise ours(str(exc)) from exc
        raise


class _Body(httpx.AsyncByteStream):
    """The response body, with httpcore's errors as httpx's. An iterator object rather
    than an async generator: nothing is left for the garbage collector to finalize
    when a stream is given up early (a preempting steer)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream  # httpcore's response stream: async-iterable, with aclose()
        self._chunks: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = aiter(self._stream)
        return self

    async def __anext__(self) -> bytes:
        assert self._chunks is not None, "iterate with async for"
        with _as_httpx():
            return await anext(self._chunks)
        raise AssertionError("unreachable: _as_httpx re-raises")

    async def aclose(self) -> None:
        with _as_httpx():
            close = getattr(self._chunks, "aclose", None)
            if close is not None:  # httpcore's iterator is an async generator: finish it now
                await close()
            await self._stream.aclose()


class DialedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that opens every connection with ``dialer`` (HTTP/1.1).
    ``ssl_context``: what ``https://`` connections trust (default: the system CAs);
    ``plain``: the transport's requests go to ``http://`` only, so no default context is
    made (``ssl_context`` as given; httpcore would make its own for an ``https://`` one)."""

    def __init__(self, dialer: Dialer, *, ssl_context: ssl.SSLContext | None = None, plain: bool = False) -> None:
        if ssl_context is None and not plain:
            ssl_context = ssl.create_default_context()
        self._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=_Backend(dialer))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx():
            response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status, headers=response.headers, stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
