"""Pure tests of the compaction decisions and the installed history."""

from __future__ import annotations

from trio_agent._session.compaction import (
    TRUNCATED_OUTPUT,
    USER_MESSAGE_BUDGET,
    auto_compact_limit,
    compacted_history,
    estimate_tokens,
    is_real_user_message,
    truncate_tool_outputs,
)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


PERMISSIONS = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "perm"}]}
CONTEXT = user("<environment_context>x</environment_context>")


def test_the_limit_is_ninety_percent_of_the_window() -> None:
    assert auto_compact_limit(272_000) == 244_800


def test_estimate_is_about_four_bytes_a_token() -> None:
    assert estimate_tokens([{"a": "x" * 400}]) == len('{"a":"' + "x" * 400 + '"}') // 4


def test_context_and_abort_markers_are_not_real_user_messages() -> None:
    assert is_real_user_message(user("hello"))
    assert not is_real_user_message(CONTEXT)
    assert not is_real_user_message(user("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>"))
    assert not is_real_user_message(user("<turn_aborted>\n...</turn_aborted>"))
    assert not is_real_user_message(PERMISSIONS)


def test_installed_history_keeps_user_messages_and_puts_context_before_the_last() -> None:
    history = [PERMISSIONS, CONTEXT, user("one"), {"type": "message", "role": "assistant", "content": []},
               {"type": "custom_tool_call_output", "call_id": "c", "output": "big"}, user("two")]
    summary = {"type": "compaction", "id": "cmp-1", "encrypted_content": "s"}
    installed = compacted_history(history, summary, permissions=PERMISSIONS, context=CONTEXT)
    summary_without_id = {"type": "compaction", "encrypted_content": "s"}
    assert installed == [user("one"), PERMISSIONS, CONTEXT, user("two"), summary_without_id]


def test_user_messages_beyond_the_budget_are_dropped_oldest_first() -> None:
    big = user("x" * (USER_MESSAGE_BUDGET * 4 - 200))
    installed = compacted_history([user("old"), big, user("new")], {"type": "compaction"}, permissions=PERMISSIONS,
                                  context=CONTEXT)
    assert user("old") not in installed
    assert installed[-2] == user("new")


def test_newest_tool_outputs_are_truncated_until_the_history_fits() -> None:
    history = [user("keep"), {"type": "function_call_output", "call_id": "a", "output": "y" * 4000},
               {"type": "function_call_output", "call_id": "b", "output": "z" * 4000}]
    result = truncate_tool_outputs(history, window=1500)
    assert result[2]["output"] == TRUNCATED_OUTPUT  # the newest output goes first...
    assert result[1]["output"] == "y" * 4000  # ...and only as many as needed
    assert result[0] == user("keep")
    assert estimate_tokens(result) <= 1500
