"""The public-dialect request (``Profile.GENERIC``, issue 25 item 1) and the profile a
config derives, as pure functions."""

from __future__ import annotations

import json

import pytest

import trio_agent as ta
from trio_agent._base.responses import endpoint_profile
from trio_agent._errors import ApiError, CheckpointMissing
from trio_agent._session.context import INSTRUCTIONS_ID, request_prefix
from trio_agent._wire.failures import failure_from_frame
from trio_agent._wire.frames import ErrorFrame, parse_frame
from trio_agent._wire.portable import (
    build_portable_create,
    call_of,
    leading_developer_texts,
    named_fields,
    portable_tools,
    split_prefix,
    string_argument,
)
from trio_agent._wire.request import RequestSettings


def settings(effort: str = "none", *, store: bool = False, fast: bool = False) -> RequestSettings:
    return RequestSettings("local-model", effort, fast, store, "cache-key", "session-1")


@pytest.mark.parametrize(("url", "profile"), [
    ("https://api.openai.com/v1", ta.Profile.OPENAI),
    ("wss://api.openai.com/v1/responses", ta.Profile.OPENAI),
    ("https://eu.api.openai.com/v1", ta.Profile.OPENAI),
    ("https://chatgpt.com/backend-api/codex", ta.Profile.OPENAI),
    ("https://API.OpenAI.com./v1", ta.Profile.OPENAI),
    ("http://127.0.0.1:4000/v1", ta.Profile.GENERIC),
    ("http://localhost:11434/v1", ta.Profile.GENERIC),
    ("https://openai.com.evil.example/v1", ta.Profile.GENERIC),  # a suffix match, not a substring one
    ("https://notopenai.com/v1", ta.Profile.GENERIC),
    ("https://my-resource.openai.azure.com/openai/v1", ta.Profile.GENERIC),
])
def test_the_profile_follows_the_endpoints_host(url: str, profile: ta.Profile) -> None:
    assert endpoint_profile(url) is profile


def test_a_config_derives_profile_store_history_and_thinking_from_the_endpoint() -> None:
    openai = ta.AgentConfig(auth="k")
    assert (openai.profile, openai.store, openai.history, openai.thinking) == (
        ta.Profile.OPENAI, True, ta.History.INCREMENTAL, ta.Thinking.MEDIUM)
    local = ta.AgentConfig(auth="k", responses=ta.Responses(api_base_url="http://127.0.0.1:4000/v1"))
    assert (local.profile, local.store, local.history, local.thinking) == (
        ta.Profile.GENERIC, False, ta.History.FULL_REPLAY, ta.Thinking.NONE)
    # given values win: a server that keeps responses may chain
    chained = ta.AgentConfig(auth="k", thinking=ta.Thinking.HIGH, responses=ta.Responses(
        api_base_url="http://127.0.0.1:4000/v1", store=True, transport=ta.Transport.HTTPS))
    assert (chained.store, chained.history, chained.thinking) == (True, ta.History.INCREMENTAL, ta.Thinking.HIGH)
    forced = ta.AgentConfig(auth="k", responses=ta.Responses(
        api_base_url="http://127.0.0.1:4000/v1", profile=ta.Profile.OPENAI))
    assert (forced.profile, forced.store, forced.history) == (ta.Profile.OPENAI, True, ta.History.INCREMENTAL)


def test_only_an_unset_transport_and_websocket_url_fall_back_to_https() -> None:
    assert ta.Responses(api_base_url="http://127.0.0.1:1/v1").https_fallback
    assert ta.Responses().https_fallback
    assert not ta.Responses(transport=ta.Transport.WEBSOCKET).https_fallback
    assert not ta.Responses(websocket_url="ws://127.0.0.1:1/v1/responses").https_fallback
    assert ta.Responses().transport is ta.Transport.WEBSOCKET


def test_a_bad_profile_is_refused_with_the_choices() -> None:
    with pytest.raises(ta.ConfigError, match=r"profile must be a ta\.Profile"):
        ta.Responses(profile="generic")  # type: ignore[arg-type]


def test_the_tools_leave_the_input_and_become_function_tools() -> None:
    tools = ta.Tools.default().with_clock()
    prefix = request_prefix(tools.definitions(), "Be brief.")
    definitions, instructions, rest = split_prefix(prefix, INSTRUCTIONS_ID)
    assert instructions == "Be brief." and rest == []  # top-level instructions, not a developer message
    converted = portable_tools(definitions)
    assert all(tool["type"] == "function" for tool in converted)
    exec_tool = next(tool for tool in converted if tool["name"] == "exec")
    assert exec_tool["parameters"] == {
        "type": "object", "properties": {"code": {"type": "string", "description": "The JavaScript source to run."}},
        "required": ["code"], "additionalProperties": False,
    }
    assert "`code`" in exec_tool["description"] and "exec_command" in exec_tool["description"]
    assert "clock__sleep" in [tool["name"] for tool in converted]  # a namespace group, flattened
    assert "format" not in json.dumps(exec_tool["parameters"])  # no grammar travels


