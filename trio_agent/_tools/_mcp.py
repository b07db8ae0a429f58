"""MCP servers as nested tools, on the official ``mcp`` SDK (anyio, so it runs on Trio).

Theory of operation. One ``McpTools`` per agent. ``start(nursery)`` starts one task
per configured server in the *agent's* nursery and returns at once: nothing waits for
a server, so a slow one never delays a turn. Each task connects (a subprocess in its
own process group for stdio, an HTTP session for Streamable HTTP), lists the tools
and then holds the session open until the agent closes. Connecting and listing are
bounded by the server's ``startup_timeout`` (one cancel scope whose deadline is lifted
once the server is up, so the SDK's nested scopes are never exited out of order);
each call by ``tool_timeout``. All on Trio's clock.

Tools are named ``mcp__<server>__<tool>`` (characters outside ``[A-Za-z0-9_-]``
become ``_``). While the servers have at most ``defer_above`` tools in all, every
tool is *active* -- callable and listed in ``ALL_TOOLS`` -- as soon as its server is
up; beyond that they are *deferred* (nanocodex's model): ``tool_search`` (BM25 over
names, descriptions and parameter names; 8 results by default, at most 32) returns
matches with their TypeScript declarations and activates them. ``tool_search`` waits
for servers still starting, up to their startup timeout.

Faults stay inside the tool result: a server that fails to start, crashes or hangs
makes its calls fail with a message (with the tail of its stderr, which is kept in a
bounded buffer); the agent goes on. A server that was up and lost its connection
(crashed, dropped its HTTP session) is restarted with backoff, bounded, and later calls
wait for it (``_mcp_session``). Resources and prompts are ``_mcp_resources``; progress
and log notifications become events (``_mcp_notify``). A malformed ``tools/list`` entry costs only itself
(``_mcp_listing``): it is left out with an ``api.warning`` (code ``mcp_tool_skipped``)
naming the server, the entry and why, as is an empty name or a second tool whose name
maps to one already taken; the server's other tools stay available. ``close()`` -- and cancellation of the agent's
nursery -- ends every session: the SDK closes a stdio server's stdin, then sends
SIGTERM and SIGKILL to its process group, shielded and bounded. On Linux the server
runs under a subreaper supervisor (``_mcp_process``, ``_server_reaper.py``) that ends
the server's whole process tree with it -- daemons that left its group or session
included -- also when the agent process dies, so no server process outlives the
agent.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import trio

from .._events import EventKind
from ._bm25 import Bm25Index
from ._mcp_catalog import McpTool, bounded_block, error_text, search_arguments, tool_entry
from ._mcp_config import McpServer
from ._mcp_listing import ToolListing
from ._mcp_notify import LOG_LEVEL, log_callback, progress_callback
from ._mcp_process import server_command
from ._mcp_resources import run_resource_tool
from ._mcp_session import Session, connection_lost, run_restarting, session_gone, wait_up, watched
from ._schema import describe_value
from ._tool_errors import NestedToolError
from ._ts import js_identifier

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpTools"]

_STDERR_TAIL = 4096
_STDERR_GRACE = 1.0
_MAX_PAGES = 100
_MAX_RESULT_CHARS = 32 << 20  # a result the script could not sensibly hold


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        leaves = exc.exceptions
        return "; ".join(_describe(e) for e in leaves[:3])
    if isinstance(exc, NestedToolError):
        return exc.message
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


class _Server:
    def __init__(self, name: str, config: McpServer) -> None:
        self.name = name
        self.config = config
        self.state: Literal["starting", "ready", "failed", "closed"] = "starting"
        self.error: str | None = None
        self.client: Client | None = None
        self.scope = trio.CancelScope()
        self.settled = trio.Event()  # ready or failed
        self.calls: set[trio.CancelScope] = set()
        self.stderr = bytearray()
        self.http_error: str | None = None  # the last HTTP error status the server answered
        self.listing = ToolListing()  # its tools/list entries, checked one by one
        self.session = Session()  # how its connection ended, its restarts (_mcp_session)
        self.lost = trio.Event()  # set when the connection is lost (Session.drop)

    def lose(self, reason: str) -> None:
        self.session.drop(self, reason)

    def stderr_note(self) -> str:
        """What the server last said about itself: its stderr tail, or an HTTP error."""
        if self.http_error is not None:
            return f" (the server answered HTTP {self.http_error})"
        tail = bytes(self.stderr).decode("utf-8", "replace").strip()
        return f"\n(server stderr, last lines:\n{tail[-1500:]})" if tail else ""

    def fail(self, error: str) -> None:
        if self.state in ("starting", "ready"):
            self.state = "failed"
            self.error = error
        self.client = None
        for scope in self.calls:
            scope.cancel()
        self.settled.set()


class McpTools:
    """The MCP tools of one agent; see the module docstring."""

    def __init__(
        self,
        servers: Mapping[str, McpServer],
        *,
        workspace: Path,
        emit: Callable[..., Any],
        defer_above: int,
    ) -> None:
        self._servers = {name: _Server(name, config) for name, config in servers.items()}
        self._workspace = workspace
        self._emit = emit
        self._defer_above = defer_above
        self._entries: dict[str, McpTool] = {}  # by canonical name, in discovery order
        self._js_names: dict[str, str] = {}  # JavaScript identifier -> canonical name
        self._active: set[str] = set()
        self._index: tuple[int, Bm25Index] | None = None
        self._closing = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        for server in self._servers.values():
            nursery.start_soon(self._run, server, name=f"mcp server {server.name}")

    def close(self) -> None:
        """End every session (idempotent, never blocks): each server task runs its
        bounded, shielded shutdown in the agent's nursery, whose exit waits for it."""
        self._closing = True
        for server in self._servers.values():
            server.scope.cancel()

    async def _run(self, server: _Server) -> None:
        """Connect, and connect again while a lost connection is to be restarted."""
        await run_restarting(server, self._connect, self._emit, lambda: self._closing)

    async def _connect(self, server: _Server) -> None:
        config = server.config
        server.scope.deadline = trio.current_time() + config.startup_timeout
        try:
            with server.scope:
                if config.transport == "stdio":
                    await self._run_stdio(server)
                else:
                    await self._run_http(server)
        except* ImportError as group:
            server.fail(f"MCP server {server.name} cannot start: {_describe(group)}; install the MCP extra: "
                        "pip install 'trio-agent[mcp]'")
        except* Exception as group:
            server.fail(f"MCP server {server.name} failed: {_describe(group)}{server.stderr_note()}")
        finally:
            verdict = server.session.verdict(server.state, self._closing)
            if verdict == "give_up":
                server.state, server.error = "failed", server.session.gave_up(server.name, server.error)
            if verdict == "retry":
                server.state, server.client = "starting", None  # _run restarts it
            elif server.state == "starting":
                if server.scope.cancelled_caught and not self._closing:  # its own deadline, not a shutdown
                    server.fail(f"MCP server {server.name} did not start within {config.startup_timeout:g} s"
                                f"{server.stderr_note()}")
                else:
                    server.state, server.error = "closed", f"MCP server {server.name} was closed while starting"
            elif server.state == "ready":
                server.state, server.error = "closed", f"MCP server {server.name} is closed"
            server.client = None
            if verdict != "retry":  # a restart's waiters wait on
                server.settled.set()
            if server.state == "failed":
                self._emit(EventKind.MCP_SERVER_FAILED, {"server": server.name, "error": server.error}, None)

    async def _session(self, server: _Server, client: Client) -> None:
        tools = await _list_tools(client)
        server.scope.deadline = math.inf  # up: only close() (or a failure) ends it now
        if server.session.attempt:  # a restart lists its tools again
            self._forget(server)
        self._ready(server, client, tools)
        await server.lost.wait()  # only close() or a lost connection (_mcp_session) ends it now

    async def _run_stdio(self, server: _Server) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client

        config = server.config
        assert config.command is not None
        cwd = config.cwd if config.cwd is not None else self._workspace
        # Under its supervisor, so that the whole process tree of the server ends with it.
        command, args = server_command(config.command, config.args, get_default_environment() | dict(config.env),
                                       cwd)
        params = StdioServerParameters(command=command, args=args, env=dict(config.env) or None, cwd=cwd)
        async with trio.open_nursery() as nursery:
            errlog, drained = _stderr_tail(server, nursery)
            try:
                transport = server.listing.wrap(watched(stdio_client(params, errlog=errlog), server.lose))
                async with Client(transport, **self._client_options(server)) as client:
                    await self._session(server, client)
            finally:
                errlog.close()
                with trio.move_on_after(_STDERR_GRACE):  # the last words of a crashed server
                    await drained.wait()
                nursery.cancel_scope.cancel()  # a server's own child may hold its stderr open

    async def _run_http(self, server: _Server) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        config = server.config
        assert config.url is not None
        async def note_status(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                server.http_error = f"{response.status_code} {response.reason_phrase}".strip()

        http = httpx2.AsyncClient(
            headers=_http_headers(server), timeout=httpx2.Timeout(30.0, read=300.0),
            event_hooks={"response": [note_status]},
        )
        async with http:
            transport = server.listing.wrap(watched(streamable_http_client(config.url, http_client=http), server.lose))
            async with Client(transport, **self._client_options(server)) as client:
                await self._session(server, client)

    def _client_options(self, server: _Server) -> dict[str, Any]:
        """The SDK client's options; the server's log becomes ``mcp.log`` (``_mcp_notify``)."""
        return {"cache": None, "client_info": _client_info(), "log_level": LOG_LEVEL,
                "logging_callback": log_callback(server.name, self._emit)}

    def _ready(self, server: _Server, client: Client, tools: list[Any]) -> None:
        for skipped in server.listing.skipped:
            self._skipped(server, f"its tools/list entry {skipped.index}", skipped.name, skipped.reason)
        names = []
        for tool in tools:
            if not server.config.keeps(tool.name):
                continue
            entry = tool_entry(server.name, tool)
            taken = self._entries.get(entry.name)
            if taken is not None or not tool.name:  # the first tool keeps a name two normalise to
                why = f"its name maps to {entry.name}, which tool {taken.tool!r} has" if taken else "its name is empty"
                self._skipped(server, "its tool", tool.name, why)
                continue
            self._entries[entry.name] = entry
            self._js_names.setdefault(js_identifier(entry.name), entry.name)
            names.append(entry.name)
        if len(self._entries) <= self._defer_above:
            self._active.update(self._entries)
        server.client = client
        server.state = "ready"
        server.settled.set()
        self._emit(EventKind.MCP_SERVER_READY, {"server": server.name, "tools": names}, None)

    def _forget(self, server: _Server) -> None:
        """Drop the tools a server listed before its restart (their activation stays)."""
        for name in [n for n, entry in self._entries.items() if entry.server == server.name]:
            del self._entries[name]
        self._js_names = {js: name for js, name in self._js_names.items() if name in self._entries}

    def _skipped(self, server: _Server, what: str, name: str | None, reason: str) -> None:
        """One tool of a server left out (the server's data, handled): an ``api.warning``."""
        shown = f" {name!r:.80}" if name is not None else ""
        self._emit(EventKind.API_WARNING, {
            "code": "mcp_tool_skipped",
            "message": f"MCP server {server.name}: {what}{shown} was skipped: {reason:.500}; "
                       "its other tools are available",
        }, None)

    # -- what the model sees -----------------------------------------------------------

    @property
    def server_list(self) -> list[tuple[str, str | None]]:
        return [(s.name, s.config.description) for s in self._servers.values()]

    def active_tools(self) -> list[tuple[str, str, bool]]:
        """``(name, description, is_function)`` of the tools callable now, for ``ALL_TOOLS``."""
        return [(e.name, e.description, True) for e in self._entries.values() if e.name in self._active]

    def knows(self, name: str) -> bool:
        return name.startswith("mcp__")

    def origin(self, name: str) -> tuple[str, str] | None:
        """``(server, the tool's name there)`` of a listed tool called ``name`` (its
        canonical or JavaScript name), or None."""
        entry = self._entries.get(name if name in self._entries else self._js_names.get(name, name))
        return (entry.server, entry.tool) if entry is not None else None

    # -- calls ---------------------------------------------------------------------------

    def _lookup(self, name: str) -> McpTool:
        canonical = name if name in self._entries else self._js_names.get(name, name)
        entry = self._entries.get(canonical)
        if entry is None:
            pending = [s.name for s in self._servers.values() if s.state == "starting"]
            hint = f" (servers still starting: {', '.join(pending)})" if pending else ""
            raise NestedToolError(f"unknown MCP tool {name}{hint}; find tools with tools.tool_search({{query}})")
        if canonical not in self._active:
            raise NestedToolError(
                f"MCP tool {name} is deferred: call tools.tool_search({{query}}) first, then call it by name"
            )
        return entry

    async def call(self, name: str, arguments: object,
                   on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        entry = self._lookup(name)
        server = self._servers[entry.server]
        if not isinstance(arguments, dict):
            raise NestedToolError(f"{entry.name} expects an object argument, got {describe_value(arguments)}")
        await wait_up(server)  # a restart
        client = server.client
        if server.state != "ready" or client is None:
            raise NestedToolError(server.error or f"MCP server {server.name} is not running")
        timeout = server.config.tool_timeout
        with trio.CancelScope() as stopped:
            server.calls.add(stopped)
            try:
                with trio.move_on_after(timeout) as timer:
                    progress = progress_callback(server.name, entry.tool, on_progress) if on_progress else None
                    result = await client.call_tool(entry.tool, arguments, progress_callback=progress)
            except Exception as exc:  # the SDK's MCPError, a transport error, a malformed result
                message = _describe(exc)
                if connection_lost(message) or await session_gone(client, message):  # restarted; calls wait
                    server.lose(f"{message}{server.stderr_note()}")
                raise NestedToolError(f"MCP tool {server.name}/{entry.tool} failed: {message}"
                                      f"{server.stderr_note()}") from None
            finally:
                server.calls.discard(stopped)
        if stopped.cancelled_caught:
            raise NestedToolError(server.error or f"MCP server {server.name} stopped during the call")
        if timer.cancelled_caught:
            raise NestedToolError(f"MCP tool {server.name}/{entry.tool} did not answer within {timeout:g} s")
        value: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        value.pop("resultType", None)
        value["content"] = [bounded_block(block) for block in value.get("content", [])]
        if value.get("isError"):
            raise NestedToolError(error_text(entry, value))
        size = len(json.dumps(value))
        if size > _MAX_RESULT_CHARS:
            raise NestedToolError(f"MCP tool {server.name}/{entry.tool} returned {size} bytes of JSON; "
                                  f"results over {_MAX_RESULT_CHARS} bytes are refused")
        return value

    async def resource_call(self, name: str, arguments: object) -> dict[str, Any]:
        """One of the resource and prompt tools (``_mcp_resources``)."""
        return await run_resource_tool(name, arguments, self._servers)

    # -- tool_search ---------------------------------------------------------------------

    async def search(self, arguments: object) -> dict[str, Any]:
        query, limit = search_arguments(arguments)
        wait = max((s.config.startup_timeout for s in self._servers.values()), default=0.0)
        with trio.move_on_after(wait):
            for server in self._servers.values():
                await server.settled.wait()
        entries = list(self._entries.values())
        if self._index is None or self._index[0] != len(entries):
            self._index = (len(entries), Bm25Index([e.search_text for e in entries]))
        hits = [entries[i] for i in self._index[1].search(query, limit)]
        self._active.update(e.name for e in hits)
        return {
            "tools": [e.summary() for e in hits],
            "pending_servers": [s.name for s in self._servers.values() if s.state == "starting"],
            "failed_servers": {s.name: s.error for s in self._servers.values() if s.state == "failed"},
        }


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _http_headers(server: _Server) -> dict[str, str]:
    config = server.config
    headers = dict(config.headers)
    for header, variable in config.header_env:
        value = os.environ.get(variable)
        if value is None:
            raise NestedToolError(f"environment variable {variable} (for header {header}) is not set")
        headers[header] = value
    token = config.bearer_token
    if config.bearer_token_env is not None:
        token = os.environ.get(config.bearer_token_env)
        if not token:
            raise NestedToolError(f"environment variable {config.bearer_token_env} (the bearer token) is not set")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _client_info() -> Any:
    from mcp_types import Implementation

    from .._transport.auth import VERSION

    return Implementation(name="trio-agent", version=VERSION)


def _stderr_tail(server: _Server, nursery: trio.Nursery) -> tuple[TextIO, trio.Event]:
    """A pipe for the server's stderr whose last ``_STDERR_TAIL`` bytes are kept in
    ``server.stderr``; the event is set once the pipe is drained (every writer closed)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    stream = trio.lowlevel.FdStream(read_fd)
    drained = trio.Event()

    async def drain() -> None:
        try:
            async with stream:
                while chunk := await stream.receive_some(4096):
                    server.stderr += chunk
                    del server.stderr[:-_STDERR_TAIL]
        finally:
            drained.set()

    nursery.start_soon(drain)
    return os.fdopen(write_fd, "w", encoding="utf-8", errors="replace"), drained
