"""The default TLS contexts: one per process and kind, loaded ahead of the first connection.

Why: a default context loads the CA bundle, tens of milliseconds of OpenSSL work (25 ms
on a quiet machine, over 100 ms on a busy one) that sat on a cold start's path between
the TCP connect and the TLS handshake -- and the WebSocket transport paid it again for
every socket. OpenSSL does that work with the GIL released, so it can run beside the
rest of start-up: ``AgentParts.startup`` calls :func:`prefetch` for an agent whose
``wss://`` or ``https://`` endpoint has no ``Responses(ssl_context=...)``, and the
transports take the context from here (:func:`tls_context`, :func:`tls_context_now`).

Theory of operation: ``_load`` builds a kind's context once, under a process-wide
lock, in whatever thread calls it; :func:`tls_context` runs it in a worker thread
(``trio.to_thread.run_sync``; a blocking C library leaves no other choice) that is
abandoned on cancellation -- it finishes on its own and fills the cache for the next
caller. A connection that asks while a prefetch is loading waits for it on the lock,
in its own worker thread, so the event loop never blocks and the bundle is loaded
once. The kinds are the transports' own defaults, unchanged: ``ssl.create_default_context()``
(the system CAs) for the WebSocket, ``httpx.create_ssl_context()`` (certifi, or
``SSL_CERT_FILE``/``SSL_CERT_DIR``) for HTTPS.
"""

from __future__ import annotations

import ssl
import threading
from typing import Literal

import trio

__all__ = ["Kind", "prefetch", "tls_context", "tls_context_now"]

Kind = Literal["websocket", "https"]

_contexts: dict[str, ssl.SSLContext] = {}
_lock = threading.Lock()


def _create(kind: Kind) -> ssl.SSLContext:
    if kind == "websocket":
        return ssl.create_default_context()
    import httpx  # loaded already: only the HTTPS transport asks for this kind

    return httpx.create_ssl_context()


def _load(kind: Kind) -> ssl.SSLContext:
    with _lock:
        context = _contexts.get(kind)
        if context is None:
            context = _contexts[kind] = _create(kind)
        return context


async def tls_context(kind: Kind) -> ssl.SSLContext:
    """The process's default context of ``kind``, loading it off the event loop."""
    context = _contexts.get(kind)
    if context is not None:
        return context
    return await trio.to_thread.run_sync(_load, kind, abandon_on_cancel=True)


def tls_context_now(kind: Kind) -> ssl.SSLContext:
    """The same from synchronous code (``HttpsTransport``'s constructor): at once when
    loaded, else waiting for a load under way or loading it here, as before."""
    context = _contexts.get(kind)
    return context if context is not None else _load(kind)


def prefetch(nursery: trio.Nursery, kind: Kind) -> None:
    """Start loading ``kind``'s context beside start-up (nothing when it is loaded)."""
    if kind not in _contexts:
        nursery.start_soon(tls_context, kind)
