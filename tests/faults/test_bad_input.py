"""Fault matrix, class 3: bad user input fails at the call that took it (issue 8).

Each case raises a clear ``AgentError`` (a ``ValueError`` too) at the call that was
given the bad value -- never later, halfway through a turn -- and says what to do.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta


@pytest.mark.parametrize("images", ["data:image/png;base64,AAAA", b"data:", 5, None])
def test_prompt_images_must_be_a_list_of_urls(images: Any) -> None:
    with pytest.raises(ta.InvalidPrompt, match="images must be a list of image URLs") as info:
        ta.Prompt("look", images=images)
    if isinstance(images, str):
        assert "pass images=[url]" in str(info.value)


def test_prompt_images_as_a_list_are_kept_whole() -> None:
    url = "data:image/png;base64,AAAA"
    assert ta.Prompt("look", images=[url]).images == (url,)


async def handler(ctx: ta.ToolContext, args: Any) -> str:
    return "ok"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"enum": {1, 2}}}},
        {"type": "object", "properties": {("tuple", "key"): {}}},
        {"type": "object", "maximum": math.nan},
        {"type": "object", "default": b"bytes"},
    ],
    ids=["set", "tuple_key", "nan", "bytes"],
)
def test_a_tool_schema_json_cannot_encode_is_refused_by_function(schema: dict[str, Any]) -> None:
    tools = ta.Tools.default()
    with pytest.raises(ta.ConfigError, match=r"tool 'probe': json_schema must be plain JSON data"):
        tools.function("probe", "A probe.", schema, handler)
    assert tools.user_tool("probe") is None  # nothing half-registered


def test_a_tool_schema_is_copied_so_later_changes_do_not_leak_in() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    tools = ta.Tools.default().function("probe", "A probe.", schema, handler)
    schema["properties"]["late"] = {"type": "string"}
    spec = tools.user_tool("probe")
    assert spec is not None and spec.parameters == {"type": "object", "properties": {}}


BAD_SESSION_IDS = [
    ("a/b", "contains '/'"),
    ("..", "starts with a dot"),
    ("../../etc", "contains '/'"),
    ("x\r\ny", "contains '\\n', '\\r'"),
    ("tab\there", "contains '\\t'"),
    ("nul\x00", "contains '\\x00'"),
    ("a" * 129, "129 characters long; at most 128"),
    ("", "non-empty string"),
    ("star*", "contains '*'"),
]


@pytest.mark.parametrize(("session_id", "why"), BAD_SESSION_IDS, ids=[str(i) for i in range(len(BAD_SESSION_IDS))])
def test_a_session_id_that_cannot_name_a_file_or_a_header_is_a_config_error(
    tmp_path: Path, session_id: str, why: str
) -> None:
    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(auth="test-key", workspace=tmp_path, session_id=session_id)
    assert why in str(info.value)
    assert "Omit it for a fresh UUIDv7" in str(info.value)


@pytest.mark.parametrize("thread_id", ["../outside", "a/../../b", "/abs", "x*", ".hidden"])
def test_rollout_files_always_land_inside_their_home(tmp_path: Path, thread_id: str) -> None:
    home = ta.RolloutConfig(tmp_path / "home")
    with pytest.raises(ta.InvalidSessionSnapshot, match="is not a valid thread id"):
        home.new_path(thread_id)
    with pytest.raises(ta.InvalidSessionSnapshot, match="is not a valid thread id"):
        home.load_session(thread_id)
    assert not (tmp_path / "outside").exists()


def test_a_valid_thread_id_lands_under_home(tmp_path: Path) -> None:
    path = ta.RolloutConfig(tmp_path / "home").new_path("019c0d31-c308-7d91-bff4-5dca82d15ac6")
    assert path.resolve().is_relative_to((tmp_path / "home").resolve())


@pytest.mark.parametrize("field", ["connect_timeout", "handshake_timeout", "idle_timeout"])
@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "30", True])
def test_timeouts_must_be_positive_finite_seconds(field: str, value: Any) -> None:
    with pytest.raises(ta.ConfigError, match=f"{field} must be a positive, finite number of seconds"):
        ta.Responses(profile=ta.Profile.OPENAI, **{field: value})


def test_timeout_defaults_are_todays() -> None:
    responses = ta.Responses(profile=ta.Profile.OPENAI)
    assert (responses.connect_timeout, responses.handshake_timeout, responses.idle_timeout) == (30.0, None, 300.0)


@pytest.mark.parametrize(("schema", "says"), [
    pytest.param({"type": "object", "enum": {1, 2}}, "must be plain JSON data", id="a-set"),
    pytest.param({"type": "object", ("tuple", "key"): {}}, "must be plain JSON data", id="tuple-key"),
    pytest.param({"type": "object", "maximum": math.inf}, "must be plain JSON data", id="infinity"),
    pytest.param({"type": "object", "description": "x" * (1 << 20)}, "at most 1 MiB", id="too-big"),
    pytest.param({"type": ["object", "null"]}, 'root must be an object schema ("type": "object")', id="type-list"),
    pytest.param("{\"type\": \"object\"}", "a JSON Schema object (a dict)", id="json-text"),
])
def test_an_output_schema_that_cannot_be_sent_is_refused_when_made(schema: Any, says: str) -> None:
    with pytest.raises(ta.ConfigError, match="output schema") as info:
        ta.OutputSchema(schema)
    assert says in str(info.value)


def test_an_output_schema_is_copied_so_later_changes_do_not_leak_in() -> None:
    given: dict[str, Any] = {"type": "object", "properties": {}}
    schema = ta.OutputSchema(given)
    given["properties"]["late"] = {"type": "string"}
    assert schema.text_format()["schema"] == {"type": "object", "properties": {}}
