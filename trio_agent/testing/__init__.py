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

``scripted(script)`` runs the server side of a test beside a block and fails the test
(``ScriptUnfinished``) when the script did not finish; ``record_events(agent.events)``
records what the agent emitted into an ``EventLog``. The client going away is
``ClientDisconnected`` (with the close ``code`` and ``reason``), whatever WebSocket
library is underneath.

Record and replay (``docs/cassettes.md``): ``AgentConfig(record=path)`` records a live
session into a cassette; ``await replay(path)`` re-runs its prompts and steers against a
``ReplayServer`` serving that cassette and returns a ``ReplayResult`` whose ``mismatch``
(a ``ReplayMismatch``, with a diff) says where the agent first behaved differently.
``Cassette.load(path)`` validates a cassette (``CassetteError`` says what is wrong).
The pytest plugin (``_trio_agent_pytest``, loaded through the ``pytest11`` entry point)
gives tests a ``cassette`` fixture (a ``CassetteFixture``), a ``cassette`` marker and
``--record-mode``.

The remote tools' endpoints (web search, image generation) are answered with
``answer_web_search`` / ``answer_image_request``; see ``_tool_endpoints``.

``AppServerClient`` is a small typed client of the Codex app-server protocol, for
tests of ``trio-agent serve`` (``open_app_server`` in process, over a
``memory_stream_pair`` wrapped in ``LineChannel``; a subprocess's stdio; or a
WebSocket through ``WebSocketChannel``).
"""


# The kit is imported lazily, name by name (PEP 562): importing every module here
# would load ``trio.testing`` -- and with it pytest -- and the cassette, replay and
# app-server modules for any one name. (``trio-agent run --local`` does not come here
# at all: its model is ``trio_agent._local_model``.) ``from trio_agent.testing import X``
# and ``trio_agent.testing.X`` behave as before; the type checkers read the imports
# below.
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._cassette.format import Cassette, CassetteError, CassetteHeader, Observation
    from .._serve._channel import LineChannel, WebSocketChannel
    from . import _frames as frames
    from ._app_client import AppServerClient, AppServerError, ClientBufferFull, ServerNotification, ServerRequest
    from ._cassette_fixture import CassetteFixture
    from ._http import FakeHttpRequest
    from ._replay import ReplayedTurn, ReplayResult, replay, replay_config
    from ._replay_match import ReplayMatch, ReplayMismatch, RequestMatcher
    from ._replay_server import ReplayServer
    from ._scripted import EventLog, ScriptUnfinished, record_events, scripted
    from ._server import (
        MEMORY_HOST,
        ClientDisconnected,
        FakeConnection,
        FakeResponsesServer,
        Handshake,
        RawConnection,
    )
    from ._tool_endpoints import PNG_PIXEL, answer_image_request, answer_web_search, image_response, search_response

_HOMES: dict[str, tuple[str, ...]] = {
    "trio_agent._cassette.format": ("Cassette", "CassetteError", "CassetteHeader", "Observation"),
    "trio_agent._serve._channel": ("LineChannel", "WebSocketChannel"),
    "trio_agent.testing._app_client": (
        "AppServerClient", "AppServerError", "ClientBufferFull", "ServerNotification", "ServerRequest",
    ),
    "trio_agent.testing._http": ("FakeHttpRequest",),
    "trio_agent.testing._replay": ("ReplayedTurn", "ReplayResult", "replay", "replay_config"),
    "trio_agent.testing._replay_match": ("ReplayMatch", "ReplayMismatch", "RequestMatcher"),
    "trio_agent.testing._cassette_fixture": ("CassetteFixture",),
    "trio_agent.testing._replay_server": ("ReplayServer",),
    "trio_agent.testing._scripted": ("EventLog", "ScriptUnfinished", "record_events", "scripted"),
    "trio_agent.testing._server": (
        "MEMORY_HOST", "ClientDisconnected", "FakeConnection", "FakeResponsesServer", "Handshake", "RawConnection",
    ),
    "trio_agent.testing._tool_endpoints": (
        "PNG_PIXEL", "answer_image_request", "answer_web_search", "image_response", "search_response",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name == "frames":
        value: Any = import_module("trio_agent.testing._frames")
    elif name in _HOME_OF:
        value = getattr(import_module(_HOME_OF[name]), name)
    else:
        raise AttributeError(f"module 'trio_agent.testing' has no attribute {name!r}")
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

__all__ = [
    "MEMORY_HOST",
    "PNG_PIXEL",
    "AppServerClient",
    "AppServerError",
    "Cassette",
    "CassetteError",
    "CassetteFixture",
    "CassetteHeader",
    "ClientBufferFull",
    "ClientDisconnected",
    "EventLog",
    "FakeConnection",
    "FakeHttpRequest",
    "FakeResponsesServer",
    "Handshake",
    "LineChannel",
    "Observation",
    "RawConnection",
    "ReplayMatch",
    "ReplayMismatch",
    "ReplayResult",
    "ReplayServer",
    "ReplayedTurn",
    "RequestMatcher",
    "ScriptUnfinished",
    "ServerNotification",
    "ServerRequest",
    "WebSocketChannel",
    "answer_image_request",
    "answer_web_search",
    "frames",
    "image_response",
    "record_events",
    "replay",
    "replay_config",
    "scripted",
    "search_response",
]
