"""The MCP tool catalog's pure parts: names, entries, search arguments, result content.

A server's tool ``t`` is ``mcp__<server>__<t>`` (characters outside
``[A-Za-z0-9_-]`` become ``_``, as nanocodex does; ``_mcp_names`` makes the names of
one server's tools distinct). An ``McpTool`` carries what the
model is shown (its description and TypeScript declaration, rendered from the input
and output schemas) and the text ``tool_search`` ranks it by: its names, title,
description and parameter names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from ._tool_errors import NestedToolError
from ._ts import declaration, ts_type

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "MAX_SEARCH_LIMIT",
    "McpTool",
    "bounded_block",
    "canonical_name",
    "content_items",
    "error_text",
    "search_arguments",
    "tool_entry",
]

DEFAULT_SEARCH_LIMIT = 8
MAX_SEARCH_LIMIT = 32
_MAX_IMAGE_CHARS = (20 << 20) * 4 // 3 + 4  # base64 of the 20 MiB view_image limit


def _normalize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def canonical_name(server: str, tool: str) -> str:
    return f"mcp__{_normalize(server)}__{_normalize(tool)}"


@attrs.frozen
class McpTool:
    name: str  # mcp__<server>__<tool>
    server: str
    tool: str  # the server's own name for it
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    search_text: str

    def declaration(self) -> str:
        structured = ts_type(self.output_schema) if self.output_schema else None
        output = f"CallToolResult<{structured}>" if structured else "CallToolResult"
        return declaration(self.name, ts_type(self.input_schema, top=True, fallback="object"), output)

    def summary(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": self.name, "server": self.server, "tool": self.tool, "description": self.description,
            "declaration": self.declaration(), "input_schema": self.input_schema,
        }
        if self.output_schema is not None:
            found["output_schema"] = self.output_schema
        return found


def tool_entry(server: str, name: str, tool: Any) -> McpTool:
    """The entry of a server's tool (an SDK ``Tool``) called ``name`` (``_mcp_names``)."""
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    description = tool.description or ""
    words = [name, server, tool.name, tool.title or "", description, " ".join(sorted(schema["properties"]))]
    return McpTool(name, server, tool.name, description, schema, tool.output_schema, " ".join(words))


def search_arguments(arguments: object) -> tuple[str, int]:
    if not isinstance(arguments, dict):
        raise NestedToolError("tool_search expects an object {query, limit?}")
    unknown = sorted(set(arguments) - {"query", "limit"})
    if unknown:
        raise NestedToolError(f"tool_search: unexpected field {unknown[0]!r} (the fields are: query, limit)")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise NestedToolError("tool_search: query must be a non-empty string")
    limit = arguments.get("limit", DEFAULT_SEARCH_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NestedToolError(f"tool_search: limit must be a positive integer (at most {MAX_SEARCH_LIMIT})")
    return query, min(limit, MAX_SEARCH_LIMIT)


def content_items(value: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``CallToolResult``'s content as output items: text blocks (and embedded text
    resources, and resource links) as ``input_text``, images as ``input_image``."""
    items: list[dict[str, Any]] = []
    for block in value.get("content", []):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            items.append({"type": "input_text", "text": str(block.get("text", ""))})
        elif kind == "image":
            mime = block.get("mimeType") or "application/octet-stream"
            items.append({"type": "input_image", "image_url": f"data:{mime};base64,{block.get('data', '')}"})
        elif kind == "resource" and isinstance(block.get("resource"), dict) and "text" in block["resource"]:
            items.append({"type": "input_text", "text": str(block["resource"]["text"])})
        elif kind == "resource_link":
            items.append({"type": "input_text", "text": f"[resource {block.get('name', '')}: {block.get('uri', '')}]"})
        elif kind is not None:
            items.append({"type": "input_text", "text": f"[{kind} content omitted]"})
    return items


def bounded_block(block: Any) -> Any:
    if isinstance(block, dict) and block.get("type") == "image" and len(str(block.get("data", ""))) > _MAX_IMAGE_CHARS:
        return {"type": "text", "text": "[image omitted: it is over the 20 MiB image limit]"}
    return block


def error_text(entry: McpTool, value: dict[str, Any]) -> str:
    texts = [b.get("text", "") for b in value.get("content", []) if isinstance(b, dict) and b.get("type") == "text"]
    detail = "\n".join(t for t in texts if t) or json.dumps(value.get("content", []))[:2000]
    return f"MCP tool {entry.server}/{entry.tool} returned an error: {detail}"
