"""Local compaction, the pure parts (``_session.summary``, ``compaction.summarized_history``)
and which answers count as a server declining remote compaction (``_runtime._model._compaction``)."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent._errors import ApiError, ConnectionLost, ProtocolError, ResponsesError, UsageLimitExceeded
from trio_agent._runtime._model._compaction import declined_error, declined_output
from trio_agent._session.compaction import is_real_user_message, summarized_history
from trio_agent._session.context import TURN_ABORTED_TEXT, user_message
from trio_agent._session.summary import (
    LOCAL_USER_MESSAGE_BUDGET,
    SUMMARY_PREFIX,
    bridge_text,
    is_summary,
    recent_within,
    summary_text,
)
from trio_agent._wire.stream import ResponseOutcome
from trio_agent._wire.usage import TokenUsage

Item = dict[str, Any]
PERMISSIONS = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<perm>"}]}
CONTEXT = user_message("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")


def assistant(text: str) -> Item:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def texts(items: list[Item]) -> list[str]:
    return ["".join(part["text"] for part in item["content"]) for item in items]


def test_the_new_history_keeps_the_user_messages_puts_context_before_the_last_and_the_bridge_last() -> None:
    history = [
        PERMISSIONS, CONTEXT, {**user_message("one"), "id": "msg_1"}, assistant("answer one"),
        {"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "out"},
        user_message(TURN_ABORTED_TEXT), user_message("two"), assistant("answer two"),
    ]
    installed, bridge = summarized_history(history, "S", permissions=PERMISSIONS, context=CONTEXT)
    assert bridge == f"{SUMMARY_PREFIX}\nS" == bridge_text("S")
    assert installed == [user_message("one"), PERMISSIONS, CONTEXT, user_message("two"), user_message(bridge)]
    assert "id" not in installed[0]  # rebuilt as plain text messages, as codex does


def test_without_user_messages_the_context_comes_before_the_bridge() -> None:
    installed, bridge = summarized_history([PERMISSIONS, CONTEXT, assistant("hi")], "S",
                                           permissions=PERMISSIONS, context=CONTEXT)
    assert installed == [PERMISSIONS, CONTEXT, user_message(bridge)]


def test_an_earlier_summary_is_not_kept_as_a_user_message() -> None:
    earlier = user_message(bridge_text("OLD"))
    assert is_summary(earlier) and not is_real_user_message(earlier)
    assert not is_summary(user_message("a message that mentions " + SUMMARY_PREFIX))
    installed, _ = summarized_history([earlier, user_message("next")], "NEW", permissions=PERMISSIONS,
                                      context=CONTEXT)
    assert "OLD" not in str(installed) and texts(installed)[-2:] == ["next", bridge_text("NEW")]


def test_text_parts_are_kept_and_images_left_out() -> None:
    mixed = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:image/png;base64,AA"},
        {"type": "input_text", "text": "here"}]}
    only_image = {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "x"}]}
    installed, _ = summarized_history([mixed, only_image], "S", permissions=PERMISSIONS, context=CONTEXT)
    assert texts(installed)[2] == "look\nhere" and "image" not in str(installed) and len(installed) == 4


def test_the_newest_messages_fit_the_budget_and_the_one_crossing_it_is_cut() -> None:
    old, middle, new = "o" * 400, "m" * 400 + "MIDDLE-END", "n" * 400
    kept = recent_within([old, middle, new], budget=150)  # 100 tokens each; 50 left for the middle one
    assert kept[-1] == new and len(kept) == 2
    cut = kept[0]
    assert cut.startswith("m" * 100) and cut.endswith("MIDDLE-END"[-10:])
    assert "characters cut when the conversation was compacted" in cut and len(cut) < len(middle)
    assert recent_within(["a", "b"], budget=0) == []
    assert recent_within(["a", "b"]) == ["a", "b"] and LOCAL_USER_MESSAGE_BUDGET == 20_000


def test_the_summary_is_the_last_assistant_text() -> None:
    assert summary_text([assistant("first"), {"type": "reasoning"}, assistant("  last  ")]) == "last"
    assert summary_text([assistant("kept"), assistant("   ")]) == "kept"
    assert summary_text([{"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": "x"}]) == ""
    assert summary_text([]) == ""


def outcome(*output: Item) -> ResponseOutcome:
    return ResponseOutcome("resp", "completed", None, tuple(output), None, TokenUsage())


@pytest.mark.parametrize(("output", "declined"), [
    ((assistant("what?"),), True),
    (({"type": "reasoning"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}), True),
    ((), False),  # nothing at all: bad data, not an answer
    (({"type": "compaction", "encrypted_content": "x"},), False),
    (({"type": "compaction_summary", "encrypted_content": "x"}, assistant("and text")), False),
])
def test_which_completed_responses_decline(output: tuple[Item, ...], declined: bool) -> None:
    assert (declined_output(outcome(*output)) is not None) is declined


@pytest.mark.parametrize(("error", "declined"), [
    (ApiError("Invalid value: 'compaction_trigger'. Supported values are: 'message'"), True),
    (ApiError("the Responses API answered HTTP 400: {\"detail\": \"unknown input type COMPACTION_TRIGGER\"}"), True),
    (ApiError("Compaction is not supported by this server"), True),
    (ApiError("unsupported item type: compaction"), True),
    (ApiError("no compaction today"), False),
    (ApiError("Invalid value: 'message'"), False),
    (UsageLimitExceeded("You exceeded your current quota"), False),
    (ConnectionLost("the connection closed mid-compaction_trigger"), False),  # not the server's answer
    (ProtocolError("compaction_trigger frame was not JSON"), False),
    (ResponsesError("compaction_trigger unsupported"), False),
])
def test_which_errors_decline(error: ResponsesError, declined: bool) -> None:
    assert declined_error(error) is declined
