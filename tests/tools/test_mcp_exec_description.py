"""How ``exec``'s description lists the active MCP tools: one bounded line each, at most
``MAX_LISTED_MCP_TOOLS`` of them, the rest counted."""

from __future__ import annotations

import trio_agent as ta
from trio_agent._tools._definitions import MAX_LISTED_MCP_TOOLS


def _description(tools: list[tuple[str, str | None]]) -> str:
    registry = ta.Tools.default().with_mcp("docs", ta.McpServer.stdio("true", description="Docs."))
    [exec_tool] = [d for d in registry.definitions(mcp_tools=tools) if d["name"] == "exec"]
    return str(exec_tool["description"])


def test_no_active_tools_no_section() -> None:
    assert "Active MCP tools" not in _description([])


def test_each_tool_gets_one_bounded_line_and_the_rest_are_counted() -> None:
    long = "Search the documentation.   It has\nmany pages. " + "x" * 500
    tools: list[tuple[str, str | None]] = [(f"mcp__docs__t{i}", long) for i in range(MAX_LISTED_MCP_TOOLS + 5)]
    tools[1] = ("mcp__docs__no-desc", None)
    text = _description(tools)
    section = text[text.index("### Active MCP tools"):text.index("```ts")]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(lines) == MAX_LISTED_MCP_TOOLS + 1
    assert lines[0] == "- `tools.mcp__docs__t0`: Search the documentation."
    assert lines[1] == "- `tools.mcp__docs__no_desc`"  # the JavaScript name, nothing after it
    assert lines[-1].startswith("- ... and 5 more: `ALL_TOOLS` lists them all")
    assert all(len(line) <= 160 for line in lines[:-1])
    only_long = _description([("mcp__docs__big", "y" * 1000)])
    [line] = [li for li in only_long.splitlines() if li.startswith("- `tools.mcp__docs__big`")]
    assert len(line) <= 160 and line.endswith("...")
