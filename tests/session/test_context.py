"""Context builders: the request prefix items and the first-turn context messages."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent._session.context import (
    DEFAULT_INSTRUCTIONS,
    INSTRUCTIONS_ID,
    TURN_ABORTED_TEXT,
    additional_tools_item,
    environment_message,
    instructions_message,
    permissions_message,
    user_message,
)
from trio_agent._wire.request import is_prefixed_id, wire_item

ENV: dict[str, Any] = {"cwd": "/work/space", "shell": "bash", "current_date": "2025-01-02", "timezone": "UTC"}


def texts(message: dict[str, Any]) -> list[str]:
    assert all(part["type"] == "input_text" for part in message["content"])
    return [part["text"] for part in message["content"]]


def test_environment_message_shape() -> None:
    message = environment_message(**ENV)
    assert message["type"] == "message"
    assert message["role"] == "user"
    assert "id" not in message
    [text] = texts(message)
    assert text.startswith("<environment_context>\n")
    assert text.endswith("</environment_context>")
    assert "  <cwd>/work/space</cwd>\n" in text
    assert "  <shell>bash</shell>\n" in text
    assert "  <current_date>2025-01-02</current_date>\n" in text
    assert "  <timezone>UTC</timezone>\n" in text
    assert "<workspace_roots><root>/work/space</root></workspace_roots>" in text


@pytest.mark.parametrize(
    ("field", "value", "escaped"),
    [
        ("cwd", "/tmp/a&b<c>d", "/tmp/a&amp;b&lt;c&gt;d"),
        ("shell", "</shell><evil/>", "&lt;/shell&gt;&lt;evil/&gt;"),
        ("current_date", "2025 & <later>", "2025 &amp; &lt;later&gt;"),
        ("timezone", "Europe/<Zone>&", "Europe/&lt;Zone&gt;&amp;"),
    ],
)
def test_environment_message_escapes_xml(field: str, value: str, escaped: str) -> None:
    [text] = texts(environment_message(**{**ENV, field: value}))
    assert f"<{field}>{escaped}</{field}>" in text
    assert value not in text
    if field == "cwd":
        assert f"<root>{escaped}</root>" in text


@pytest.mark.parametrize("agents_md", [None, ""])
def test_no_agents_md_part_when_absent(agents_md: str | None) -> None:
    message = environment_message(**ENV, agents_md=agents_md)
    assert len(message["content"]) == 1
    assert "AGENTS.md" not in texts(message)[0]
    assert "<INSTRUCTIONS>" not in texts(message)[0]


def test_agents_md_part_comes_first_when_given() -> None:
    message = environment_message(**ENV, agents_md="Always run the tests.")
    agents, env = texts(message)
    assert agents == (
        "# AGENTS.md instructions for /work/space\n\n<INSTRUCTIONS>\nAlways run the tests.\n</INSTRUCTIONS>"
    )
    assert env.startswith("<environment_context>")


def test_additional_tools_item_has_no_id() -> None:
    tools = [{"type": "custom", "name": "exec"}, {"type": "function", "name": "wait"}]
    item = additional_tools_item(tools)
    assert item == {"type": "additional_tools", "role": "developer", "tools": tools}
    assert "id" not in item
    assert item["tools"] is not tools  # its own list
    assert wire_item(item) == item


def test_instructions_message_has_the_msg_id() -> None:
    message = instructions_message("be brief")
    assert message == {
        "type": "message",
        "id": INSTRUCTIONS_ID,
        "role": "developer",
        "content": [{"type": "input_text", "text": "be brief"}],
    }
    assert INSTRUCTIONS_ID.startswith("msg_")
    assert is_prefixed_id(message["id"])
    assert wire_item(message)["id"] == INSTRUCTIONS_ID  # kept on every replay


def test_default_instructions_mention_the_tools() -> None:
    assert "`exec`" in DEFAULT_INSTRUCTIONS
    assert texts(instructions_message(DEFAULT_INSTRUCTIONS)) == [DEFAULT_INSTRUCTIONS]


def test_permissions_and_user_messages() -> None:
    permissions = permissions_message()
    assert permissions["role"] == "developer"
    assert "id" not in permissions
    [text] = texts(permissions)
    assert text.startswith("<permissions instructions>")
    assert text.endswith("</permissions instructions>")
    assert user_message("hello") == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "hello"}],
    }


def test_turn_aborted_text() -> None:
    assert TURN_ABORTED_TEXT.startswith("<turn_aborted>")
    assert TURN_ABORTED_TEXT.endswith("</turn_aborted>")
