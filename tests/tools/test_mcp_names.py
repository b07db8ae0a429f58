"""The names MCP tools are called by (``_mcp_names``, issue 28 item 3): server names
checked at configuration, and one server's tools given distinct names that depend on
the set of names alone -- never on listing or start order."""

from __future__ import annotations

import itertools
import re

import pytest

import trio_agent as ta
from trio_agent._tools._mcp_names import MAX_NAME, check_server_name, js_form, server_part, tool_names


@pytest.mark.parametrize("name", ["x__y", "_x", "x-", "a b", "", "ü", "a.b", "a" * 49, "x_-y"])
def test_a_server_name_that_cannot_make_an_unambiguous_tool_name_is_a_config_error(name: str) -> None:
    with pytest.raises(ta.ConfigError, match=r"MCP server name .* is invalid: use 1-48 letters and digits"):
        ta.Tools.default().with_mcp(name, ta.McpServer.stdio("srv"))


def test_the_config_error_says_what_to_do() -> None:
    with pytest.raises(ta.ConfigError, match=r"no '__'.*e\.g\. 'x_y'") as caught:
        check_server_name("x__y")
    assert "tools.mcp__<server>__<tool>" in str(caught.value)
    with pytest.raises(ta.ConfigError, match="of type int"):
        check_server_name(7)
    good = ["a", "Git-Hub", "files_2", "a" * 48]
    assert [check_server_name(n) for n in good] == good


def test_two_servers_one_javascript_name_is_a_config_error() -> None:
    tools = ta.Tools.default().with_mcp("my-files", ta.McpServer.stdio("srv"))
    with pytest.raises(ta.ConfigError, match=r"'my-files' and 'my_files' are both tools\.mcp__my_files__"):
        tools.with_mcp("my_files", ta.McpServer.stdio("srv"))


def test_colliding_tools_keep_distinct_names_and_the_identifier_keeps_its_plain_one() -> None:
    names, renamed = tool_names("x", ["get.time", "get_time", "get-time", "y__z", "ok"])
    assert names["get_time"] == "mcp__x__get_time"  # already a JavaScript identifier
    assert names["ok"] == "mcp__x__ok" and names["y__z"] == "mcp__x__y__z"
    assert re.fullmatch(r"mcp__x__get_time_[0-9a-f]{8}", names["get.time"])
    assert re.fullmatch(r"mcp__x__get-time_[0-9a-f]{8}", names["get-time"])
    assert len({js_form(n) for n in names.values()}) == len(names)  # distinct as the model writes them
    assert [(r.tool, r.plain) for r in renamed] == [("get-time", "mcp__x__get-time"), ("get.time", "mcp__x__get_time")]
    assert all("which tool 'get_time' has" in r.reason for r in renamed)


def test_names_depend_on_the_set_of_names_alone() -> None:
    tools = ["get.time", "get_time", "get-time", "a" * 80, "a" * 81, "b.c", "b-c"]
    first = tool_names("srv", tools)
    for order in itertools.islice(itertools.permutations(tools), 0, None, 97):
        assert tool_names("srv", order) == first


def test_a_long_name_is_cut_to_the_function_name_limit_with_a_suffix() -> None:
    names, renamed = tool_names("s", ["a" * 80, "a" * 81])
    assert all(len(n) <= MAX_NAME and n.startswith("mcp__s__aaa") for n in names.values())
    assert names["a" * 80] != names["a" * 81]
    assert [r.reason for r in renamed] == [f"its name would be {len(n) + 8} characters long, over 64" for n in
                                           ("a" * 80, "a" * 81)]


def test_across_servers_the_server_part_of_a_name_is_unambiguous() -> None:
    # Server "x" tool "y__z" and server "x__y" tool "z" collided; "x__y" is now refused,
    # and the server part of a name ends at its first "__".
    assert server_part("mcp__x__y__z") == "x"
    assert server_part("mcp__my-files__read") == "my_files"
    assert server_part("mcp__a___b__c") == "a"
    assert [server_part(n) for n in ("mcp__x", "mcp____y", "exec", "mcp__x__")] == [None, None, None, None]
