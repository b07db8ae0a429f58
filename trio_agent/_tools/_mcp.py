"""MCP servers as nested tools, on the official ``mcp`` SDK (anyio, so it runs on Trio).

Theory of operation. One ``McpTools`` per agent. ``start(nursery)`` starts one task
per configured server in the *agent's* nursery and returns at once: nothing waits for
a server before a turn, so a slow one never delays the model's first request. Each
task connects (a subprocess in its own process group for stdio, an HTTP session for
Streamable HTTP), lists the tools and then holds the session open until the agent
closes. Connecting and listing are bounded by the server's ``startup_timeout`` (one
cancel scope whose deadline is lifted once the server is up, so the SDK's nested
scopes are never exited out of order); each call by ``tool_timeout``. All on Trio's
clock.

A call to a server that is still starting *waits* for it (``ServerState.until_started``:
until it is up or failed, bounded by its startup deadline and by the caller's cancel
-- the turn's) and then runs; a call to a server that failed reports why it failed
(its error and the tail of its log). ``tool_search`` waits the same way for every
server still starting.

Names (``_mcp_names``): a server's tool is ``mcp__<server>__<tool>``, distinct and
stable: server names are checked at configuration, and tools of one server whose
names would collide get a hashed suffix (``api.warning`` ``mcp_tool_renamed``).
Activation (``_mcp_ready.Activation``): which servers' tools are active (in
``ALL_TOOLS``, callable by name) and which are deferred behind ``tool_search`` is
decided from the configuration order, never the order servers come up in.

Faults stay inside the tool result: a server that fails to start, crashes or hangs
makes its calls fail with a message (with the tail of its bounded log: its stderr and
what the SDK said about it, ``_mcp_log``, which never reaches the host's stderr); the
agent goes on. A server that was up and lost its connection (crashed, dropped
its HTTP session) is restarted with backoff, bounded, and later calls wait for it
(``_mcp_session``). Resources and prompts are ``_mcp_resources``; progress and log
notifications become events (``_mcp_notify``). A malformed ``tools/list`` entry costs only itself (``_mcp_listing``):
it is left out with an ``api.warning`` (code ``mcp_tool_skipped``) naming the server,
the entry and why, as is an empty name or a second tool of the same name; the server's
other tools stay available. ``close()`` -- and cancellation of the agent's nursery --
ends every session: the SDK closes a stdio server's stdin, then sends SIGTERM and
SIGKILL to its process group, shielded and bounded. On Linux the server runs under a
subreaper supervisor (``_mcp_process``, ``_server_reaper.py``) that ends the server's
whole process tree with it -- daemons that left its group or session included -- also
when the agent process dies, so no server process outlives the agent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._events import EventKind
from ._bm25 import Bm25Index
from ._mcp_catalog import McpTool, bounded_block, error_text, search_arguments, tool_entry
from ._mcp_config import McpServer
from ._mcp_log import capture_sdk_logs, routed, stderr_pipe
from ._mcp_names import js_form, server_part, tool_names
from ._mcp_notify import LOG_LEVEL, log_callback, progress_callback
from ._mcp_process import server_command
from ._mcp_ready import Activation, ServerState
from ._mcp_resources import run_resource_tool
from ._mcp_session import connection_lost, run_restarting, session_gone, wait_up, watched
from ._mcp_support import client_info, describe, http_headers, list_tools, login_error
from ._schema import describe_value
from ._tool_errors import NestedToolError

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpTools"]

_STDERR_GRACE = 1.0
_MAX_RESULT_CHARS = 32 << 20  # a result the script could not sensibly hold


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
        self._servers = {name: ServerState(name, config) for name, config in servers.items()}
        self._by_part = {js_form(name): server for name, server in self._servers.items()}
        self._workspace = workspace
        self._emit = emit
        self._activation = Activation(list(self._servers.values()), defer_above)
        self._names: dict[str, McpTool] = {}  # by the JavaScript form of their name
        self._searched: set[str] = set()  # names tool_search found: active whatever their server
        self._index: tuple[tuple[str, ...], list[McpTool], Bm25Index] | None = None
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

    async def _run(self, server: ServerState) -> None:
        """Connect, and connect again while a lost connection is to be restarted."""
        await run_restarting(server, self._connect, self._emit, lambda: self._closing)

    async def _connect(self, server: ServerState) -> None:
        config = server.config
        server.deadline = server.scope.deadline = trio.current_time() + config.startup_timeout
        server.log.on_report = lambda line: self._noise(server, line)
        try:
            with server.scope, routed(server.log):  # the SDK's records about it go to its log
                if config.transport == "stdio":
                    await self._run_stdio(server)
                else:
                    await self._run_http(server)
        except* ImportError as group:
            server.fail(f"MCP server {server.name} cannot start: {describe(group)}; install the MCP extra: "
                        "pip install 'trio-agent[mcp]'")
        except* Exception as group:
            login = login_error(group)  # an OAuth login to do again says which command does it
            server.fail(login or f"MCP server {server.name} failed: {describe(group)}{server.log_note()}")
        finally:
            verdict = server.session.verdict(server.state, self._closing)
            if verdict == "give_up":
                server.state, server.error = "failed", server.session.gave_up(server.name, server.error)
            if verdict == "retry":
                server.state, server.client = "starting", None  # _run restarts it
            elif server.state == "starting":
                if server.scope.cancelled_caught and not self._closing:  # its own deadline, not a shutdown
                    server.fail(server.late_error())
                else:
                    server.state, server.error = "closed", f"MCP server {server.name} was closed while starting"
            elif server.state == "ready":
                server.state, server.error = "closed", f"MCP server {server.name} is closed"
            server.client = None
            if verdict != "retry":  # a restart's waiters wait on
                server.settled.set()
            if server.state == "failed":
                self._emit(EventKind.MCP_SERVER_FAILED, {"server": server.name, "error": server.error}, None)

    async def _session(self, server: ServerState, client: Client) -> None:
        tools = await list_tools(client)
        if trio.current_time() >= server.deadline:  # listed just as its time ran out: as late as any
            server.fail(server.late_error())
            return
        server.scope.deadline = math.inf  # up: only close() (or a failure) ends it now
        if server.session.attempt:  # a restart lists its tools again
            self._forget(server)
        self._ready(server, client, tools)
        await server.lost.wait()  # only close() or a lost connection (_mcp_session) ends it now

    async def _run_stdio(self, server: ServerState) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client

        capture_sdk_logs()
        config = server.config
        assert config.command is not None
        cwd = config.cwd if config.cwd is not None else self._workspace
        # Under its supervisor, so that the whole process tree of the server ends with it.
        command, args = server_command(config.command, config.args, get_default_environment() | dict(config.env),
                                       cwd)
        params = StdioServerParameters(command=command, args=args, env=dict(config.env) or None, cwd=cwd)
        async with trio.open_nursery() as nursery:
            errlog, drained = stderr_pipe(server.log, nursery)
            try:
                transport = server.listing.wrap(watched(stdio_client(params, errlog=errlog), server.lose))
                async with Client(transport, **self._client_options(server)) as client:
                    await self._session(server, client)
            finally:
                errlog.close()
                with trio.move_on_after(_STDERR_GRACE):  # the last words of a crashed server
                    await drained.wait()
                nursery.cancel_scope.cancel()  # a server's own child may hold its stderr open

    async def _run_http(self, server: ServerState) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        capture_sdk_logs()
        config = server.config
        assert config.url is not None
        async def note_status(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                server.http_error = f"{response.status_code} {response.reason_phrase}".strip()

        auth = None
        if config.oauth:  # the stored login of `trio-agent mcp login` (_mcp_oauth)
            from ._mcp_oauth import agent_auth

            auth = agent_auth(server.name, config.url)
        http = httpx2.AsyncClient(
            headers=http_headers(server), timeout=httpx2.Timeout(30.0, read=300.0),
            event_hooks={"response": [note_status]}, auth=auth,
        )
        async with http:
            transport = server.listing.wrap(watched(streamable_http_client(config.url, http_client=http), server.lose))
            async with Client(transport, **self._client_options(server)) as client:
                await self._session(server, client)

    def _client_options(self, server: ServerState) -> dict[str, Any]:
        """The SDK client's options; the server's log becomes ``mcp.log`` (``_mcp_notify``)."""
        return {"cache": None, "client_info": client_info(), "log_level": LOG_LEVEL,
                "logging_callback": log_callback(server.name, self._emit)}

    def _ready(self, server: ServerState, client: Client, tools: list[Any]) -> None:
        for skipped in server.listing.skipped:
            self._skipped(server, f"its tools/list entry {skipped.index}", skipped.name, skipped.reason)
        kept: dict[str, Any] = {}
        for tool in tools:
            if not server.config.keeps(tool.name):
                continue
            if not tool.name:
                self._skipped(server, "its tool", tool.name, "its name is empty")
            elif tool.name in kept:
                self._skipped(server, "its tool", tool.name, "a tool of that name came before it")
            else:
                kept[tool.name] = tool
        names, renamed = tool_names(server.name, kept)
        for change in renamed:
            self._emit(EventKind.API_WARNING, {
                "code": "mcp_tool_renamed", "server": server.name, "name": change.name,
                "message": f"MCP server {server.name}: its tool {change.tool!r:.80} is called {change.name}, "
                           f"not {change.plain}: {change.reason}",
            }, None)
        for tool in kept.values():
            entry = tool_entry(server.name, names[tool.name], tool)
            server.entries[tool.name] = entry
            self._names[js_form(entry.name)] = entry
        server.client = client
        server.state = "ready"
        server.settled.set()
        self._emit(EventKind.MCP_SERVER_READY, {"server": server.name, "tools": [names[t] for t in kept]}, None)

    def _forget(self, server: ServerState) -> None:
        """Drop the tools a server listed before its restart (its activation stays)."""
        self._names = {js: entry for js, entry in self._names.items() if entry.server != server.name}
        server.entries.clear()

    def _skipped(self, server: ServerState, what: str, name: str | None, reason: str) -> None:
        """One tool of a server left out (the server's data, handled): an ``api.warning``."""
        shown = f" {name!r:.80}" if name is not None else ""
        self._emit(EventKind.API_WARNING, {
            "code": "mcp_tool_skipped", "server": server.name,
            "message": f"MCP server {server.name}: {what}{shown} was skipped: {reason:.500}; "
                       "its other tools are available",
        }, None)

    def _noise(self, server: ServerState, line: str) -> None:
        """The first thing the SDK could not use from a server (a line of its stdout
        that is not JSON-RPC...): kept in its log, reported once."""
        self._emit(EventKind.API_WARNING, {
            "code": "mcp_server_output",
            "message": f"MCP server {server.name}: the MCP client could not use what it sent: {line}; "
                       "this and later such notes are in its log (quoted when a call fails)",
            "server": server.name,
        }, None)

    # -- what the model sees -----------------------------------------------------------

    @property
    def server_list(self) -> list[tuple[str, str | None]]:
        return [(s.name, s.config.description) for s in self._servers.values()]

    def active_entries(self) -> list[McpTool]:
        """The tools callable by name now (never waits), in configuration order, then
        each server's listing order: those of the servers that are up (or restarting) and active, and
        those ``tool_search`` found. Each has its name, description and declaration."""
        found: list[McpTool] = []
        for server in self._servers.values():
            if server.state in ("failed", "closed"):  # (a restarting server keeps its listed tools)
                continue
            active = self._activation.active(server)
            found.extend(e for e in server.entries.values() if active or e.name in self._searched)
        return found

    def active_tools(self) -> list[tuple[str, str, bool]]:
        """``(name, description, is_function)`` of the tools callable now, for ``ALL_TOOLS``."""
        return [(e.name, e.description, True) for e in self.active_entries()]

    def direct_tools(self) -> list[McpTool]:
        """The listed tools of the ``direct=True`` servers, in configuration order: once
        offered, a tool stays in the list (a crashed server's calls fail with why), so
        the model's tool list changes only when a server comes up (``_mcp_direct``)."""
        return [e for s in self._servers.values() if s.config.direct for e in s.entries.values()]

    def direct_starting(self, name: str) -> bool:
        """Whether ``name`` may be a tool of a ``direct=True`` server still starting (a
        resumed conversation can call one before its server is up)."""
        server = self._servers.get(name.removeprefix("mcp__").partition("__")[0])
        return server is not None and server.config.direct and server.state == "starting"

    def knows(self, name: str) -> bool:
        return name.startswith("mcp__")

    def origin(self, name: str) -> tuple[str, str] | None:
        """``(server, the tool's name there)`` of a listed tool called ``name`` (its
        canonical or JavaScript name), or None. For a server still starting (the call
        will wait for it), the tool's part of ``name``: its own name unless the
        server's listing renames it."""
        entry = self._names.get(js_form(name))
        if entry is not None:
            return entry.server, entry.tool
        part = server_part(name)
        server = self._by_part.get(part) if part is not None else None
        if server is None or server.state != "starting" or server.late:
            return None
        return server.name, name[len(f"mcp__{server.name}__"):]

    # -- calls ---------------------------------------------------------------------------

    async def _lookup(self, name: str) -> tuple[ServerState, McpTool]:
        """The server and tool ``name`` routes to, once that server has started
        (waiting for it, bounded by its startup deadline), and active."""
        part = server_part(name)
        server = self._by_part.get(part) if part is not None else None
        if server is None:
            raise NestedToolError(f"unknown MCP tool {name} (no MCP server {part or name!r}); "
                                  "find tools with tools.tool_search({query})")
        await server.until_started()
        problem = server.problem()
        if problem is not None:
            raise NestedToolError(f"MCP tool {name} cannot be called: {problem}")
        entry = self._names.get(js_form(name))
        if entry is None or entry.server != server.name:
            raise NestedToolError(f"unknown MCP tool {name}; find tools with tools.tool_search({{query}})")
        if entry.name not in self._searched and not await self._activation.decide(server):
            raise NestedToolError(
                f"MCP tool {name} is deferred: call tools.tool_search({{query}}) first, then call it by name"
            )
        return server, entry

    async def call(self, name: str, arguments: object,
                   on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        server, entry = await self._lookup(name)
        if not isinstance(arguments, dict):
            raise NestedToolError(f"{entry.name} expects an object argument, got {describe_value(arguments)}")
        await wait_up(server)  # a restart
        client = server.client
        if server.state != "ready" or client is None:
            raise NestedToolError(server.problem() or f"MCP server {server.name} is not running")
        timeout = server.config.tool_timeout
        with trio.CancelScope() as stopped, routed(server.log):
            server.calls.add(stopped)
            try:
                with trio.move_on_after(timeout) as timer:
                    progress = progress_callback(server.name, entry.tool, on_progress) if on_progress else None
                    result = await client.call_tool(entry.tool, arguments, progress_callback=progress)
            except Exception as exc:  # the SDK's MCPError, a transport error, a malformed result
                message = describe(exc)
                if connection_lost(message) or await session_gone(client, message):  # restarted; calls wait
                    server.lose(f"{message}{server.log_note()}")
                raise NestedToolError(f"MCP tool {server.name}/{entry.tool} failed: {message}"
                                      f"{server.log_note()}") from None
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
        """BM25 over every started server's tools (waiting for those still starting,
        each bounded by its deadline); the tools found become active."""
        query, limit = search_arguments(arguments)
        for server in self._servers.values():  # absolute deadlines: waiting in turn adds nothing
            await server.until_started()
        ready = tuple(s.name for s in self._servers.values() if s.state == "ready")
        if self._index is None or self._index[0] != ready:
            entries = [e for name in ready for e in self._servers[name].entries.values()]
            self._index = (ready, entries, Bm25Index([e.search_text for e in entries]))
        _, entries, index = self._index
        hits = [entries[i] for i in index.search(query, limit)]
        self._searched.update(e.name for e in hits)
        return {
            "tools": [e.summary() for e in hits],
            "pending_servers": [s.name for s in self._servers.values() if s.state == "starting" and not s.late],
            "failed_servers": {s.name: problem for s in self._servers.values()
                               if s.state != "closed" and (problem := s.problem()) is not None},
        }
