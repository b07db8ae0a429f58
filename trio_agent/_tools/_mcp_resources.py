"""MCP resources, resource templates and prompts, as nested tools of ``exec``.

codex gives the model ``list_mcp_resources``, ``list_mcp_resource_templates`` and
``read_mcp_resource``; an agent with MCP servers has the same three as
``tools.<name>(...)``, plus ``list_mcp_prompts`` and ``get_mcp_prompt`` for prompts (a
prompt is a template of messages the server fills in; the model reads them as data,
the way it reads a resource). Their arguments and results follow codex:

- ``list_mcp_resources({server?, cursor?})`` -- with ``server``, one page of that
  server's list and its ``nextCursor``; without, every server's resources (each entry
  tagged with its ``server``), all pages, up to ``MAX_LISTED`` entries (``truncated``
  says when more were left off; page through one server with ``server`` and
  ``cursor`` then). A cursor needs its server. ``list_mcp_resource_templates`` and
  ``list_mcp_prompts`` are the same over templates and prompts.
- ``read_mcp_resource({server, uri})`` -- ``{server, uri, contents}``; the texts are
  cut past ``MAX_READ_CHARS`` in all and a blob past the 20 MiB image limit is left
  out, each marked ``truncated``/``omitted``, so one read cannot flood the script.
- ``get_mcp_prompt({server, name, arguments?})`` -- ``{server, name, description?,
  messages}``, bounded the same way.

A server still starting is waited for (up to its startup timeout, as ``tool_search``
does); each request is bounded by the server's ``tool_timeout``. A server without the
capability lists nothing. Everything the server gets wrong -- an error, a timeout, a
malformed result -- is a failed call (``NestedToolError``) naming the server.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ._definitions import (
    GET_PROMPT,
    LIST_PROMPTS,
    LIST_RESOURCES,
    LIST_TEMPLATES,
    MCP_RESOURCE_TOOLS,
    READ_RESOURCE,
)
from ._tool_errors import NestedToolError

if TYPE_CHECKING:
    from mcp import Client

    from ._mcp_config import McpServer

__all__ = ["MAX_LISTED", "MAX_READ_CHARS", "RESOURCE_TOOLS", "McpServerView", "run_resource_tool"]

RESOURCE_TOOLS = MCP_RESOURCE_TOOLS  # their definitions: _definitions, _nested_parameters
MAX_LISTED = 500  # entries in one listing result
MAX_READ_CHARS = 1 << 20  # text of one read (or one prompt's messages)
_MAX_BLOB_CHARS = (20 << 20) * 4 // 3 + 4  # base64 of the 20 MiB image limit
_MAX_PAGES = 100
_MAX_FIELD = 2000  # a description (or any other string) of a listed entry



class McpServerView(Protocol):
    """What these tools need of a server of ``McpTools`` (``_mcp._Server``)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def client(self) -> Client | None: ...
    @property
    def settled(self) -> trio.Event: ...
    @property
    def config(self) -> McpServer: ...


# -- running them ----------------------------------------------------------------------------

async def run_resource_tool(name: str, arguments: object, servers: Mapping[str, McpServerView]) -> dict[str, Any]:
    """Run ``tools.<name>(arguments)`` of one of ``RESOURCE_TOOLS``."""
    if not isinstance(arguments, dict):
        raise NestedToolError(f"{name} expects an object argument")
    if name == READ_RESOURCE:
        server_name, uri = _fields(name, arguments, required=("server", "uri"))
        server = _server(servers, server_name)
        result = await _request(server, "read", lambda c: c.read_resource(uri))
        return {"server": server.name, "uri": uri, "contents": _bounded_contents(result.get("contents"))}
    if name == GET_PROMPT:
        server_name, prompt = _fields(name, arguments, required=("server", "name"), optional=("arguments",))
        values = arguments.get("arguments", {})
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise NestedToolError(f"{name}: arguments must be an object of strings")
        server = _server(servers, server_name)
        result = await _request(server, "get prompt", lambda c: c.get_prompt(prompt, values or None))
        value: dict[str, Any] = {"server": server.name, "name": prompt}
        if isinstance(result.get("description"), str):
            value["description"] = result["description"][:_MAX_FIELD]
        value["messages"] = _bounded_messages(result.get("messages"))
        return value
    if name not in RESOURCE_TOOLS:
        raise NestedToolError(f"unknown MCP resource tool {name}")
    _fields(name, arguments, optional=("server", "cursor"))
    return await _listing(name, arguments.get("server"), arguments.get("cursor"), servers)


def _fields(name: str, arguments: dict[str, Any], *, required: tuple[str, ...] = (),
            optional: tuple[str, ...] = ()) -> tuple[str, ...]:
    known = (*required, *optional)
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise NestedToolError(f"{name}: unexpected field {unknown[0]!r} (the fields are: {', '.join(known)})")
    for field in known:
        value = arguments.get(field)
        if (field in required or value is not None) and field != "arguments" and (
                not isinstance(value, str) or not value):
            raise NestedToolError(f"{name}: {field} must be a non-empty string")
    return tuple(arguments[field] for field in required)


def _server(servers: Mapping[str, McpServerView], name: str) -> McpServerView:
    server = servers.get(name)
    if server is None:
        known = ", ".join(servers) or "none"
        raise NestedToolError(f"unknown MCP server {name!r} (the servers are: {known})")
    return server


