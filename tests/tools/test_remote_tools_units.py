"""Pure parts of the remote and MCP tools: BM25 ranking, the conversation a web search
sees, the images an edit takes from history, MCP names and content."""

from __future__ import annotations

from typing import Any

from trio_agent._tools._bm25 import Bm25Index, tokens
from trio_agent._tools._image_gen import recent_images
from trio_agent._tools._mcp_catalog import canonical_name, content_items
from trio_agent._tools._web_search import recent_input


def _user(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "id": "msg_1", "content": [{"type": "input_text", "text": text}],
            **extra}


def _assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": "msg_2", "content": [{"type": "output_text", "text": text}]}


def test_tokens_split_names_and_drop_noise() -> None:
    assert tokens("mcp__docs__searchFiles the HTTPServer's tools") == [
        "mcp", "doc", "search", "file", "http", "server", "tool"]


def test_bm25_ranks_rarer_and_more_frequent_terms_higher() -> None:
    index = Bm25Index([
        "mcp__calc__add add two integers and return their sum",
        "mcp__calc__tool_0 tool for weather forecast",
        "mcp__calc__tool_1 tool for stock price quote",
        "mcp__calc__tool_2 tool for weather radar weather maps",
    ])
    assert index.search("weather", 8) == [3, 1]
    assert index.search("integer sum", 8) == [0]
    assert index.search("tool", 2) == [1, 2]  # the two shorter documents; equal scores keep their order
    assert index.search("nothing matches", 8) == []
    assert Bm25Index([]).search("x", 8) == []


def test_recent_input_keeps_the_last_two_prompts_and_drops_context() -> None:
    history = [
        _user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        _user("first"),
        _assistant("one"),
        _user("second", extra_part=True),
        {"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "x"},
        _assistant("two"),
        _user("third"),
        _assistant("after the last prompt"),
    ]
    assert recent_input(history) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "third"}]},
    ]
    assert recent_input([_assistant("alone")]) is None
    images_only = {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:"}]}
    assert recent_input([images_only]) is None


def test_recent_images_come_from_prompts_and_tool_outputs_oldest_first() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:a"},
                                                        {"type": "input_image", "image_url": "https://remote"}]},
        {"type": "custom_tool_call_output", "call_id": "c", "output": [{"type": "input_image", "image_url": "data:b"}]},
        {"type": "function_call_output", "call_id": "d", "output": "text only"},
    ]
    assert recent_images(history, 2) == ["data:a", "data:b"]
    assert recent_images(history, 1) == ["data:b"]


def test_mcp_names_and_content() -> None:
    assert canonical_name("Google Drive", "files/search") == "mcp__Google_Drive__files_search"
    assert content_items({"content": [
        {"type": "text", "text": "hi"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
        {"type": "resource_link", "uri": "file:///b", "name": "b"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
    ]}) == [
        {"type": "input_text", "text": "hi"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_text", "text": "body"},
        {"type": "input_text", "text": "[resource b: file:///b]"},
        {"type": "input_text", "text": "[audio content omitted]"},
    ]
