"""Hostile data for direct MCP tools and MCP OAuth logins (issue 28 item 1): whatever a
token file holds, an agent gets a usable login or one ``McpOAuthError`` naming the
file -- never another exception; whatever a server's ``CallToolResult`` or a prefix
holds, the direct tools' pure parts answer with an output or leave the prefix be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_agent._tools._mcp_direct import direct_output, prefix_with_direct
from trio_agent._tools._mcp_oauth import McpOAuthError, TokenFile

URL = "http://127.0.0.1:9/mcp"
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
GOOD = {"format": 1, "server_name": "docs", "server_url": URL,
        "client": {"client_id": "c", "redirect_uris": ["http://127.0.0.1:1/callback"]},
        "tokens": {"access_token": "at", "token_type": "Bearer", "refresh_token": "rt", "expires_at": 5.0}}
# A token file's shape with hostile values inside, and whole garbage.
FILES = st.one_of(
    JSON.map(json.dumps),
    st.text(max_size=40),
    st.fixed_dictionaries({"format": st.sampled_from([1, 2, "1", None]), "server_url": st.sampled_from([URL, "x"]),
                           "client": JSON | st.just(GOOD["client"]), "tokens": JSON | st.just(GOOD["tokens"])},
                          optional={"server_name": JSON}).map(json.dumps),
)


@given(FILES)
@example(json.dumps(GOOD))
@settings(max_examples=150, deadline=None)
def test_any_token_file_is_a_login_or_one_clear_error(tmp_path_factory: Any, text: str) -> None:
    path: Path = tmp_path_factory.mktemp("home") / "docs.json"
    path.write_text(text)
    path.chmod(0o600)
    try:
        store = TokenFile(path, "docs", URL)
    except McpOAuthError as exc:
        assert str(path) in str(exc) and "trio-agent mcp login docs" in str(exc)
        return

    async def use() -> None:  # what the SDK reads of it
        await store.get_tokens()
        await store.get_client_info()

    trio.run(use)
    assert store.redirect_uri.startswith("http")
    assert store.expires_at is None or isinstance(store.expires_at, float)


RESULTS = st.one_of(
    st.dictionaries(st.text(max_size=12), JSON, max_size=4),
    st.fixed_dictionaries({"content": st.lists(st.dictionaries(st.sampled_from(
        ["type", "text", "data", "mimeType", "resource", "uri", "name"]), JSON | st.sampled_from(
        ["text", "image", "resource", "resource_link", "audio"])), max_size=3)},
        optional={"structuredContent": JSON}),
)


@given(RESULTS)
def test_any_call_tool_result_becomes_an_output(value: dict[str, Any]) -> None:
    output = direct_output(value)
    assert isinstance(output, str) or all(item["type"] in ("input_text", "input_image") for item in output)
    json.dumps(output)


PREFIX_ITEMS = st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["type", "tools", "role", "id"]), JSON | st.just("additional_tools"),
                    max_size=3),
    st.fixed_dictionaries({"type": st.just("additional_tools"),
                           "tools": st.lists(JSON | st.fixed_dictionaries({"name": JSON}), max_size=4) | JSON}),
), max_size=3)


@given(PREFIX_ITEMS, st.lists(st.fixed_dictionaries({"name": st.text(max_size=6).map("mcp__".__add__)}),
                              max_size=3))
def test_any_prefix_takes_direct_tools_or_is_left_as_it_is(prefix: list[dict[str, Any]],
                                                           wanted: list[dict[str, Any]]) -> None:
    grown = prefix_with_direct(prefix, wanted)
    if grown is not None:
        assert len(grown) == len(prefix)
        assert prefix_with_direct(grown, wanted) is None  # offering the same tools again changes nothing
