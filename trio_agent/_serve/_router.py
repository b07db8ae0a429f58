"""Method routing: the supported subset of the Codex app-server v2 protocol.

``dispatch`` answers an unknown method with -32601, a request before ``initialize``
with -32600 ("Not initialized"), and hands the rest to its handler with the params
wrapped in ``Params`` (whose errors are -32602). A library error a handler lets
through (``ta.AgentError``: an unknown thread, a refused config...) becomes -32600
with its message. A request naming an unloaded thread (``threadId``) first has its
rollout located through the thread index (``_thread_lookup``). ``initialize`` and
``model/list`` live here; thread, turn, account and configuration methods in their own
modules (docs/app-server.md has the table of every method of the schema and what this
server does with it).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._config import DEFAULT_MODEL, Thinking
from .._errors import AgentError
from . import _account, _rollback, _settings_methods, _thread_admin, _thread_list, _thread_methods, _turn_methods
from ._connection import Connection, Reply
from ._jsonrpc import InvalidParams, InvalidRequest, MethodNotFound, Request, shown
from ._params import Params
from ._shapes import CLI_VERSION

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ["INLINE_METHODS", "METHODS", "dispatch", "serves_inline"]

Handler = Callable[["ServerContext", Connection, Params], Awaitable[Reply]]


async def dispatch(server: ServerContext, conn: Connection, request: Request) -> Reply:
    handler = METHODS.get(request.method)
    if handler is None:
        raise MethodNotFound(
            f"unknown method {shown(request.method)}: trio-agent serve speaks a subset of the Codex app-server v2 "
            f"protocol ({', '.join(sorted(METHODS))}); see docs/app-server.md"
        )
    if not conn.initialized and request.method != "initialize":
        raise InvalidRequest("Not initialized: send `initialize` (then the `initialized` notification) first")
    params = Params(request.method, request.params)
    thread_id = request.params.get("threadId") if isinstance(request.params, dict) else None
    if isinstance(thread_id, str) and not server.closing and server.state(thread_id) is None:
        await server.index.locate(thread_id)  # its rollout, off the loop: the handler's lookups glob nothing
    try:
        return await handler(server, conn, params)
    except AgentError as exc:
        raise InvalidRequest(f"{request.method}: {exc}") from exc


#: Methods whose handler, on a loaded thread and with input that names no file, waits on
#: nothing but in-memory steps (checkpoints that never block: ``agent.submit``, a turn's
#: ``steer``, the thread's lock held by in-memory steps): the connection's reader may
#: serve them itself (``Connection``'s docstring).
INLINE_METHODS = frozenset({"turn/start", "turn/steer"})


def serves_inline(server: ServerContext, conn: Connection, request: Request) -> bool:
    """Whether ``request`` may be served by the reader itself: an ``INLINE_METHODS``
    request of an initialized client on a loaded thread (an unloaded one is located on
    disk first, in ``dispatch``) whose input has no ``localImage`` (read from disk)."""
    params = request.params
    if request.method not in INLINE_METHODS or not conn.initialized or not isinstance(params, dict):
        return False
    thread_id = params.get("threadId")
    if not isinstance(thread_id, str) or server.state(thread_id) is None:
        return False
    given = params.get("input")
    return isinstance(given, list) and all(isinstance(item, dict) and item.get("type") != "localImage"
                                           for item in given)


#: The codex version ``initialize`` reports (``userAgent``'s ``name/VERSION``, where codex
#: puts its CLI version; the schema's InitializeResponse has no ``serverInfo``):
#: ``0.0.0``, codex's own "unversioned build". A real codex version would promise that
#: release's whole protocol, and the official Python SDK would then send fields this
#: server does not implement (``turnTrigger``...) unchecked; with ``0.0.0`` it asks this
#: server's own schema (``app-server generate-json-schema --experimental``, restricted to
#: what it implements: ``_schema_export``) and refuses, before sending, what is not
#: there. trio-agent's own version follows in the comment. docs/app-server.md "Version".
PROTOCOL_VERSION = "0.0.0"


async def initialize(server: ServerContext, conn: Connection, params: Params) -> Reply:
    if conn.initialized:
        raise InvalidRequest("Already initialized: send `initialize` once per connection")
    info = params.opt_object("clientInfo")
    if info is None:
        raise InvalidParams("initialize: missing required field `clientInfo` ({name, version})")
    name, version = info.get("name"), info.get("version", "")
    if not isinstance(name, str) or not name or not isinstance(version, str):
        raise InvalidParams("initialize: `clientInfo` needs a non-empty string `name` (and a string `version`)")
    capabilities = params.opt_object("capabilities") or {}
    opt_out = capabilities.get("optOutNotificationMethods") or []
    if not isinstance(opt_out, list) or not all(isinstance(method, str) for method in opt_out):
        raise InvalidParams("initialize: `capabilities.optOutNotificationMethods` must be an array of method names")
    conn.opt_out = frozenset(opt_out)
    conn.initialized = True
    conn.client_name = name
    system = platform.system()
    return Reply({
        "userAgent": f"trio-agent/{PROTOCOL_VERSION} (trio-agent {CLI_VERSION}; {system} {platform.release()}; "
                     f"{platform.machine()}) ({name}; {version})",
        "codexHome": str(server.home.resolve()),
        "platformFamily": "windows" if sys.platform == "win32" else "unix",
        "platformOs": {"Darwin": "macos", "Windows": "windows"}.get(system, system.lower()),
    })


_KNOWN_MODELS = ("gpt-5.5", "gpt-5.4", "gpt-5")
_EFFORTS = {
    Thinking.MINIMAL: "Fastest responses, least reasoning",
    Thinking.LOW: "Fast responses with light reasoning",
    Thinking.MEDIUM: "Balances speed and reasoning depth",
    Thinking.HIGH: "Greater reasoning depth for complex problems",
    Thinking.XHIGH: "Extra high reasoning depth",
}


def model_entry(model: str, *, default: bool, effort: Thinking) -> dict[str, Any]:
    return {
        "id": model, "model": model, "displayName": model, "description": f"{model} on the Responses API",
        "hidden": False, "isDefault": default, "defaultReasoningEffort": effort.value,
        "supportedReasoningEfforts": [{"reasoningEffort": e.value, "description": d} for e, d in _EFFORTS.items()],
        "inputModalities": ["text", "image"], "supportsPersonality": False, "upgrade": None,
    }


async def model_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    params.opt_string("cursor")
    limit = params.opt_int("limit")
    configured = server.config.model
    models = [configured, *(m for m in (DEFAULT_MODEL, *_KNOWN_MODELS) if m != configured)]
    unique = list(dict.fromkeys(models))
    data = [model_entry(m, default=m == configured, effort=server.config.thinking) for m in unique]
    return Reply({"data": data[:limit] if limit else data, "nextCursor": None})


METHODS: dict[str, Handler] = {
    "initialize": initialize,
    "model/list": model_list,
    **_thread_methods.METHODS,
    **_thread_list.METHODS,
    **_thread_admin.METHODS,
    **_rollback.METHODS,
    **_turn_methods.METHODS,
    **_account.METHODS,
    **_settings_methods.METHODS,
}
