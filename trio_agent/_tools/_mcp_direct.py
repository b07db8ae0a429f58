"""Direct MCP tools: a ``direct=True`` server's tools offered to the model as top-level
function tools, beside ``exec`` (codex and openai-agents offer MCP tools this way).

Why and when. A direct tool is named as in the catalog (``mcp__<server>__<tool>``), with
the server's input schema as its parameters (``strict: false``: an MCP schema is the
server's, not one the strict mode accepts) and its description. Its tools are known
only once the server is up, and the first request never waits for a server, so a
direct server's tools join the model's tool list at the first turn that *starts* after
the server is ready -- never in the middle of a turn, so that one turn sees one tool
list. Both profiles read the tools from the request prefix's ``additional_tools``
item, so the runner replaces that item (``prefix_with_direct``): the OpenAI profile,
which sends the prefix once, then replays the conversation in full on the next
request (the server's copy has the old prefix; codex breaks its chain the same way
when its tool list changes), and the generic profile sends the new list as the
top-level ``tools`` of every later request. A session resumed later starts without
them (its servers start again), so ``check_prefix`` leaves ``mcp__`` tools out of the
comparison.

A call runs through the same client path as a call from ``exec`` (``McpTools.call``:
the wait for a starting server, the tool timeout, ``isError``, a crashed server), and
its result becomes the output's content items (text, images, resource text and links);
a result with no content but structured content is sent as that JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ._mcp_catalog import McpTool, content_items

__all__ = ["DIRECT_PREFIX", "direct_definition", "direct_output", "prefix_with_direct"]

DIRECT_PREFIX = "mcp__"


def direct_definition(entry: McpTool) -> dict[str, Any]:
    """The function tool the model is offered for ``entry``."""
    description = entry.description or f"The tool {entry.tool!r} of the MCP server {entry.server!r}."
    return {"type": "function", "name": entry.name, "description": description, "strict": False,
            "parameters": entry.input_schema}


def direct_output(value: dict[str, Any]) -> str | list[dict[str, Any]]:
    """A ``CallToolResult`` (``McpTools.call``'s value) as a function call's output."""
    items = content_items(value)
    if items:
        return items
    structured = value.get("structuredContent")
    return json.dumps(structured, ensure_ascii=False) if structured is not None else ""


def prefix_with_direct(
    prefix: Sequence[dict[str, Any]], definitions: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any], ...] | None:
    """``prefix`` whose ``additional_tools`` item offers ``definitions`` as its direct MCP
    tools (in place of those it had), or None when that is what it offers already."""
    wanted = list(definitions)
    items = list(prefix)
    for index, item in enumerate(items):
        if item.get("type") != "additional_tools":
            continue
        listed = item.get("tools")
        tools = [t for t in listed if isinstance(t, dict)] if isinstance(listed, list) else []
        own = [t for t in tools if not str(t.get("name", "")).startswith(DIRECT_PREFIX)]
        if [t for t in tools if t not in own] == wanted:
            return None
        items[index] = {**item, "tools": [*own, *wanted]}
        return tuple(items)
    return None