async def _client(server: McpServerView) -> Client:
    """The server's client once it is up (waiting for it, up to its startup timeout)."""
    from ._mcp_session import wait_up

    timeout = server.config.startup_timeout
    await wait_up(server)  # also while it restarts
    client = server.client
    if server.state != "ready" or client is None:
        if server.state == "starting":
            raise NestedToolError(f"MCP server {server.name} did not start within {timeout:g} s")
        raise NestedToolError(server.error or f"MCP server {server.name} is not running")
    return client


async def _request(server: McpServerView, what: str, request: Callable[[Client], Awaitable[Any]]) -> dict[str, Any]:
    """One request to the server, bounded by its tool timeout, as JSON."""
    client = await _client(server)
    timeout = server.config.tool_timeout
    with trio.move_on_after(timeout) as timer:
        try:
            result = await request(client)
            value: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception as exc:  # the SDK's MCPError, a transport error, a malformed result
            why = f"{type(exc).__name__}: {exc}"[:1000]
            raise NestedToolError(f"MCP server {server.name} could not {what}: {why}") from None
    if timer.cancelled_caught:
        raise NestedToolError(f"MCP server {server.name} did not answer {what} within {timeout:g} s")
    value.pop("resultType", None)
    return value


_KINDS = {
    LIST_RESOURCES: ("resources", "resources", "list_resources"),
    LIST_TEMPLATES: ("resourceTemplates", "resources", "list_resource_templates"),
    LIST_PROMPTS: ("prompts", "prompts", "list_prompts"),
}


async def _listing(name: str, server_name: str | None, cursor: str | None,
                   servers: Mapping[str, McpServerView]) -> dict[str, Any]:
    key, capability, method = _KINDS[name]
    if server_name is not None:
        server = _server(servers, server_name)
        entries, next_cursor = await _page(server, capability, method, key, cursor)
        value: dict[str, Any] = {"server": server.name, key: entries[:MAX_LISTED]}
        if next_cursor is not None:
            value["nextCursor"] = next_cursor
        if len(entries) > MAX_LISTED:
            value["truncated"] = True
        return value
    if cursor is not None:
        raise NestedToolError(f"{name}: a cursor needs its server (pass server too)")
    listed: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    truncated = False
    for server in servers.values():
        try:
            for _ in range(_MAX_PAGES):
                entries, cursor = await _page(server, capability, method, key, cursor)
                listed.extend(entries)
                if cursor is None or len(listed) > MAX_LISTED:
                    break
        except NestedToolError as exc:
            failed[server.name] = exc.message
        truncated = truncated or len(listed) > MAX_LISTED or cursor is not None
        cursor = None
    value = {key: listed[:MAX_LISTED]}
    if truncated:
        value["truncated"] = True
    if failed:
        value["failed_servers"] = failed
    return value


async def _page(server: McpServerView, capability: str, method: str, key: str,
                cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
    client = await _client(server)
    if getattr(client.server_capabilities, capability, None) is None:
        return [], None
    page = await _request(server, f"list {key}", lambda c: getattr(c, method)(cursor=cursor))
    entries = page.get(key)
    next_cursor = page.get("nextCursor")
    return ([{"server": server.name, **_bounded_fields(e)} for e in entries if isinstance(e, dict)]
            if isinstance(entries, list) else [], next_cursor if isinstance(next_cursor, str) else None)


def _bounded_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """A listed entry with every long string cut (a description is advice, not data)."""
    return {k: v[:_MAX_FIELD] if isinstance(v, str) else v for k, v in entry.items()}


class _Budget:
    """The characters of text one result may still carry."""

    def __init__(self) -> None:
        self.left = MAX_READ_CHARS

    def text(self, text: str) -> tuple[str, bool]:
        kept = text[:max(self.left, 0)]
        self.left -= len(kept)
        return kept, len(kept) < len(text)


def _bounded_contents(contents: object, budget: _Budget | None = None) -> list[Any]:
    budget = budget or _Budget()
    bounded: list[Any] = []
    for item in contents if isinstance(contents, list) else []:
        if not isinstance(item, dict):
            continue
        item = dict(item)
        if isinstance(item.get("text"), str):
            item["text"], cut = budget.text(item["text"])
            if cut:
                item["truncated"] = True
        if isinstance(item.get("blob"), str) and (len(item["blob"]) > _MAX_BLOB_CHARS
                                                  or len(item["blob"]) > budget.left * 4):
            size = len(item.pop("blob")) * 3 // 4
            item["omitted"] = f"a blob of about {size} bytes, over what one read returns"
        elif isinstance(item.get("blob"), str):
            budget.left -= len(item["blob"]) // 4
        bounded.append(item)
    return bounded


def _bounded_messages(messages: object) -> list[Any]:
    budget = _Budget()
    bounded: list[Any] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, dict) and content.get("type") == "resource":
            resource = _bounded_contents([content.get("resource")], budget)
            content = {**content, "resource": resource[0]} if resource else content
        elif isinstance(content, dict):
            content = _bounded_contents([content], budget)[0]
        bounded.append({**message, "content": content})
    if len(json.dumps(bounded)) > MAX_READ_CHARS * 2:  # images and audio, which the text budget does not see
        raise NestedToolError(f"the prompt's messages are over {MAX_READ_CHARS * 2} characters of JSON")
    return bounded
