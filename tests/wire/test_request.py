"""build_response_create bodies, wire_item / is_prefixed_id / strip_prefix_ids (SPEC sec. 2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trio_agent._session.context import additional_tools_item, instructions_message, user_message
from trio_agent._wire.request import (
    LITE_KEY,
    TURN_STATE_KEY,
    RequestSettings,
    build_response_create,
    is_prefixed_id,
    strip_prefix_ids,
    wire_item,
)

SETTINGS = RequestSettings(
    model="gpt-5.5",
    effort="low",
    fast_mode=False,
    store=True,
    prompt_cache_key="model-test",
    session_id="sess-1",
)
TOOLS = additional_tools_item([{"type": "function", "name": "wait"}])
INSTRUCTIONS = instructions_message("be good")
PREFIX = [TOOLS, INSTRUCTIONS]


def common(**overrides: Any) -> dict[str, Any]:
    """The fields every body carries, with the default SETTINGS."""
    body: dict[str, Any] = {
        "model": "gpt-5.5",
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "context": "all_turns"},
        "store": True,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "model-test",
        "text": {"verbosity": "low"},
    }
    body.update(overrides)
    return body


def test_warmup_body_exact() -> None:
    body = build_response_create(SETTINGS, PREFIX, generate=False)
    assert body == {
        "type": "response.create",
        "input": PREFIX,
        **common(),
        "generate": False,
        "client_metadata": {"session_id": "sess-1", "thread_id": "sess-1", LITE_KEY: "true"},
    }
    assert next(iter(body)) == "type"  # WebSocket frames start with the type


def test_incremental_body_exact() -> None:
    prompt = user_message("second prompt")
    body = build_response_create(SETTINGS, [prompt], previous_response_id="resp-1", turn_state="sticky")
    assert body == {
        "type": "response.create",
        "previous_response_id": "resp-1",
        "input": [prompt],
        **common(),
        "client_metadata": {
            "session_id": "sess-1",
            "thread_id": "sess-1",
            LITE_KEY: "true",
            TURN_STATE_KEY: "sticky",
        },
    }
    assert "generate" not in body


def test_full_replay_body_exact() -> None:
    history = [
        user_message("first"),
        {"type": "custom_tool_call", "id": "item-exec", "call_id": "c1", "name": "exec", "input": "x"},
        {"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "c1", "output": "ok"},
    ]
    body = build_response_create(SETTINGS, [*PREFIX, *history])
    assert body == {
        "type": "response.create",
        "input": [
            TOOLS,
            INSTRUCTIONS,
            history[0],
            {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "x"},
            history[2],
        ],
        **common(),
        "client_metadata": {"session_id": "sess-1", "thread_id": "sess-1", LITE_KEY: "true"},
    }
    assert "previous_response_id" not in body
    assert "generate" not in body


@pytest.mark.parametrize("turn_state", [None, "sticky"])
@pytest.mark.parametrize("generate", [None, False])
def test_https_body_has_no_type_and_no_ws_metadata(turn_state: str | None, generate: bool | None) -> None:
    body = build_response_create(
        SETTINGS, PREFIX, previous_response_id="resp-1", generate=generate, websocket=False, turn_state=turn_state
    )
    assert "type" not in body
    assert body["client_metadata"] == {"session_id": "sess-1", "thread_id": "sess-1"}
    expected = {"model": "gpt-5.5", "previous_response_id": "resp-1", "input": PREFIX, **common()}
    if generate is not None:
        expected["generate"] = generate
    expected["client_metadata"] = {"session_id": "sess-1", "thread_id": "sess-1"}
    assert body == expected


def test_turn_state_only_when_given() -> None:
    without = build_response_create(SETTINGS, [])
    assert TURN_STATE_KEY not in without["client_metadata"]
    with_state = build_response_create(SETTINGS, [], turn_state="abc")
    assert with_state["client_metadata"][TURN_STATE_KEY] == "abc"


@pytest.mark.parametrize("websocket", [True, False])
@pytest.mark.parametrize(("fast", "tier"), [(True, "priority"), (False, None)])
def test_fast_mode_adds_service_tier_only_when_on(websocket: bool, fast: bool, tier: str | None) -> None:
    settings = RequestSettings("m", "high", fast, False, "key", "s")
    body = build_response_create(settings, [], websocket=websocket)
    assert body.get("service_tier") == tier
    assert ("service_tier" in body) is fast
    # nothing else moves with fast mode: the chain and cache key stay the same
    other = build_response_create(RequestSettings("m", "high", not fast, False, "key", "s"), [], websocket=websocket)
    assert {k: v for k, v in body.items() if k != "service_tier"} == {
        k: v for k, v in other.items() if k != "service_tier"
    }


@pytest.mark.parametrize("websocket", [True, False])
@pytest.mark.parametrize("kwargs", [{}, {"generate": False}, {"previous_response_id": "r"}, {"turn_state": "t"}])
def test_never_top_level_tools_instructions_or_context_management(websocket: bool, kwargs: dict[str, Any]) -> None:
    body = build_response_create(SETTINGS, PREFIX, websocket=websocket, **kwargs)
    for absent in ("tools", "instructions", "context_management"):
        assert absent not in body
    assert body["reasoning"]["effort"] == "low"
    assert "mode" not in body["reasoning"]
    assert body["stream"] is True
    assert body["parallel_tool_calls"] is False


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high", "xhigh"])
def test_reasoning_effort_and_store_come_from_settings(effort: str) -> None:
    settings = RequestSettings("m", effort, False, False, "lineage", "child-session")
    body = build_response_create(settings, [])
    assert body["reasoning"] == {"effort": effort, "context": "all_turns"}
    assert body["store"] is False
    assert body["prompt_cache_key"] == "lineage"
    assert body["client_metadata"]["session_id"] == "child-session"
    assert body["client_metadata"]["thread_id"] == "child-session"


def test_input_accepts_any_iterable_and_keeps_order() -> None:
    items = [user_message(str(i)) for i in range(5)]
    body = build_response_create(SETTINGS, iter(items))
    assert body["input"] == items


# -- ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "prefixed"),
    [
        ("ctco_x", True),
        ("rs_1", True),
        ("msg_trio-agent-instructions", True),
        ("fco_0198-abc", True),
        ("a_b_c", True),
        ("item-exec", False),
        ("server-item-id", False),
        ("cmp-server-id", False),
        ("_x", False),
        ("x_", False),
        ("x", False),
        ("_", False),
        ("", False),
        (None, False),
        (5, False),
        (["rs_1"], False),
    ],
)
def test_is_prefixed_id(value: Any, prefixed: bool) -> None:
    assert is_prefixed_id(value) is prefixed


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"type": "custom_tool_call_output", "id": "ctco_x", "output": "o"}, "ctco_x"),
        ({"type": "reasoning", "id": "rs_1"}, "rs_1"),
        ({"type": "custom_tool_call", "id": "item-exec"}, None),
        ({"type": "message", "id": "server-item-id"}, None),
        ({"type": "compaction", "id": "cmp-server-id"}, None),
        ({"type": "message", "id": "_x"}, None),
        ({"type": "message", "id": "x_"}, None),
        ({"type": "message", "id": "x"}, None),
        ({"type": "message", "id": None}, None),
        ({"type": "additional_tools", "id": "at_legacy", "tools": []}, None),
        ({"type": "additional_tools", "id": "at-legacy", "tools": []}, None),
        ({"type": "message"}, None),
    ],
)
def test_wire_item_ids(item: dict[str, Any], expected: str | None) -> None:
    original = copy.deepcopy(item)
    out = wire_item(item)
    assert out.get("id") == expected
    assert ("id" in out) is (expected is not None)
    assert {k: v for k, v in out.items() if k != "id"} == {k: v for k, v in item.items() if k != "id"}
    assert item == original  # history is never mutated


def test_additional_tools_never_carry_client_defined_ids() -> None:
    """Port of nanocodex ``additional_tools_never_carry_client_defined_ids``."""
    legacy = {"type": "additional_tools", "role": "developer", "tools": [], "id": "at_legacy"}
    assert "id" not in wire_item(legacy)
    prefix = [legacy, {**INSTRUCTIONS}]
    stripped = strip_prefix_ids(prefix)
    assert "id" not in stripped[0]
    assert stripped[0] == {"type": "additional_tools", "role": "developer", "tools": []}
    assert stripped[1] == INSTRUCTIONS  # other prefix items keep their ids
    assert legacy["id"] == "at_legacy"  # the input list is not mutated
    body = build_response_create(SETTINGS, [legacy, INSTRUCTIONS])
    assert "id" not in body["input"][0]
    assert body["input"][1]["id"] == INSTRUCTIONS["id"]


def test_additional_tools_item_from_context_has_no_id_on_the_wire() -> None:
    body = build_response_create(SETTINGS, PREFIX, generate=False)
    assert body["input"][0]["type"] == "additional_tools"
    assert "id" not in body["input"][0]


def test_building_a_body_does_not_mutate_history() -> None:
    history = [
        {"type": "custom_tool_call", "id": "item-exec", "call_id": "c", "name": "exec", "input": "1"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "additional_tools", "id": "at_legacy", "tools": [{"name": "t"}]},
        {"type": "message", "id": "server-item-id", "role": "assistant", "content": []},
    ]
    snapshot = copy.deepcopy(history)
    body = build_response_create(SETTINGS, history)
    assert history == snapshot
    assert [item.get("id") for item in body["input"]] == [None, "rs_1", None, None]
    # the outgoing copies are not the history dicts when an id was stripped
    assert body["input"][0] is not history[0]
    assert body["input"][2] is not history[2]
    assert body["input"][3] is not history[3]