def test_a_custom_user_tool_takes_one_input_string() -> None:
    [tool] = portable_tools([{"type": "custom", "name": "shout", "description": "Shout it."}])
    assert tool["parameters"]["required"] == ["input"]
    assert tool["description"].startswith("Shout it.")


def test_a_flattened_group_call_is_the_namespaced_call_again() -> None:
    call = {"type": "function_call", "call_id": "c", "name": "clock__sleep", "arguments": "{}"}
    assert call_of(call, {"clock"}) == {**call, "namespace": "clock", "name": "sleep"}
    assert call_of(call, {"other"}) == call
    assert call_of({**call, "name": "clock__"}, {"clock"})["name"] == "clock__"
    assert call_of({**call, "type": "custom_tool_call"}, {"clock"}) == {**call, "type": "custom_tool_call"}


def test_the_string_argument_of_a_function_form_custom_call() -> None:
    assert string_argument({"code": "1+1"}, "code") == "1+1"
    assert string_argument("raw text", "code") == "raw text"  # passed through undecoded
    assert string_argument({"code": 1}, "code") is None
    assert string_argument({"code": "x", "extra": 1}, "code") is None
    assert string_argument({}, "code") is None
    assert string_argument(["x"], "code") is None


def test_a_generic_body_has_public_fields_only() -> None:
    body = build_portable_create(settings(), [{"type": "message", "role": "user", "content": "hi"}],
                                 [{"type": "function", "name": "f", "parameters": {}}], instructions="Be brief.")
    assert list(body) == ["model", "instructions", "input", "tools", "tool_choice", "parallel_tool_calls", "store",
                          "stream"]
    assert body["store"] is False and body["stream"] is True
    asked = build_portable_create(settings("high", fast=True), [], [])
    assert asked["reasoning"] == {"effort": "high"}
    assert asked["include"] == ["reasoning.encrypted_content"]  # stateless: the reasoning travels back
    assert asked["service_tier"] == "priority"
    assert "tools" not in asked and "tool_choice" not in asked  # no tools: no tool fields
    stored = build_portable_create(settings("low", store=True), [], [], previous_response_id="resp_1")
    assert "include" not in stored and stored["previous_response_id"] == "resp_1"
    dropped = build_portable_create(settings("high"), [], [], dropped=frozenset({"reasoning", "include"}))
    assert "reasoning" not in dropped and "include" not in dropped
    assert build_portable_create(settings(), [], [], websocket=True)["type"] == "response.create"


@pytest.mark.parametrize(("message", "fields"), [
    ("Unknown parameter: 'include'.", {"include"}),
    ("custom_openai does not support parameters: ['reasoning_effort']", {"reasoning"}),
    ("Unsupported parameter: 'reasoning.effort' is not supported with this model.", {"reasoning"}),
    ("parallel_tool_calls and service_tier are not allowed", {"parallel_tool_calls", "service_tier"}),
    ("Input tag 'additional_tools' found using 'type' does not match", set()),
    ("my_include_flag is wrong", set()),  # a word of its own, not part of another
    ("tool_choice_mode is bad", set()),
])
def test_a_400_names_the_optional_fields_to_leave_out(message: str, fields: set[str]) -> None:
    body = build_portable_create(settings("high", fast=True), [], [{"type": "function", "name": "f"}])
    assert named_fields(message, body) == fields


def test_only_fields_the_body_carries_are_named() -> None:
    body = build_portable_create(settings(), [], [])  # no reasoning, no include
    assert named_fields("Unknown parameter: 'include'", body) == frozenset()


def test_an_error_with_no_frame_type_is_an_error_frame() -> None:
    raw = {"error": {"code": "404", "message": "Response with id 'resp_1' not found."}}
    frame = parse_frame(raw)
    assert isinstance(frame, ErrorFrame)
    assert isinstance(failure_from_frame(frame.raw), CheckpointMissing)  # replayed once in full
    other = failure_from_frame({"error": {"code": "404", "message": "Model 'x' is unknown"}})
    assert isinstance(other, ApiError) and not isinstance(other, CheckpointMissing)


def test_only_the_developer_messages_that_open_the_conversation_join_the_instructions() -> None:
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert leading_developer_texts([developer, {**developer, "content": "more"}, user, developer]) == ["rules", "more"]
    assert leading_developer_texts([user, developer]) == []
    assert leading_developer_texts([{**developer, "content": None}]) == []  # not text: left in its place
