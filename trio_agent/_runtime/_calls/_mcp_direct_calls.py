"""Top-level calls of direct MCP tools (``McpServer(..., direct=True)``; the tools
layer's ``_mcp_direct`` says when they are offered and why).

A call runs through ``McpTools.call``, the path a call from ``exec`` takes, so the
two behave alike: a failure (``NestedToolError``: bad arguments, ``isError``, a
timeout, a crashed or failed server) is a failed output whose text says why, never an
exception out of the turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._tools import NestedToolError
from ._tool_runner import Runner, ToolOutcome

if TYPE_CHECKING:
    from ..._session.ledger import TurnLedger
    from ..._tools._mcp import McpTools

__all__ = ["direct_definitions", "direct_runner", "offer_direct_tools"]


def direct_definitions(mcp: McpTools | None) -> list[dict[str, Any]] | None:
    """The function tools of the direct servers that are up (None: no MCP servers)."""
    if mcp is None:
        return None
    from ..._tools._mcp_direct import direct_definition

    return [direct_definition(entry) for entry in mcp.direct_tools()]


def direct_runner(mcp: McpTools | None, name: str) -> Runner | None:
    """What answers a top-level function call named ``name``, when it is a direct tool
    -- or may be one, of a direct server still starting: ``McpTools.call`` then says
    what a call from ``exec`` would."""
    if mcp is None or not (any(entry.name == name for entry in mcp.direct_tools()) or mcp.direct_starting(name)):
        return None

    async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
        from ..._tools._mcp_direct import direct_output

        try:
            value = await mcp.call(name, arguments)
        except NestedToolError as exc:
            return ToolOutcome(exc.message, "failed")
        return ToolOutcome(direct_output(value), "completed")

    return run


def offer_direct_tools(definitions: list[dict[str, Any]] | None, ledger: TurnLedger) -> bool:
    """Put ``definitions`` (``direct_definitions``) in the ledger's prefix, as its direct
    MCP tools; True when the prefix changed (the caller unchains the next request)."""
    if definitions is None:
        return False
    from ..._tools._mcp_direct import prefix_with_direct

    prefix = prefix_with_direct(ledger.prefix, definitions)
    if prefix is None:
        return False
    ledger.prefix = prefix
    return True
