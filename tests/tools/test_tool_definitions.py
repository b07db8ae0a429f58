"""The ``exec`` description: TypeScript declarations of every nested tool, per ``Tools`` options."""

from __future__ import annotations

from typing import Any

import pytest

import trio_agent as ta
from trio_agent._tools._ts import declaration, ts_type


def _description(tools: ta.Tools) -> str:
    exec_definition = tools.definitions()[0]
    assert exec_definition["name"] == "exec"
    text = exec_definition["description"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "string"),
        ({"type": "integer"}, "number"),
        ({"type": ["string", "null"]}, "string | null"),
        ({"enum": ["a", 1]}, '"a" | 1'),
        ({"const": "x"}, '"x"'),
        ({"type": "array", "items": {"type": "number"}}, "number[]"),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, 'Array<"a" | "b">'),
        ({"type": "array"}, "unknown[]"),
        ({"type": "object"}, "{ [key: string]: unknown }"),
        ({"type": "object", "properties": {}, "additionalProperties": False}, "{}"),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "{ [key: string]: number }"),
        ({"type": "object", "properties": {"a": {"type": "string"}, "b-c": {}}, "required": ["a"]},
         '{ a: string; "b-c"?: unknown }'),
        ({"anyOf": [{"type": "string"}, {"type": "string"}, {"type": "null"}]}, "string | null"),
        ({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}, "{ a?: string }"),
        ({"$defs": {"P": {"type": "integer"}}, "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}},
         "{ p?: number }"),
        ({"type": "object", "properties": {"p": {"$ref": "https://elsewhere"}}}, "{ p?: unknown }"),
        ({}, "unknown"),
    ],
)
def test_json_schema_as_typescript(schema: dict[str, Any], expected: str) -> None:
    assert ts_type(schema) == expected


def test_top_level_descriptions_become_doc_comments_and_huge_schemas_fall_back() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "The */ query."}}}
    assert ts_type(schema, top=True) == "{ /** The * / query. */ q?: string }"
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(600)}}
    assert ts_type(huge, fallback="object") == "object"
    assert declaration("a-b", "", freeform=True) == "declare const tools: { a_b(input: string): Promise<unknown>; }"


def test_the_default_description_declares_every_nested_builtin() -> None:
    text = _description(ta.Tools.default())
    for name in ("exec_command", "write_stdin", "apply_patch", "update_plan", "view_image", "web__run"):
        assert f"### `{name}`" in text
    assert "not part of this runtime" not in text  # web__run exists now
    assert "Web search runs through `tools.web__run`" in text
    assert 'update_plan(args: { /** Why the plan changed, if it did. */ explanation?: string;' in text
    assert 'plan: Array<{ step: string; status: "pending" | "in_progress" | "completed" }>' in text
    assert 'view_image(args: { /** The image file, relative to the workspace. */ path: string; ' in text
    assert "search_query?: Array<{ q: string; recency?: number; domains?: string[] }>" in text
    assert 'response_length?: "short" | "medium" | "long"' in text
    assert "apply_patch(input: string): Promise<string>" in text
    for absent in ("image_gen__imagegen", "tool_search", "## MCP servers"):
        assert absent not in text


def test_options_change_the_nested_tools() -> None:
    off = _description(ta.Tools.default().without_web_search())
    assert "### `web__run`" not in off
    assert "Web search (`web__run`) is turned off for this agent" in off
    images = _description(ta.Tools.default().with_image_generation())
    assert "### `image_gen__imagegen`" in images
    assert "num_last_images_to_include?: number" in images
    server = ta.McpServer.http("http://127.0.0.1:1/mcp", description="Product   docs.")
    mcp = _description(ta.Tools.default().with_mcp("docs", server).with_mcp("local", ta.McpServer.stdio("srv")))
    assert "## MCP servers" in mcp
    assert "- `docs`: Product docs.\n- `local`\n" in mcp
    assert "type CallToolResult<TStructured" in mcp
    assert "### `tool_search`" in mcp
    assert "tool_search(args: { /** Words describing the tool you need. */ query: string;" in mcp


def test_user_tools_are_declared_from_their_schemas() -> None:
    async def lookup(ctx: ta.ToolContext, args: Any) -> str:
        return ""

    async def shout(ctx: ta.ToolContext, text: str) -> str:
        return text

    @ta.tool
    async def count_words(text: str, unique: bool = False) -> int:
        """Count the words of a text."""
        return 0

    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    tools = (
        ta.Tools.default().function("lookup", "Look up a key.", schema, lookup).custom("shout", "Shout.", shout)
        .add(count_words)
    )
    text = _description(tools)
    assert "### `lookup`\nLook up a key.\n```ts\ndeclare const tools: { lookup(args: { key: string }): " \
           "Promise<unknown>; }\n```" in text
    assert "shout(input: string): Promise<unknown>" in text
    assert "count_words(args: { text: string; unique?: boolean }): Promise<number>" in text
    names = [d["name"] for d in tools.definitions()]
    assert names == ["exec", "wait", "lookup", "shout", "count_words"]
    count = tools.definitions()[4]
    assert count["strict"] is False
    assert count["parameters"]["additionalProperties"] is False


def test_mcp_and_image_generation_need_exec() -> None:
    with pytest.raises(ta.ConfigError, match="MCP servers are reached from exec"):
        ta.Tools.empty().with_mcp("docs", ta.McpServer.stdio("srv"))
    with pytest.raises(ta.ConfigError, match="image generation is reached from exec"):
        ta.Tools.empty().with_image_generation()
