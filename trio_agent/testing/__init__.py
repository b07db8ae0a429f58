"""Public test kit: a scripted fake Responses server and frame builders.

Use it from your own pytest-trio tests to script exactly what the model "says". The
server runs two ways, with the same scripting API (``accept()``, ``accept_raw()``,
``accept_http()``, ``next_request()``, ``send_*``):

- over real loopback: ``FakeResponsesServer()`` listens on ``127.0.0.1:0``; point the
  agent at ``server.url`` (WebSocket) or ``server.http_base_url`` (HTTPS);
- in memory: ``FakeResponsesServer.in_memory()`` opens no socket and no listener.
  Its ``dial`` is a ``Responses(dialer=...)`` whose connections are
  ``trio.testing.memory_stream_pair`` streams queued where TCP connections would be,
  and ``http_client()`` is an ``httpx.AsyncClient`` dialing the same way. With no
  real I/O, ``trio.testing.MockClock(autojump_threshold=0)`` gives exact virtual
  times (a server that sleeps 5.0 s is seen exactly 5.0 s later)::

      server = FakeResponsesServer.in_memory()
      await nursery.start(server.serve)
      responses = ta.Responses(websocket_url=server.url, dialer=server.dial)
      # HTTPS: ta.Responses(transport=ta.Transport.HTTPS, api_base_url=server.http_base_url,
      #                     http_client=server.http_client())

  Its URLs name ``MEMORY_HOST`` (an ``.invalid`` name, so nothing real is reachable);
  pass a server-side ``ssl_context`` for ``wss://``/``https://`` over memory streams.

``AppServerClient`` is a small typed client of the Codex app-server protocol, for
tests of ``trio-agent serve`` (``open_app_server`` in process, over a
``memory_stream_pair`` wrapped in ``LineChannel``; a subprocess's stdio; or a
WebSocket through ``WebSocketChannel``).
"""

from .._serve._channel import LineChannel, WebSocketChannel
from . import _frames as frames
from ._app_client import AppServerClient, AppServerError, ClientBufferFull, ServerNotification, ServerRequest
from ._http import FakeHttpRequest
from ._server import MEMORY_HOST, FakeConnection, FakeResponsesServer, Handshake, RawConnection

__all__ = [
    "MEMORY_HOST",
    "AppServerClient",
    "AppServerError",
    "ClientBufferFull",
    "FakeConnection",
    "FakeHttpRequest",
    "FakeResponsesServer",
    "Handshake",
    "LineChannel",
    "RawConnection",
    "ServerNotification",
    "ServerRequest",
    "WebSocketChannel",
    "frames",
]
