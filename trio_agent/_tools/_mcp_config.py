"""``McpServer``: how to reach one MCP server (configuration only; no ``mcp`` import).

The connection itself (``_mcp.py``, on the official ``mcp`` SDK) is made by the agent
that has the server in its ``Tools``; this value only says how, and is validated when
it is built, so a typo fails at configuration time with a ``ConfigError``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, final

import attrs

from .._errors import ConfigError
from ._mcp_names import check_server_name

__all__ = ["McpServer", "check_server_name"]

DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_TOOL_TIMEOUT = 300.0
# Compiled on first use, not at import (see _jsontext).
_HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _pairs(value: Mapping[str, str] | None, what: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError(f"MCP server {what} must be a mapping of strings, got {type(value).__name__}")
    pairs = tuple(value.items())
    for key, item in pairs:
        if not isinstance(key, str) or not isinstance(item, str):
            raise ConfigError(f"MCP server {what} must map strings to strings, got {key!r}: {type(item).__name__}")
    return pairs


def _names(value: Iterable[str] | None, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"MCP server {what} must be a list of tool names, got {value!r}")
    return frozenset(value)


def _timeout(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"MCP server {what} must be a positive number of seconds, got {value!r}")
    return float(value)


@final
@attrs.frozen
class McpServer:
    """One MCP server, reached over stdio (a subprocess) or Streamable HTTP.

    Build it with ``McpServer.stdio(...)`` or ``McpServer.http(...)`` and add it with
    ``Tools.with_mcp(name, server)``. ``startup_timeout`` bounds connecting and listing
    its tools (default 30 s); ``tool_timeout`` bounds each tool call (default 300 s);
    both on Trio's clock. ``enabled_tools`` (when given) keeps only those tools,
    ``disabled_tools`` drops some. ``description`` tells the model what the server is
    for. ``direct=True`` also offers its tools to the model as top-level function
    tools (``mcp__<server>__<tool>``), from the first turn that starts after the server
    is up (``_mcp_direct``). Secrets (``headers``, ``bearer_token``) are left out of
    the repr.
    """

    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    cwd: Path | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    header_env: tuple[tuple[str, str], ...] = ()
    bearer_token: str | None = attrs.field(default=None, repr=False)
    bearer_token_env: str | None = None
    description: str | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    enabled_tools: frozenset[str] | None = None
    disabled_tools: frozenset[str] = frozenset()
    direct: bool = False  # its tools are also top-level function tools (_mcp_direct)
    oauth: bool = False  # Streamable HTTP with OAuth tokens from `trio-agent mcp login` (_mcp_oauth)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.direct, bool) or not isinstance(self.oauth, bool):
            raise ConfigError("MCP server direct= and oauth= must be True or False")
        if self.oauth and self.transport != "http":
            raise ConfigError("oauth=True is for Streamable HTTP servers (McpServer.http)")
        if self.oauth and (self.bearer_token is not None or self.bearer_token_env is not None):
            raise ConfigError("pass oauth=True or a bearer token, not both (OAuth sends its own Authorization)")
        _timeout(self.startup_timeout, "startup_timeout")
        _timeout(self.tool_timeout, "tool_timeout")
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigError("MCP server description must be a string")
        if self.transport == "stdio":
            if not isinstance(self.command, str) or not self.command.strip():
                raise ConfigError("McpServer.stdio needs a command, e.g. McpServer.stdio('python', ['server.py'])")
            if not all(isinstance(a, str) for a in self.args):
                raise ConfigError(f"McpServer.stdio args must be strings, got {list(self.args)!r}")
        elif self.transport == "http":
            if not isinstance(self.url, str) or not re.match(r"^https?://[^\s/]+", self.url):
                raise ConfigError(f"McpServer.http needs an http:// or https:// URL, got {self.url!r}")
            for name, _ in (*self.headers, *self.header_env):
                if not _pattern(_HEADER_NAME).match(name):
                    raise ConfigError(f"MCP server header name {name!r} is not a valid HTTP header name")
            for _, variable in self.header_env:
                if not _pattern(_ENV_NAME).match(variable):
                    raise ConfigError(f"MCP server header_env values name environment variables, got {variable!r}")
            if self.bearer_token_env is not None and not _pattern(_ENV_NAME).match(self.bearer_token_env):
                raise ConfigError(f"bearer_token_env must name an environment variable, got {self.bearer_token_env!r}")
        else:
            raise ConfigError(f"MCP server transport must be 'stdio' or 'http', got {self.transport!r}")

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        *,
        description: str | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        tool_timeout: float = DEFAULT_TOOL_TIMEOUT,
        enabled_tools: Iterable[str] | None = None,
        disabled_tools: Iterable[str] = (),
        direct: bool = False,
    ) -> McpServer:
        """A server the agent runs as a subprocess (its own process group), speaking MCP
        on stdin/stdout. Its environment is the MCP SDK's safe default (``HOME``,
        ``PATH``, ``SHELL``, ``TERM``, ``USER``, ``LOGNAME``) plus ``env``; it runs in
        ``cwd`` (default: the agent's workspace). The agent stops it when it closes
        (stdin closed, then SIGTERM, then SIGKILL to its process group). On Linux
        every process the server starts, daemons that leave its process group or
        session included, ends with it (a subreaper supervisor; also when the agent
        process dies)."""
        if isinstance(args, str):
            raise ConfigError("McpServer.stdio args must be a list of strings, not one string")
        return cls(
            "stdio", command=command, args=tuple(args), env=_pairs(env, "env"),
            cwd=Path(cwd) if cwd is not None else None, description=description,
            startup_timeout=startup_timeout, tool_timeout=tool_timeout,
            enabled_tools=_names(enabled_tools, "enabled_tools"),
            disabled_tools=_names(disabled_tools, "disabled_tools") or frozenset(), direct=direct,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        header_env: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        bearer_token_env: str | None = None,
        description: str | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        tool_timeout: float = DEFAULT_TOOL_TIMEOUT,
        enabled_tools: Iterable[str] | None = None,
        disabled_tools: Iterable[str] = (),
        direct: bool = False,
        oauth: bool = False,
    ) -> McpServer:
        """A Streamable HTTP server at ``url``. Every request carries ``headers``, each
        ``header_env`` header (name -> environment variable, read when the agent
        connects) and ``Authorization: Bearer`` from ``bearer_token`` or the
        environment variable ``bearer_token_env``. ``oauth=True``: the ``Authorization``
        comes from the OAuth tokens ``trio-agent mcp login NAME URL`` stored (refreshed
        when they expire; ``_mcp_oauth``)."""
        if bearer_token is not None and bearer_token_env is not None:
            raise ConfigError("pass bearer_token or bearer_token_env, not both")
        if bearer_token is not None and (not isinstance(bearer_token, str) or not bearer_token.strip()):
            raise ConfigError("bearer_token must be a non-empty string")
        return cls(
            "http", url=url, headers=_pairs(headers, "headers"), header_env=_pairs(header_env, "header_env"),
            bearer_token=bearer_token, bearer_token_env=bearer_token_env, description=description,
            startup_timeout=startup_timeout, tool_timeout=tool_timeout,
            enabled_tools=_names(enabled_tools, "enabled_tools"),
            disabled_tools=_names(disabled_tools, "disabled_tools") or frozenset(), direct=direct, oauth=oauth,
        )

    def keeps(self, tool: str) -> bool:
        """Whether the tool named ``tool`` is offered (``enabled_tools``/``disabled_tools``)."""
        if self.enabled_tools is not None and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools
