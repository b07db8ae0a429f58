"""Small parts of the MCP client (``_mcp``): how an error reads, a server's HTTP
headers, the listing of its tools, the client's name."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._tool_errors import NestedToolError

if TYPE_CHECKING:
    from mcp import Client

    from ._mcp_ready import ServerState

__all__ = ["MAX_PAGES", "client_info", "describe", "http_headers", "list_tools", "login_error"]

MAX_PAGES = 100


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        leaves = exc.exceptions
        return "; ".join(describe(e) for e in leaves[:3])
    if isinstance(exc, NestedToolError):
        return exc.message
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


def login_error(group: BaseException) -> str | None:
    """The message of an ``McpOAuthError`` (``_mcp_oauth``) in ``group``, if any."""
    from ._mcp_oauth import McpOAuthError

    found = group.subgroup(lambda e: isinstance(e, McpOAuthError)) if isinstance(group, BaseExceptionGroup) else None
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return str(found) if found is not None else None


async def list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def http_headers(server: ServerState) -> dict[str, str]:
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


def client_info() -> Any:
    from mcp_types import Implementation

    from .._transport.auth import VERSION

    return Implementation(name="trio-agent", version=VERSION)
