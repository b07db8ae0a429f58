"""``trio-agent serve``: the thread manager over the Codex app-server v2 protocol
(JSON-RPC 2.0 on stdio or WebSocket). See ``docs/app-server.md``.

Layout: ``_jsonrpc`` (messages), ``_channel`` (line and WebSocket framing),
``_connection`` (one client: reader, dispatcher, bounded writer), ``_router`` and the
``_*_methods`` modules (the methods), ``_items`` and ``_tool_items`` (agent events to
v2 items, pure), ``_shapes`` (the v2 objects), ``_dynamic`` (client-run tools),
``_store`` (the server's thread records), ``_server`` (the server and its shutdown),
``_context`` (what the handlers use of the server: a protocol below them),
``_thread_state`` (the loaded threads' states), ``_pump`` (thread events to
notifications), ``_asking`` (dynamic tool calls and approvals put to the clients),
``_transports`` (stdio and WebSocket listeners), ``_listen_policy`` and
``_http_gate`` (who may connect to the listener, and its front door), ``_command``
(the CLI).
"""

from ._channel import LineChannel, MessageChannel, WebSocketChannel
from ._connection import OUTGOING_LIMIT
from ._listen_policy import ListenerPolicy
from ._server import AppServer, open_app_server
from ._transports import Listening, serve_stdio, serve_websocket

__all__ = [
    "OUTGOING_LIMIT",
    "AppServer",
    "LineChannel",
    "ListenerPolicy",
    "Listening",
    "MessageChannel",
    "WebSocketChannel",
    "open_app_server",
    "serve_stdio",
    "serve_websocket",
]
